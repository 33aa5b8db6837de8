#include "tests/metrics/grafana_dashboards.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/metrics/json_struct.h"

namespace gpuprof::testing {
namespace {

void CollectPanels(const google::protobuf::ListValue& panels, std::vector<DashboardPanel>& out) {
  for (const google::protobuf::Value& value : panels.values()) {
    DashboardPanel panel;
    panel.json = value.struct_value();
    panel.id = Field(panel.json, "id").number_value();
    panel.type = StringField(panel.json, "type");
    panel.title = StringField(panel.json, "title");
    out.push_back(panel);
    // A collapsed row keeps its panels inside itself.
    CollectPanels(ListField(panel.json, "panels"), out);
  }
}

bool IsNameChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// One variable reference starting at text[start] == '$': its name and its length in `text`.
// Length 0 when the '$' starts none.
struct Reference {
  std::string name;
  size_t length = 0;
};

Reference ReferenceAt(const std::string& text, size_t start) {
  Reference reference;
  if (start + 1 < text.size() && text[start + 1] == '{') {
    const size_t close = text.find('}', start + 2);
    if (close == std::string::npos) return reference;
    const std::string inside = text.substr(start + 2, close - start - 2);
    reference.name = inside.substr(0, inside.find(':'));
    reference.length = close - start + 1;
    return reference;
  }
  size_t end = start + 1;
  while (end < text.size() && IsNameChar(text[end])) ++end;
  if (end == start + 1) return reference;
  reference.name = text.substr(start + 1, end - start - 1);
  reference.length = end - start;
  return reference;
}

}  // namespace

absl::StatusOr<std::vector<Dashboard>> LoadDashboards(const std::string& directory) {
  std::vector<std::filesystem::path> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  if (error) return absl::NotFoundError(absl::StrCat(directory, ": ", error.message()));
  std::sort(files.begin(), files.end());
  std::vector<Dashboard> dashboards;
  for (const auto& path : files) {
    std::ifstream file(path);
    std::stringstream contents;
    contents << file.rdbuf();
    absl::StatusOr<google::protobuf::Struct> json = ParseJsonObject(contents.str());
    if (!json.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path.filename().string(), ": ", json.status().message()));
    }
    Dashboard dashboard;
    dashboard.file = path.filename().string();
    dashboard.json = *std::move(json);
    dashboard.uid = StringField(dashboard.json, "uid");
    dashboard.title = StringField(dashboard.json, "title");
    CollectPanels(ListField(dashboard.json, "panels"), dashboard.panels);
    dashboards.push_back(std::move(dashboard));
  }
  return dashboards;
}

std::string ExpandVariables(const std::string& text,
                            const std::map<std::string, std::string>& values) {
  std::string expanded;
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '$') {
      const Reference reference = ReferenceAt(text, i);
      const auto value = values.find(reference.name);
      if (reference.length > 0 && value != values.end()) {
        expanded += value->second;
        i += reference.length;
        continue;
      }
    }
    expanded.push_back(text[i++]);
  }
  return expanded;
}

std::vector<std::string> ReferencedVariables(const std::string& text) {
  std::vector<std::string> names;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '$') continue;
    const Reference reference = ReferenceAt(text, i);
    if (reference.length > 0) names.push_back(reference.name);
  }
  return names;
}

// Panels that can only show data on a machine with NVIDIA GPUs (and the matching GPU
// experiments); a CPU-only run proves that their expressions parse, nothing more.
// Key: "<dashboard uid>/<panel title>".
const std::map<std::string, std::string>& GpuOnlyPanels() {
  static const auto* const kPanels = new std::map<std::string, std::string>{
      {"gpuprof-overview/GPUs leased",
       "gpuprof_gpu_leased has one series per GPU; a machine without GPUs has none"},
      {"gpuprof-overview/GPU leases", "gpuprof_gpu_leased: one series per GPU"},
      {"gpuprof-overview/GPU holders", "gpuprof_gpu_lease_info: one series per leased GPU"},
      {"gpuprof-workload-performance/Bandwidth vs measured copy bandwidth",
       "index/store/attention decode results need a GPU and its measured copy bandwidth"},
      {"gpuprof-workload-performance/Achieved bandwidth",
       "index/store/attention results need a GPU"},
      {"gpuprof-workload-performance/Latest bandwidth ratio per GPU",
       "index/store/attention results need a GPU"},
      {"gpuprof-workload-performance/Collective bus bandwidth",
       "NCCL collectives need at least one GPU"},
      {"gpuprof-workload-performance/Attention prefill throughput", "attention kernels need a GPU"},
      {"gpuprof-gpu-telemetry/GPU inventory", "gpuprof_gpu_info: one series per GPU"},
      {"gpuprof-gpu-telemetry/GPU utilisation", "NVML telemetry needs the NVIDIA driver"},
      {"gpuprof-gpu-telemetry/Memory used", "NVML telemetry needs the NVIDIA driver"},
      {"gpuprof-gpu-telemetry/GPU leases", "gpuprof_gpu_leased: one series per GPU"},
      {"gpuprof-gpu-telemetry/SM clock", "NVML telemetry needs the NVIDIA driver"},
      {"gpuprof-gpu-telemetry/Temperature", "NVML telemetry needs the NVIDIA driver"},
      {"gpuprof-gpu-telemetry/Power", "NVML telemetry needs the NVIDIA driver"},
      {"gpuprof-gpu-telemetry/Throttle reasons", "NVML telemetry needs the NVIDIA driver"},
      {"gpuprof-gpu-telemetry/GPU health", "GPU health is watched through NVML"},
      {"gpuprof-gpu-telemetry/Xid events", "Xid events come from NVML"},
      {"gpuprof-gpu-telemetry/Memory errors", "memory error counters come from NVML"},
  };
  return *kPanels;
}

// Template variables whose values only exist on a GPU machine; Grafana then offers only
// "All", whose value (allValue) is used instead.
const std::map<std::string, std::string>& GpuOnlyVariables() {
  static const auto* const kVariables = new std::map<std::string, std::string>{
      {"gpu", "gpuprof_gpu_info has one series per GPU; a machine without GPUs has none"},
  };
  return *kVariables;
}

// Grafana escapes regex metacharacters in the values of multi-value variables, which it then
// joins as (a|b) inside =~ matchers.
std::string GrafanaRegexValue(const std::vector<std::string>& values) {
  std::vector<std::string> escaped;
  for (const std::string& value : values) {
    std::string out;
    for (char c : value) {
      if (std::string_view("\\^$*+?.()|{}[]").find(c) != std::string_view::npos) out += "\\\\";
      out.push_back(c);
    }
    escaped.push_back(out);
  }
  return escaped.size() == 1 ? escaped[0] : absl::StrCat("(", absl::StrJoin(escaped, "|"), ")");
}

int SeriesWithSamples(const google::protobuf::Struct& data) {
  int series = 0;
  for (const auto& result : ListField(data, "result").values()) {
    const auto& fields = result.struct_value();
    if (ListField(fields, "values").values_size() > 0 ||
        ListField(fields, "value").values_size() > 0) {
      ++series;
    }
  }
  return series;
}

}  // namespace gpuprof::testing
