#include "tests/metrics/daemon_runs.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"

namespace gpuprof::testing {

absl::StatusOr<v1::ExperimentState> RunRadixExperiment(
    v1::Profiler::Stub& stub, const std::map<std::string, std::string>& labels,
    absl::Duration timeout) {
  v1::ExperimentRequest request;
  request.mutable_radix()->set_num_requests(300);
  request.set_user("metrics-test");
  for (const auto& [key, value] : labels) (*request.mutable_labels())[key] = value;
  if (timeout > absl::ZeroDuration()) {
    request.mutable_timeout()->set_seconds(absl::ToInt64Seconds(timeout));
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  std::unique_ptr<grpc::ClientReader<v1::ExperimentEvent>> reader = stub.Submit(&context, request);
  v1::ExperimentEvent event;
  v1::ExperimentState state = v1::EXPERIMENT_STATE_UNSPECIFIED;
  while (reader->Read(&event)) {
    if (event.has_state()) state = event.state().state();
  }
  const grpc::Status finished = reader->Finish();
  if (!finished.ok()) {
    return absl::InternalError(absl::StrCat("Submit failed: ", finished.error_message()));
  }
  return state;
}

absl::StatusOr<int> MetricsPortFromLog(const std::string& log) {
  const std::string marker = "metrics on http://";
  const size_t line = log.find(marker);
  if (line == std::string::npos) return absl::NotFoundError("no metrics line in the log");
  const size_t slash = log.find('/', line + marker.size());
  const size_t colon = slash == std::string::npos ? slash : log.rfind(':', slash);
  int port = 0;
  if (colon == std::string::npos || colon < line ||
      !absl::SimpleAtoi(log.substr(colon + 1, slash - colon - 1), &port)) {
    return absl::DataLossError(absl::StrCat("bad metrics line: ", log.substr(line, 80)));
  }
  return port;
}

}  // namespace gpuprof::testing
