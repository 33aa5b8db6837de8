#include "client/trace_command.h"

#include <fstream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/request_text.h"
#include "common/gzip.h"
#include "report/trace_export.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace gpuprof::client {

grpc::Status FetchExperimentActivity(v1::Profiler::StubInterface& profiler,
                                     const std::string& experiment_id,
                                     ExperimentActivity& activity) {
  activity = ExperimentActivity();
  activity.experiment_id = experiment_id;
  v1::WatchRequest request;
  request.set_experiment_id(experiment_id);
  request.set_from_seq(1);
  if (const absl::Status text = CheckRequestIsUtf8(request); !text.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(text.message()));
  }
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderInterface<v1::ExperimentEvent>> reader =
      profiler.Watch(&context, request);
  int64_t dropped_in_batches = 0;
  v1::ExperimentEvent event;
  while (reader->Read(&event)) {
    switch (event.payload_case()) {
      case v1::ExperimentEvent::kActivity:
        ++activity.activity_batches;
        dropped_in_batches += event.activity().dropped_records();
        for (v1::ActivityRecord& record : *event.mutable_activity()->mutable_records()) {
          activity.records.push_back(std::move(record));
        }
        break;
      case v1::ExperimentEvent::kResult:
        activity.result = event.result();
        activity.has_result = true;
        break;
      case v1::ExperimentEvent::kState:
        activity.state = event.state().state();
        if (!event.state().reason().empty()) activity.state_reason = event.state().reason();
        break;
      default:
        break;
    }
  }
  if (dropped_in_batches > activity.result.dropped_activity_records()) {
    activity.result.set_dropped_activity_records(dropped_in_batches);
  }
  return reader->Finish();
}

bool TraceWantsGzip(const std::string& path, bool gzip_flag) {
  return gzip_flag || absl::EndsWith(path, ".gz");
}

absl::Status WriteChromeTrace(const ExperimentActivity& activity, const std::string& path,
                              bool gzip, std::ostream& standard_output) {
  std::string trace =
      report::ExportChromeTrace(activity.experiment_id, activity.records, activity.result);
  if (gzip) {
    absl::StatusOr<std::string> compressed = GzipCompress(trace);
    if (!compressed.ok()) return compressed.status();
    trace = *std::move(compressed);
  }
  if (path == kStandardOutputPath) {
    standard_output.write(trace.data(), static_cast<std::streamsize>(trace.size()));
    standard_output.flush();
    if (!standard_output) return absl::DataLossError("writing the trace to standard output failed");
    return absl::OkStatus();
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::UnavailableError(absl::StrCat("cannot open ", path, " for writing"));
  file.write(trace.data(), static_cast<std::streamsize>(trace.size()));
  file.close();
  if (!file) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

std::string DescribeWrittenTrace(const ExperimentActivity& activity, const std::string& path) {
  int64_t phases = 0, kernels = 0, launches = 0;
  for (const v1::ActivityRecord& record : activity.records) {
    if (record.kind() == v1::ActivityRecord::KIND_PHASE) ++phases;
    if (record.kind() == v1::ActivityRecord::KIND_KERNEL) ++kernels;
    if (record.kind() == v1::ActivityRecord::KIND_LAUNCH) ++launches;
  }
  std::string text = absl::StrCat(
      "wrote ", activity.records.size(), " records (", phases, " phases, ", kernels, " kernels",
      launches > 0 ? absl::StrCat(", ", launches, " launches") : "", ") of ",
      activity.experiment_id, " to ", path == kStandardOutputPath ? "standard output" : path,
      "; open it in https://ui.perfetto.dev or chrome://tracing\n");
  if (activity.records.empty()) {
    absl::StrAppend(&text, "note: the experiment stored no activity records (tracing off, a CPU "
                           "workload, or it ended before any GPU work)\n");
  }
  if (activity.result.dropped_activity_records() > 0) {
    absl::StrAppend(&text, "note: ", activity.result.dropped_activity_records(),
                    " activity records were dropped (CUPTI buffers were full)\n");
  }
  return text;
}

}  // namespace gpuprof::client
