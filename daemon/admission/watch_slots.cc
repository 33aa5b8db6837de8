#include "daemon/admission/watch_slots.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/admission/live_counts.h"

namespace gpuprof::daemon {

int WatchSlots::ReservedForOwner() const {
  if (limits_.per_subject <= 0) return 0;
  const int half = limits_.per_subject / 2;
  return limits_.per_user_per_subject > 0 ? std::min(limits_.per_user_per_subject, half) : half;
}

absl::StatusOr<int64_t> WatchSlots::Acquire(absl::string_view kind, const std::string& subject,
                                            const std::string& owner, const Watcher& watcher) {
  absl::MutexLock lock(&mutex_);
  const std::pair<std::string, std::string> subject_user(subject, watcher.user);
  if (!watcher.own_submission) {
    const int on_subject = LiveCountOf(by_subject_, subject);
    if (!watcher.admin) {
      const int mine_here = LiveCountOf(by_subject_user_, subject_user);
      if (limits_.per_user_per_subject > 0 && mine_here >= limits_.per_user_per_subject) {
        return absl::ResourceExhaustedError(absl::StrCat(
            watcher.user, " already holds ", mine_here, " live streams on ", kind, " ", subject,
            ", the most one user may hold on one experiment or sweep "
            "(--max_watchers_per_user_per_experiment=",
            limits_.per_user_per_subject, "); end one, or poll with gpuprof get"));
      }
      const int mine = LiveCountOf(by_user_, watcher.user);
      if (limits_.per_user > 0 && mine >= limits_.per_user) {
        return absl::ResourceExhaustedError(absl::StrCat(
            watcher.user, " already holds ", mine,
            " live watch streams over all experiments and sweeps, the most one user may "
            "(--max_watch_streams_per_user=",
            limits_.per_user, "); end some, or poll with gpuprof get"));
      }
    }
    if (limits_.per_subject > 0) {
      const bool privileged = watcher.admin || watcher.user == owner;
      const int reserved = ReservedForOwner();
      if (on_subject >= limits_.per_subject) {
        return absl::ResourceExhaustedError(
            absl::StrCat(kind, " ", subject, " already has ", on_subject,
                         " live streams, the most gpuprofd allows (--max_watchers_per_experiment=",
                         limits_.per_subject, "); detach one or poll with gpuprof get"));
      }
      if (!privileged && on_subject >= limits_.per_subject - reserved) {
        return absl::ResourceExhaustedError(absl::StrCat(
            kind, " ", subject, " already has ", on_subject,
            " live streams; users other than "
            "its owner (",
            owner, ") and admins may hold ", limits_.per_subject - reserved,
            " (--max_watchers_per_experiment=", limits_.per_subject, ", of which ", reserved,
            " are kept for the owner and admins); detach one or poll with gpuprof get"));
      }
    }
  }
  const int64_t slot = next_slot_++;
  held_[slot] = Held{subject, watcher.user};
  ++by_subject_[subject];
  ++by_user_[watcher.user];
  ++by_subject_user_[subject_user];
  return slot;
}

void WatchSlots::Release(int64_t slot) {
  absl::MutexLock lock(&mutex_);
  const auto it = held_.find(slot);
  if (it == held_.end()) return;
  DecrementLiveCount(by_subject_, it->second.subject);
  DecrementLiveCount(by_user_, it->second.user);
  DecrementLiveCount(by_subject_user_, std::make_pair(it->second.subject, it->second.user));
  held_.erase(it);
}

std::string WatchSlots::RefusalReason(const absl::Status& refusal) {
  for (const char* cap : {"max_watchers_per_user_per_experiment", "max_watch_streams_per_user",
                          "max_watchers_per_experiment"}) {
    if (absl::StrContains(refusal.message(), absl::StrCat("(--", cap, "="))) {
      return absl::StrCat("watch-cap:", cap);
    }
  }
  return "watch-cap";
}

int WatchSlots::LiveOn(const std::string& subject) const {
  absl::MutexLock lock(&mutex_);
  return LiveCountOf(by_subject_, subject);
}

int WatchSlots::LiveOf(const std::string& user) const {
  absl::MutexLock lock(&mutex_);
  return LiveCountOf(by_user_, user);
}

}  // namespace gpuprof::daemon
