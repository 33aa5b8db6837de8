// The paged K/V read (paged_kv_read.h): 16-byte loads through the page table, four of K and
// four of V in flight a thread, XOR-folded so that the compiler keeps them.
#include "kernels/attention/paged_kv_read.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "kernels/attention/attention_device.cuh"

namespace gpuprof::attention {
namespace {

inline constexpr int kThreads = 256;
inline constexpr int kUnroll = 4;
inline constexpr int kBlocksPerSm = 2048 / kThreads;  // resident at full occupancy
inline constexpr int kWaves = 4;                      // blocks enough for this many waves
inline constexpr int kMinKeysPerSplit = 64;

struct PagedKvReadParams {
  const uint4* k;  // the caches as 16-byte chunks
  const uint4* v;
  const int32_t* kv_lens;
  const int32_t* page_indptr;
  const int32_t* page_indices;
  int log2_page_size;
  int log2_slot_chunks;   // 16-byte chunks a slot (every KV head's part)
  int log2_block_chunks;  // chunks a block reads of each slot: one KV head's, or the slot's
  int num_splits;
  uint4* sink;
};

// Block (KV head or 0, split, sequence): a split's KV heads run side by side, as their reads
// share each slot row.
__global__ void __launch_bounds__(kThreads)
    PagedKvReadKernel(const __grid_constant__ PagedKvReadParams p) {
  const int seq = blockIdx.z;
  const int kv_len = p.kv_lens[seq];
  const int32_t* pages = p.page_indices + p.page_indptr[seq];
  const int per_split = (kv_len + p.num_splits - 1) / p.num_splits;
  const int begin = min(kv_len, static_cast<int>(blockIdx.y) * per_split);
  const int end = min(kv_len, begin + per_split);
  const int total = (end - begin) << p.log2_block_chunks;
  const int chunk_mask = (1 << p.log2_block_chunks) - 1;
  const int64_t part = static_cast<int64_t>(blockIdx.x) << p.log2_block_chunks;
  uint4 folded = make_uint4(0u, 0u, 0u, 0u);
  for (int base = threadIdx.x; base < total; base += kThreads * kUnroll) {
    uint4 k[kUnroll], v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int idx = base + u * kThreads;
      k[u] = v[u] = make_uint4(0u, 0u, 0u, 0u);
      if (idx < total) {
        const int key = begin + (idx >> p.log2_block_chunks);
        const int64_t chunk =
            (device::PagedRow(pages, key, p.log2_page_size) << p.log2_slot_chunks) + part +
            (idx & chunk_mask);
        k[u] = __ldg(p.k + chunk);
        v[u] = __ldg(p.v + chunk);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      folded.x ^= k[u].x ^ v[u].x;
      folded.y ^= k[u].y ^ v[u].y;
      folded.z ^= k[u].z ^ v[u].z;
      folded.w ^= k[u].w ^ v[u].w;
    }
  }
  if ((folded.x & folded.y & folded.z & folded.w) == 0xffffffffu) *p.sink = folded;
}

int Log2IfPowerOfTwo(int value) {
  const auto bits = static_cast<unsigned>(value);
  return value > 0 && std::has_single_bit(bits) ? std::countr_zero(bits) : -1;
}

}  // namespace

absl::Status LaunchPagedKvRead(const AttentionProblem& problem, PagedKvReadOrder order, void* sink,
                               cudaStream_t stream) {
  const AttentionShape& shape = problem.shape;
  const int log2_head_chunks = Log2IfPowerOfTwo(shape.head_dim * 2 / 16);
  const int log2_heads = Log2IfPowerOfTwo(shape.num_kv_heads);
  const int log2_page_size = Log2IfPowerOfTwo(shape.page_size);
  if (DtypeBytes(shape.dtype) != 2 || log2_head_chunks < 0 || log2_heads < 0 ||
      log2_page_size < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the paged K/V read takes 2-byte K and V with head_dim x 2 / 16, num_kv_heads and "
        "page_size powers of two; got dtype ",
        std::string(DtypeName(shape.dtype)), ", head_dim ", shape.head_dim, ", num_kv_heads ",
        shape.num_kv_heads, ", page_size ", shape.page_size));
  }
  const int batch = problem.lengths.batch();
  if (batch == 0) return absl::OkStatus();
  int device = 0, sm_count = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  const bool per_head = order == PagedKvReadOrder::kPerKvHead;
  const int64_t parts = static_cast<int64_t>(batch) * (per_head ? shape.num_kv_heads : 1);
  const int64_t wanted =
      (static_cast<int64_t>(sm_count) * kBlocksPerSm * kWaves + parts - 1) / parts;
  const int most = std::max(1, problem.lengths.max_kv_len() / kMinKeysPerSplit);
  const PagedKvReadParams params{
      .k = static_cast<const uint4*>(problem.buffers.k_cache),
      .v = static_cast<const uint4*>(problem.buffers.v_cache),
      .kv_lens = problem.buffers.kv_lens,
      .page_indptr = problem.buffers.page_indptr,
      .page_indices = problem.buffers.page_indices,
      .log2_page_size = log2_page_size,
      .log2_slot_chunks = log2_head_chunks + log2_heads,
      .log2_block_chunks = per_head ? log2_head_chunks : log2_head_chunks + log2_heads,
      .num_splits = static_cast<int>(std::clamp<int64_t>(wanted, 1, most)),
      .sink = static_cast<uint4*>(sink)};
  const dim3 grid(per_head ? shape.num_kv_heads : 1, params.num_splits, batch);
  PagedKvReadKernel<<<grid, kThreads, 0, stream>>>(params);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace gpuprof::attention
