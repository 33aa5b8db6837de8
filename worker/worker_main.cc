// gpuprof_worker: runs experiments for gpuprofd. Started by the daemon with commands on fd 3
// and reports on fd 4 (length-delimited protobufs); its stdout/stderr go to the daemon, which
// keeps their tail for error messages. It owns the only CUDA context of its GPUs.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

#include "comm/nccl_communicator.h"
#include "comm/nccl_tuning_log.h"
#include "common/message_pipe.h"
#include "common/version.h"
#include "gpu/gpu_probe.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"
#include "kernels/jit/jit_cache.h"
#include "measure/copy_bandwidth.h"
#include "worker/experiment_dispatch.h"
#include "worker/nsight_capture.h"
#include "workloads/custom_kernel/sanitizer_run.h"
#include "workloads/runner_table.h"

namespace gpuprof::worker {
namespace {

constexpr int kCommandFd = 3;

struct JitCacheSize {
  int64_t entries = 0;
  int64_t bytes = 0;
};

// Entries and bytes in the JIT cache this worker uses (zero when it cannot be listed).
JitCacheSize MeasureJitCache() {
  const kernels::JitCache jit_cache(kernels::DefaultJitCacheDirectory());
  const absl::StatusOr<kernels::JitCacheContents> contents = jit_cache.Contents();
  if (!contents.ok()) return {};
  return {contents->entries, contents->bytes};
}

int Serve() {
  MessageReader commands(kCommandFd);
  MessageWriter reports(kReportFd);
  auto send = [&](const worker_protocol::WorkerReport& report) {
    if (!reports.Write(report).ok()) {
      // The daemon is gone; nobody is left to report to.
      std::_Exit(0);
    }
  };
  worker_protocol::WorkerReport ready;
  ready.mutable_ready()->set_pid(getpid());
  ready.mutable_ready()->set_version(std::string(GpuprofVersion()));
  send(ready);
  while (true) {
    worker_protocol::WorkerCommand command;
    const absl::Status read = commands.Read(&command);
    if (!read.ok()) {
      if (read.code() == absl::StatusCode::kOutOfRange) return 0;
      std::fprintf(stderr, "gpuprof_worker: %s\n", read.ToString().c_str());
      return 2;
    }
    if (command.has_shutdown()) return 0;
    if (command.has_rendezvous()) {
      // Rank 0 of a new group: the id's bootstrap root lives in this process.
      worker_protocol::WorkerReport report;
      absl::StatusOr<ncclUniqueId> id = comm::CreateUniqueId();
      if (id.ok()) {
        report.mutable_rendezvous()->set_nccl_unique_id(comm::SerializeUniqueId(*id));
      } else {
        report.mutable_rendezvous()->set_error(id.status().ToString());
      }
      send(report);
      continue;
    }
    if (command.has_probe()) {
      gpu::ProbeOptions options;
      options.gpuprof_version = std::string(GpuprofVersion());
      worker_protocol::WorkerReport report;
      *report.mutable_probe() = gpu::ProbeHost(options);
      if (command.probe().measure_copy_bandwidth()) {
        measure::FillMeasuredCopyBandwidth(*report.mutable_probe());
      }
      for (const auto& workload : workloads::RunnableWorkloadNames()) {
        report.mutable_probe()->add_supported_workloads(workload);
      }
      // The JIT cache this worker's experiments use, for `gpuprof gpus`.
      auto* host = report.mutable_probe()->mutable_host();
      host->set_jit_cache_dir(kernels::DefaultJitCacheDirectory());
      const JitCacheSize size = MeasureJitCache();
      host->set_jit_cache_entries(size.entries);
      host->set_jit_cache_bytes(size.bytes);
      send(report);
      continue;
    }
    if (command.has_run()) {
      const worker_protocol::RunFinished finished = RunExperiment(command.run(), [&](const auto& event) {
        worker_protocol::WorkerReport report;
        *report.mutable_event() = event;
        send(report);
      });
      worker_protocol::WorkerReport report;
      *report.mutable_finished() = finished;
      // Runs add compiled kernels to the cache; keep the daemon's listing current.
      const JitCacheSize size = MeasureJitCache();
      report.mutable_finished()->set_jit_cache_entries(size.entries);
      report.mutable_finished()->set_jit_cache_bytes(size.bytes);
      send(report);
      // A process whose CUDA context may be broken must not take another experiment.
      if (finished.must_not_reuse()) return 0;
    }
  }
}

}  // namespace
}  // namespace gpuprof::worker

int main(int argc, char** argv) {
  // MODE_SANITIZE: this binary again, under compute-sanitizer, running one submitted kernel's
  // checks (workloads/custom_kernel/sanitizer_run.h).
  namespace workloads = gpuprof::workloads;
  if (argc == 2 && absl::StartsWith(argv[1], workloads::kCustomKernelCheckFlag)) {
    return workloads::RunCustomKernelCheckChild(
        std::string(absl::StripPrefix(argv[1], workloads::kCustomKernelCheckFlag)),
        [](const gpuprof::v1::ExperimentRequest& request) -> workloads::RunWorkloadFunction {
          const workloads::WorkloadRunner* runner =
              workloads::FindWorkloadRunner(request.workload_case());
          return runner != nullptr ? runner->run : nullptr;
        });
  }
  // A capture: this binary again, under ncu or nsys, running one experiment
  // (worker/nsight_capture.h).
  if (argc == 2 && absl::StartsWith(argv[1], gpuprof::worker::kCaptureChildFlag)) {
    return gpuprof::worker::RunCaptureChild(
        std::string(absl::StripPrefix(argv[1], gpuprof::worker::kCaptureChildFlag)),
        [](const gpuprof::v1::ExperimentRequest& request) -> workloads::RunWorkloadFunction {
          const workloads::WorkloadRunner* runner =
              workloads::FindWorkloadRunner(request.workload_case());
          return runner != nullptr ? runner->run : nullptr;
        });
  }
  // Before anything can call NCCL: its tuning log tells collectives which algorithm it chose.
  gpuprof::comm::ProcessNcclTuningLog();
  return gpuprof::worker::Serve();
}
