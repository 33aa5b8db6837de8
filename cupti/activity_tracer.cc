#include "cupti/activity_tracer.h"

#include <cupti.h>

#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/cupti_status.h"
#include "common/status_macros.h"
#include "cupti/activity_records.h"

namespace gpuprof::cupti {
namespace {

namespace api = ::gpuprof::v1;

// The kinds gpuprof traces; kernels first, since they are the ones tracing cannot do without.
constexpr CUpti_ActivityKind kTracedKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,            CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_OVERHEAD,
};


absl::string_view KindName(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "kernel";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "memcpy";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "memset";
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
      return "synchronization";
    case CUPTI_ACTIVITY_KIND_OVERHEAD:
      return "CUPTI overhead";
    default:
      return "activity";
  }
}

int64_t CuptiNow() {
  uint64_t timestamp = 0;
  CUPTI_LOG_IF_ERROR(cuptiGetTimestamp(&timestamp));
  return static_cast<int64_t>(timestamp);
}

}  // namespace

// Correlation ids of scaffolding launches, handed from the API callback (any launching thread)
// to TakeBatch.
class ActivityTracerTags {
 public:
  void Add(uint32_t correlation_id) {
    absl::MutexLock lock(&mutex_);
    ids_.push_back(correlation_id);
  }
  std::vector<uint32_t> Take() {
    absl::MutexLock lock(&mutex_);
    return std::exchange(ids_, {});
  }

 private:
  absl::Mutex mutex_;
  std::vector<uint32_t> ids_ ABSL_GUARDED_BY(mutex_);
};

struct ActivityTracer::State {
  explicit State(ActivityTracerOptions options)
      : pool(options.buffer_bytes, options.max_buffers),
        converter(options.gpu_id_by_device),
        launch_filter(options.max_launch_records),
        phase_marker_gpu_id(options.gpu_id_by_device.empty() ? 0
                                                             : options.gpu_id_by_device.front()) {}

  struct CompletedBuffer {
    uint8_t* data;
    size_t valid_bytes;
  };

  void OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
    absl::MutexLock lock(&mutex);
    *buffer = pool.Acquire();
    *size = *buffer != nullptr ? pool.buffer_bytes() : 0;
    *max_records = 0;  // fill the buffer
  }

  void OnBufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_bytes) {
    size_t dropped = 0;
    CUPTI_LOG_IF_ERROR(cuptiActivityGetNumDroppedRecords(context, stream, &dropped));
    absl::MutexLock lock(&mutex);
    dropped_records += static_cast<int64_t>(dropped);
    if (buffer == nullptr) return;
    if (valid_bytes == 0) {
      pool.Release(buffer);
      return;
    }
    completed.push_back({buffer, valid_bytes});
  }

  mutable absl::Mutex mutex;
  ActivityBufferPool pool ABSL_GUARDED_BY(mutex);
  std::vector<CompletedBuffer> completed ABSL_GUARDED_BY(mutex);
  int64_t dropped_records ABSL_GUARDED_BY(mutex) = 0;
  PhaseTimeline phases ABSL_GUARDED_BY(mutex);

  // Only TakeBatch converts; one caller at a time.
  absl::Mutex convert_mutex ABSL_ACQUIRED_BEFORE(mutex);
  ActivityRecordConverter converter ABSL_GUARDED_BY(convert_mutex);
  LaunchRecordFilter launch_filter ABSL_GUARDED_BY(convert_mutex);
  ScaffoldingCorrelations scaffolding ABSL_GUARDED_BY(convert_mutex);

  const int32_t phase_marker_gpu_id;
  std::vector<CUpti_ActivityKind> enabled_kinds;
  // The API-callback subscriber that sees which launches are scaffolding; null without one.
  CUpti_SubscriberHandle subscriber = nullptr;
  // Correlation ids the callback saw while a scaffolding region was open, not yet handed to
  // `scaffolding` (the callback runs inside CUDA calls on the launching thread).
  ActivityTracerTags tags;
  std::vector<std::string> notes;
  bool stopped = false;
};

// CUPTI's buffer callbacks are plain functions: these forward to the one live tracer. A
// callback holds the reader side of slot_mutex while it uses the state, so the destructor
// (writer side) cannot free the state under it.
struct ActivityTracerTrampolines {
  static void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
    absl::ReaderMutexLock lock(&slot_mutex);
    if (live_state == nullptr) {
      *buffer = nullptr;
      *size = 0;
      *max_records = 0;
      return;
    }
    live_state->OnBufferRequested(buffer, size, max_records);
  }

  static void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer,
                                       size_t /*size*/, size_t valid_bytes) {
    absl::ReaderMutexLock lock(&slot_mutex);
    if (live_state == nullptr) {
      ActivityBufferPool::FreeOrphanBuffer(buffer);
      return;
    }
    live_state->OnBufferCompleted(context, stream, buffer, valid_bytes);
  }

  static std::atomic<bool> slot_taken;
  static absl::Mutex slot_mutex;
  static ActivityTracer::State* live_state ABSL_GUARDED_BY(slot_mutex);
};

std::atomic<bool> ActivityTracerTrampolines::slot_taken{false};
absl::Mutex ActivityTracerTrampolines::slot_mutex(absl::kConstInit);
ActivityTracer::State* ActivityTracerTrampolines::live_state = nullptr;

absl::StatusOr<ActivityTracer> ActivityTracer::Start(ActivityTracerOptions options) {
  using Slot = ActivityTracerTrampolines;
  bool expected = false;
  if (!Slot::slot_taken.compare_exchange_strong(expected, true)) {
    return absl::FailedPreconditionError(
        "another ActivityTracer is live in this process (CUPTI activity state is per process)");
  }
  auto state = std::make_unique<State>(std::move(options));
  {
    absl::MutexLock lock(&Slot::slot_mutex);
    Slot::live_state = state.get();
  }
  // From here on the tracer owns the slot: its destructor gives it back on every path.
  ActivityTracer tracer(std::move(state));
  RETURN_IF_ERROR(CuptiStatus(cuptiActivityRegisterCallbacks(
                                  &ActivityTracerTrampolines::BufferRequested,
                                  &ActivityTracerTrampolines::BufferCompleted),
                              "cuptiActivityRegisterCallbacks"));
  for (CUpti_ActivityKind kind : kTracedKinds) {
    const absl::Status enabled = CuptiStatus(cuptiActivityEnable(kind), "cuptiActivityEnable");
    if (enabled.ok()) {
      tracer.state_->enabled_kinds.push_back(kind);
    } else if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      return enabled;
    } else {
      tracer.state_->notes.push_back(
          absl::StrCat(KindName(kind), " activity records: not collected: ", enabled.message()));
    }
  }
  tracer.EnableLaunchRecords();
  tracer.EnableScaffoldingTags();
  return tracer;
}

void ActivityTracer::EnableLaunchRecords() {
  State& state = *state_;
  // The whole runtime and driver kinds, not cuptiActivityEnable{Runtime,Driver}Api per launch
  // call: the per-call switches reach only contexts created after them (measured on an H200,
  // CUDA 13: a context made first gave 0 launch records), so a worker's second experiment on
  // its kept context, or any tracer started after cudaMalloc, drew no arrows. The converter
  // keeps only the launch calls of these kinds.
  const struct {
    CUpti_ActivityKind kind;
    absl::string_view what;
  } domains[] = {{CUPTI_ACTIVITY_KIND_RUNTIME, "runtime"}, {CUPTI_ACTIVITY_KIND_DRIVER, "driver"}};
  for (const auto& domain : domains) {
    const absl::Status enabled =
        CuptiStatus(cuptiActivityEnable(domain.kind), "cuptiActivityEnable");
    if (enabled.ok()) {
      state.enabled_kinds.push_back(domain.kind);
    } else {
      state.notes.push_back(absl::StrCat(domain.what,
                                         " API launch records (the trace's arrows to kernels): "
                                         "not collected: ",
                                         enabled.message()));
    }
  }
}

namespace {

// Open scaffolding regions of this thread (the measurement core launches from one thread).
thread_local int scaffolding_depth = 0;

// Every runtime API call: inside a scaffolding region, its correlation id is the one the GPU
// record of its launch will carry.
void CUPTIAPI OnRuntimeApiCall(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId,
                               const void* data) {
  if (scaffolding_depth == 0 || domain != CUPTI_CB_DOMAIN_RUNTIME_API) return;
  const auto* call = static_cast<const CUpti_CallbackData*>(data);
  if (call->callbackSite != CUPTI_API_ENTER) return;
  auto* tags = static_cast<ActivityTracerTags*>(userdata);
  tags->Add(call->correlationId);
}

}  // namespace

void ActivityTracer::EnableScaffoldingTags() {
  State& state = *state_;
  // External correlation records came only in front of driver API records (a different
  // correlation id than the launch's GPU record carries, with the static cudart the worker
  // links), so the launch's own id is taken from CUPTI's runtime API callback instead.
  absl::Status subscribed = CuptiStatus(
      cuptiSubscribe(&state.subscriber, reinterpret_cast<CUpti_CallbackFunc>(&OnRuntimeApiCall),
                     &state.tags),
      "cuptiSubscribe");
  if (subscribed.ok()) {
    subscribed = CuptiStatus(cuptiEnableDomain(1, state.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API),
                             "cuptiEnableDomain(RUNTIME_API)");
    if (!subscribed.ok()) {
      CUPTI_LOG_IF_ERROR(cuptiUnsubscribe(state.subscriber));
      state.subscriber = nullptr;
    }
  } else {
    state.subscriber = nullptr;
  }
  if (!subscribed.ok()) {
    state.notes.push_back(absl::StrCat(
        "scaffolding flags (stream blocker, L2 flush): not collected: ", subscribed.message()));
  }
}

void ActivityTracer::BeginScaffolding() { ++scaffolding_depth; }

void ActivityTracer::EndScaffolding() {
  if (scaffolding_depth > 0) --scaffolding_depth;
}

ActivityTracer::ActivityTracer(std::unique_ptr<State> state) : state_(std::move(state)) {}

ActivityTracer::ActivityTracer(ActivityTracer&& other) noexcept = default;

ActivityTracer& ActivityTracer::operator=(ActivityTracer&& other) noexcept {
  if (this != &other) {
    ActivityTracer previous(std::move(*this));  // stopped and released at the end of scope
    state_ = std::move(other.state_);
  }
  return *this;
}

ActivityTracer::~ActivityTracer() {
  if (state_ == nullptr) return;  // moved from
  if (const absl::Status stopped = Stop(); !stopped.ok()) LogStatusToStderr(stopped);
  {
    absl::MutexLock lock(&ActivityTracerTrampolines::slot_mutex);
    ActivityTracerTrampolines::live_state = nullptr;
  }
  // Unprocessed buffers go back with the pool.
  {
    absl::MutexLock lock(&state_->mutex);
    for (const State::CompletedBuffer& buffer : state_->completed) {
      state_->pool.Release(buffer.data);
    }
    state_->completed.clear();
  }
  state_.reset();
  ActivityTracerTrampolines::slot_taken.store(false);
}

void ActivityTracer::SetPhase(api::Phase phase) {
  const int64_t now = CuptiNow();
  absl::MutexLock lock(&state_->mutex);
  state_->phases.Begin(phase, now);
}

absl::Status ActivityTracer::Flush(bool forced) {
  // No lock held: CUPTI calls BufferCompleted (which locks) from inside this call.
  return CuptiStatus(cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0),
                     "cuptiActivityFlushAll");
}

api::ActivityBatch ActivityTracer::TakeBatch() {
  absl::MutexLock convert_lock(&state_->convert_mutex);
  std::vector<State::CompletedBuffer> buffers;
  {
    absl::MutexLock lock(&state_->mutex);
    buffers.swap(state_->completed);
  }
  api::ActivityBatch batch;
  // Launch records go through the filter (nested driver calls, the cap) before joining.
  std::vector<api::ActivityRecord> launches;
  std::vector<bool> launch_from_driver;
  int64_t unreadable_records = 0;
  for (const State::CompletedBuffer& buffer : buffers) {
    CUpti_Activity* activity = nullptr;
    while (true) {
      const CUptiResult next = cuptiActivityGetNextRecord(buffer.data, buffer.valid_bytes, &activity);
      if (next == CUPTI_ERROR_MAX_LIMIT_REACHED) break;
      if (next != CUPTI_SUCCESS) {
        // An incomplete or corrupt record ends the buffer; count it rather than lose it quietly.
        ++unreadable_records;
        break;
      }
      if (auto record = state_->converter.Convert(*activity); record.has_value()) {
        if (record->kind() == api::ActivityRecord::KIND_LAUNCH) {
          launches.push_back(*std::move(record));
          launch_from_driver.push_back(activity->kind == CUPTI_ACTIVITY_KIND_DRIVER);
        } else {
          *batch.add_records() = *std::move(record);
        }
      }
    }
  }
  for (api::ActivityRecord& launch :
       state_->launch_filter.Filter(std::move(launches), launch_from_driver)) {
    *batch.add_records() = std::move(launch);
  }
  // Every launch was tagged before its GPU record could exist.
  for (uint32_t correlation_id : state_->tags.Take()) state_->scaffolding.Tag(correlation_id);
  for (api::ActivityRecord& record : *batch.mutable_records()) {
    state_->scaffolding.Flag(record);
  }
  size_t dropped_globally = 0;
  CUPTI_LOG_IF_ERROR(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped_globally));
  const int64_t now = CuptiNow();
  absl::MutexLock lock(&state_->mutex);
  for (const State::CompletedBuffer& buffer : buffers) state_->pool.Release(buffer.data);
  for (api::ActivityRecord& record : *batch.mutable_records()) {
    // Kernels replayed by the profiler come without timestamps (0): they belong to the phase
    // running as they are delivered.
    record.set_phase(state_->phases.PhaseAt(record.start_ns() > 0 ? record.start_ns() : now));
  }
  for (api::ActivityRecord& marker :
       state_->phases.TakeEndedPhaseMarkers(state_->phase_marker_gpu_id)) {
    *batch.add_records() = std::move(marker);
  }
  state_->dropped_records += static_cast<int64_t>(dropped_globally) + unreadable_records;
  batch.set_dropped_records(state_->dropped_records);
  state_->dropped_records = 0;
  return batch;
}

absl::Status ActivityTracer::Stop() {
  {
    absl::MutexLock lock(&state_->mutex);
    if (state_->stopped) return absl::OkStatus();
    state_->stopped = true;
  }
  const int64_t now = CuptiNow();
  {
    absl::MutexLock lock(&state_->mutex);
    state_->phases.End(now);
  }
  absl::Status status = absl::OkStatus();
  for (CUpti_ActivityKind kind : state_->enabled_kinds) {
    status.Update(CuptiStatus(cuptiActivityDisable(kind), "cuptiActivityDisable"));
  }
  if (state_->subscriber != nullptr) {
    status.Update(CuptiStatus(cuptiUnsubscribe(state_->subscriber), "cuptiUnsubscribe"));
    state_->subscriber = nullptr;
  }
  status.Update(Flush(/*forced=*/true));
  return status;
}

std::vector<std::string> ActivityTracer::notes() const { return state_->notes; }

int64_t ActivityTracer::launch_records_left_out() const {
  absl::MutexLock lock(&state_->convert_mutex);
  return state_->launch_filter.left_out();
}

int64_t ActivityTracer::max_launch_records() const {
  absl::MutexLock lock(&state_->convert_mutex);
  return state_->launch_filter.max_kept();
}

int64_t ActivityTracer::scaffolding_tags_learnt() const {
  absl::MutexLock lock(&state_->convert_mutex);
  return state_->scaffolding.learnt();
}

size_t ActivityTracer::scaffolding_tags_pending() const {
  absl::MutexLock lock(&state_->convert_mutex);
  return state_->scaffolding.pending();
}

size_t ActivityTracer::refused_buffer_requests() const {
  absl::MutexLock lock(&state_->mutex);
  return state_->pool.refused_requests();
}

}  // namespace gpuprof::cupti
