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
#include "common/status_macros.h"
#include "daemon/admission/watch_slots.h"
#include "daemon/store/event_log.h"
#include "daemon/store/stream_sink.h"

namespace gpuprof::daemon {

using store::EventPageLimit;

// The live streams of one experiment or sweep, by subscription handle.
template <typename Event>
using Subscribers = std::map<int64_t, std::shared_ptr<StreamSink<Event>>>;

// What one attempt to bring a stream up to date did.
enum class CatchUp {
  kLive,    // the stream had every event up to now and receives the new ones as they come
  kEnded,   // the subject ended: the stream had every event, then OnEnd
  kBehind,  // more is stored than one attempt replays: nothing was sent; page through the
            // store (outside the producer's lock) and try again
};

// Every method runs under the lock the subject's events are appended and published under
// (the manager's): that lock is what makes replay-then-register gapless. A stream reads the
// bulk of a long history page by page without that lock (the producer's event pages) and
// comes here only for the last few events, so no replay under the lock is longer than
// `max_events` of CatchUpTo.
template <typename Event>
class EventFanOut {
 public:
  // At most this many events are replayed under the producer's lock by one CatchUpTo.
  static constexpr int64_t kMaxCatchUpEvents = 64;

  // `kind` ("experiment", "sweep") names the subject in refusals; `slots` are the caps shared
  // by every stream; `refused` counts a refusal (for a metric).
  EventFanOut(absl::string_view kind, WatchSlots& slots,
              std::function<void(const absl::Status&)> refused)
      : kind_(kind), slots_(slots), refused_(std::move(refused)) {}

  // Brings `sink` up to date from from_seq: sends it the events `replay(from_seq, limit)`
  // returns (the stored ones, then any still on their way to disk) when there are at most
  // kMaxCatchUpEvents of them, then registers it in `live` for the events to come (kLive), or,
  // `live` being null because the subject ended (or the daemon is stopping), calls OnEnd
  // (kEnded). More than that waiting is kBehind with nothing sent.
  //
  // A stream of a live subject holds a place of `watcher`'s on the subject owned by `owner`
  // from its first call on: `handle` is 0 on the first call and set here (RESOURCE_EXHAUSTED
  // naming the cap when none is left, with nothing sent); pass it back on later calls.
  // Registering again with the same handle is harmless: the sink drops what it already has.
  absl::StatusOr<CatchUp> CatchUpTo(
      const std::string& id, const std::string& owner, Subscribers<Event>* live, int64_t from_seq,
      absl::FunctionRef<absl::StatusOr<std::vector<Event>>(int64_t from_seq, int64_t max_events)>
          replay,
      const std::shared_ptr<StreamSink<Event>>& sink, const Watcher& watcher, int64_t& handle) {
    if (from_seq < 0) {
      return absl::InvalidArgumentError(absl::StrCat("from_seq: got ", from_seq, "; must be >= 0"));
    }
    // Only a live subject's stream holds a place: a replay of an ended one ends by itself.
    const bool acquired_now = live != nullptr && handle == 0;
    if (acquired_now) {
      absl::StatusOr<int64_t> slot = slots_.Acquire(kind_, id, owner, watcher);
      if (!slot.ok()) {
        if (refused_) refused_(slot.status());
        return slot.status();
      }
      handle = *slot;
    }
    absl::StatusOr<std::vector<Event>> events = replay(from_seq, kMaxCatchUpEvents + 1);
    if (!events.ok()) {
      if (acquired_now) {
        slots_.Release(handle);
        handle = 0;
      }
      return events.status();
    }
    if (static_cast<int64_t>(events->size()) > kMaxCatchUpEvents) return CatchUp::kBehind;
    for (const Event& event : *events) sink->OnEvent(event);
    if (live == nullptr) {
      sink->OnEnd();
      return CatchUp::kEnded;
    }
    (*live)[handle] = sink;
    return CatchUp::kLive;
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

// Sends `sink` every event of the subject from from_seq on, however many, then registers it
// (or ends it): pages of `producer.EventPage` without the producer's lock until the rest fits
// one `producer.CatchUpStream`. Returns the stream's handle for Unsubscribe (0 when the
// subject had ended). For consumers that keep every event themselves; network streams pace
// their paging by their client instead (daemon/server/event_stream.h).
template <typename Event, typename Producer>
absl::StatusOr<int64_t> SubscribeFromSeq(Producer& producer, const std::string& id,
                                         int64_t from_seq,
                                         const std::shared_ptr<StreamSink<Event>>& sink,
                                         const Watcher& watcher) {
  constexpr EventPageLimit kPage{.max_events = 1000, .max_bytes = 4 << 20};
  int64_t handle = 0;
  while (true) {
    ASSIGN_OR_RETURN(CatchUp outcome,
                     producer.CatchUpStream(id, from_seq, sink, watcher, handle));
    if (outcome == CatchUp::kLive) return handle;
    if (outcome == CatchUp::kEnded) {
      if (handle != 0) producer.Unsubscribe(id, handle);
      return 0;
    }
    ASSIGN_OR_RETURN(std::vector<Event> page, producer.EventPage(id, from_seq, kPage));
    for (const Event& event : page) {
      sink->OnEvent(event);
      from_seq = event.seq() + 1;
    }
  }
}

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_STORE_EVENT_FAN_OUT_H_
