// The index and store kernel sources, embedded for NVRTC (generated from KERNEL_SOURCES in
// this folder's BUILD.bazel).
#ifndef GPUPROF_KERNELS_COPY_COPY_KERNEL_SOURCES_H_
#define GPUPROF_KERNELS_COPY_COPY_KERNEL_SOURCES_H_

#include "absl/types/span.h"
#include "kernels/jit/jit_cache.h"

namespace gpuprof::kernels {

absl::Span<const KernelSource> CopyKernelSources();

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_COPY_COPY_KERNEL_SOURCES_H_
