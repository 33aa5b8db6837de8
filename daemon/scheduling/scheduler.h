// Which queued experiment runs next, and on which GPUs. Not thread-safe: the experiment
// manager calls it under its own lock. Policy:
//   1. higher priority first;
//   2. within a priority, fair share across users: the user with the fewest running
//      experiments goes first, ties to the user served least recently, so one user's hundred
//      queued experiments do not hold back another user's single one;
//   3. first come, first served within a user;
//   4. a group (the points of one sweep) never holds more GPUs than its cap;
//   5. an experiment whose GPUs are busy does not block later ones that fit elsewhere, until
//      it has waited `reserve_after`: then no GPU experiment behind it starts until it has
//      its GPUs, so a large request is not starved by a stream of small ones.
// GPU leases are exclusive; CPU workloads share a fixed number of CPU slots.
#ifndef GPUPROF_DAEMON_SCHEDULING_SCHEDULER_H_
#define GPUPROF_DAEMON_SCHEDULING_SCHEDULER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "daemon/scheduling/gpu_placement.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {

struct PendingExperiment {
  std::string id;
  std::string user;
  int priority = 0;
  int64_t submit_order = 0;
  v1::GpuSelection selection;
  int gpu_count = 0;  // 0: a CPU workload
  // Experiments of one group (a sweep's points) hold at most `group_max_gpus` GPUs at once;
  // empty or 0: no cap. A capped experiment waits without reserving GPUs.
  std::string group;
  int group_max_gpus = 0;
};

// When a queued experiment may take GPUs from running ones (from the access policy).
struct PreemptionRules {
  // Queued experiments at or above this priority may preempt; 0 turns preemption off.
  int min_priority = 0;
  // How long such an experiment waits for its GPUs before it preempts.
  absl::Duration grace = absl::ZeroDuration();
};

struct Preemption {
  std::string for_id;  // the experiment that needs the GPUs
  int for_priority = 0;
  std::vector<std::string> victims;
};

struct Dispatch {
  std::string id;
  std::vector<int> gpus;  // in rank order; empty for CPU workloads
};

class Scheduler {
 public:
  Scheduler(GpuTopology topology, int cpu_slots,
            absl::Duration reserve_after = absl::Minutes(2));

  // A user's cap on GPUs held at once (the max_concurrent_gpus quota), asked at every dispatch
  // so that a policy reload applies to what is queued; < 0 means none. An experiment that
  // would go over it waits without reserving GPUs.
  void SetUserGpuLimit(std::function<int(const std::string& user)> limit) {
    user_gpu_limit_ = std::move(limit);
  }

  void Enqueue(PendingExperiment experiment);
  // Removes a queued experiment (cancelled); false if it is not queued.
  bool Remove(const std::string& id);
  // Leases resources to every experiment that can start now, in policy order.
  std::vector<Dispatch> DispatchReady(absl::Time now);
  // DispatchReady leases nothing before `until` (start-up keeps queue places for experiments
  // about to be queued again, which must not be overtaken meanwhile).
  void HoldDispatchUntil(absl::Time until) { hold_dispatch_until_ = until; }
  // Frees what a dispatched experiment held.
  void Release(const std::string& id);

  // The running experiments to stop so that the first queued experiment (in policy order) at
  // or above rules.min_priority, blocked on busy GPUs longer than rules.grace, can be placed:
  // lowest priority first, then the most recently started, only of lower priority than it, as
  // few as place it. Empty when nothing qualifies or when experiments already being preempted
  // will free enough. Victims are remembered until Preempt or Release.
  Preemption ChoosePreemption(absl::Time now, const PreemptionRules& rules);
  // Frees a preempted experiment's resources and queues it again in its original place.
  void Preempt(const std::string& id);

  // 1-based place in the order the scheduler would start queued experiments if resources were
  // free; 0 when not queued.
  int QueuePosition(const std::string& id) const;
  size_t queued_count() const { return queue_.size(); }
  size_t running_count() const { return running_.size(); }
  // GPU index -> experiment id, for every leased GPU.
  std::map<int, std::string> GpuLeases() const;

  // A drained GPU (unhealthy) is never leased again until it is undrained; the experiment
  // holding it keeps it until Release. Queued experiments that can only run on drained GPUs
  // wait without reserving GPUs, so they hold nobody else back.
  void SetGpuDrained(int gpu, bool drained);
  bool IsDrained(int gpu) const { return drained_.contains(gpu); }

 private:
  struct Running {
    std::string user;
    std::vector<int> gpus;
    bool cpu = false;
    std::string group;
    PendingExperiment pending;  // as queued, to queue it again if preempted
    int64_t started_tick = 0;
    bool being_preempted = false;
  };
  // Queued experiments in the order the policy would consider them.
  std::vector<const PendingExperiment*> PolicyOrder() const;
  // Whether the experiment could be placed if every GPU that is not drained were free.
  bool PlaceableOnHealthyGpus(const PendingExperiment& experiment) const;

  GpuTopology topology_;
  int cpu_slots_;
  absl::Duration reserve_after_;
  // When each queued GPU experiment first found its GPUs busy.
  std::map<std::string, absl::Time> blocked_since_;
  int cpu_in_use_ = 0;
  std::set<int> free_gpus_;
  std::set<int> drained_;
  std::map<std::string, PendingExperiment> queue_;  // by id
  std::map<std::string, Running> running_;          // by id
  std::map<std::string, int> running_per_user_;
  std::map<std::string, int> gpus_per_group_;
  std::map<std::string, int> gpus_per_user_;
  std::function<int(const std::string& user)> user_gpu_limit_;
  absl::Time hold_dispatch_until_ = absl::InfinitePast();
  std::map<std::string, int64_t> last_served_;      // user -> dispatch tick
  int64_t tick_ = 0;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SCHEDULING_SCHEDULER_H_
