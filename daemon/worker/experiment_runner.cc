#include "daemon/worker/experiment_runner.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "daemon/radix_spec.h"
#include "daemon/request_validation.h"
#include "daemon/worker/index_runner.h"
#include "daemon/worker/store_runner.h"
#include "daemon/worker/tracing_session.h"
#include "radix/radix_workload.h"

#ifndef GPUPROF_VERSION
#define GPUPROF_VERSION "0.1.0"
#endif

namespace gpuprof::worker {
namespace {

namespace api = ::gpuprof::v1;

v1::RunFinished Succeeded() {
  v1::RunFinished finished;
  finished.set_ok(true);
  return finished;
}

v1::RunFinished Failed(const std::string& error, bool must_not_reuse) {
  v1::RunFinished finished;
  finished.set_ok(false);
  finished.set_error(error);
  finished.set_must_not_reuse(must_not_reuse);
  return finished;
}

api::Provenance MakeProvenance(const v1::RunExperiment& run) {
  api::Provenance provenance;
  provenance.set_hostname(run.host().hostname());
  for (const auto& gpu : run.gpus()) *provenance.add_gpus() = gpu;
  provenance.set_driver_version(run.host().driver_version());
  provenance.set_cuda_runtime_version(run.host().cuda_runtime_version());
  provenance.set_nccl_version(run.host().nccl_version());
  provenance.set_cupti_version(run.host().cupti_version());
  provenance.set_gpuprof_version(GPUPROF_VERSION);
  *provenance.mutable_request() = run.request();
  provenance.set_worker_pid(getpid());
  provenance.set_worker_reused(run.worker_reused());
  return provenance;
}

void EmitProgress(const EventEmitter& emit, api::Phase phase, int64_t done, int64_t total,
                  const std::string& message) {
  api::ExperimentEvent event;
  auto* progress = event.mutable_progress();
  progress->set_phase(phase);
  progress->set_done(done);
  progress->set_total(total);
  progress->set_message(message);
  emit(event);
}

// Misbehaves as a test asked, when the daemon runs with --enable_test_faults. Returns a
// RunFinished for faults that end the run normally; does not return for the others.
std::optional<v1::RunFinished> InjectFault(const v1::RunExperiment& run,
                                           const EventEmitter& emit) {
  const char* enabled = std::getenv("GPUPROF_ENABLE_TEST_FAULTS");
  if (enabled == nullptr || std::string(enabled) != "1") return std::nullopt;
  const auto fault = run.request().labels().find(daemon::kFaultLabel);
  if (fault == run.request().labels().end()) return std::nullopt;
  EmitProgress(emit, api::PHASE_SETUP, 0, 1, "injecting fault: " + fault->second);
  std::fprintf(stderr, "gpuprof_worker: injected fault '%s' in %s\n", fault->second.c_str(),
               run.experiment_id().c_str());
  std::fflush(stderr);
  if (fault->second == "crash") std::raise(SIGSEGV);
  if (fault->second == "exit") std::_Exit(3);
  if (fault->second == "hang") {
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  return Failed("injected CUDA error: an illegal memory access was encountered "
                "(cudaErrorIllegalAddress)",
                /*must_not_reuse=*/true);
}

v1::RunFinished RunRadix(const v1::RunExperiment& run, const EventEmitter& emit) {
  const radix::RadixWorkloadConfig config = daemon::RadixConfigFromSpec(run.request().radix());
  EmitProgress(emit, api::PHASE_TIMED, 0, config.stream.num_requests, "replaying requests");
  const radix::RadixWorkloadReport report =
      radix::RunRadixWorkload(config, [&](int64_t done, int64_t total) {
        EmitProgress(emit, api::PHASE_TIMED, done, total, "replaying requests");
      });
  if (!report.error.empty()) return Failed("radix: " + report.error, false);
  api::ExperimentEvent event;
  auto* result = event.mutable_result();
  *result->mutable_provenance() = MakeProvenance(run);
  *result->mutable_radix() = daemon::RadixResultFromReport(report);
  emit(event);
  return Succeeded();
}

using GpuWorkload = absl::StatusOr<api::ExperimentResult> (*)(const v1::RunExperiment&,
                                                               const PhaseProgress&,
                                                               TracingSession*);

// Runs a GPU workload and reports its result. A failure that carries a CUDA error ends the
// worker: after a sticky error (illegal address, launch failure) the context is unusable, and
// after any other the device's state is unknown, so a fresh process is the safe next owner.
v1::RunFinished RunGpuWorkload(const v1::RunExperiment& run, const EventEmitter& emit,
                               GpuWorkload workload) {
  const std::string name = daemon::WorkloadName(run.request());
  // Tracing starts before the workload creates its context, so every phase is on record.
  std::vector<int32_t> gpu_ids;
  for (const auto& gpu : run.gpus()) gpu_ids.push_back(gpu.index());
  TracingSession tracing(run.request().tracing(), gpu_ids, emit);
  absl::StatusOr<api::ExperimentResult> result = workload(
      run,
      [&](api::Phase phase, int64_t done, int64_t total, const std::string& message) {
        tracing.OnPhase(phase);
        EmitProgress(emit, phase, done, total, message);
      },
      &tracing);
  if (!result.ok()) {
    // The records still stream: they show what happened up to the failure.
    api::ExperimentResult partial;
    tracing.Finish(partial);
    const bool cuda_error = CudaErrorFromStatus(result.status()).has_value() ||
                            CuResultFromStatus(result.status()).has_value();
    return Failed(absl::StrCat(name, ": ", result.status().ToString()),
                  cuda_error || IsStickyCudaError(result.status()));
  }
  // Activity batches go out before the result, which counts what was dropped or not collected.
  tracing.Finish(*result);
  api::ExperimentEvent event;
  *event.mutable_result() = *std::move(result);
  *event.mutable_result()->mutable_provenance() = MakeProvenance(run);
  emit(event);
  return Succeeded();
}

}  // namespace

std::vector<std::string> SupportedWorkloads() { return {"index", "store", "radix"}; }

v1::RunFinished RunExperiment(const v1::RunExperiment& run, const EventEmitter& emit) {
  if (auto fault = InjectFault(run, emit); fault.has_value()) return *fault;
  switch (run.request().workload_case()) {
    case api::ExperimentRequest::kRadix:
      return RunRadix(run, emit);
    case api::ExperimentRequest::kIndex:
      return RunGpuWorkload(run, emit, &RunIndexWorkload);
    case api::ExperimentRequest::kStore:
      return RunGpuWorkload(run, emit, &RunStoreWorkload);
    default:
      return Failed(absl::StrCat("workload ", daemon::WorkloadName(run.request()),
                                 " is not available in this build of the worker"),
                    false);
  }
}

}  // namespace gpuprof::worker
