// Inputs made in place on the GPU and outputs checked there, so a small experiment does not
// spend its time filling gigabytes on the host and moving them over PCIe (or reading a whole
// cache back to check a few rows). Both follow the counter stream a host reference recomputes.
#include "kernels/copy/device_inputs_kernels.h"

#include <type_traits>

#include "kernels/copy/counter_bytes.h"

namespace gpuprof::kernels {
namespace {

constexpr int kThreads = 256;
// Enough blocks to keep every SM busy through a grid-stride loop.
constexpr int kBlocksPerSm = 8;

struct CounterFillParams {
  uint64_t* words;
  int64_t whole_words;
  unsigned char* tail;  // the bytes after the last whole word
  int tail_bytes;
  uint64_t seed;
};

template <int kNumThreads>
__global__ void __launch_bounds__(kNumThreads)
    CounterFillKernel(const __grid_constant__ CounterFillParams params) {
  static_assert(kNumThreads % 32 == 0, "whole warps");
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kNumThreads;
  for (int64_t i = blockIdx.x * int64_t{kNumThreads} + threadIdx.x; i < params.whole_words;
       i += stride) {
    params.words[i] = CounterWord(params.seed, i);
  }
  if (blockIdx.x == 0 && threadIdx.x < params.tail_bytes) {
    const uint64_t word = CounterWord(params.seed, params.whole_words);
    params.tail[threadIdx.x] = static_cast<unsigned char>(word >> (8 * threadIdx.x));
  }
}

template <typename Element>
__device__ __forceinline__ uint64_t LoadElement(const void* base, int64_t element) {
  return static_cast<const Element*>(base)[element];
}

template <int kNumThreads, int kElementBytes>
__global__ void __launch_bounds__(kNumThreads)
    ScatteredCacheCheckKernel(const __grid_constant__ ScatteredCacheCheckParams params) {
  static_assert(kNumThreads % 32 == 0, "whole warps");
  static_assert(kElementBytes == 1 || kElementBytes == 2 || kElementBytes == 4,
                "elements fit in one stream word");
  using Element = std::conditional_t<
      kElementBytes == 1, uint8_t, std::conditional_t<kElementBytes == 2, uint16_t, uint32_t>>;
  const int64_t per_row = params.row_bytes / kElementBytes;
  const int64_t elements = params.slots * per_row;
  uint64_t fill = 0;
  for (int i = 0; i < kElementBytes; ++i) fill |= uint64_t{params.fill_byte} << (8 * i);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kNumThreads;
  for (int64_t e = blockIdx.x * int64_t{kNumThreads} + threadIdx.x; e < elements; e += stride) {
    const int64_t slot = e / per_row;
    const int32_t token = params.slot_tokens[slot];
    const uint64_t expected =
        token < 0 ? fill
                  : CounterBytesAt(params.source_seed,
                                   token * params.row_bytes + (e - slot * per_row) * kElementBytes,
                                   kElementBytes);
    if (LoadElement<Element>(params.cache, e) != expected) {
      atomicAdd(params.mismatches, 1ULL);
      atomicMin(params.first_mismatch, static_cast<unsigned long long>(e));
    }
  }
}

int GridFor(int64_t items, int sm_count) {
  const int64_t wanted = (items + kThreads - 1) / kThreads;
  const int64_t most = static_cast<int64_t>(sm_count > 0 ? sm_count : 1) * kBlocksPerSm;
  return static_cast<int>(wanted < 1 ? 1 : wanted < most ? wanted : most);
}

}  // namespace

cudaError_t LaunchCounterFill(void* device, int64_t bytes, uint64_t seed, int sm_count,
                              cudaStream_t stream) {
  if (bytes <= 0) return cudaSuccess;
  const CounterFillParams params{.words = static_cast<uint64_t*>(device),
                                 .whole_words = bytes / 8,
                                 .tail = static_cast<unsigned char*>(device) + bytes / 8 * 8,
                                 .tail_bytes = static_cast<int>(bytes % 8),
                                 .seed = seed};
  CounterFillKernel<kThreads><<<GridFor(params.whole_words, sm_count), kThreads, 0, stream>>>(
      params);
  return cudaGetLastError();
}

cudaError_t LaunchScatteredCacheCheck(const ScatteredCacheCheckParams& params, int sm_count,
                                      cudaStream_t stream) {
  if (params.element_bytes <= 0 || params.row_bytes % params.element_bytes != 0) {
    return cudaErrorInvalidValue;
  }
  const int grid = GridFor(params.slots * (params.row_bytes / params.element_bytes), sm_count);
  switch (params.element_bytes) {
    case 1:
      ScatteredCacheCheckKernel<kThreads, 1><<<grid, kThreads, 0, stream>>>(params);
      break;
    case 2:
      ScatteredCacheCheckKernel<kThreads, 2><<<grid, kThreads, 0, stream>>>(params);
      break;
    case 4:
      ScatteredCacheCheckKernel<kThreads, 4><<<grid, kThreads, 0, stream>>>(params);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace gpuprof::kernels
