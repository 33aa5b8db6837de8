#include "daemon/server/event_stream.h"

#include <malloc.h>

namespace gpuprof::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

bool StreamBufferBudget::TryReserve(int64_t bytes) {
  int64_t used = used_.load();
  do {
    if (used + bytes > limit_) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return true;
}

StreamWatchdog::StreamWatchdog(absl::Duration period, const StreamBufferBudget& budget)
    : period_(period), budget_(budget), thread_([this] { Loop(); }) {}

StreamWatchdog::~StreamWatchdog() {
  stop_.Notify();
  thread_.join();
}

void StreamWatchdog::Add(WatchedStream* stream) {
  absl::MutexLock lock(&mutex_);
  streams_.insert(stream);
}

void StreamWatchdog::Remove(WatchedStream* stream) {
  absl::MutexLock lock(&mutex_);
  streams_.erase(stream);
  trim_due_ = true;
}

void StreamWatchdog::Loop() {
  // Below this much still queued, what the ended streams freed is worth giving back; at most
  // this often, since a trim holds each allocator arena's lock while it walks it.
  constexpr int64_t kTrimBelowBytes = 1 << 20;
  constexpr absl::Duration kTrimEvery = absl::Seconds(5);
  absl::Time last_trim = absl::InfinitePast();
  while (!stop_.WaitForNotificationWithTimeout(period_)) {
    std::vector<WatchedStream*> streams;
    bool trim = false;
    {
      absl::MutexLock lock(&mutex_);
      streams.reserve(streams_.size());
      for (WatchedStream* stream : streams_) {
        stream->Ref();
        streams.push_back(stream);
      }
      if (trim_due_ && budget_.used() < kTrimBelowBytes && absl::Now() - last_trim >= kTrimEvery) {
        trim = true;
        trim_due_ = false;
      }
    }
    const absl::Time now = absl::Now();
    for (WatchedStream* stream : streams) {
      stream->CutOffIfStalled(now);
      stream->Unref();
    }
    // glibc keeps freed memory in its arenas; a replay of a long history frees many small
    // blocks at once, which would otherwise stay in the daemon's RSS.
    if (trim) {
      malloc_trim(0);
      last_trim = absl::Now();
    }
  }
}

}  // namespace gpuprof::daemon
