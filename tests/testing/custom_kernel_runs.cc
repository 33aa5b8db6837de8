#include "tests/testing/custom_kernel_runs.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "common/experiment_states.h"
#include "grpcpp/grpcpp.h"

namespace gpuprof::testing {

v1::CustomKernel KernelFromFile(const std::string& path, const std::string& name,
                                int block_threads, int items_per_block) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  v1::CustomKernel kernel;
  kernel.set_source(text.str());
  kernel.set_file_name(path.substr(path.rfind('/') + 1));
  kernel.set_kernel_name(name);
  if (block_threads > 0) kernel.set_block_threads(block_threads);
  if (items_per_block > 0) kernel.set_items_per_block(items_per_block);
  return kernel;
}

absl::StatusOr<v1::Experiment> SubmitAndWait(const DaemonProcess& daemon,
                                             const v1::ExperimentRequest& request) {
  auto stub = daemon.NewStub();
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  auto events = stub->Submit(&context, request);
  std::string id;
  v1::ExperimentEvent event;
  while (events->Read(&event)) {
    if (id.empty()) id = event.experiment_id();
    if (event.has_state() && IsTerminalState(event.state().state())) break;
  }
  // Cancelled once the end is seen; a refusal ends the stream with its own status.
  if (!id.empty()) context.TryCancel();
  const grpc::Status submitted = events->Finish();
  if (id.empty()) {
    return absl::Status(static_cast<absl::StatusCode>(submitted.error_code()),
                        submitted.error_message());
  }
  grpc::ClientContext get_context;
  v1::GetExperimentRequest get;
  get.set_experiment_id(id);
  v1::Experiment experiment;
  const grpc::Status got = stub->GetExperiment(&get_context, get, &experiment);
  if (!got.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(got.error_code()), got.error_message());
  }
  return experiment;
}

}  // namespace gpuprof::testing
