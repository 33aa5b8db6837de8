// Streaming an experiment's or a sweep's events to one gRPC client: the history read from the
// store page by page as the client takes it, then the live events, with neither a gap nor a
// duplicate, in memory bounded by bytes per stream and in total. A client that stops reading
// is cut off and told the seq to resume from.
#ifndef GPUPROF_DAEMON_SERVER_EVENT_STREAM_H_
#define GPUPROF_DAEMON_SERVER_EVENT_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/admission/watch_slots.h"
#include "daemon/blocking_call_pool.h"
#include "daemon/store/event_fan_out.h"
#include "daemon/store/stream_sink.h"
#include "grpcpp/grpcpp.h"

namespace gpuprof::daemon {

// Called once per finished RPC with its method name and status code (for metrics).
using RpcObserver = std::function<void(const std::string& method, grpc::StatusCode code)>;

// absl and gRPC share the canonical code numbering: the status as gRPC sends it.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The trailing metadata key of a stream cut off for not reading: the seq to watch again from.
inline constexpr char kResumeFromSeqTrailer[] = "gpuprof-resume-from-seq";

struct StreamLimits {
  // Live events queued for one client beyond this are not buffered: the stream reads them back
  // from the store once its client has taken what it has (nothing is lost; every event is
  // stored). One event is always allowed, whatever its size.
  int64_t buffer_bytes_per_stream = 1 << 20;
  // The same bound over every stream of the daemon together.
  int64_t buffer_bytes_total = 64 << 20;
  // One read of stored history.
  store::EventPageLimit replay_page{.max_events = 256, .max_bytes = 256 << 10};
  // A client that has not taken a written event for this long is cut off (RESOURCE_EXHAUSTED,
  // with the seq to resume from in the message and the kResumeFromSeqTrailer trailer).
  absl::Duration stall_timeout = absl::Seconds(60);
};

// Bytes of events queued for clients, over every stream.
class StreamBufferBudget {
 public:
  explicit StreamBufferBudget(int64_t limit) : limit_(limit) {}
  // Takes `bytes` unless that would pass the limit.
  bool TryReserve(int64_t bytes);
  // Takes `bytes` whatever the limit (a stream's one event, a bounded page).
  void Reserve(int64_t bytes) { used_.fetch_add(bytes); }
  void Release(int64_t bytes) { used_.fetch_sub(bytes); }
  int64_t used() const { return used_.load(); }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

// What the watchdog needs of a stream. Ref/Unref keep it alive while it is being checked.
class WatchedStream {
 public:
  virtual void Ref() = 0;
  virtual void Unref() = 0;
  virtual void CutOffIfStalled(absl::Time now) = 0;

 protected:
  ~WatchedStream() = default;
};

// Checks every stream for a stalled client once per `period`, on a thread of its own, and
// hands memory freed by ended streams back to the system (malloc_trim) so that the daemon's
// RSS returns to where it was after a burst of big replays.
class StreamWatchdog {
 public:
  StreamWatchdog(absl::Duration period, const StreamBufferBudget& budget);
  ~StreamWatchdog();
  StreamWatchdog(const StreamWatchdog&) = delete;
  StreamWatchdog& operator=(const StreamWatchdog&) = delete;

  void Add(WatchedStream* stream) ABSL_LOCKS_EXCLUDED(mutex_);
  void Remove(WatchedStream* stream) ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mutex_);

  const absl::Duration period_;
  const StreamBufferBudget& budget_;
  absl::Mutex mutex_;
  absl::flat_hash_set<WatchedStream*> streams_ ABSL_GUARDED_BY(mutex_);
  bool trim_due_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Notification stop_;
  std::thread thread_;
};

// What every stream of one service shares.
struct StreamContext {
  RpcObserver observer;
  StreamLimits limits;
  StreamBufferBudget* budget;
  StreamWatchdog* watchdog;
  BlockingCallPool* pool;
};

// One client's stream of `Producer`'s (ExperimentManager's or SweepManager's) events. gRPC
// owns the reactor until OnDone; the watchdog and calls posted to the pool hold references, so
// the last of them deletes it. The producer holds the sink half through a shared_ptr, detached
// in OnDone.
//
// It moves between two modes. Paging: the stream reads stored events from next_seq_ (a page
// at a time, on the pool, without the producer's lock) whenever its queue has drained, until
// a page comes back short; then it asks the producer to bring it up to date under the lock
// (CatchUpStream), which registers it for live events. Live: the producer's events are queued
// as they come, while they fit the byte limits; the first that does not fit is left to the
// store and the stream pages again once its queue drains. Each event is taken only if its seq
// is next_seq_ (events are numbered without gaps): a replayed duplicate or a live event
// beyond a left one is ignored, so no switch between modes loses or repeats one.
template <typename Event, typename Producer>
class EventStreamReactor final : public grpc::ServerWriteReactor<Event>, public WatchedStream {
 public:
  EventStreamReactor(Producer* producer, grpc::CallbackServerContext* context, std::string method,
                     const StreamContext& shared)
      : producer_(producer),
        context_(context),
        method_(std::move(method)),
        shared_(shared),
        sink_(std::make_shared<Sink>(this)) {
    shared_.watchdog->Add(this);
  }

  // On the pool. Until the first step is over nothing is written or finished. `watcher`'s
  // caps on live streams apply (RESOURCE_EXHAUSTED when one is reached, with nothing sent).
  void Begin(const std::string& id, int64_t from_seq, const Watcher& watcher) {
    {
      absl::MutexLock lock(&mutex_);
      id_ = id;
      watcher_ = watcher;
      // Seqs start at 1: from 0 is from the start.
      next_seq_ = from_seq < 1 ? 1 : from_seq;
      if (from_seq < 0) {
        stepping_ = false;
        FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  absl::StrCat("from_seq: got ", from_seq, "; must be >= 0")));
        return;
      }
    }
    Step();
  }

  void FinishNow(const grpc::Status& status) {
    absl::MutexLock lock(&mutex_);
    stepping_ = false;
    FinishLocked(status);
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mutex_);
    writing_ = false;
    if (!pending_.empty()) PopFrontLocked();
    if (finished_) return;
    if (deferred_finish_.has_value()) {
      FinishLocked(*deferred_finish_);
      return;
    }
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mutex_);
    cancelled_ = true;
    if (!writing_ && !stepping_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled"));
    }
  }

  void OnDone() override {
    int64_t handle = 0;
    grpc::StatusCode final_code = grpc::StatusCode::OK;
    {
      // Finish may have been called from another thread (the pool, a sink's OnEnd, the
      // watchdog): the lock makes what it wrote visible here.
      absl::MutexLock lock(&mutex_);
      handle = handle_;
      handle_ = 0;
      final_code = final_code_;
      while (!pending_.empty()) PopFrontLocked();
    }
    if (handle > 0) producer_->Unsubscribe(id_, handle);
    sink_->Detach();
    shared_.watchdog->Remove(this);
    if (shared_.observer) shared_.observer(method_, final_code);
    Unref();
  }

  void Ref() override { references_.fetch_add(1); }
  void Unref() override {
    if (references_.fetch_sub(1) == 1) delete this;
  }

  void CutOffIfStalled(absl::Time now) override {
    int64_t handle = 0;
    {
      absl::MutexLock lock(&mutex_);
      if (finished_ || !writing_ || now - write_started_ < shared_.limits.stall_timeout) return;
      // The event in flight reaches the client if it ever reads again; what is queued behind
      // it is dropped, and the client resumes after the one in flight.
      const int64_t resume_from = pending_.front().event.seq() + 1;
      while (pending_.size() > 1) PopBackLocked();
      context_->AddTrailingMetadata(kResumeFromSeqTrailer, absl::StrCat(resume_from));
      finished_ = true;
      final_code_ = grpc::StatusCode::RESOURCE_EXHAUSTED;
      // Finished with the write still in flight: the status follows the event, and the
      // stream's place under the caps is freed now rather than when the client reads.
      this->Finish(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the client took no event for ",
                       absl::FormatDuration(shared_.limits.stall_timeout),
                       "; watch again from seq ", resume_from, " (gpuprof watch --from-seq ",
                       resume_from, ")")));
      handle = handle_;
      handle_ = 0;
    }
    if (handle > 0) producer_->Unsubscribe(id_, handle);
  }

 private:
  ~EventStreamReactor() = default;

  class Sink : public StreamSink<Event> {
   public:
    explicit Sink(EventStreamReactor* reactor) : reactor_(reactor) {}
    void OnEvent(const Event& event) override {
      absl::MutexLock lock(&mutex_);
      if (reactor_ != nullptr) reactor_->TakeLiveEvent(event);
    }
    void OnEnd() override {
      absl::MutexLock lock(&mutex_);
      if (reactor_ != nullptr) reactor_->TakeEnd();
    }
    void Detach() {
      absl::MutexLock lock(&mutex_);
      reactor_ = nullptr;
    }

   private:
    absl::Mutex mutex_;
    EventStreamReactor* reactor_ ABSL_GUARDED_BY(mutex_);
  };

  struct Queued {
    Event event;
    int64_t bytes;
  };

  // Called under the producer's lock.
  void TakeLiveEvent(const Event& event) {
    absl::MutexLock lock(&mutex_);
    if (finished_ || end_queued_ || event.seq() < next_seq_) return;
    const int64_t bytes = static_cast<int64_t>(event.ByteSizeLong());
    const bool fits =
        event.seq() == next_seq_ &&
        (pending_.empty() ||
         (queued_bytes_ + bytes <= shared_.limits.buffer_bytes_per_stream &&
          shared_.budget->TryReserve(bytes)));
    if (!fits) {
      // Left in the store: read back once the queue has drained.
      behind_ = true;
      MaybeStepLocked();
      return;
    }
    if (pending_.empty()) shared_.budget->Reserve(bytes);
    PushLocked(event, bytes);
    WriteNextLocked();
  }

  void TakeEnd() {
    absl::MutexLock lock(&mutex_);
    // Behind, the end comes again when the stream catches up.
    if (finished_ || behind_) return;
    end_queued_ = true;
    WriteNextLocked();
  }

  // Paging and catching up, on the pool: loops until there is something to write, the stream
  // is live or it finished.
  void Step() {
    while (true) {
      int64_t from = 0;
      bool catch_up = false;
      {
        absl::MutexLock lock(&mutex_);
        if (finished_ || cancelled_ || deferred_finish_.has_value() || !NeedsStepLocked()) {
          stepping_ = false;
          if (cancelled_ && !deferred_finish_.has_value()) {
            FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled"));
          } else if (deferred_finish_.has_value()) {
            FinishLocked(*deferred_finish_);
          } else {
            WriteNextLocked();
          }
          return;
        }
        from = next_seq_;
        catch_up = store_read_to_end_;
        // From here a live event left behind sets it again.
        if (catch_up) behind_ = false;
      }
      if (catch_up) {
        int64_t handle = 0;
        {
          absl::MutexLock lock(&mutex_);
          handle = handle_;
        }
        absl::StatusOr<CatchUp> outcome =
            producer_->CatchUpStream(id_, from, sink_, watcher_, handle);
        absl::MutexLock lock(&mutex_);
        handle_ = handle;
        store_read_to_end_ = false;
        if (!outcome.ok()) {
          stepping_ = false;
          FinishLocked(ToGrpcStatus(outcome.status()));
          return;
        }
        if (*outcome == CatchUp::kLive) live_ = true;
        // kBehind: more was stored meanwhile than a catch-up replays; page again.
        if (*outcome == CatchUp::kBehind) behind_ = true;
        continue;
      }
      absl::StatusOr<std::vector<Event>> page =
          producer_->EventPage(id_, from, shared_.limits.replay_page);
      absl::MutexLock lock(&mutex_);
      if (!page.ok()) {
        stepping_ = false;
        FinishLocked(ToGrpcStatus(page.status()));
        return;
      }
      int64_t page_bytes = 0;
      for (const Event& event : *page) {
        const int64_t bytes = static_cast<int64_t>(event.ByteSizeLong());
        page_bytes += bytes;
        // The store is the authority on what exists: its order is taken as it is.
        if (event.seq() < next_seq_) continue;
        shared_.budget->Reserve(bytes);
        PushLocked(event, bytes);
      }
      store_read_to_end_ =
          static_cast<int64_t>(page->size()) < shared_.limits.replay_page.max_events &&
          page_bytes < shared_.limits.replay_page.max_bytes;
      if (!pending_.empty()) {
        stepping_ = false;
        WriteNextLocked();
        return;
      }
    }
  }

  // Neither live nor ended, or live with events left in the store.
  bool NeedsStepLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    return !finished_ && !end_queued_ && (!live_ || behind_);
  }

  // Posts a step once the queue has drained and nothing is in flight.
  void MaybeStepLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (stepping_ || writing_ || !pending_.empty() || !NeedsStepLocked()) return;
    stepping_ = true;
    // A caught-up stream that fell behind reads the store from where it stopped.
    Ref();
    shared_.pool->Post([this] {
      Step();
      Unref();
    });
  }

  void PushLocked(const Event& event, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    pending_.push_back(Queued{event, bytes});
    queued_bytes_ += bytes;
    next_seq_ = event.seq() + 1;
  }
  void PopFrontLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    queued_bytes_ -= pending_.front().bytes;
    shared_.budget->Release(pending_.front().bytes);
    pending_.pop_front();
  }
  void PopBackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    queued_bytes_ -= pending_.back().bytes;
    shared_.budget->Release(pending_.back().bytes);
    pending_.pop_back();
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (stepping_ || writing_ || finished_) return;
    if (cancelled_) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled"));
      return;
    }
    if (!pending_.empty()) {
      writing_ = true;
      write_started_ = absl::Now();
      this->StartWrite(&pending_.front().event);
    } else if (end_queued_) {
      FinishLocked(grpc::Status::OK);
    } else {
      MaybeStepLocked();
    }
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    if (finished_) return;
    // Finishing waits for the step on the pool and for the write in flight.
    if (stepping_ || writing_) {
      if (!deferred_finish_.has_value()) deferred_finish_ = status;
      return;
    }
    finished_ = true;
    final_code_ = status.error_code();
    this->Finish(status);
  }

  Producer* const producer_;
  grpc::CallbackServerContext* const context_;
  const std::string method_;
  const StreamContext& shared_;
  const std::shared_ptr<Sink> sink_;
  // gRPC's, dropped in OnDone; the watchdog's and the pool's while they use it.
  std::atomic<int> references_{1};
  // Set by Begin before the first step, read-only after.
  std::string id_;
  Watcher watcher_;

  absl::Mutex mutex_;
  int64_t next_seq_ ABSL_GUARDED_BY(mutex_) = 1;
  // The stream's place under the watch caps (0: none held).
  int64_t handle_ ABSL_GUARDED_BY(mutex_) = 0;
  std::deque<Queued> pending_ ABSL_GUARDED_BY(mutex_);
  int64_t queued_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  // Registered with the producer for live events.
  bool live_ ABSL_GUARDED_BY(mutex_) = false;
  // Live events were left in the store: page them back.
  bool behind_ ABSL_GUARDED_BY(mutex_) = false;
  // The last page was short: catch up under the producer's lock next. True at first, so that
  // a short history takes one step and a refusal comes before anything is sent.
  bool store_read_to_end_ ABSL_GUARDED_BY(mutex_) = true;
  bool stepping_ ABSL_GUARDED_BY(mutex_) = true;
  bool writing_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Time write_started_ ABSL_GUARDED_BY(mutex_);
  bool end_queued_ ABSL_GUARDED_BY(mutex_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mutex_) = false;
  bool finished_ ABSL_GUARDED_BY(mutex_) = false;
  std::optional<grpc::Status> deferred_finish_ ABSL_GUARDED_BY(mutex_);
  grpc::StatusCode final_code_ ABSL_GUARDED_BY(mutex_) = grpc::StatusCode::OK;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SERVER_EVENT_STREAM_H_
