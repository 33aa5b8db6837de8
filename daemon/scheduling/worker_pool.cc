#include "daemon/scheduling/worker_pool.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/process_state.h"

namespace gpuprof::daemon {

std::vector<std::string> WorkerEnvironment() {
  return {"CUDA_DEVICE_ORDER=PCI_BUS_ID", "NCCL_NVLS_ENABLE=0",
          "TORCH_SYMM_MEM_DISABLE_MULTICAST=1", "NVSHMEM_DISABLE_NVLS=1"};
}

WorkerPool::WorkerPool(absl::Mutex& owner_lock, const v1::ListGpusResponse& inventory,
                       WorkerPoolOptions options, ReportCallback on_report, ExitCallback on_exit,
                       std::function<void()> on_retired)
    : owner_lock_(owner_lock),
      inventory_(inventory),
      options_(std::move(options)),
      on_report_(std::move(on_report)),
      on_exit_(std::move(on_exit)),
      on_retired_(std::move(on_retired)) {}

WorkerLaunch WorkerPool::LaunchFor(const std::vector<int>& gpus) const {
  WorkerLaunch launch;
  launch.binary = options_.worker_binary;
  launch.env = WorkerEnvironment();
  std::vector<std::string> uuids;
  for (int gpu : gpus) uuids.push_back(inventory_.gpus(gpu).uuid());
  // An empty list hides every GPU from CPU workloads.
  launch.env.push_back(absl::StrCat("CUDA_VISIBLE_DEVICES=", absl::StrJoin(uuids, ",")));
  if (options_.allow_test_faults) launch.env.push_back("GPUPROF_ENABLE_TEST_FAULTS=1");
  launch.nice = options_.worker_nice;
  return launch;
}

absl::StatusOr<WorkerGroup> WorkerPool::Acquire(const std::string& experiment_id,
                                                const std::vector<int>& gpus, bool one_per_rank,
                                                WorkerReuse reuse) {
  owner_lock_.AssertHeld();
  WorkerGroup group = Reserve(experiment_id, gpus, one_per_rank, reuse);
  RETURN_IF_ERROR(Install(group, StartReserved(group)));
  return group;
}

WorkerGroup WorkerPool::Reserve(const std::string& experiment_id, const std::vector<int>& gpus,
                                bool one_per_rank, WorkerReuse reuse) {
  owner_lock_.AssertHeld();
  WorkerGroup group;
  const int ranks = one_per_rank ? static_cast<int>(gpus.size()) : 1;
  const bool single_use = reuse == WorkerReuse::kSingleUse;
  // Idle workers that already hold contexts (and, for ranks, a communicator) on exactly this
  // arrangement skip the start-up; a single-use group takes none of them.
  std::vector<int64_t> warm(ranks, -1);
  for (const auto& [id, slot] : slots_) {
    if (single_use || !slot.experiment_id.empty()) continue;
    if (one_per_rank ? slot.group_gpus == gpus : slot.group_gpus.empty() && slot.gpus == gpus) {
      warm[slot.rank] = id;
    }
  }
  if (std::none_of(warm.begin(), warm.end(), [](int64_t id) { return id < 0; })) {
    group.workers = std::move(warm);
    group.reused = true;
  } else {
    // Idle workers on any of these GPUs would share them: stop them.
    const std::set<int> wanted(gpus.begin(), gpus.end());
    RetireIf([&](const Slot& slot) {
      return slot.experiment_id.empty() &&
             std::any_of(slot.gpus.begin(), slot.gpus.end(),
                         [&](int gpu) { return wanted.contains(gpu); });
    });
    for (int rank = 0; rank < ranks; ++rank) {
      const std::vector<int> visible = one_per_rank ? std::vector<int>{gpus[rank]} : gpus;
      const int64_t id = next_id_++;
      Slot& slot = slots_[id];
      slot.gpus = visible;
      slot.rank = rank;
      slot.single_use = single_use;
      if (one_per_rank) slot.group_gpus = gpus;
      group.workers.push_back(id);
      group.to_start.emplace_back(id, LaunchFor(visible));
    }
  }
  const absl::Time now = absl::Now();
  for (int64_t id : group.workers) {
    Slot& slot = slots_[id];
    slot.experiment_id = experiment_id;
    slot.last_report = now;
  }
  return group;
}

StartedWorkers WorkerPool::StartReserved(const WorkerGroup& group) const {
  StartedWorkers started;
  for (const auto& [binding_id, launch] : group.to_start) {
    const auto id = binding_id;  // clang 14 cannot capture a structured binding (C++20 can)
    started.push_back(WorkerProcess::Start(
        launch,
        [this, id](const worker_protocol::WorkerReport& report) { on_report_(id, report); },
        [this, id](const WorkerExit& exit) { on_exit_(id, exit); }));
  }
  return started;
}

absl::Status WorkerPool::Install(const WorkerGroup& group, StartedWorkers started) {
  owner_lock_.AssertHeld();
  absl::Status failed;
  for (size_t i = 0; i < group.to_start.size() && i < started.size(); ++i) {
    if (!started[i].ok()) {
      if (failed.ok()) failed = started[i].status();
      continue;
    }
    std::unique_ptr<WorkerProcess>& process = *started[i];
    const auto slot = slots_.find(group.to_start[i].first);
    if (slot == slots_.end()) {
      // It exited (or was retired) before it was installed: destroyed outside the lock.
      process->Kill();
      retired_.push_back(std::move(process));
      on_retired_();
      continue;
    }
    slot->second.process = std::move(process);
    if (slot->second.kill_on_install) slot->second.process->Kill();
  }
  if (!failed.ok()) {
    for (int64_t id : group.workers) Retire(id);
  }
  return failed;
}

void WorkerPool::StartRendezvous(const WorkerGroup& group) {
  owner_lock_.AssertHeld();
  worker_protocol::WorkerCommand command;
  command.mutable_rendezvous()->set_world_size(static_cast<int>(group.workers.size()));
  const auto rank0 = slots_.find(group.workers.at(0));
  // A failed send means the worker died; its exit callback fails the experiment.
  if (rank0 != slots_.end() && rank0->second.process != nullptr) {
    (void)rank0->second.process->Send(command);
  }
}

void WorkerPool::AssignRanks(const v1::Experiment& experiment, const std::vector<int64_t>& workers,
                             const std::string& nccl_unique_id, bool reused) {
  owner_lock_.AssertHeld();
  const int world_size = static_cast<int>(workers.size());
  const std::vector<int> gpus(experiment.gpu_ids().begin(), experiment.gpu_ids().end());
  for (int rank = 0; rank < world_size; ++rank) {
    worker_protocol::WorkerCommand command;
    auto& run = *command.mutable_run();
    run.set_experiment_id(experiment.id());
    *run.mutable_request() = experiment.request();
    // One rank sees its own GPU; a single worker sees them all, in rank order.
    if (world_size > 1) {
      *run.add_gpus() = inventory_.gpus(gpus[rank]);
    } else {
      for (int gpu : gpus) *run.add_gpus() = inventory_.gpus(gpu);
    }
    *run.mutable_host() = inventory_.host();
    for (const v1::GpuLink& link : inventory_.links()) {
      if (std::find(gpus.begin(), gpus.end(), link.gpu_a()) != gpus.end() &&
          std::find(gpus.begin(), gpus.end(), link.gpu_b()) != gpus.end()) {
        *run.add_links() = link;
      }
    }
    if (experiment.request().has_custom_kernel()) {
      *run.mutable_custom_kernel_limits() = options_.custom_kernel_limits;
    }
    if (const v1::NsightCapture::Tool tool = experiment.request().capture().tool();
        tool != v1::NsightCapture::TOOL_UNSPECIFIED) {
      const NsightTool& found = ToolOf(options_.capture, tool);
      worker_protocol::CaptureSetup& capture = *run.mutable_capture();
      capture.set_tool_path(found.path);
      capture.set_tool_version(found.version);
      capture.set_report_path(
          CaptureReportPath(options_.capture.reports_dir, experiment.id(), tool));
      capture.set_max_report_bytes(options_.capture.max_report_bytes);
    }
    run.set_worker_reused(reused);
    run.set_rank(rank);
    run.set_world_size(world_size);
    if (world_size > 1) {
      run.set_nccl_unique_id(nccl_unique_id);
      run.set_reuse_communicator(reused);
    }
    // A failed send means the worker died; its exit callback fails the experiment.
    const auto slot = slots_.find(workers[rank]);
    if (slot != slots_.end() && slot->second.process != nullptr) {
      (void)slot->second.process->Send(command);
    }
  }
}

std::optional<WorkerRun> WorkerPool::Running(int64_t worker) const {
  owner_lock_.AssertHeld();
  const auto slot = slots_.find(worker);
  if (slot == slots_.end() || slot->second.experiment_id.empty()) return std::nullopt;
  return WorkerRun{slot->second.experiment_id, slot->second.rank};
}

bool WorkerPool::AnyRunning(const std::string& experiment_id) const {
  owner_lock_.AssertHeld();
  return std::any_of(slots_.begin(), slots_.end(), [&](const auto& entry) {
    return entry.second.experiment_id == experiment_id;
  });
}

void WorkerPool::NoteReport(int64_t worker) {
  owner_lock_.AssertHeld();
  if (const auto slot = slots_.find(worker); slot != slots_.end()) {
    slot->second.last_report = absl::Now();
  }
}

void WorkerPool::Finished(int64_t worker) {
  owner_lock_.AssertHeld();
  if (const auto slot = slots_.find(worker); slot != slots_.end()) {
    if (slot->second.single_use) {
      Retire(worker);
      return;
    }
    slot->second.experiment_id.clear();
    slot->second.idle_since = absl::Now();
  }
}

std::string WorkerPool::StderrTail(int64_t worker) const {
  owner_lock_.AssertHeld();
  const auto slot = slots_.find(worker);
  return slot == slots_.end() || slot->second.process == nullptr
             ? ""
             : slot->second.process->StderrTail();
}

std::string WorkerPool::DescribeRanks(const std::string& experiment_id,
                                      const std::vector<int64_t>& workers, absl::Time now) const {
  owner_lock_.AssertHeld();
  if (workers.size() < 2) return "";
  std::vector<std::string> ranks;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const auto slot = slots_.find(workers[rank]);
    if (slot == slots_.end() || slot->second.experiment_id != experiment_id ||
        slot->second.process == nullptr) {
      ranks.push_back(absl::StrCat("rank ", rank, " done"));
      continue;
    }
    const Slot& worker = slot->second;
    ranks.push_back(absl::StrFormat("rank %d (GPU %s, pid %d) %s, last report %.1f s before",
                                    worker.rank, absl::StrJoin(worker.gpus, ","),
                                    worker.process->pid(),
                                    DescribeProcessState(worker.process->pid()),
                                    absl::ToDoubleSeconds(now - worker.last_report)));
  }
  return absl::StrCat("; at the deadline: ", absl::StrJoin(ranks, "; "));
}

void WorkerPool::Kill(const std::string& experiment_id) {
  owner_lock_.AssertHeld();
  for (auto& [id, slot] : slots_) {
    if (slot.experiment_id != experiment_id) continue;
    if (slot.process == nullptr) {
      slot.kill_on_install = true;
    } else {
      slot.process->Kill();
    }
  }
}

void WorkerPool::Retire(int64_t worker) {
  owner_lock_.AssertHeld();
  const auto it = slots_.find(worker);
  if (it == slots_.end()) return;
  // Reserved without a process: Install retires the process when it comes.
  std::unique_ptr<WorkerProcess> process = std::move(it->second.process);
  slots_.erase(it);
  if (process == nullptr) return;
  process->Kill();
  retired_.push_back(std::move(process));
  on_retired_();
}

void WorkerPool::RetireIf(const std::function<bool(const Slot&)>& retire) {
  std::vector<int64_t> chosen;
  for (const auto& [id, slot] : slots_) {
    if (retire(slot)) chosen.push_back(id);
  }
  for (int64_t id : chosen) Retire(id);
}

void WorkerPool::RetireIdleOn(int gpu) {
  owner_lock_.AssertHeld();
  RetireIf([gpu](const Slot& slot) {
    return slot.experiment_id.empty() &&
           std::find(slot.gpus.begin(), slot.gpus.end(), gpu) != slot.gpus.end();
  });
}

absl::Time WorkerPool::RetireIdle(absl::Time now) {
  owner_lock_.AssertHeld();
  absl::Time next = absl::InfiniteFuture();
  RetireIf([&](const Slot& slot) {
    if (!slot.experiment_id.empty()) return false;
    const absl::Time due = slot.idle_since + options_.idle_timeout;
    if (due <= now) return true;
    next = std::min(next, due);
    return false;
  });
  return next;
}

void WorkerPool::RetireAll() {
  owner_lock_.AssertHeld();
  RetireIf([](const Slot&) { return true; });
}

std::optional<WorkerRun> WorkerPool::Exited(int64_t worker) {
  owner_lock_.AssertHeld();
  const auto slot = slots_.find(worker);
  if (slot == slots_.end()) return std::nullopt;
  WorkerRun run{slot->second.experiment_id, slot->second.rank};
  // The process is gone; its object is destroyed outside the lock (by Install's caller if it
  // exited while reserved).
  std::unique_ptr<WorkerProcess> process = std::move(slot->second.process);
  slots_.erase(slot);
  if (process != nullptr) {
    retired_.push_back(std::move(process));
    on_retired_();
  }
  return run;
}

std::vector<std::unique_ptr<WorkerProcess>> WorkerPool::TakeRetired() {
  owner_lock_.AssertHeld();
  return std::exchange(retired_, {});
}

}  // namespace gpuprof::daemon
