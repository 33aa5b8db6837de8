#include "workloads/custom_kernel/decode_contract_plan.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "kernels/attention/attention_check.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/device_attention_problem.h"
#include "kernels/attention/head_dims.h"
#include "kernels/attention/reference.h"
#include "kernels/custom/contract/gpuprof/contract.h"
#include "workloads/attention/attention_spec.h"
#include "workloads/custom_kernel/custom_kernel_plan.h"
#include "workloads/custom_kernel/guarded_buffer.h"
#include "workloads/gpu_driver/gpu_run_driver.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// Written over o before each checked launch: 0xFFFF is NaN in bf16 and fp16, so an element the
// kernel leaves unwritten fails the check.
constexpr int kPoisonByte = 0xff;

class DecodeContractPlan final : public CustomKernelPlan {
 public:
  DecodeContractPlan(const worker_protocol::ExperimentAssignment& assignment,
                     const cupti::TracingSession* tracing)
      : CustomKernelPlan(assignment, tracing), spec_(assignment.request().attention()) {}

  // As our decode's plan counts them, less the split workspace this contract has none of; the
  // fp32 reference's output and LSE come with DeviceAttentionProblem.
  MemoryNeeds memory_needs() const override {
    const int64_t element = attention::DtypeBytes(shape_.dtype);
    const int64_t cache_bytes =
        2 * cached_pages() * shape_.page_size * shape_.num_kv_heads * shape_.head_dim * element;
    const int64_t io = o_elements() * (3 * element + 4) + 8 * batch() * shape_.num_qo_heads;
    return {.device_bytes = cache_bytes + io + 2 * kGuardBytes,
            .device_breakdown = absl::StrCat(DescribeBytes("K and V caches", cache_bytes), ", ",
                                             DescribeBytes("Q, outputs and reference", io)),
            .host_bytes = 2 * o_elements() * 4,
            .host_purpose = "the output and the reference in fp32 for the comparison"};
  }

  // The same figures as our decode's (attention_params.h), so the headlines compare.
  WorkPerLaunch work_per_launch() const override {
    return {.bytes = static_cast<int64_t>(attention::AttentionBytes(shape_, lengths_)),
            .flops = attention::AttentionFlops(shape_, lengths_)};
  }

  void FinishResult(v1::ExperimentResult& result) const override {
    CustomKernelPlan::FinishResult(result);
    auto& config = *result.mutable_kernel_config();
    config["phase"] = "decode";
    config["group_size"] = absl::StrCat(shape_.group_size());
    config["pages"] = absl::StrCat(cached_pages());
    const auto [low, high] = std::minmax_element(lengths_.kv_lens.begin(), lengths_.kv_lens.end());
    config["sequences"] =
        absl::StrCat(batch(), "; kv ",
                     *low == *high ? absl::StrCat(*low, " each") : absl::StrCat(*low, "..", *high));
  }

 protected:
  std::string contract_name() const override { return "decode"; }

  absl::Status ResolveShape() override {
    RETURN_IF_ERROR(CheckDecodeContractRequest(request()));
    shape_.num_qo_heads = static_cast<int>(spec_.num_qo_heads());
    shape_.num_kv_heads = static_cast<int>(spec_.num_kv_heads());
    shape_.head_dim = static_cast<int>(spec_.head_dim());
    shape_.page_size = static_cast<int>(spec_.page_size());
    // One query after every cached token: the causal mask hides nothing.
    shape_.causal = false;
    // CheckDecodeContractRequest took bf16 or fp16 (unset: bf16).
    shape_.dtype = spec_.dtype() == v1::DATA_TYPE_FP16 ? attention::AttentionDtype::kFp16
                                                       : attention::AttentionDtype::kBf16;
    const AttentionLengths expanded = ExpandAttentionLengths(spec_);
    lengths_ = {};
    for (int64_t kv_len : expanded.kv_lens) {
      lengths_.q_lens.push_back(1);
      lengths_.kv_lens.push_back(static_cast<int32_t>(kv_len));
      lengths_.num_pages.push_back(
          static_cast<int32_t>((kv_len + shape_.page_size - 1) / shape_.page_size));
    }
    RETURN_IF_ERROR(attention::ValidateAttentionShape(
        shape_,
        {std::begin(attention::kAttentionHeadDims), std::end(attention::kAttentionHeadDims)}));
    return attention::ValidateSequenceLengths(shape_, lengths_);
  }

  int64_t items() const override { return batch() * shape_.num_kv_heads; }

  std::vector<std::string> ContractMacros() const override {
    const int element = attention::DtypeBytes(shape_.dtype);
    return {absl::StrCat("GPUPROF_HEAD_DIM=", shape_.head_dim),
            absl::StrCat("GPUPROF_GROUP_SIZE=", shape_.group_size()),
            absl::StrCat("GPUPROF_PAGE_SIZE=", shape_.page_size),
            absl::StrCat("GPUPROF_DTYPE_BF16=", shape_.dtype == attention::AttentionDtype::kBf16),
            absl::StrCat("GPUPROF_ELEMENT_BYTES=", element),
            absl::StrCat("GPUPROF_ROW_BYTES=", shape_.head_dim * element)};
  }

  absl::StatusOr<std::string> AllocateBuffers(cudaStream_t stream) override {
    ASSIGN_OR_RETURN(o_, GuardedDeviceBuffer::Allocate(o_bytes()));
    return absl::StrCat(cached_pages(), " pages of ", shape_.page_size, " tokens, ", batch(),
                        " sequence(s); ", DescribeBytes("output", o_bytes()), " between ",
                        DescribeBytes("guards of", kGuardBytes));
  }

  absl::Status FillInputs(uint64_t seed, cudaStream_t stream) override {
    // Our decode's inputs for `seed`: Q, K and V drawn uniformly, the pages shuffled. The last
    // seed's buffers go first, so that two sets never hold memory at once.
    problem_.reset();
    ASSIGN_OR_RETURN(problem_, attention::MakeDeviceAttentionProblem(shape_, lengths_, seed));
    const attention::AttentionBuffers& buffers = problem_->problem.buffers;
    const float scale = shape_.EffectiveScale();
    const int64_t token_stride = static_cast<int64_t>(shape_.num_kv_heads) * shape_.head_dim;
    params_ = {.q = buffers.q,
               .k_cache = buffers.k_cache,
               .v_cache = buffers.v_cache,
               .o = o_.data(),
               .page_indptr = buffers.page_indptr,
               .page_indices = buffers.page_indices,
               .kv_lens = buffers.kv_lens,
               .num_pages = buffers.num_pages,
               .kv_page_stride = shape_.page_size * token_stride,
               .kv_token_stride = token_stride,
               .scale = scale,
               .scale_log2 = static_cast<float>(scale * std::numbers::log2e),
               .batch_size = static_cast<int>(batch()),
               .num_qo_heads = shape_.num_qo_heads,
               .num_kv_heads = shape_.num_kv_heads,
               .head_dim = shape_.head_dim,
               .page_size = shape_.page_size};
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return absl::OkStatus();
  }

  absl::Status PoisonOutputs(cudaStream_t stream) override {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(o_.data(), kPoisonByte, o_bytes(), stream));
    return attention::PoisonBuffer(problem_->ref_out, stream);
  }

  const void* params() const override { return &params_; }

  absl::StatusOr<OutputComparison> CompareWithReference(uint64_t seed,
                                                        cudaStream_t stream) override {
    RETURN_IF_ERROR(attention::LaunchReferenceAttention(problem_->ReferenceProblem(), stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    ASSIGN_OR_RETURN(const std::vector<float> expected,
                     attention::DownloadAsFloat(problem_->ref_out.data(), o_elements(),
                                                shape_.dtype, /*is_fp32=*/true));
    ASSIGN_OR_RETURN(const std::vector<float> actual,
                     attention::DownloadAsFloat(o_.data(), o_elements(), shape_.dtype,
                                                /*is_fp32=*/false));
    const attention::AttentionTolerance tolerance = attention::DefaultTolerance(shape_.dtype);
    const attention::AttentionErrorReport report =
        attention::CompareAttentionOutputs(actual, expected, tolerance);
    OutputComparison comparison{.elements = report.elements,
                                .mismatches = report.mismatches + report.non_finite,
                                .max_abs_error = report.max_abs_error};
    auto describe = [&](int64_t i) {
      const double bound = tolerance.atol + tolerance.rtol * std::abs(expected[i]);
      return absl::StrFormat("%s: got %.6g, expected %.6g, tolerance %.3g",
                             DecodeOutputElementName(i, shape_.num_qo_heads, shape_.head_dim),
                             actual[i], expected[i], bound);
    };
    for (int64_t i = 0; i < report.elements && comparison.mismatches > 0; ++i) {
      const double bound = tolerance.atol + tolerance.rtol * std::abs(expected[i]);
      if (!std::isfinite(actual[i]) || std::abs(actual[i] - expected[i]) > bound) {
        comparison.first_mismatch = describe(i);
        break;
      }
    }
    if (!report.passed && comparison.mismatches == 0) {
      // Every element within its bound, the whole too far off: counted as its worst element.
      comparison.mismatches = 1;
      comparison.first_mismatch = absl::StrFormat(
          "%s (within its own bound, but the relative L2 error over the whole output is %.3g, "
          "over the bound %.3g)",
          describe(std::max<int64_t>(report.worst_index, 0)), report.rel_l2_error,
          tolerance.max_rel_l2);
    }
    ASSIGN_OR_RETURN(const GuardDamage damage, o_.CheckGuards());
    comparison.guard_bytes_overwritten = damage.total();
    comparison.guard_message = DescribeGuardDamage(damage, "o");
    return comparison;
  }

  std::string reference_method() const override {
    const attention::AttentionTolerance tolerance = attention::DefaultTolerance(shape_.dtype);
    return absl::StrFormat(
        "every element of o against our exact fp32 attention on the same inputs (expf, fp32 "
        "sums); tolerance |o - ref| <= %g + %g |ref| and relative L2 error <= %g, as our "
        "decode's",
        tolerance.atol, tolerance.rtol, tolerance.max_rel_l2);
  }

  uint64_t timing_seed() const override { return spec_.seed(); }

 private:
  int64_t batch() const { return lengths_.batch(); }
  int64_t o_elements() const { return batch() * shape_.num_qo_heads * shape_.head_dim; }
  int64_t o_bytes() const { return o_elements() * attention::DtypeBytes(shape_.dtype); }
  int64_t cached_pages() const {
    int64_t pages = 0;
    for (int32_t count : lengths_.num_pages) pages += count;
    return pages;
  }

  const v1::AttentionSpec& spec_;
  attention::AttentionShape shape_;
  attention::SequenceLengths lengths_;
  GuardedDeviceBuffer o_;
  std::optional<attention::DeviceAttentionProblem> problem_;
  gpuprof_decode_params params_{};
};

}  // namespace

absl::Status CheckDecodeContractRequest(const v1::ExperimentRequest& request) {
  const v1::AttentionSpec& spec = request.attention();
  if (spec.phase() == v1::ATTENTION_PHASE_PREFILL) {
    return absl::InvalidArgumentError(
        "attention.phase: got prefill; custom kernels cover decode only (the decode contract, "
        "docs/custom-kernels.md)");
  }
  const AttentionLengths lengths = ExpandAttentionLengths(spec);
  for (size_t i = 0; i < lengths.q_lens.size(); ++i) {
    if (lengths.q_lens[i] != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: got %d; a custom decode kernel takes one query token per sequence (1)",
          spec.q_lens_size() > 0 ? absl::StrFormat("attention.q_lens[%d]", i) : "attention.q_len",
          lengths.q_lens[i]));
    }
  }
  if (spec.dtype() != v1::DATA_TYPE_UNSPECIFIED && spec.dtype() != v1::DATA_TYPE_BF16 &&
      spec.dtype() != v1::DATA_TYPE_FP16) {
    return absl::InvalidArgumentError(absl::StrCat("attention.dtype: got ",
                                                   EnumShortName(spec.dtype()),
                                                   "; a custom decode kernel takes bf16 or fp16"));
  }
  if (spec.backend() != v1::ATTENTION_BACKEND_UNSPECIFIED &&
      spec.backend() != v1::ATTENTION_BACKEND_GPUPROF) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention.backend: got ", EnumShortName(spec.backend()),
                     "; a custom kernel runs in place of ours: leave the backend unset"));
  }
  if (request.tp_degree() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("tp_degree: got ", request.tp_degree(),
                                                   "; a custom decode kernel runs on one GPU"));
  }
  return absl::OkStatus();
}

std::string DecodeOutputElementName(int64_t index, int num_qo_heads, int head_dim) {
  const int64_t row = index / head_dim;
  return absl::StrFormat("sequence %d, head %d, element %d", row / num_qo_heads, row % num_qo_heads,
                         index % head_dim);
}

absl::StatusOr<v1::ExperimentResult> RunDecodeContractWorkload(const RunContext& context) {
  // Activated before the plan exists, so that its buffers are freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  DecodeContractPlan plan(context.assignment, context.tracing);
  return RunGpuWorkloadPlan(plan, context);
}

}  // namespace gpuprof::workloads
