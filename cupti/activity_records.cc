#include "cupti/activity_records.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gpuprof::cupti {
namespace {

namespace api = ::gpuprof::v1;

int64_t Nanoseconds(uint64_t cupti_timestamp) { return static_cast<int64_t>(cupti_timestamp); }

absl::string_view SynchronizationName(CUpti_ActivitySynchronizationType type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "cudaDeviceSynchronize";
    default:
      return "synchronization";
  }
}

absl::string_view OverheadName(CUpti_ActivityOverheadKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER:
      return "driver JIT compilation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH:
      return "CUPTI buffer flush";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION:
      return "CUPTI instrumentation";
    case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE:
      return "CUPTI resource allocation";
    case CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING:
      return "module loading";
    case CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING:
      return "lazy function loading";
    case CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL:
      return "command buffer full";
    case CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST:
      return "activity buffer request";
    case CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT:
      return "UVM activity init";
    default:
      return "CUPTI overhead";
  }
}

constexpr LaunchApi kRuntimeLaunchApis[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, "cudaLaunchKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, "cudaLaunchKernelEx"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, "cudaLaunchKernelEx"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, "cudaLaunchCooperativeKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
     "cudaLaunchCooperativeKernel"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, "cudaGraphLaunch"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000, "cudaGraphLaunch"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000, "cudaMemcpy"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, "cudaMemcpyAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, "cudaMemcpyAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, "cudaMemset"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000, "cudaMemset"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, "cudaMemsetAsync"},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000, "cudaMemsetAsync"},
};

// What the workloads launch through the driver: NVRTC-compiled kernels (kernels/jit), and
// the copies of the copy workload.
constexpr LaunchApi kDriverLaunchApis[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, "cuLaunchKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, "cuLaunchKernelEx"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, "cuLaunchKernelEx"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, "cuLaunchCooperativeKernel"},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, "cuGraphLaunch"},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, "cuGraphLaunch"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, "cuMemcpyAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz, "cuMemcpyAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, "cuMemcpyHtoDAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2, "cuMemcpyDtoHAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2, "cuMemcpyDtoDAsync"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, "cuMemsetD8Async"},
    {CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async, "cuMemsetD32Async"},
};

std::optional<absl::string_view> LaunchApiName(absl::Span<const LaunchApi> apis,
                                               CUpti_CallbackId cbid) {
  for (const LaunchApi& api : apis) {
    if (api.cbid == cbid) return api.name;
  }
  return std::nullopt;
}

}  // namespace

absl::Span<const LaunchApi> RuntimeLaunchApis() { return kRuntimeLaunchApis; }
absl::Span<const LaunchApi> DriverLaunchApis() { return kDriverLaunchApis; }

std::string DemangleKernelName(absl::string_view mangled) {
  std::string input(mangled);
  if (!absl::StartsWith(input, "_Z")) return input;
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> demangled(
      abi::__cxa_demangle(input.c_str(), nullptr, nullptr, &status), &std::free);
  if (status != 0 || demangled == nullptr) return input;
  return std::string(demangled.get());
}

absl::string_view MemcpyKindName(uint32_t copy_kind) {
  switch (copy_kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "htod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "dtoh";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "htoa";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "atoh";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "atoa";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "atod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "dtoa";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "dtod";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "htoh";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "ptop";
    default:
      return "unknown";
  }
}

ActivityRecordConverter::ActivityRecordConverter(std::vector<int32_t> gpu_id_by_device)
    : gpu_id_by_device_(std::move(gpu_id_by_device)) {}

int32_t ActivityRecordConverter::GpuIdOfDevice(uint32_t device) const {
  if (device < gpu_id_by_device_.size()) return gpu_id_by_device_[device];
  return static_cast<int32_t>(device);
}

std::optional<api::ActivityRecord> ActivityRecordConverter::Convert(
    const CUpti_Activity& activity) {
  api::ActivityRecord record;
  switch (activity.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& kernel = reinterpret_cast<const CUpti_ActivityKernel10&>(activity);
      record.set_kind(api::ActivityRecord::KIND_KERNEL);
      record.set_name(kernel.name != nullptr ? DemangleKernelName(kernel.name) : "<unnamed>");
      record.set_start_ns(Nanoseconds(kernel.start));
      record.set_end_ns(Nanoseconds(kernel.end));
      record.set_gpu_id(GpuIdOfDevice(kernel.deviceId));
      record.set_stream_id(kernel.streamId);
      record.set_correlation_id(kernel.correlationId);
      for (int32_t extent : {kernel.gridX, kernel.gridY, kernel.gridZ}) {
        record.add_grid(static_cast<uint32_t>(extent));
      }
      for (int32_t extent : {kernel.blockX, kernel.blockY, kernel.blockZ}) {
        record.add_block(static_cast<uint32_t>(extent));
      }
      record.set_registers_per_thread(kernel.registersPerThread);
      record.set_static_shared_memory(kernel.staticSharedMemory);
      record.set_dynamic_shared_memory(kernel.dynamicSharedMemory);
      device_by_context_[kernel.contextId] = kernel.deviceId;
      return record;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& copy = reinterpret_cast<const CUpti_ActivityMemcpy6&>(activity);
      const absl::string_view copy_kind = MemcpyKindName(copy.copyKind);
      record.set_kind(api::ActivityRecord::KIND_MEMCPY);
      record.set_name(absl::StrCat("memcpy ", copy_kind));
      record.set_copy_kind(std::string(copy_kind));
      record.set_bytes(static_cast<int64_t>(copy.bytes));
      record.set_start_ns(Nanoseconds(copy.start));
      record.set_end_ns(Nanoseconds(copy.end));
      record.set_gpu_id(GpuIdOfDevice(copy.deviceId));
      record.set_stream_id(copy.streamId);
      record.set_correlation_id(copy.correlationId);
      device_by_context_[copy.contextId] = copy.deviceId;
      return record;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto& memset = reinterpret_cast<const CUpti_ActivityMemset4&>(activity);
      record.set_kind(api::ActivityRecord::KIND_MEMSET);
      record.set_name("memset");
      record.set_bytes(static_cast<int64_t>(memset.bytes));
      record.set_start_ns(Nanoseconds(memset.start));
      record.set_end_ns(Nanoseconds(memset.end));
      record.set_gpu_id(GpuIdOfDevice(memset.deviceId));
      record.set_stream_id(memset.streamId);
      record.set_correlation_id(memset.correlationId);
      device_by_context_[memset.contextId] = memset.deviceId;
      return record;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& sync = reinterpret_cast<const CUpti_ActivitySynchronization2&>(activity);
      record.set_kind(api::ActivityRecord::KIND_SYNCHRONIZATION);
      record.set_name(std::string(SynchronizationName(sync.type)));
      record.set_start_ns(Nanoseconds(sync.start));
      record.set_end_ns(Nanoseconds(sync.end));
      // A context we have not seen a GPU record of yet: most likely device 0, the only one a
      // single-GPU worker has.
      const auto device = device_by_context_.find(sync.contextId);
      record.set_gpu_id(GpuIdOfDevice(device != device_by_context_.end() ? device->second : 0));
      if (sync.streamId != CUPTI_SYNCHRONIZATION_INVALID_VALUE) {
        record.set_stream_id(sync.streamId);
      }
      record.set_correlation_id(sync.correlationId);
      return record;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
      const auto& overhead = reinterpret_cast<const CUpti_ActivityOverhead3&>(activity);
      record.set_kind(api::ActivityRecord::KIND_OVERHEAD);
      record.set_name(std::string(OverheadName(overhead.overheadKind)));
      record.set_start_ns(Nanoseconds(overhead.start));
      record.set_end_ns(Nanoseconds(overhead.end));
      // Overheads of a device belong to its GPU; the others are the host's (-1).
      const bool on_device = overhead.objectKind == CUPTI_ACTIVITY_OBJECT_DEVICE ||
                             overhead.objectKind == CUPTI_ACTIVITY_OBJECT_CONTEXT ||
                             overhead.objectKind == CUPTI_ACTIVITY_OBJECT_STREAM;
      record.set_gpu_id(on_device ? GpuIdOfDevice(overhead.objectId.dcs.deviceId) : -1);
      record.set_correlation_id(overhead.correlationId);
      return record;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto& call = reinterpret_cast<const CUpti_ActivityAPI&>(activity);
      // CUPTI's activity state is per process: someone else may have enabled every call.
      const std::optional<absl::string_view> name = LaunchApiName(
          activity.kind == CUPTI_ACTIVITY_KIND_RUNTIME ? RuntimeLaunchApis() : DriverLaunchApis(),
          call.cbid);
      if (!name.has_value()) return std::nullopt;
      record.set_kind(api::ActivityRecord::KIND_LAUNCH);
      record.set_name(std::string(*name));
      record.set_start_ns(Nanoseconds(call.start));
      record.set_end_ns(Nanoseconds(call.end));
      record.set_gpu_id(-1);
      record.set_correlation_id(call.correlationId);
      record.set_thread_id(call.threadId);
      return record;
    }
    default:
      return std::nullopt;
  }
}

LaunchRecordFilter::LaunchRecordFilter(int64_t max_kept) : max_kept_(std::max<int64_t>(max_kept, 0)) {}

std::vector<api::ActivityRecord> LaunchRecordFilter::Filter(
    std::vector<api::ActivityRecord> launches, const std::vector<bool>& from_driver) {
  // Runtime calls of each thread by start; calls of one thread do not overlap, so the last
  // one that starts at or before a driver call is the only one that can hold it.
  std::map<uint32_t, std::map<int64_t, int64_t>> runtime_calls;  // thread -> start -> end
  for (size_t i = 0; i < launches.size(); ++i) {
    if (i < from_driver.size() && from_driver[i]) continue;
    int64_t& end = runtime_calls[launches[i].thread_id()][launches[i].start_ns()];
    end = std::max(end, launches[i].end_ns());
  }
  std::vector<api::ActivityRecord> kept;
  for (size_t i = 0; i < launches.size(); ++i) {
    api::ActivityRecord& launch = launches[i];
    if (i < from_driver.size() && from_driver[i]) {
      const auto thread = runtime_calls.find(launch.thread_id());
      if (thread != runtime_calls.end()) {
        auto after = thread->second.upper_bound(launch.start_ns());
        if (after != thread->second.begin() && std::prev(after)->second >= launch.end_ns()) {
          continue;  // the runtime's own call into the driver
        }
      }
    }
    if (kept_ >= max_kept_) {
      ++left_out_;
      continue;
    }
    ++kept_;
    kept.push_back(std::move(launch));
  }
  return kept;
}

ScaffoldingCorrelations::ScaffoldingCorrelations(size_t max_pending)
    : max_pending_(std::max<size_t>(max_pending, 1)) {}

void ScaffoldingCorrelations::Tag(uint32_t correlation_id) {
  if (correlation_id == 0) return;
  pending_.insert(correlation_id);
  ++learnt_;
  while (pending_.size() > max_pending_) pending_.erase(pending_.begin());
}

void ScaffoldingCorrelations::Flag(api::ActivityRecord& record) {
  switch (record.kind()) {
    case api::ActivityRecord::KIND_KERNEL:
    case api::ActivityRecord::KIND_MEMCPY:
    case api::ActivityRecord::KIND_MEMSET:
      break;
    default:
      return;  // waits and overheads share correlation ids with launches; they are not GPU work
  }
  if (pending_.erase(record.correlation_id()) > 0) record.set_scaffolding(true);
}

void PhaseTimeline::Begin(api::Phase phase, int64_t timestamp_ns) {
  End(timestamp_ns);
  if (!ended_.empty()) timestamp_ns = std::max(timestamp_ns, ended_.back().end_ns);
  open_ = Interval{phase, timestamp_ns, timestamp_ns};
}

void PhaseTimeline::End(int64_t timestamp_ns) {
  if (!open_.has_value()) return;
  open_->end_ns = std::max(timestamp_ns, open_->begin_ns);
  ended_.push_back(*open_);
  open_.reset();
}

api::Phase PhaseTimeline::PhaseAt(int64_t timestamp_ns) const {
  if (open_.has_value() && timestamp_ns >= open_->begin_ns) return open_->phase;
  // Intervals are sorted and disjoint: the last one that begins at or before the time.
  auto after = std::upper_bound(
      ended_.begin(), ended_.end(), timestamp_ns,
      [](int64_t time, const Interval& interval) { return time < interval.begin_ns; });
  if (after == ended_.begin()) return api::PHASE_UNSPECIFIED;
  const Interval& interval = *std::prev(after);
  return timestamp_ns < interval.end_ns ? interval.phase : api::PHASE_UNSPECIFIED;
}

std::vector<api::ActivityRecord> PhaseTimeline::TakeEndedPhaseMarkers(int32_t gpu_id) {
  std::vector<api::ActivityRecord> markers;
  for (; markers_taken_ < ended_.size(); ++markers_taken_) {
    const Interval& interval = ended_[markers_taken_];
    api::ActivityRecord& marker = markers.emplace_back();
    marker.set_kind(api::ActivityRecord::KIND_PHASE);
    marker.set_name(EnumShortName(interval.phase));
    marker.set_phase(interval.phase);
    marker.set_start_ns(interval.begin_ns);
    marker.set_end_ns(interval.end_ns);
    marker.set_gpu_id(gpu_id);
  }
  return markers;
}

ActivityBufferPool::ActivityBufferPool(size_t buffer_bytes, size_t max_buffers)
    // aligned_alloc needs a size that is a multiple of the alignment.
    : buffer_bytes_((std::max<size_t>(buffer_bytes, 1024) + kAlignment - 1) / kAlignment *
                    kAlignment),
      max_buffers_(std::max<size_t>(max_buffers, 1)) {}

ActivityBufferPool::~ActivityBufferPool() {
  for (uint8_t* buffer : free_buffers_) std::free(buffer);
  // Buffers still lent out belong to CUPTI; FreeOrphanBuffer frees them if they come back.
}

uint8_t* ActivityBufferPool::Acquire() {
  if (lent_out_ >= max_buffers_) {
    ++refused_requests_;
    return nullptr;
  }
  uint8_t* buffer = nullptr;
  if (!free_buffers_.empty()) {
    buffer = free_buffers_.back();
    free_buffers_.pop_back();
  } else {
    buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlignment, buffer_bytes_));
    if (buffer == nullptr) {
      ++refused_requests_;
      return nullptr;
    }
  }
  ++lent_out_;
  lent_buffers_.push_back(buffer);
  return buffer;
}

void ActivityBufferPool::Release(uint8_t* buffer) {
  if (buffer == nullptr) return;
  const auto lent = std::find(lent_buffers_.begin(), lent_buffers_.end(), buffer);
  if (lent == lent_buffers_.end()) {
    FreeOrphanBuffer(buffer);
    return;
  }
  lent_buffers_.erase(lent);
  --lent_out_;
  free_buffers_.push_back(buffer);
}

void ActivityBufferPool::FreeOrphanBuffer(uint8_t* buffer) { std::free(buffer); }

}  // namespace gpuprof::cupti
