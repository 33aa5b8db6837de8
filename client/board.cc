#include "client/board.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/kernel_render.h"
#include "client/render.h"
#include "client/table.h"
#include "google/protobuf/util/time_util.h"
#include "sweep/sweep_expansion.h"
#include "workloads/spec_table.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::FieldDescriptor;

// The request as run: the workload's defaults filled where the request left fields unset (a
// listing carries no provenance to read them from).
v1::ExperimentRequest WithDefaults(const v1::ExperimentRequest& request) {
  v1::ExperimentRequest filled = request;
  const workloads::WorkloadSpec* spec = workloads::FindWorkloadSpec(request.workload_case());
  if (spec != nullptr && spec->apply_defaults != nullptr) {
    spec->apply_defaults(v1::ListGpusResponse(), filled);
  }
  return filled;
}

// Ours is one kernel; a source is known by its hash (the same file resubmitted is the same).
std::string KernelKey(const v1::Experiment& experiment) {
  const v1::CustomKernel& kernel = experiment.request().custom_kernel();
  if (!experiment.request().has_custom_kernel() ||
      (kernel.source().empty() && kernel.file_name().empty())) {
    return "ours";
  }
  const std::string& sha = experiment.result().custom_kernel().source_sha256();
  return sha.empty() ? absl::StrCat(kernel.file_name(), "/", kernel.kernel_name()) : sha;
}

std::string Noise(const workloads::Headline& headline) {
  return headline.relative_noise.has_value()
             ? absl::StrFormat("±%.1f%%", 100 * *headline.relative_noise)
             : std::string("±?");
}

google::protobuf::Value Text(std::string text) {
  google::protobuf::Value value;
  value.set_string_value(std::move(text));
  return value;
}

google::protobuf::Value Number(double number) {
  google::protobuf::Value value;
  value.set_number_value(number);
  return value;
}

}  // namespace

bool IsVerified(const v1::Experiment& experiment) {
  if (experiment.state() != v1::FINISHED) return false;
  const v1::ExperimentResult& result = experiment.result();
  if (result.custom_kernel().checks_size() > 0) {
    return std::all_of(result.custom_kernel().checks().begin(),
                       result.custom_kernel().checks().end(),
                       [](const v1::Verification& check) { return check.passed(); }) &&
           result.custom_kernel().guard_bytes_overwritten() == 0;
  }
  return result.verification().checked() && result.verification().passed();
}

bool MatchesShape(const v1::Experiment& experiment, const v1::ExperimentRequest& shape,
                  const std::vector<const FieldDescriptor*>& fields) {
  if (experiment.request().workload_case() != shape.workload_case()) return false;
  const FieldDescriptor* workload_field = shape.GetReflection()->GetOneofFieldDescriptor(
      shape, shape.GetDescriptor()->FindOneofByName("workload"));
  const v1::ExperimentRequest ran = WithDefaults(experiment.request());
  for (const FieldDescriptor* field : fields) {
    const sweep::FieldPath path = {workload_field, field};
    if (sweep::FieldValueText(ran, path) != sweep::FieldValueText(shape, path)) return false;
  }
  return true;
}

std::vector<BoardRow> RankBoard(const std::vector<v1::Experiment>& experiments,
                                const v1::ExperimentRequest& shape,
                                const std::vector<const FieldDescriptor*>& fields,
                                bool best_per_kernel) {
  std::vector<BoardRow> rows;
  for (const v1::Experiment& experiment : experiments) {
    if (!IsVerified(experiment) || !MatchesShape(experiment, shape, fields)) continue;
    const std::optional<workloads::Headline> headline = workloads::HeadlineOf(experiment);
    if (!headline.has_value() || headline->value <= 0) continue;
    BoardRow row;
    row.experiment = experiment;
    row.headline = *headline;
    row.kernel = KernelLabel(experiment);
    rows.push_back(std::move(row));
  }
  const auto created = [](const BoardRow& row) {
    return google::protobuf::util::TimeUtil::TimestampToNanoseconds(row.experiment.created());
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const BoardRow& a, const BoardRow& b) {
    if (a.headline.value != b.headline.value) {
      return a.headline.higher_is_better ? a.headline.value > b.headline.value
                                         : a.headline.value < b.headline.value;
    }
    return created(a) < created(b);
  });
  if (best_per_kernel) {
    std::map<std::string, bool> seen;
    std::vector<BoardRow> best;
    for (BoardRow& row : rows) {
      if (seen.emplace(KernelKey(row.experiment), true).second) best.push_back(std::move(row));
    }
    rows = std::move(best);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].rank = static_cast<int>(i) + 1;
    const double best = rows[0].headline.value;
    rows[i].ratio_to_best = rows[i].headline.higher_is_better ? rows[i].headline.value / best
                                                              : best / rows[i].headline.value;
  }
  return rows;
}

std::string RenderBoard(const std::vector<BoardRow>& rows, absl::TimeZone time_zone) {
  TextTable table({"RANK", "HEADLINE", "VS BEST", "KERNEL", "USER", "ID", "GPU", "DATE"});
  table.SetAlign(0, TextTable::Align::kRight);
  table.SetAlign(2, TextTable::Align::kRight);
  for (const BoardRow& row : rows) {
    table.AddRow({absl::StrCat(row.rank),
                  absl::StrCat(FormatNumber(row.headline.value), " ", row.headline.unit, " ",
                               Noise(row.headline)),
                  absl::StrFormat("%.3fx", row.ratio_to_best), row.kernel, row.experiment.user(),
                  row.experiment.id(),
                  !row.gpu.empty()                     ? row.gpu
                  : row.experiment.gpu_ids().empty() ? std::string("-")
                                                       : absl::StrCat("GPU ", FormatGpuIds(row.experiment.gpu_ids())),
                  row.experiment.has_created()
                      ? absl::FormatTime("%Y-%m-%d %H:%M", ToTime(row.experiment.created()),
                                         time_zone)
                      : "-"});
  }
  return table.Render();
}

google::protobuf::Struct BoardRowStruct(const BoardRow& row) {
  google::protobuf::Struct out;
  auto& fields = *out.mutable_fields();
  fields["rank"] = Number(row.rank);
  fields["id"] = Text(row.experiment.id());
  fields["user"] = Text(row.experiment.user());
  fields["headline"] = Text(row.headline.name);
  fields["value"] = Number(row.headline.value);
  fields["unit"] = Text(row.headline.unit);
  if (row.headline.relative_noise.has_value()) {
    fields["relativeNoise"] = Number(*row.headline.relative_noise);
  }
  fields["ratioToBest"] = Number(row.ratio_to_best);
  fields["kernel"] = Text(row.kernel);
  const v1::CustomKernel& kernel = row.experiment.request().custom_kernel();
  if (!kernel.file_name().empty()) fields["fileName"] = Text(kernel.file_name());
  const v1::CustomKernelResult& result = row.experiment.result().custom_kernel();
  if (!result.kernel_name().empty()) fields["kernelName"] = Text(result.kernel_name());
  if (!result.source_sha256().empty()) fields["sourceSha256"] = Text(result.source_sha256());
  if (!row.gpu.empty()) fields["gpu"] = Text(row.gpu);
  if (row.experiment.has_created()) {
    fields["created"] =
        Text(google::protobuf::util::TimeUtil::ToString(row.experiment.created()));
  }
  return out;
}

}  // namespace gpuprof::client
