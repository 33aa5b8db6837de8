#include "worker/experiment_dispatch.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/fault_label.h"
#include "common/version.h"
#include "cupti/tracing_session.h"
#include "worker/nsight_capture.h"
#include "workloads/runner_table.h"
#include "workloads/spec_table.h"

namespace gpuprof::worker {
namespace {

namespace v1 = ::gpuprof::v1;

worker_protocol::RunFinished Succeeded() {
  worker_protocol::RunFinished finished;
  finished.set_ok(true);
  return finished;
}

worker_protocol::RunFinished Failed(const std::string& error, bool must_not_reuse) {
  worker_protocol::RunFinished finished;
  finished.set_ok(false);
  finished.set_error(error);
  finished.set_must_not_reuse(must_not_reuse);
  return finished;
}

v1::Provenance MakeProvenance(const worker_protocol::ExperimentAssignment& assignment) {
  v1::Provenance provenance;
  provenance.set_hostname(assignment.host().hostname());
  for (const auto& gpu : assignment.gpus()) *provenance.add_gpus() = gpu;
  provenance.set_driver_version(assignment.host().driver_version());
  provenance.set_cuda_runtime_version(assignment.host().cuda_runtime_version());
  provenance.set_nccl_version(assignment.host().nccl_version());
  provenance.set_cupti_version(assignment.host().cupti_version());
  provenance.set_gpuprof_version(std::string(GpuprofVersion()));
  *provenance.mutable_request() = assignment.request();
  provenance.set_worker_pid(getpid());
  provenance.set_worker_reused(assignment.worker_reused());
  return provenance;
}

void EmitProgress(const EventEmitter& emit, v1::Phase phase, int64_t done, int64_t total,
                  const std::string& message) {
  v1::ExperimentEvent event;
  auto* progress = event.mutable_progress();
  progress->set_phase(phase);
  progress->set_done(done);
  progress->set_total(total);
  progress->set_message(message);
  emit(event);
}

// Misbehaves as a test asked, when the daemon runs with --enable_test_faults. Returns a
// RunFinished for faults that end the run normally; does not return for the others.
std::optional<worker_protocol::RunFinished> InjectFault(
    const worker_protocol::ExperimentAssignment& assignment, const EventEmitter& emit) {
  const char* enabled = std::getenv("GPUPROF_ENABLE_TEST_FAULTS");
  if (enabled == nullptr || std::string(enabled) != "1") return std::nullopt;
  const auto label = assignment.request().labels().find(kFaultLabel);
  if (label == assignment.request().labels().end()) return std::nullopt;
  // "hang@1": only rank 1 misbehaves; the other ranks go on and find their peer missing.
  const std::optional<FaultLabel> parsed = ParseFaultLabel(label->second);
  if (!parsed.has_value() || !parsed->AppliesTo(assignment.rank())) return std::nullopt;
  const std::string& fault = parsed->fault;
  EmitProgress(emit, v1::PHASE_SETUP, 0, 1, "injecting fault: " + label->second);
  std::fprintf(stderr, "gpuprof_worker: injected fault '%s' in %s (rank %d)\n",
               label->second.c_str(), assignment.experiment_id().c_str(), assignment.rank());
  std::fflush(stderr);
  if (fault == "crash") {
    // Die by the signal itself, as a real crash does, also in sanitizer builds (whose SIGSEGV
    // handler would otherwise report and exit with a status instead).
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  }
  if (fault == "exit") std::_Exit(3);
  if (fault == "hang") {
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  if (fault == "flood") {
    // Well-formed reports as fast as the pipe takes them, each carrying 64 KiB.
    const std::string filler(64 << 10, 'f');
    for (int64_t done = 0;; ++done) EmitProgress(emit, v1::PHASE_TIMED, done, 0, filler);
  }
  if (fault == "garbage") {
    // A length prefix promising a message, then bytes that do not parse as one; then wait to
    // be killed, as a worker with a corrupted stack might.
    const char garbage[] = "\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff";
    (void)!write(kReportFd, garbage, sizeof(garbage) - 1);
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  return Failed("injected CUDA error: an illegal memory access was encountered "
                "(cudaErrorIllegalAddress)",
                /*must_not_reuse=*/true);
}

}  // namespace

worker_protocol::RunFinished RunExperiment(const worker_protocol::ExperimentAssignment& assignment,
                                           const EventEmitter& emit) {
  if (auto fault = InjectFault(assignment, emit); fault.has_value()) return *fault;
  const std::string name = workloads::WorkloadName(assignment.request());
  const workloads::WorkloadRunner* runner =
      workloads::FindWorkloadRunner(assignment.request().workload_case());
  if (runner == nullptr) {
    return Failed(absl::StrCat("workload ", name, " is not available in this build of the worker"),
                  false);
  }
  // Tracing starts before the workload creates its context, so every phase is on record.
  std::optional<cupti::TracingSession> tracing;
  if (workloads::IsGpuWorkload(assignment.request())) {
    std::vector<int32_t> gpu_ids;
    for (const auto& gpu : assignment.gpus()) gpu_ids.push_back(gpu.index());
    tracing.emplace(assignment.request().tracing(), gpu_ids, emit);
  }
  const workloads::RunContext context{
      .assignment = assignment,
      .progress =
          [&](v1::Phase phase, int64_t done, int64_t total, const std::string& message) {
            if (tracing.has_value()) tracing->OnPhase(phase);
            EmitProgress(emit, phase, done, total, message);
          },
      .tracing = tracing.has_value() ? &*tracing : nullptr};
  absl::StatusOr<v1::ExperimentResult> result = runner->run(context);
  if (!result.ok()) {
    // The records still stream: they show what happened up to the failure.
    if (tracing.has_value()) {
      v1::ExperimentResult partial;
      tracing->Finish(partial);
    }
    // A failure that carries a CUDA error ends the worker: after a sticky error (illegal
    // address, launch failure) the context is unusable, and after any other the device's
    // state is unknown, so a fresh process is the safe next owner.
    // A rank's communicator may be aborted or out of step with its peers after any failure.
    const bool cuda_error = CudaErrorFromStatus(result.status()).has_value() ||
                            CuResultFromStatus(result.status()).has_value() ||
                            IsStickyCudaError(result.status());
    return Failed(absl::StrCat(name, ": ", result.status().ToString()),
                  cuda_error || assignment.world_size() > 1);
  }
  // Activity batches go out before the result, which counts what was dropped or not collected.
  if (tracing.has_value()) tracing->Finish(*result);
  // A submitted kernel refused by its checks (a wrong element, a write past an output, or
  // compute-sanitizer's findings) fails the experiment: it has no figure to rank. Its result
  // (the checks, the report, the SASS) is kept, and the reason says what was wrong first.
  const bool refused_kernel =
      result->has_custom_kernel() &&
      (result->custom_kernel().sanitizer_errors() > 0 ||
       (result->verification().checked() && !result->verification().passed()));
  const std::string verdict = result->verification().message();
  // The report comes from a second run under the tool; the measured run's figures stay.
  absl::Status capture_failed;
  if (assignment.has_capture() && !refused_kernel) {
    absl::StatusOr<v1::CaptureReport> report =
        RunCapture(assignment, [&](int64_t done, const std::string& message) {
          EmitProgress(emit, v1::PHASE_PROFILING, done, 1, message);
        });
    if (report.ok()) {
      *result->mutable_capture_report() = *std::move(report);
    } else {
      capture_failed = report.status();
    }
  }
  v1::ExperimentEvent event;
  *event.mutable_result() = *std::move(result);
  *event.mutable_result()->mutable_provenance() = MakeProvenance(assignment);
  emit(event);
  if (refused_kernel) {
    return Failed(absl::StrCat(name, ": the custom kernel was refused: ", verdict), false);
  }
  if (!capture_failed.ok()) {
    return Failed(absl::StrCat(name, ": the capture under ",
                               assignment.request().capture().tool() ==
                                       v1::NsightCapture::TOOL_NSYS
                                   ? "nsys"
                                   : "ncu",
                               " failed: ", capture_failed.message()),
                  false);
  }
  return Succeeded();
}

}  // namespace gpuprof::worker
