// Device helpers shared by the attention kernels: element types, 16-byte vectors, the paged
// row address, and thin wrappers over the PTX the tensor-core path needs (cp.async, ldmatrix,
// mma.sync m16n8k16). Only .cu files include this.
#ifndef GPUPROF_KERNELS_ATTENTION_ATTENTION_DEVICE_CUH_
#define GPUPROF_KERNELS_ATTENTION_ATTENTION_DEVICE_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace gpuprof::attention::device {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// The 16-bit element types that PackTwo, UnpackTwo and mma.sync below take.
template <typename T>
inline constexpr bool kIsAttentionType =
    std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

// Every element type Q, K and V may have (ToFloat reads each): the 16-bit ones and fp8 e4m3,
// whose stored values are multiplied by the tensor's scale (attention_params.h) elsewhere.
template <typename T>
inline constexpr bool kIsAttentionInputType =
    kIsAttentionType<T> || std::is_same_v<T, __nv_fp8_e4m3>;

// Two floats rounded into one 32-bit register of two T (low half first).
template <typename T>
__device__ __forceinline__ uint32_t PackTwo(float lo, float hi) {
  static_assert(kIsAttentionType<T>);
  uint32_t out;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    out = *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    out = *reinterpret_cast<uint32_t*>(&v);
  }
  return out;
}

template <typename T>
__device__ __forceinline__ float2 UnpackTwo(uint32_t bits) {
  static_assert(kIsAttentionType<T>);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&bits));
  }
}

// Eight T in a 16-byte vector to eight floats.
template <typename T>
__device__ __forceinline__ void UnpackEight(const uint4& v, float (&out)[8]) {
  const float2 a = UnpackTwo<T>(v.x), b = UnpackTwo<T>(v.y), c = UnpackTwo<T>(v.z),
               d = UnpackTwo<T>(v.w);
  out[0] = a.x, out[1] = a.y, out[2] = b.x, out[3] = b.y;
  out[4] = c.x, out[5] = c.y, out[6] = d.x, out[7] = d.y;
}

// The stored value, unscaled for fp8.
template <typename T>
__device__ __forceinline__ float ToFloat(T v) {
  static_assert(kIsAttentionInputType<T>);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else if constexpr (std::is_same_v<T, __half>) {
    return __half2float(v);
  } else {
    return static_cast<float>(v);
  }
}

// Flat row (page * page_size + slot) of KV row `row` of a sequence, `page` being the entry of
// its page list that holds the row.
__device__ __forceinline__ int64_t PagedSlot(int page, int row, int log2_page_size) {
  return (static_cast<int64_t>(page) << log2_page_size) | (row & ((1 << log2_page_size) - 1));
}

// The same, reading the page list that starts at `pages`.
__device__ __forceinline__ int64_t PagedRow(const int32_t* __restrict__ pages, int row,
                                            int log2_page_size) {
  return PagedSlot(__ldg(pages + (row >> log2_page_size)), row, log2_page_size);
}

// Element offset of 16-byte chunk `chunk` of row `row` in a shared-memory tile of rows of
// kHeadDim elements, the chunk index XORed with row % 8 so that ldmatrix reads of eight rows
// are free of bank conflicts.
template <int kHeadDim>
__device__ __forceinline__ int SwizzledOffset(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (row & 7)) << 3);
}

// 2^x on the special-function unit (flushes denormals; -inf gives 0).
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t SharedAddress(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// 16-byte global -> shared copy that bypasses L1; `valid` false fills the 16 bytes with zeros
// and reads nothing.
__device__ __forceinline__ void CpAsync16(uint32_t shared, const void* global, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared), "l"(global),
               "r"(bytes));
}

__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }

// The memory clobber keeps the compiler from moving shared-memory reads above the wait.
template <int kPending>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// D += A (16x16, row) * B (16x8, col), fp32 accumulators.
template <typename T>
__device__ __forceinline__ void MmaM16N8K16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  static_assert(kIsAttentionType<T>);
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Programmatic dependent launch (sm_90+). A kernel launched with
// cudaLaunchAttributeProgrammaticStreamSerialization may be scheduled before the kernel ahead
// of it has finished, once every block of that kernel has called AllowDependentLaunch (or
// exited); it must call WaitForPrimaryGrid before reading what that kernel writes, which returns
// once the kernel has finished and its writes are visible. Both are no-ops before sm_90, where
// the launch is an ordinary one.
__device__ __forceinline__ void AllowDependentLaunch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}

__device__ __forceinline__ void WaitForPrimaryGrid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace gpuprof::attention::device

#endif  // GPUPROF_KERNELS_ATTENTION_ATTENTION_DEVICE_CUH_
