// The daemon's worker processes: which GPUs each one sees, which experiment (and rank) it runs,
// the idle ones kept warm for the next experiment on the same GPUs, and the NCCL rank groups
// (one worker per GPU, rank r on the lease's r-th GPU) that keep their communicator between
// experiments. The experiment manager decides what runs; the pool owns the processes.
#ifndef GPUPROF_DAEMON_SCHEDULING_WORKER_POOL_H_
#define GPUPROF_DAEMON_SCHEDULING_WORKER_POOL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/capture/nsight_tools.h"
#include "daemon/scheduling/worker_process.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof::daemon {

// What every worker runs with: CUDA ordinals in nvidia-smi's order, and NVLink multicast off
// for NCCL, PyTorch and NVSHMEM (multicast objects can take a shared host's GPUs out of
// service; no workload needs them).
std::vector<std::string> WorkerEnvironment();

struct WorkerPoolOptions {
  std::string worker_binary;
  // Lets the request's gpuprof.fault label make a worker misbehave (tests).
  bool allow_test_faults = false;
  // An idle worker kept for reuse on the same GPUs is stopped after this long.
  absl::Duration idle_timeout = absl::Seconds(60);
  // What compiling a custom kernel may take (gpuprofd's flags); sent with every assignment
  // whose request carries one.
  worker_protocol::CustomKernelLimits custom_kernel_limits;
  // The Nsight tools and the reports' directory; an assignment whose request asks for a
  // capture gets the tool's path and its report's path from here.
  CaptureTools capture;
  // Niceness of started workers (WorkerLaunch::nice); unset: the daemon's.
  std::optional<int> worker_nice;
};

// Whether an experiment may run on a warm idle worker and leave its own warm for the next.
// A custom kernel is the submitter's code in our process: it gets a new worker, which is
// retired when the experiment ends, so that nothing it left in the process (its context, its
// memory, a corrupted heap) meets another experiment.
enum class WorkerReuse { kWarm, kSingleUse };

// The workers one experiment got, by rank.
struct WorkerGroup {
  std::vector<int64_t> workers;
  // Idle workers already on exactly these GPUs (with their communicator, for ranks).
  bool reused = false;
  // The workers of `workers` that Reserve set aside without a process yet, each with how to
  // start it (StartReserved).
  std::vector<std::pair<int64_t, WorkerLaunch>> to_start;
};

// The processes StartReserved started for a group's to_start, in its order, or why not.
using StartedWorkers = std::vector<absl::StatusOr<std::unique_ptr<WorkerProcess>>>;

// What a worker was running: the experiment (empty while idle) and its rank in it.
struct WorkerRun {
  std::string experiment_id;
  int rank = 0;
};

// Locking: the pool has no lock of its own. Every method must be called with `owner_lock`
// held (it asserts so), the lock of the experiment manager that owns it: which worker runs
// which experiment changes in the same critical section as the experiment's state and its
// GPU lease (a worker's exit and the release of the lease its experiment held must not be
// seen apart), so a second lock would only add an ordering to get wrong. For the same
// reason the callbacks run on the workers' reader threads without the lock and take it
// themselves, and processes are destroyed outside it (TakeRetired): a WorkerProcess's
// destructor joins the threads that run those callbacks.
class WorkerPool {
 public:
  // A worker's report and its exit (on the worker's reader thread, lock not held).
  using ReportCallback =
      std::function<void(int64_t worker, const worker_protocol::WorkerReport& report)>;
  using ExitCallback = std::function<void(int64_t worker, const WorkerExit& exit)>;

  // `inventory` (the GPUs by index, their links and the host) must outlive the pool; it is
  // read when workers start and when ranks are assigned. `on_retired` is called, lock held,
  // whenever a process waits in TakeRetired to be destroyed.
  WorkerPool(absl::Mutex& owner_lock, const v1::ListGpusResponse& inventory,
             WorkerPoolOptions options, ReportCallback on_report, ExitCallback on_exit,
             std::function<void()> on_retired);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Workers for `experiment_id` on `gpus`: one that sees them all, or with `one_per_rank`
  // one per GPU (rank r sees gpus[r] only). Idle workers holding exactly that arrangement are
  // reused; idle workers on any of these GPUs are stopped; the rest are started. On an error
  // nothing is left started.
  // kSingleUse: never an idle worker, always new ones (idle workers on these GPUs are
  // stopped), retired by Finished instead of kept warm.
  absl::StatusOr<WorkerGroup> Acquire(const std::string& experiment_id,
                                      const std::vector<int>& gpus, bool one_per_rank,
                                      WorkerReuse reuse = WorkerReuse::kWarm);
  // Acquire in three steps, so that new processes start without the owner's lock (a vfork and
  // exec take milliseconds on a busy host, and every RPC waits for that lock): Reserve (lock
  // held) picks the idle workers to reuse or reserves slots, without processes, for new ones;
  // StartReserved (lock NOT held: it reads only what never changes) starts the processes;
  // Install (lock held) puts them in their slots. A reserved worker that exits before Install
  // is reported as usual (its Exited forgets the slot) and Install retires its process; Kill
  // of a reserved worker takes effect at Install. If a process could not be started, Install
  // retires the whole group and returns why.
  WorkerGroup Reserve(const std::string& experiment_id, const std::vector<int>& gpus,
                      bool one_per_rank, WorkerReuse reuse = WorkerReuse::kWarm);
  StartedWorkers StartReserved(const WorkerGroup& group) const;
  absl::Status Install(const WorkerGroup& group, StartedWorkers started);
  // A new group's first step: rank 0 makes the NCCL id (its report carries the rendezvous).
  void StartRendezvous(const WorkerGroup& group);
  // Sends every rank of `workers` its assignment for `experiment`, which holds its GPUs in
  // rank order (with the group's NCCL id when it has more than one rank).
  void AssignRanks(const v1::Experiment& experiment, const std::vector<int64_t>& workers,
                   const std::string& nccl_unique_id, bool reused);

  // What `worker` runs; nullopt if it is gone or idle.
  std::optional<WorkerRun> Running(int64_t worker) const;
  // Whether any worker still runs `experiment_id` (its GPUs stay leased till none does).
  bool AnyRunning(const std::string& experiment_id) const;
  // `worker` reported something for its experiment now (DescribeRanks' "last report").
  void NoteReport(int64_t worker);
  // `worker` finished its experiment: idle, and kept warm for the same GPUs; a single-use
  // worker is retired instead (its exit is not reported).
  void Finished(int64_t worker);
  std::string StderrTail(int64_t worker) const;
  // "; at the deadline: rank 0 (GPU 0, pid N) sleeping, last report 0.2 s before; rank 1 ...
  // done" for a group of ranks, `workers` by rank; empty for one worker.
  std::string DescribeRanks(const std::string& experiment_id, const std::vector<int64_t>& workers,
                            absl::Time now) const;

  // Kills every worker still running `experiment_id`; their exits report it.
  void Kill(const std::string& experiment_id);
  // Kills `worker` and forgets it: its exit is not reported.
  void Retire(int64_t worker);
  // Retires the idle workers that see `gpu` (a drained GPU must not get the next experiment).
  void RetireIdleOn(int gpu);
  // Retires the workers idle for the idle timeout; returns when the next one will be due
  // (absl::InfiniteFuture() if none is idle).
  absl::Time RetireIdle(absl::Time now);
  void RetireAll();
  // The worker's process exited: forgets it and returns what it ran; nullopt if it had been
  // retired already (killed on purpose).
  std::optional<WorkerRun> Exited(int64_t worker);
  // Processes to destroy, outside the owner's lock.
  std::vector<std::unique_ptr<WorkerProcess>> TakeRetired();

 private:
  struct Slot {
    std::unique_ptr<WorkerProcess> process;  // null while reserved (Reserve to Install)
    // Killed while reserved: killed as soon as Install gives it its process.
    bool kill_on_install = false;
    // What the worker sees (CUDA_VISIBLE_DEVICES): all of an experiment's GPUs, or one rank's.
    std::vector<int> gpus;
    // For a rank of a group: the group's GPUs in rank order, and this worker's rank in it.
    std::vector<int> group_gpus;
    int rank = 0;
    std::string experiment_id;  // empty while idle
    // Started for one experiment (WorkerReuse::kSingleUse): never reused, never idle.
    bool single_use = false;
    absl::Time idle_since;
    // When the worker last reported anything for its current experiment.
    absl::Time last_report;
  };

  // How a worker that sees `gpus` is started.
  WorkerLaunch LaunchFor(const std::vector<int>& gpus) const;
  void RetireIf(const std::function<bool(const Slot&)>& retire);

  absl::Mutex& owner_lock_;
  const v1::ListGpusResponse& inventory_;
  const WorkerPoolOptions options_;
  const ReportCallback on_report_;
  const ExitCallback on_exit_;
  const std::function<void()> on_retired_;
  std::map<int64_t, Slot> slots_;
  int64_t next_id_ = 1;
  std::vector<std::unique_ptr<WorkerProcess>> retired_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SCHEDULING_WORKER_POOL_H_
