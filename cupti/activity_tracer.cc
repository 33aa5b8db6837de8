#include "cupti/activity_tracer.h"

#include <cupti.h>

#include <atomic>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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

// The runtime calls the measurement core makes its scaffolding launches with. CUPTI writes an
// external correlation record only before an API record, so these calls (and no others) get
// API records; the converter drops them once their tags are learnt.
constexpr CUpti_CallbackId kScaffoldingLaunchApis[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
    CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
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

struct ActivityTracer::State {
  explicit State(ActivityTracerOptions options)
      : pool(options.buffer_bytes, options.max_buffers),
        converter(options.gpu_id_by_device),
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
  ScaffoldingCorrelations scaffolding ABSL_GUARDED_BY(convert_mutex);

  const int32_t phase_marker_gpu_id;
  std::vector<CUpti_ActivityKind> enabled_kinds;
  std::vector<CUpti_CallbackId> enabled_runtime_apis;
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
  tracer.EnableScaffoldingTags();
  return tracer;
}

void ActivityTracer::EnableScaffoldingTags() {
  State& state = *state_;
  const absl::Status correlation =
      CuptiStatus(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION),
                  "cuptiActivityEnable(EXTERNAL_CORRELATION)");
  if (!correlation.ok()) {
    state.notes.push_back(absl::StrCat(
        "scaffolding flags (stream blocker, L2 flush): not collected: ", correlation.message()));
    return;
  }
  state.enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  // CUPTI writes an external-correlation record only in front of an API record. Driver API
  // records come for every launch, whether cudart is linked statically or not (runtime API
  // records alone gave no tags on an H200 with the static cudart the worker links); they are
  // read for their tags and dropped.
  if (CuptiStatus(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER), "cuptiActivityEnable(DRIVER)")
          .ok()) {
    state.enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  for (CUpti_CallbackId api : kScaffoldingLaunchApis) {
    const absl::Status enabled =
        CuptiStatus(cuptiActivityEnableRuntimeApi(api, 1), "cuptiActivityEnableRuntimeApi");
    if (enabled.ok()) {
      state.enabled_runtime_apis.push_back(api);
      continue;
    }
    // A CUPTI without per-call control: every runtime call gets an API record instead.
    for (CUpti_CallbackId done : state.enabled_runtime_apis) {
      CUPTI_LOG_IF_ERROR(cuptiActivityEnableRuntimeApi(done, 0));
    }
    state.enabled_runtime_apis.clear();
    const absl::Status runtime = CuptiStatus(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME),
                                             "cuptiActivityEnable(RUNTIME)");
    if (runtime.ok()) {
      state.enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
    } else {
      state.notes.push_back(absl::StrCat(
          "scaffolding flags (stream blocker, L2 flush): not collected: ", runtime.message()));
    }
    return;
  }
}

void ActivityTracer::BeginScaffolding() {
  CUPTI_LOG_IF_ERROR(
      cuptiActivityPushExternalCorrelationId(kScaffoldingCorrelationKind, kScaffoldingExternalId));
}

void ActivityTracer::EndScaffolding() {
  uint64_t popped = 0;
  CUPTI_LOG_IF_ERROR(cuptiActivityPopExternalCorrelationId(kScaffoldingCorrelationKind, &popped));
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
      if (state_->scaffolding.Learn(*activity)) continue;
      if (auto record = state_->converter.Convert(*activity); record.has_value()) {
        *batch.add_records() = *std::move(record);
      }
    }
  }
  // After every tag of the batch is learnt: buffers need not come back in launch order.
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
  for (CUpti_CallbackId api : state_->enabled_runtime_apis) {
    status.Update(
        CuptiStatus(cuptiActivityEnableRuntimeApi(api, 0), "cuptiActivityEnableRuntimeApi"));
  }
  status.Update(Flush(/*forced=*/true));
  return status;
}

std::vector<std::string> ActivityTracer::notes() const { return state_->notes; }

size_t ActivityTracer::refused_buffer_requests() const {
  absl::MutexLock lock(&state_->mutex);
  return state_->pool.refused_requests();
}

}  // namespace gpuprof::cupti
