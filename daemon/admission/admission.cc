#include "daemon/admission/admission.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

// Decrements `counts[key]` and forgets the key at zero, so that the maps hold only what is live.
template <typename Key>
void Decrement(std::map<Key, int>& counts, const Key& key, int by = 1) {
  const auto it = counts.find(key);
  if (it == counts.end()) return;
  it->second -= by;
  if (it->second <= 0) counts.erase(it);
}

template <typename Key>
int CountOf(const std::map<Key, int>& counts, const Key& key) {
  const auto it = counts.find(key);
  return it == counts.end() ? 0 : it->second;
}

}  // namespace

AdmissionLedger::AdmissionLedger(int submits_per_minute)
    : submits_per_minute_(submits_per_minute) {}

AdmissionLedger::Bucket& AdmissionLedger::RefilledBucket(const std::string& user, absl::Time now) {
  const double capacity = submits_per_minute_;
  auto [bucket, fresh] = buckets_.try_emplace(user);
  if (fresh) {
    bucket->second.tokens = capacity;
  } else if (now > bucket->second.refilled) {
    bucket->second.tokens =
        std::min(capacity, bucket->second.tokens +
                               absl::ToDoubleMinutes(now - bucket->second.refilled) * capacity);
  }
  bucket->second.refilled = std::max(bucket->second.refilled, now);
  return bucket->second;
}

absl::Status AdmissionLedger::CheckRate(const std::string& user, absl::Time now) {
  if (submits_per_minute_ <= 0) return absl::OkStatus();
  const Bucket& bucket = RefilledBucket(user, now);
  if (bucket.tokens >= 1) return absl::OkStatus();
  const absl::Duration wait = absl::Minutes((1 - bucket.tokens) / submits_per_minute_);
  return absl::ResourceExhaustedError(
      absl::StrCat("submit rate limit for ", user, " is ", submits_per_minute_,
                   " per minute (--submits_per_minute_per_user); retry in ",
                   absl::FormatDuration(absl::Ceil(wait, absl::Milliseconds(100)))));
}

void AdmissionLedger::TakeToken(const std::string& user, absl::Time now) {
  if (submits_per_minute_ <= 0) return;
  RefilledBucket(user, now).tokens -= 1;
}

void AdmissionLedger::RefundToken(const std::string& user) {
  if (submits_per_minute_ <= 0) return;
  const auto bucket = buckets_.find(user);
  if (bucket == buckets_.end()) return;
  bucket->second.tokens = std::min<double>(submits_per_minute_, bucket->second.tokens + 1);
}

int AdmissionLedger::reserved(const std::string& user) const { return CountOf(reserved_, user); }

void AdmissionLedger::Reserve(const std::string& user, int places) {
  if (places > 0) reserved_[user] += places;
}

void AdmissionLedger::Release(const std::string& user, int places) {
  if (places > 0) Decrement(reserved_, user, places);
}

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
    const int on_subject = CountOf(by_subject_, subject);
    if (!watcher.admin) {
      const int mine_here = CountOf(by_subject_user_, subject_user);
      if (limits_.per_user_per_subject > 0 && mine_here >= limits_.per_user_per_subject) {
        return absl::ResourceExhaustedError(absl::StrCat(
            watcher.user, " already holds ", mine_here, " live streams on ", kind, " ", subject,
            ", the most one user may hold on one experiment or sweep "
            "(--max_watchers_per_user_per_experiment=",
            limits_.per_user_per_subject, "); end one, or poll with gpuprof get"));
      }
      const int mine = CountOf(by_user_, watcher.user);
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
  Decrement(by_subject_, it->second.subject);
  Decrement(by_user_, it->second.user);
  Decrement(by_subject_user_, std::make_pair(it->second.subject, it->second.user));
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
  return CountOf(by_subject_, subject);
}

int WatchSlots::LiveOf(const std::string& user) const {
  absl::MutexLock lock(&mutex_);
  return CountOf(by_user_, user);
}

}  // namespace gpuprof::daemon
