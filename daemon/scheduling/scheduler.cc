#include "daemon/scheduling/scheduler.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace gpuprof::daemon {

Scheduler::Scheduler(GpuTopology topology, int cpu_slots, absl::Duration reserve_after)
    : topology_(std::move(topology)), cpu_slots_(cpu_slots), reserve_after_(reserve_after) {
  for (int gpu = 0; gpu < topology_.gpu_count(); ++gpu) free_gpus_.insert(gpu);
}

void Scheduler::Enqueue(PendingExperiment experiment) {
  const std::string id = experiment.id;
  queue_[id] = std::move(experiment);
}

bool Scheduler::Remove(const std::string& id) {
  blocked_since_.erase(id);
  return queue_.erase(id) > 0;
}

std::vector<const PendingExperiment*> Scheduler::PolicyOrder() const {
  // Simulates fair turns: a user's k-th queued experiment (at one priority) comes after every
  // other user's (k-1)-th; users with fewer running and served longer ago go first in a turn.
  std::map<std::pair<int, std::string>, std::vector<const PendingExperiment*>> per_user;
  for (const auto& [id, experiment] : queue_) {
    per_user[{experiment.priority, experiment.user}].push_back(&experiment);
  }
  using Key = std::tuple<int, int, int, int64_t, int64_t>;
  std::vector<std::pair<Key, const PendingExperiment*>> keyed;
  for (auto& [priority_user, experiments] : per_user) {
    std::sort(experiments.begin(), experiments.end(),
              [](const auto* a, const auto* b) { return a->submit_order < b->submit_order; });
    const std::string& user = priority_user.second;
    const auto running = running_per_user_.find(user);
    const auto served = last_served_.find(user);
    const int running_count = running == running_per_user_.end() ? 0 : running->second;
    const int64_t served_tick = served == last_served_.end() ? -1 : served->second;
    for (size_t turn = 0; turn < experiments.size(); ++turn) {
      keyed.push_back({Key{-priority_user.first, static_cast<int>(turn), running_count,
                           served_tick, experiments[turn]->submit_order},
                       experiments[turn]});
    }
  }
  std::sort(keyed.begin(), keyed.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<const PendingExperiment*> order;
  order.reserve(keyed.size());
  for (const auto& [key, experiment] : keyed) order.push_back(experiment);
  return order;
}

std::vector<Dispatch> Scheduler::DispatchReady(absl::Time now) {
  std::vector<Dispatch> dispatched;
  if (now < hold_dispatch_until_) return dispatched;
  // Each start changes the fair-share order, so recompute it after every dispatch.
  bool started = true;
  while (started && !queue_.empty()) {
    started = false;
    // Set once an experiment ahead in the order has waited too long for its GPUs: the GPUs
    // that free up are kept for it.
    bool reserving = false;
    for (const PendingExperiment* candidate : PolicyOrder()) {
      std::vector<int> gpus;
      if (candidate->gpu_count == 0) {
        if (cpu_in_use_ >= cpu_slots_) continue;
        ++cpu_in_use_;
      } else {
        if (reserving) continue;
        if (!candidate->group.empty() && candidate->group_max_gpus > 0) {
          const auto held = gpus_per_group_.find(candidate->group);
          const int in_use = held == gpus_per_group_.end() ? 0 : held->second;
          if (in_use + candidate->gpu_count > candidate->group_max_gpus) continue;
        }
        if (user_gpu_limit_) {
          const int limit = user_gpu_limit_(candidate->user);
          const auto held = gpus_per_user_.find(candidate->user);
          const int in_use = held == gpus_per_user_.end() ? 0 : held->second;
          if (limit >= 0 && in_use + candidate->gpu_count > limit) continue;
        }
        auto chosen =
            ChooseGpus(candidate->selection, candidate->gpu_count, topology_, free_gpus_);
        if (!chosen.has_value()) {
          // Waiting for a GPU that may never come back must not hold others back.
          if (!drained_.empty() && !PlaceableOnHealthyGpus(*candidate)) continue;
          const absl::Time since = blocked_since_.try_emplace(candidate->id, now).first->second;
          if (now - since >= reserve_after_) reserving = true;
          continue;
        }
        gpus = *std::move(chosen);
        for (int gpu : gpus) free_gpus_.erase(gpu);
      }
      const PendingExperiment experiment = *candidate;
      blocked_since_.erase(experiment.id);
      queue_.erase(experiment.id);
      running_[experiment.id] =
          Running{experiment.user, gpus, experiment.gpu_count == 0, experiment.group, experiment,
                  tick_ + 1};
      if (!experiment.group.empty() && !gpus.empty()) {
        gpus_per_group_[experiment.group] += static_cast<int>(gpus.size());
      }
      ++running_per_user_[experiment.user];
      if (!gpus.empty()) gpus_per_user_[experiment.user] += static_cast<int>(gpus.size());
      last_served_[experiment.user] = ++tick_;
      dispatched.push_back(Dispatch{experiment.id, std::move(gpus)});
      started = true;
      break;
    }
  }
  return dispatched;
}

void Scheduler::Release(const std::string& id) {
  const auto it = running_.find(id);
  if (it == running_.end()) return;
  if (it->second.cpu) --cpu_in_use_;
  for (int gpu : it->second.gpus) {
    if (!drained_.contains(gpu)) free_gpus_.insert(gpu);
  }
  if (!it->second.group.empty() && !it->second.gpus.empty() &&
      (gpus_per_group_[it->second.group] -= static_cast<int>(it->second.gpus.size())) <= 0) {
    gpus_per_group_.erase(it->second.group);
  }
  if (--running_per_user_[it->second.user] == 0) running_per_user_.erase(it->second.user);
  if (!it->second.gpus.empty() &&
      (gpus_per_user_[it->second.user] -= static_cast<int>(it->second.gpus.size())) <= 0) {
    gpus_per_user_.erase(it->second.user);
  }
  running_.erase(it);
}

Preemption Scheduler::ChoosePreemption(absl::Time now, const PreemptionRules& rules) {
  Preemption preemption;
  if (rules.min_priority <= 0) return preemption;
  const PendingExperiment* needy = nullptr;
  for (const PendingExperiment* candidate : PolicyOrder()) {
    if (candidate->gpu_count == 0 || candidate->priority < rules.min_priority) continue;
    if (!drained_.empty() && !PlaceableOnHealthyGpus(*candidate)) continue;
    const auto blocked = blocked_since_.find(candidate->id);
    if (blocked == blocked_since_.end() || now - blocked->second < rules.grace) continue;
    needy = candidate;
    break;
  }
  if (needy == nullptr) return preemption;
  // GPUs that will be free once the preemptions under way end.
  std::set<int> free = free_gpus_;
  for (const auto& [id, running] : running_) {
    if (!running.being_preempted) continue;
    for (int gpu : running.gpus) {
      if (!drained_.contains(gpu)) free.insert(gpu);
    }
  }
  if (ChooseGpus(needy->selection, needy->gpu_count, topology_, free).has_value()) {
    return preemption;
  }
  std::vector<std::pair<std::string, const Running*>> lower;
  for (const auto& [id, running] : running_) {
    if (running.cpu || running.being_preempted || running.pending.priority >= needy->priority) {
      continue;
    }
    lower.push_back({id, &running});
  }
  std::sort(lower.begin(), lower.end(), [](const auto& a, const auto& b) {
    if (a.second->pending.priority != b.second->pending.priority) {
      return a.second->pending.priority < b.second->pending.priority;
    }
    return a.second->started_tick > b.second->started_tick;
  });
  std::vector<std::string> victims;
  for (const auto& [id, running] : lower) {
    victims.push_back(id);
    for (int gpu : running->gpus) {
      if (!drained_.contains(gpu)) free.insert(gpu);
    }
    if (ChooseGpus(needy->selection, needy->gpu_count, topology_, free).has_value()) {
      for (const std::string& victim : victims) running_[victim].being_preempted = true;
      preemption.for_id = needy->id;
      preemption.for_priority = needy->priority;
      preemption.victims = std::move(victims);
      return preemption;
    }
  }
  return preemption;  // even every lower-priority experiment would not make room
}

void Scheduler::Preempt(const std::string& id) {
  const auto it = running_.find(id);
  if (it == running_.end()) return;
  PendingExperiment pending = it->second.pending;
  Release(id);
  Enqueue(std::move(pending));
}

int Scheduler::QueuePosition(const std::string& id) const {
  const auto order = PolicyOrder();
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i]->id == id) return static_cast<int>(i) + 1;
  }
  return 0;
}

void Scheduler::SetGpuDrained(int gpu, bool drained) {
  if (gpu < 0 || gpu >= topology_.gpu_count()) return;
  if (drained) {
    drained_.insert(gpu);
    free_gpus_.erase(gpu);
    return;
  }
  drained_.erase(gpu);
  const std::map<int, std::string> leases = GpuLeases();
  if (!leases.contains(gpu)) free_gpus_.insert(gpu);
}

bool Scheduler::PlaceableOnHealthyGpus(const PendingExperiment& experiment) const {
  std::set<int> healthy;
  for (int gpu = 0; gpu < topology_.gpu_count(); ++gpu) {
    if (!drained_.contains(gpu)) healthy.insert(gpu);
  }
  return ChooseGpus(experiment.selection, experiment.gpu_count, topology_, healthy).has_value();
}

std::map<int, std::string> Scheduler::GpuLeases() const {
  std::map<int, std::string> leases;
  for (const auto& [id, running] : running_) {
    for (int gpu : running.gpus) leases[gpu] = id;
  }
  return leases;
}

}  // namespace gpuprof::daemon
