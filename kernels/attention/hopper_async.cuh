// Hopper building blocks shared by the prefill kernels (sm_90a) and the decode's TMA loads
// (sm_90): wgmma shared-memory descriptors and the fence/commit/wait around it, mbarriers, TMA
// loads, and the driver's tensor-map encoder with the KV cache's map. Device code is inline and
// sm_90 only: call it from code built for sm_90 or sm_90a.
#ifndef GPUPROF_KERNELS_ATTENTION_HOPPER_ASYNC_CUH_
#define GPUPROF_KERNELS_ATTENTION_HOPPER_ASYNC_CUH_

#include <cuda.h>  // CUtensorMap and its enums (libcuda is not linked: common/cuda_driver_entry.h)
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "absl/status/statusor.h"
#include "common/cuda_driver_entry.h"

// The accumulator operands of one wgmma: 32 (n64), 40 (n80), 64 (n128) or 128 (n256) fp32
// registers a thread.
#define GPUPROF_WGMMA_ACC32_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"

#define GPUPROF_WGMMA_ACC32_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
  "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
  "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

#define GPUPROF_WGMMA_ACC40_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39}"

#define GPUPROF_WGMMA_ACC40_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
  "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
  "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
  "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])

#define GPUPROF_WGMMA_ACC64_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63}"

#define GPUPROF_WGMMA_ACC64_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
  "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
  "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
  "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
  "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
  "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
  "+f"(d[63])

#define GPUPROF_WGMMA_ACC128_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, " \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, " \
  "%56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, " \
  "%74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, " \
  "%92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, " \
  "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, " \
  "%123, %124, %125, %126, %127}"

#define GPUPROF_WGMMA_ACC128_OPERANDS \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), \
  "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), \
  "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), \
  "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), \
  "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), \
  "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), \
  "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), \
  "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), \
  "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), \
  "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), \
  "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), \
  "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), \
  "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), \
  "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), \
  "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), \
  "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), \
  "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

namespace gpuprof::attention::sm90 {

// wgmma shared-memory descriptor for rows swizzled over kSwizzleBytes (128: the 16-byte chunk
// index XOR row % 8; 64: XOR (row / 2) % 4): start address, leading and stride byte offsets,
// all in 16-byte units, and the layout type (1: 128-byte swizzle, 2: 64-byte).
template <int kSwizzleBytes = 128>
__device__ __forceinline__ uint64_t Descriptor(uint32_t address, uint32_t leading_bytes,
                                               uint32_t stride_bytes) {
  static_assert(kSwizzleBytes == 128 || kSwizzleBytes == 64);
  constexpr uint64_t kLayoutType = kSwizzleBytes == 128 ? 1 : 2;
  return static_cast<uint64_t>((address & 0x3FFFF) >> 4) |
         static_cast<uint64_t>((leading_bytes >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3FFF) << 32 | kLayoutType << 62;
}

__device__ __forceinline__ void WgmmaFence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void WgmmaCommit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int kPending>
__device__ __forceinline__ void WgmmaWait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}
// cp.async wrote through the generic proxy; wgmma reads through the async proxy.
__device__ __forceinline__ void FenceProxyAsync() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// mbarriers: the producer's cp.async completions fill a stage, the consumers' warps empty it.
__device__ __forceinline__ void MbarrierInit(uint32_t barrier, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarrierArrive(uint32_t barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}
// Arrives from the threads where `arrive` holds, under a predicate rather than a branch: a lane-0
// `if` cost the prefill consumers a divergent branch and its reconvergence (BSYNC) on every tile
// (H200: +0.5-1% at head_dim 64 and 128, docs/gpu-runs/attention-prefill-unit-overlap-h200.md).
__device__ __forceinline__ void MbarrierArriveIf(uint32_t barrier, bool arrive) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %1, 0;\n"
      "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n}\n" ::"r"(barrier),
      "r"(static_cast<int>(arrive))
      : "memory");
}
// Arrives once this thread's earlier cp.async copies have landed (the count set at init
// includes this arrival: .noinc).
__device__ __forceinline__ void CpAsyncArriveOn(uint32_t barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(barrier) : "memory");
}
// The barrier's phase completes once `bytes` more have landed (and this arrival).
__device__ __forceinline__ void MbarrierArriveExpectBytes(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes)
               : "memory");
}
// One box of a 3-D tensor map (TMA) into shared memory; its bytes count towards `barrier`.
__device__ __forceinline__ void TmaLoad3d(uint32_t shared, const CUtensorMap& map, int c0, int c1,
                                          int c2, uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3, %4}], [%5];\n" ::"r"(shared),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(barrier)
      : "memory");
}
// The same box written to every block of the cluster in `block_mask` (bit r: rank r), at the
// same shared-memory offset in each; its bytes count towards each block's own `barrier`.
__device__ __forceinline__ void TmaLoad3dMulticast(uint32_t shared, const CUtensorMap& map, int c0,
                                                   int c1, int c2, uint32_t barrier,
                                                   uint16_t block_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(shared),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(barrier),
      "h"(block_mask)
      : "memory");
}
// One box of shared memory written to a 3-D tensor map (TMA), whose rows outside the tensor are
// dropped; tracked by this thread's bulk groups (TmaStoreCommit, TmaStoreWaitRead).
__device__ __forceinline__ void TmaStore3d(const CUtensorMap& map, uint32_t shared, int c0, int c1,
                                           int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(&map)),
      "r"(shared), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void TmaStoreCommit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Until at most kPending of this thread's committed stores still read shared memory.
template <int kPending>
__device__ __forceinline__ void TmaStoreWaitRead() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
// Brings a tensor map (a kernel parameter) into the TMA unit's cache ahead of its first use.
__device__ __forceinline__ void PrefetchTensorMap(const CUtensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map)) : "memory");
}
// Waits until the barrier's phase of parity `parity` has completed; kAcquireCluster also
// acquires what threads of other blocks of the cluster released by arriving on it.
template <bool kAcquireCluster = false>
__device__ __forceinline__ void MbarrierWait(uint32_t barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    if constexpr (kAcquireCluster) {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], "
          "%2;\nselp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(barrier), "r"(parity)
          : "memory");
    } else {
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(barrier), "r"(parity)
          : "memory");
    }
  } while (done == 0);
}

// Clusters (thread block clusters of sm_90): the blocks of one cluster reach each other's shared
// memory and mbarriers through the shared::cluster window.
__device__ __forceinline__ uint32_t ClusterCtaRank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// Every thread of every block of the cluster, once; orders what came before (mbarrier inits
// included, after FenceMbarrierInitCluster) before anything after, cluster-wide.
__device__ __forceinline__ void ClusterSync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" :::
                   "memory");
}
__device__ __forceinline__ void FenceMbarrierInitCluster() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// The shared::cluster address of `shared` (a shared::cta address) in block `rank`'s memory.
__device__ __forceinline__ uint32_t MapShared(uint32_t shared, uint32_t rank) {
  uint32_t mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(mapped) : "r"(shared), "r"(rank));
  return mapped;
}
// Arrives on an mbarrier of another block (a shared::cluster address), releasing this thread's
// earlier writes to whoever acquires the phase.
__device__ __forceinline__ void MbarrierArriveRemote(uint32_t cluster_barrier) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(
                   cluster_barrier)
               : "memory");
}
// Arrives on an mbarrier of a block of the cluster (a shared::cluster address) as a signal
// alone: it releases at block scope only, for a waiter that needs to know that this thread's
// reads of that shared memory are done (they completed before the arrival), not to see writes.
__device__ __forceinline__ void MbarrierArriveCluster(uint32_t cluster_barrier) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_barrier) : "memory");
}
__device__ __forceinline__ float4 LoadSharedCluster(uint32_t cluster_address) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(cluster_address)
               : "memory");
  return v;
}

// Keeps the compiler from moving reads or writes of wgmma's registers across a wait: the
// hardware writes them asynchronously, which the asm statements' operands cannot express.
template <int N>
__device__ __forceinline__ void PinRegisters(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}

// The driver's cuTensorMapEncodeTiled, looked up once; null where the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 EncodeTiledEntry() {
  static const absl::StatusOr<PFN_cuTensorMapEncodeTiled_v12000> entry =
      CudaDriverEntry<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  return entry.ok() ? *entry : nullptr;
}

// A tensor map over rows of heads of T (bf16 or fp16) as (head_dim, head, row), rows
// `row_stride` elements apart: a paged KV cache (a row is a slot, the heads its KV heads) or Q
// and O (a row is a token, the heads its query heads). Boxes of 64 columns x 1 head x `box_rows`
// rows are written with the 128-byte swizzle (a 128-byte row's 16-byte chunk index XOR row % 8),
// each row's fetch from memory widened to `promotion`. False where TMA cannot read it (no driver
// entry point, an address or stride the TMA unit refuses): callers then load by cp.async.
template <typename T>
bool EncodeHeadRowsTensorMap(const void* base, int head_dim, int heads, int64_t rows,
                             int64_t row_stride, int box_rows, CUtensorMapL2promotion promotion,
                             CUtensorMap& map) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>);
  const PFN_cuTensorMapEncodeTiled_v12000 encode = EncodeTiledEntry();
  if (encode == nullptr) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_dim), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[2] = {head_dim * sizeof(T),
                                 static_cast<cuuint64_t>(row_stride) * sizeof(T)};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUtensorMapDataType type = std::is_same_v<T, __nv_bfloat16>
                                       ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  return encode(&map, type, 3, const_cast<void*>(base), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promotion,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace gpuprof::attention::sm90

#endif  // GPUPROF_KERNELS_ATTENTION_HOPPER_ASYNC_CUH_
