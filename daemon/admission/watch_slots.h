// Live watch streams (Watch, WatchSweep and Submit's own stream) against per-experiment and
// per-user caps, with room kept for the owner and admins, so that one user's streams cannot
// lock others out of watching their own experiments.
#ifndef GPUPROF_DAEMON_ADMISSION_WATCH_SLOTS_H_
#define GPUPROF_DAEMON_ADMISSION_WATCH_SLOTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace gpuprof::daemon {

// The caps on live watch streams (Watch, WatchSweep and Submit's own stream). 0: no cap.
struct WatchLimits {
  // Streams on one experiment or sweep (--max_watchers_per_experiment). Its last
  // ReservedForOwner() places are kept for the subject's owner and admins.
  int per_subject = 0;
  // Streams one user holds on one experiment or sweep
  // (--max_watchers_per_user_per_experiment); admins are not limited.
  int per_user_per_subject = 0;
  // Streams one user holds over all experiments and sweeps (--max_watch_streams_per_user);
  // admins are not limited.
  int per_user = 0;
};

// Who opens a stream, as the gRPC layer authenticated them.
struct Watcher {
  std::string user;
  bool admin = false;
  // The Submit call's stream of the experiment it has just stored: always admitted, since
  // refusing it would hide the acknowledgement of a queued experiment (counted all the same;
  // submits are bounded by the rate limit and the queue quota).
  bool own_submission = false;
};

// Live watch streams by subject (experiment or sweep id) and by user, against WatchLimits.
// Thread-safe: the experiment and sweep managers share one, so the per-user cap spans both.
class WatchSlots {
 public:
  explicit WatchSlots(WatchLimits limits) : limits_(limits) {}

  // Places of the per-subject cap that only the owner and admins may fill: as many as one user
  // may hold on a subject, so that the owner always gets every stream it is allowed, and at
  // most half the cap.
  int ReservedForOwner() const;

  // Takes a place for `watcher` on `subject` (`kind`: "experiment" or "sweep", for the
  // message), owned by `owner`; returns its handle (> 0) for Release. RESOURCE_EXHAUSTED naming
  // the cap, its value and its flag when a cap is reached.
  absl::StatusOr<int64_t> Acquire(absl::string_view kind, const std::string& subject,
                                  const std::string& owner, const Watcher& watcher);
  // Frees a place Acquire gave; an unknown or already released handle is ignored.
  void Release(int64_t slot);

  int LiveOn(const std::string& subject) const;
  int LiveOf(const std::string& user) const;

  // "watch-cap:<flag>" for a refusal of Acquire, naming the cap (a fixed set of three), for the
  // refusal metric.
  static std::string RefusalReason(const absl::Status& refusal);

 private:
  struct Held {
    std::string subject;
    std::string user;
  };

  const WatchLimits limits_;
  mutable absl::Mutex mutex_;
  int64_t next_slot_ ABSL_GUARDED_BY(mutex_) = 1;
  std::map<int64_t, Held> held_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, int> by_subject_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, int> by_user_ ABSL_GUARDED_BY(mutex_);
  std::map<std::pair<std::string, std::string>, int> by_subject_user_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_WATCH_SLOTS_H_
