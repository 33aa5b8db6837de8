// Loads NVRTC-compiled code into the current CUDA context with the runtime's library API
// (cudaLibraryLoadData), so that libcuda is never a link-time dependency, and launches it.
#ifndef GPUPROF_KERNELS_JIT_JIT_MODULE_H_
#define GPUPROF_KERNELS_JIT_JIT_MODULE_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "kernels/jit/jit_cache.h"

namespace gpuprof::kernels {

struct KernelAttributes {
  int registers_per_thread = 0;
  int max_threads_per_block = 0;
  int64_t local_bytes_per_thread = 0;  // spills show up here
  int64_t static_shared_bytes = 0;     // __shared__ arrays of fixed size, per block
};

// A loaded kernel; move-only, unloads its library on destruction.
class JitKernel {
 public:
  static absl::StatusOr<JitKernel> Load(const JitBinary& binary);

  JitKernel() = default;
  JitKernel(JitKernel&& other) noexcept
      : library_(std::exchange(other.library_, nullptr)),
        kernel_(std::exchange(other.kernel_, nullptr)) {}
  JitKernel& operator=(JitKernel&& other) noexcept;
  JitKernel(const JitKernel&) = delete;
  JitKernel& operator=(const JitKernel&) = delete;
  ~JitKernel() { Reset(); }

  // Launches with one by-value parameter struct (the kernels take a __grid_constant__ struct).
  // With `programmatic_dependent_launch` the launch may overlap the previous kernel on the
  // stream until the kernel's griddepcontrol.wait (sm_90+).
  // `dynamic_shared_bytes` above 48 KiB needs AllowDynamicSharedBytes first.
  absl::Status Launch(int64_t blocks, int threads, const void* params,
                      bool programmatic_dependent_launch, cudaStream_t stream,
                      int64_t dynamic_shared_bytes = 0) const;

  absl::StatusOr<KernelAttributes> Attributes() const;

  // Lets launches use up to `bytes` of dynamic shared memory per block (the opt-in above the
  // default 48 KiB).
  absl::Status AllowDynamicSharedBytes(int64_t bytes) const;

  // Blocks of `threads` threads with `dynamic_shared_bytes` each that fit on one SM at once, as
  // the runtime's occupancy calculator says.
  absl::StatusOr<int> MaxActiveBlocksPerMultiprocessor(int threads,
                                                       int64_t dynamic_shared_bytes) const;

  void Reset();

 private:
  JitKernel(cudaLibrary_t library, cudaKernel_t kernel) : library_(library), kernel_(kernel) {}

  cudaLibrary_t library_ = nullptr;
  cudaKernel_t kernel_ = nullptr;
};

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_JIT_JIT_MODULE_H_
