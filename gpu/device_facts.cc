#include "gpu/device_facts.h"

#include <cuda_runtime_api.h>

#include <fstream>
#include <string>

#include "absl/base/const_init.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/byte_format.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::gpu {
namespace {

// Room for what the CUDA context, graphs and events allocate beside the workload's buffers.
constexpr int64_t kContextReserveBytes = int64_t{256} << 20;

}  // namespace

absl::StatusOr<DeviceFacts> CurrentDeviceFacts() {
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  // A device's facts never change while the process runs; kernels' launch paths ask each time.
  static absl::Mutex mutex(absl::kConstInit);
  static auto* const known = new absl::flat_hash_map<int, DeviceFacts>();
  {
    absl::MutexLock lock(&mutex);
    if (const auto it = known->find(device); it != known->end()) return it->second;
  }
  DeviceFacts facts;
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&facts.compute_major, cudaDevAttrComputeCapabilityMajor, device));
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&facts.compute_minor, cudaDevAttrComputeCapabilityMinor, device));
  CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&facts.sm_count, cudaDevAttrMultiProcessorCount, device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&facts.max_shared_bytes_per_block,
                                              cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  absl::MutexLock lock(&mutex);
  known->emplace(device, facts);
  return facts;
}

absl::StatusOr<int64_t> FreeDeviceMemoryBytes() {
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(free_bytes);
}

absl::Status CheckFitsInFreeMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view breakdown, int64_t free_bytes, int gpu_index) {
  if (needed + kContextReserveBytes <= free_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat(
      "%s needs %s of GPU memory (%s) plus %s of headroom, but GPU %d has %s free", workload,
      FormatBinaryBytes(needed), breakdown, FormatBinaryBytes(kContextReserveBytes), gpu_index,
      FormatBinaryBytes(free_bytes)));
}

absl::Status CheckFitsInHostMemory(absl::string_view workload, int64_t needed,
                                   absl::string_view purpose) {
  // MemAvailable counts reclaimable page cache, unlike sysconf's free pages.
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key != "MemAvailable:") continue;
    const int64_t available = kib * 1024;
    if (needed <= available) return absl::OkStatus();
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s needs %s of host memory for %s, but %s is available", workload,
                        FormatBinaryBytes(needed), purpose, FormatBinaryBytes(available)));
  }
  return absl::OkStatus();  // unknown: let the allocation try
}

}  // namespace gpuprof::gpu
