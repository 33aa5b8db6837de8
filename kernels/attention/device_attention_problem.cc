#include "kernels/attention/device_attention_problem.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::attention {
namespace {

// The bytes of `count` elements uniform in [-range, range]: bf16 and fp16 round the values,
// fp8 e4m3 rounds value / scale to nearest (real value = stored x scale).
std::vector<uint8_t> RandomElements(int64_t count, float range, AttentionDtype dtype, float scale,
                                    std::mt19937_64& random) {
  std::uniform_real_distribution<float> uniform(-range, range);
  const int element = DtypeBytes(dtype);
  std::vector<uint8_t> out(count * element);
  for (int64_t i = 0; i < count; ++i) {
    const float x = uniform(random);
    uint8_t* bytes = out.data() + i * element;
    switch (dtype) {
      case AttentionDtype::kBf16: {
        const uint16_t bits = static_cast<__nv_bfloat16_raw>(__float2bfloat16(x)).x;
        std::memcpy(bytes, &bits, sizeof(bits));
        break;
      }
      case AttentionDtype::kFp16: {
        const uint16_t bits = static_cast<__half_raw>(__float2half(x)).x;
        std::memcpy(bytes, &bits, sizeof(bits));
        break;
      }
      case AttentionDtype::kFp8E4m3:
        *bytes = __nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E4M3);
        break;
    }
  }
  return out;
}

// The dequantisation scale of an input drawn from [-range, range]: 1 unless fp8.
float InputScale(AttentionDtype dtype, float range) {
  return dtype == AttentionDtype::kFp8E4m3 ? range / kFp8StoredMax : 1.0f;
}

template <typename T>
absl::StatusOr<DeviceBuffer> Upload(const std::vector<T>& host) {
  ASSIGN_OR_RETURN(DeviceBuffer buffer,
                   DeviceBuffer::Allocate(std::max<size_t>(host.size() * sizeof(T), sizeof(T))));
  if (!host.empty()) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  return buffer;
}

// Random values; past kRandomBlock elements the first block is repeated by device copies, so
// that benchmark-sized caches (GBs) fill in well under a second and are still not constant.
absl::StatusOr<DeviceBuffer> AllocateInput(int64_t count, float range, AttentionDtype dtype,
                                           std::mt19937_64& random) {
  constexpr int64_t kRandomBlock = int64_t{1} << 22;
  count = std::max<int64_t>(count, 1);
  const int64_t element = DtypeBytes(dtype);
  ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(count * element));
  const std::vector<uint8_t> block =
      RandomElements(std::min(count, kRandomBlock), range, dtype, InputScale(dtype, range), random);
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buffer.data(), block.data(), block.size(), cudaMemcpyHostToDevice));
  auto* bytes = buffer.data_as<char>();
  for (int64_t filled = static_cast<int64_t>(block.size()) / element; filled < count;) {
    const int64_t n = std::min(filled, count - filled);
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(bytes + filled * element, bytes, n * element, cudaMemcpyDeviceToDevice));
    filled += n;
  }
  return buffer;
}

}  // namespace

AttentionProblem DeviceAttentionProblem::ReferenceProblem() const {
  AttentionProblem reference = problem;
  reference.buffers.o = ref_out.data();
  reference.buffers.lse = ref_lse.data_as<float>();
  return reference;
}

absl::Status PoisonBuffer(const DeviceBuffer& buffer, cudaStream_t stream) {
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffer.data(), 0xFF, buffer.bytes(), stream));
  return absl::OkStatus();
}

absl::StatusOr<DeviceAttentionProblem> MakeDeviceAttentionProblem(const AttentionShape& shape,
                                                                  SequenceLengths lengths,
                                                                  uint64_t seed, float q_range) {
  DeviceAttentionProblem d;
  ASSIGN_OR_RETURN(d.layout, BuildPagedLayout(lengths, shape.page_size, seed));
  std::mt19937_64 random(seed * 7919 + 1);
  const int64_t total_q = lengths.total_q();
  const int64_t q_elements = std::max<int64_t>(total_q, 1) * shape.num_qo_heads * shape.head_dim;
  const int64_t kv_elements =
      d.layout.num_pages * shape.page_size * shape.num_kv_heads * shape.head_dim;
  ASSIGN_OR_RETURN(d.q, AllocateInput(q_elements, q_range, shape.dtype, random));
  ASSIGN_OR_RETURN(d.k_cache, AllocateInput(kv_elements, 1.0f, shape.dtype, random));
  ASSIGN_OR_RETURN(d.v_cache, AllocateInput(kv_elements, 1.0f, shape.dtype, random));
  ASSIGN_OR_RETURN(d.q_indptr, Upload(d.layout.q_indptr));
  ASSIGN_OR_RETURN(d.kv_lens, Upload(lengths.kv_lens));
  ASSIGN_OR_RETURN(d.page_indptr, Upload(d.layout.page_indptr));
  ASSIGN_OR_RETURN(d.page_indices, Upload(d.layout.page_indices));
  const int64_t rows = std::max<int64_t>(total_q, 1) * shape.num_qo_heads;
  ASSIGN_OR_RETURN(d.out, DeviceBuffer::Allocate(q_elements * OutputDtypeBytes(shape.dtype)));
  ASSIGN_OR_RETURN(d.out_lse, DeviceBuffer::Allocate(rows * sizeof(float)));
  ASSIGN_OR_RETURN(d.ref_out, DeviceBuffer::Allocate(q_elements * sizeof(float)));
  ASSIGN_OR_RETURN(d.ref_lse, DeviceBuffer::Allocate(rows * sizeof(float)));
  for (const DeviceBuffer* b : {&d.out, &d.out_lse, &d.ref_out, &d.ref_lse}) {
    CUDA_RETURN_IF_ERROR(cudaMemset(b->data(), 0xFF, b->bytes()));
  }
  if (const size_t bytes = PrefillWorkspaceBytes(shape.head_dim);
      bytes > 0 && lengths.max_q_len() > 1) {
    ASSIGN_OR_RETURN(d.prefill_workspace, DeviceBuffer::Allocate(bytes));
    CUDA_RETURN_IF_ERROR(cudaMemset(d.prefill_workspace.data(), 0, bytes));
  }
  d.problem.shape = shape;
  if (shape.dtype == AttentionDtype::kFp8E4m3) {
    d.problem.shape.q_scale = InputScale(shape.dtype, q_range);
    d.problem.shape.k_scale = InputScale(shape.dtype, 1.0f);
    d.problem.shape.v_scale = InputScale(shape.dtype, 1.0f);
  }
  d.problem.lengths = std::move(lengths);
  d.problem.buffers = AttentionBuffers{
      .q = d.q.data(),
      .k_cache = d.k_cache.data(),
      .v_cache = d.v_cache.data(),
      .num_pages = d.layout.num_pages,
      .q_indptr = d.q_indptr.data_as<int32_t>(),
      .kv_lens = d.kv_lens.data_as<int32_t>(),
      .page_indptr = d.page_indptr.data_as<int32_t>(),
      .page_indices = d.page_indices.data_as<int32_t>(),
      .o = d.out.data(),
      .lse = d.out_lse.data_as<float>(),
  };
  return d;
}

absl::StatusOr<std::vector<float>> DownloadAsFloat(const void* device, int64_t count,
                                                   AttentionDtype dtype, bool is_fp32) {
  std::vector<float> out(count);
  if (count == 0) return out;
  if (is_fp32) {
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(out.data(), device, count * sizeof(float), cudaMemcpyDeviceToHost));
    return out;
  }
  std::vector<uint8_t> bytes(count * DtypeBytes(dtype));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(bytes.data(), device, bytes.size(), cudaMemcpyDeviceToHost));
  auto bits16 = [&](int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, bytes.data() + i * sizeof(bits), sizeof(bits));
    return bits;
  };
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case AttentionDtype::kBf16: {
        __nv_bfloat16_raw raw;
        raw.x = bits16(i);
        out[i] = __bfloat162float(__nv_bfloat16(raw));
        break;
      }
      case AttentionDtype::kFp16: {
        __half_raw raw;
        raw.x = bits16(i);
        out[i] = __half2float(__half(raw));
        break;
      }
      case AttentionDtype::kFp8E4m3: {
        __nv_fp8_e4m3 value;
        value.__x = bytes[i];
        out[i] = static_cast<float>(value);
        break;
      }
    }
  }
  return out;
}

}  // namespace gpuprof::attention
