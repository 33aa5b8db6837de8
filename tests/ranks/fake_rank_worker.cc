// A stand-in gpuprof_worker for the daemon's rank supervision tests on machines without GPUs.
// It speaks the real worker protocol over the real pipes, so the daemon under test is exactly
// the one that runs NCCL ranks: it reports FAKE_RANK_GPUS GPUs that run `collective` (or the
// FAKE_RANK_WORKLOADS), answers
// the rendezvous with an id of its own, and for each assignment reports which rank it is, the
// id it was given and whether it was told to reuse its communicator; the gpuprof.fault label
// (crash, exit, hang, optionally @RANK) makes it misbehave, and the fake.run_ms label makes the
// run take that long. What it stands in for is only the
// GPU work; the process model, relay, merge and supervision are the daemon's own.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/fault_label.h"
#include "common/message_pipe.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof::testing {
namespace {

namespace v1 = ::gpuprof::v1;
namespace wp = ::gpuprof::worker_protocol;

constexpr int kCommandFd = 3;
constexpr int kReportFd = 4;

v1::ListGpusResponse FakeInventory() {
  int gpus = 4;
  if (const char* count = std::getenv("FAKE_RANK_GPUS"); count != nullptr) {
    (void)absl::SimpleAtoi(count, &gpus);
  }
  v1::ListGpusResponse inventory;
  inventory.mutable_host()->set_hostname("fake-rank-host");
  for (int i = 0; i < gpus; ++i) {
    v1::GpuInfo& gpu = *inventory.add_gpus();
    gpu.set_index(i);
    gpu.set_name("fake GPU");
    gpu.set_uuid(absl::StrCat("GPU-fake-", i));
    gpu.set_total_memory_bytes(int64_t{80} << 30);
    gpu.set_numa_node(0);
  }
  for (int a = 0; a < gpus; ++a) {
    for (int b = 0; b < gpus; ++b) {
      if (a == b) continue;
      v1::GpuLink& link = *inventory.add_links();
      link.set_gpu_a(a);
      link.set_gpu_b(b);
      link.set_type(v1::LINK_TYPE_NVLINK);
      link.set_nvlink_count(18);
    }
  }
  // FAKE_RANK_WORKLOADS="collective,index": tests of admission's decisions on other workloads
  // (a custom kernel's index run, which the fake worker only pretends to run).
  const char* workloads = std::getenv("FAKE_RANK_WORKLOADS");
  for (absl::string_view workload :
       absl::StrSplit(workloads != nullptr ? workloads : "collective", ',', absl::SkipEmpty())) {
    inventory.add_supported_workloads(std::string(workload));
  }
  return inventory;
}

// The fault the request asks of this rank, or "".
std::string FaultFor(const wp::ExperimentAssignment& run) {
  const auto label = run.request().labels().find(kFaultLabel);
  if (label == run.request().labels().end()) return "";
  const std::optional<FaultLabel> fault = ParseFaultLabel(label->second);
  return fault.has_value() && fault->AppliesTo(run.rank()) ? fault->fault : "";
}

int Serve() {
  MessageReader commands(kCommandFd);
  MessageWriter reports(kReportFd);
  auto send = [&](const wp::WorkerReport& report) {
    if (!reports.Write(report).ok()) std::_Exit(0);
  };
  wp::WorkerReport ready;
  ready.mutable_ready()->set_pid(getpid());
  send(ready);
  while (true) {
    wp::WorkerCommand command;
    if (!commands.Read(&command).ok() || command.has_shutdown()) return 0;
    wp::WorkerReport report;
    if (command.has_probe()) {
      *report.mutable_probe() = FakeInventory();
      send(report);
      continue;
    }
    if (command.has_rendezvous()) {
      std::string id = absl::StrCat("fake-nccl-id-of-pid-", getpid());
      id.resize(128, '\0');
      report.mutable_rendezvous()->set_nccl_unique_id(id);
      send(report);
      continue;
    }
    if (!command.has_run()) continue;
    const wp::ExperimentAssignment& run = command.run();
    // What the daemon told this rank, for the test to compare across ranks.
    v1::ExperimentEvent event;
    event.mutable_progress()->set_phase(v1::PHASE_SETUP);
    event.mutable_progress()->set_message(absl::StrCat(
        "rank ", run.rank(), " of ", run.world_size(), " pid ", getpid(), " id ",
        std::string(run.nccl_unique_id().c_str()), " reuse ", run.reuse_communicator() ? 1 : 0,
        " gpus ", run.gpus_size(), " links ", run.links_size(),
        run.has_custom_kernel_limits()
            ? absl::StrCat(" compile limits ", run.custom_kernel_limits().compile_timeout().seconds(),
                           " s ", run.custom_kernel_limits().compile_memory_bytes(), " bytes")
            : ""));
    *report.mutable_event() = event;
    send(report);
    const std::string fault = FaultFor(run);
    if (fault == "crash") {
      // Die by the signal itself, also under a sanitizer's SIGSEGV handler.
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
    }
    if (fault == "exit") std::_Exit(3);
    if (fault == "hang") {
      while (true) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    // How long the "GPU work" takes, for tests that need an experiment to run a while.
    if (const auto run_ms = run.request().labels().find("fake.run_ms");
        run_ms != run.request().labels().end()) {
      int milliseconds = 0;
      if (absl::SimpleAtoi(run_ms->second, &milliseconds)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
      }
    }
    wp::WorkerReport result;
    v1::ExperimentResult& figures = *result.mutable_event()->mutable_result();
    figures.mutable_collective()->set_ranks(run.world_size());
    // Different per rank, so the test sees whose result the daemon kept.
    figures.mutable_collective()->set_busbw_gbps(100.0 + run.rank());
    figures.mutable_provenance()->set_worker_pid(getpid());
    send(result);
    wp::WorkerReport finished;
    finished.mutable_finished()->set_ok(true);
    send(finished);
  }
}

}  // namespace
}  // namespace gpuprof::testing

int main() { return gpuprof::testing::Serve(); }
