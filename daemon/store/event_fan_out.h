// Watching an event log: the stored events from a seq, then the live ones, with neither a gap
// nor a duplicate, each live stream holding a place under the watch caps. One pattern for
// experiments and sweeps.
#ifndef GPUPROF_DAEMON_STORE_EVENT_FAN_OUT_H_
#define GPUPROF_DAEMON_STORE_EVENT_FAN_OUT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/admission/watch_slots.h"
#include "daemon/store/stream_sink.h"

namespace gpuprof::daemon {

// The live streams of one experiment or sweep, by subscription handle.
template <typename Event>
using Subscribers = std::map<int64_t, std::shared_ptr<StreamSink<Event>>>;

// Every method runs under the lock the subject's events are appended and published under
// (the manager's): that lock is what makes replay-then-register gapless.
template <typename Event>
class EventFanOut {
 public:
  // `kind` ("experiment", "sweep") names the subject in refusals; `slots` are the caps shared
  // by every stream; `refused` counts a refusal (for a metric).
  EventFanOut(absl::string_view kind, WatchSlots& slots,
              std::function<void(const absl::Status&)> refused)
      : kind_(kind), slots_(slots), refused_(std::move(refused)) {}

  // Sends `sink` the events `replay(from_seq)` returns (the stored ones, from from_seq on,
  // then any still on their way to disk), then registers it in `live` for the events to come;
  // returns its handle. `live` is null when the subject has ended (or the daemon is stopping):
  // the replay is then followed by OnEnd and 0 is returned. A live stream takes a place of
  // `watcher`'s on the subject owned by `owner`: RESOURCE_EXHAUSTED naming the cap when none
  // is left, with nothing sent.
  absl::StatusOr<int64_t> Subscribe(
      const std::string& id, const std::string& owner, Subscribers<Event>* live, int64_t from_seq,
      absl::FunctionRef<absl::StatusOr<std::vector<Event>>(int64_t from_seq)> replay,
      std::shared_ptr<StreamSink<Event>> sink, const Watcher& watcher) {
    if (from_seq < 0) {
      return absl::InvalidArgumentError(absl::StrCat("from_seq: got ", from_seq, "; must be >= 0"));
    }
    // Only a live stream holds a place: a replay of an ended subject ends by itself.
    int64_t subscription = 0;
    if (live != nullptr) {
      absl::StatusOr<int64_t> slot = slots_.Acquire(kind_, id, owner, watcher);
      if (!slot.ok()) {
        if (refused_) refused_(slot.status());
        return slot.status();
      }
      subscription = *slot;
    }
    absl::StatusOr<std::vector<Event>> events = replay(from_seq);
    if (!events.ok()) {
      slots_.Release(subscription);
      return events.status();
    }
    for (const Event& event : *events) sink->OnEvent(event);
    if (live == nullptr) {
      sink->OnEnd();
      return 0;
    }
    (*live)[subscription] = std::move(sink);
    return subscription;
  }

  // Ends the stream and frees its place; `live` is null when the subject has ended meanwhile
  // (its streams held places until now).
  void Unsubscribe(Subscribers<Event>* live, int64_t subscription) {
    if (live != nullptr) live->erase(subscription);
    slots_.Release(subscription);
  }

  // An event already numbered and stored, to every live stream.
  static void Publish(const Subscribers<Event>& live, const Event& event) {
    for (const auto& [subscription, sink] : live) sink->OnEvent(event);
  }

  // The subject ended: every stream ends (their places are freed as they unsubscribe).
  static void EndAll(const Subscribers<Event>& live) {
    for (const auto& [subscription, sink] : live) sink->OnEnd();
  }

 private:
  const std::string kind_;
  WatchSlots& slots_;
  const std::function<void(const absl::Status&)> refused_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_STORE_EVENT_FAN_OUT_H_
