#include "workloads/custom_kernel/guarded_buffer.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::workloads {
namespace {

int64_t CountChanged(const std::vector<uint8_t>& guard) {
  return std::count_if(guard.begin(), guard.end(), [](uint8_t byte) { return byte != kGuardByte; });
}

}  // namespace

absl::StatusOr<DeviceBuffer> AllocateClearedDeviceBuffer(int64_t bytes) {
  ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(std::max<int64_t>(bytes, 1)));
  CUDA_RETURN_IF_ERROR(cudaMemset(buffer.data(), 0, buffer.bytes()));
  return buffer;
}

absl::StatusOr<GuardedDeviceBuffer> GuardedDeviceBuffer::Allocate(int64_t bytes) {
  GuardedDeviceBuffer buffer;
  ASSIGN_OR_RETURN(buffer.memory_, AllocateClearedDeviceBuffer(bytes + 2 * kGuardBytes));
  buffer.bytes_ = bytes;
  char* const base = static_cast<char*>(buffer.memory_.data());
  CUDA_RETURN_IF_ERROR(cudaMemset(base, kGuardByte, kGuardBytes));
  CUDA_RETURN_IF_ERROR(cudaMemset(base + kGuardBytes + bytes, kGuardByte, kGuardBytes));
  return buffer;
}

absl::StatusOr<GuardDamage> GuardedDeviceBuffer::CheckGuards() const {
  std::vector<uint8_t> guard(kGuardBytes);
  const char* const base = static_cast<const char*>(memory_.data());
  GuardDamage damage;
  CUDA_RETURN_IF_ERROR(cudaMemcpy(guard.data(), base, kGuardBytes, cudaMemcpyDeviceToHost));
  damage.before = CountChanged(guard);
  CUDA_RETURN_IF_ERROR(cudaMemcpy(guard.data(), base + kGuardBytes + bytes_, kGuardBytes,
                                  cudaMemcpyDeviceToHost));
  damage.after = CountChanged(guard);
  return damage;
}

std::string DescribeGuardDamage(const GuardDamage& damage, const std::string& what) {
  if (damage.total() == 0) return "";
  std::string where;
  if (damage.before > 0 && damage.after > 0) {
    where = absl::StrCat(damage.before, " guard bytes before and ", damage.after,
                         " guard bytes after ", what);
  } else if (damage.before > 0) {
    where = absl::StrCat(damage.before, " guard bytes before ", what);
  } else {
    where = absl::StrCat(damage.after, " guard bytes after ", what);
  }
  return absl::StrCat("out-of-bounds write: ", where, " changed");
}

}  // namespace gpuprof::workloads
