#include "workloads/attention/attention_runner.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/collective.h"
#include "comm/nccl_communicator.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "kernels/attention/attention_check.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/decode.h"
#include "kernels/attention/decode_tuning.h"
#include "kernels/attention/device_attention_problem.h"
#include "kernels/attention/prefill.h"
#include "kernels/attention/reference.h"
#include "workloads/attention/attention_spec.h"
#include "workloads/gpu_driver/gpu_run_driver.h"
#include "workloads/gpu_driver/rank_group.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// With tp_degree N > 1 (one worker per rank), the heads are split as a tensor-parallel serving
// engine splits them: rank r computes query heads and KV heads [r H/N, (r+1) H/N) of every
// sequence, with no communication inside attention; the ranks agree over NCCL on the slowest
// rank's time, which is the layer's.
class AttentionPlan final : public GpuWorkloadPlan {
 public:
  AttentionPlan(const v1::AttentionSpec& spec,
                const worker_protocol::ExperimentAssignment& assignment)
      : spec_(spec),
        assignment_(assignment),
        ranks_(std::max(1, assignment.world_size())),
        decode_(spec.phase() == v1::ATTENTION_PHASE_DECODE),
        reference_backend_(spec.backend() == v1::ATTENTION_BACKEND_REFERENCE),
        cudnn_backend_(spec.backend() == v1::ATTENTION_BACKEND_CUDNN) {}

  PlanMessages messages() const override {
    return {.jit = absl::StrCat(decode_ ? "decode" : "prefill", " kernels (built ahead of time)"),
            .allocation = "allocating the paged KV cache and filling it",
            .verification = "checking against the fp32 reference on the GPU"};
  }

  absl::Status Compile(const gpu::DeviceFacts& device, v1::ExperimentResult& result) override {
    switch (spec_.dtype()) {
      case v1::DATA_TYPE_BF16:
        shape_.dtype = attention::AttentionDtype::kBf16;
        break;
      case v1::DATA_TYPE_FP16:
        shape_.dtype = attention::AttentionDtype::kFp16;
        break;
      case v1::DATA_TYPE_FP8_E4M3:
        shape_.dtype = attention::AttentionDtype::kFp8E4m3;
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("attention.dtype: got ", EnumShortName(spec_.dtype()),
                         "; must be one of bf16, fp16, fp8-e4m3 (prefill)"));
    }
    // Before any GPU work, the ranks' communicator included.
    RETURN_IF_ERROR(
        CheckAttentionDtypeRunsOn(spec_.dtype(), device.compute_major, device.compute_minor));
    shape_.num_qo_heads = static_cast<int>(spec_.num_qo_heads()) / ranks_;
    shape_.num_kv_heads = static_cast<int>(spec_.num_kv_heads()) / ranks_;
    if (ranks_ > 1) {
      ASSIGN_OR_RETURN(communicator_,
                       RankGroupCommunicator(assignment_, RankDeadline(assignment_)));
    }
    shape_.head_dim = static_cast<int>(spec_.head_dim());
    shape_.page_size = static_cast<int>(spec_.page_size());
    shape_.causal = spec_.causal();
    // Uniform, ragged or drawn from the distribution: the spec says (attention_spec.h).
    const AttentionLengths expanded = ExpandAttentionLengths(spec_);
    for (size_t i = 0; i < expanded.kv_lens.size(); ++i) {
      lengths_.q_lens.push_back(static_cast<int32_t>(expanded.q_lens[i]));
      lengths_.kv_lens.push_back(static_cast<int32_t>(expanded.kv_lens[i]));
      lengths_.num_pages.push_back(
          static_cast<int32_t>((expanded.kv_lens[i] + spec_.page_size() - 1) / spec_.page_size()));
    }
    // cuDNN judges its own head sizes (its refusal carries the reason); ours are instantiated.
    const std::vector<int> cudnn_head_dims = {shape_.head_dim};
    const std::vector<int>& head_dims = cudnn_backend_ ? cudnn_head_dims
                                        : decode_      ? attention::DecodeHeadDims()
                                                       : attention::PrefillHeadDims();
    RETURN_IF_ERROR(attention::ValidateAttentionShape(shape_, head_dims));
    RETURN_IF_ERROR(attention::ValidateSequenceLengths(shape_, lengths_));
    v1::JitInfo& jit = *result.mutable_jit();
    jit.set_kernel(reference_backend_ ? "attention_reference (fp32, exact)"
                   : cudnn_backend_   ? "cuDNN fused attention (graph API)"
                   : decode_          ? "attention_decode + split merge"
                   : fp8()            ? "attention_prefill fp8 e4m3 (wgmma on sm_90a)"
                                      : "attention_prefill (wgmma on sm_90a, mma.sync elsewhere)");
    jit.set_cache_key(cudnn_backend_ ? "cuDNN execution plan, built after allocation"
                                     : "ahead of time (nvcc: sm_80, sm_90, sm_90a)");
    return absl::OkStatus();
  }

  MemoryNeeds memory_needs() const override {
    const int64_t element = attention::DtypeBytes(shape_.dtype);
    const int64_t output_element = attention::OutputDtypeBytes(shape_.dtype);
    const int64_t q_elements = lengths_.total_q() * shape_.num_qo_heads * shape_.head_dim;
    int64_t pages = 0;
    for (int32_t kv_len : lengths_.kv_lens) pages += (kv_len + shape_.page_size - 1) / shape_.page_size;
    const int64_t cache_bytes =
        2 * pages * shape_.page_size * shape_.num_kv_heads * shape_.head_dim * element;
    // Q in the input type, O in its output type (bf16 for fp8), O and the LSEs in fp32 for the
    // reference, the decode's split workspace or the prefill's hand-over workspace.
    const int64_t io_bytes =
        q_elements * (element + output_element + 4) + 8 * lengths_.total_q() * shape_.num_qo_heads;
    const int64_t workspace =
        decode_ ? static_cast<int64_t>(attention::DecodeWorkspaceBytes(
                      shape_, lengths_, attention::kMaxDecodeSplits))
                : static_cast<int64_t>(attention::PrefillWorkspaceBytes(shape_.head_dim));
    return {.device_bytes = cache_bytes + io_bytes + workspace,
            .device_breakdown = absl::StrCat(DescribeBytes("K and V caches", cache_bytes), ", ",
                                             DescribeBytes("Q and outputs", io_bytes), ", ",
                                             DescribeBytes(decode_ ? "split workspace"
                                                                   : "prefill workspace",
                                                           workspace)),
            .host_bytes = 2 * q_elements * 4,
            .host_purpose = "both outputs in fp32 for the comparison"};
  }

  absl::StatusOr<std::string> Allocate(cudaStream_t stream) override {
    ASSIGN_OR_RETURN(problem_, attention::MakeDeviceAttentionProblem(shape_, lengths_, spec_.seed()));
    if (cudnn_backend_) {
      // The plan reads the buffers just allocated; cuDNN's refusal ends the experiment here,
      // with its reason, before anything is timed.
      ASSIGN_OR_RETURN(cudnn_, attention::CudnnAttention::Create(problem_->problem, problem_->layout));
      launch_description_ = cudnn_->info().ToString();
    }
    if (decode_) {
      workspace_bytes_ = attention::DecodeWorkspaceBytes(shape_, problem_->problem.lengths,
                                                         attention::kMaxDecodeSplits);
      ASSIGN_OR_RETURN(workspace_, DeviceBuffer::Allocate(std::max<size_t>(workspace_bytes_, 16)));
    }
    if (decode_ && !cudnn_backend_ && !reference_backend_) {
      // Which decode kernel is fastest differs by GPU (the plan's weights are the H100's): time
      // each on this problem once and run the fastest; the trial is in the result.
      ASSIGN_OR_RETURN(const attention::DecodeTuning tuning,
                       attention::TuneDecodeKernel(problem_->problem, DecodeOptionsFor(), stream));
      decode_options_ = tuning.Apply(DecodeOptionsFor());
      decode_tuning_ = tuning.ToString();
    }
    return absl::StrCat(problem_->layout.num_pages, " pages of ", shape_.page_size, " tokens, ",
                        lengths_.batch(), " sequence(s)");
  }

  WorkPerLaunch work_per_launch() const override {
    const auto& lengths = problem_->problem.lengths;
    return {.bytes = static_cast<int64_t>(attention::AttentionBytes(shape_, lengths)),
            .flops = attention::AttentionFlops(shape_, lengths)};
  }

  absl::Status Launch(cudaStream_t stream) const override {
    if (reference_backend_) {
      return attention::LaunchReferenceAttention(problem_->ReferenceProblem(), stream);
    }
    if (cudnn_backend_) return cudnn_->Run(stream);
    if (decode_) {
      ASSIGN_OR_RETURN(const attention::DecodeLaunchInfo info,
                       attention::LaunchDecode(problem_->problem, decode_options_, stream));
      launch_description_ = info.ToString();
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(const attention::PrefillLaunchInfo info,
                     attention::LaunchPrefill(problem_->problem, stream,
                                              attention::PrefillVariant::kAuto,
                                              problem_->PrefillScratch()));
    launch_description_ = info.ToString();
    return absl::OkStatus();
  }

  // The ranks' medians, gathered over NCCL: the result takes the slowest rank's.
  absl::Status MeasureParts(const measure::MeasurementSetup& setup, cudaStream_t stream,
                            const measure::PhaseProgress& progress,
                            v1::ExperimentResult& result) override {
    if (ranks_ == 1) return absl::OkStatus();
    const absl::Time deadline = RankDeadline(assignment_);
    ASSIGN_OR_RETURN(DeviceBuffer medians, DeviceBuffer::Allocate(sizeof(double) * (1 + ranks_)));
    const double mine = result.measurement().kernel_time().median_us();
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(medians.data(), &mine, sizeof(double),
                                         cudaMemcpyHostToDevice, stream));
    double* all_device = medians.data_as<double>() + 1;
    RETURN_IF_ERROR(communicator_->FinishCall(
        ncclAllGather(medians.data(), all_device, 1, ncclFloat64, communicator_->get(), stream),
        "gathering the ranks' medians"));
    RETURN_IF_ERROR(comm::WaitWithDeadline(*communicator_, stream, deadline));
    std::vector<double> all(ranks_);
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(all.data(), all_device, sizeof(double) * ranks_, cudaMemcpyDeviceToHost));
    const auto slowest = std::max_element(all.begin(), all.end());
    auto& config = *result.mutable_kernel_config();
    config["tp_ranks"] = absl::StrCat(ranks_);
    config["tp_heads_per_rank"] =
        absl::StrCat(shape_.num_qo_heads, " query / ", shape_.num_kv_heads, " KV");
    config["tp_rank_median_us"] = absl::StrJoin(all, ", ", [](std::string* out, double value) {
      absl::StrAppend(out, absl::StrFormat("%.2f", value));
    });
    config["tp_slowest_rank"] = absl::StrCat(slowest - all.begin());
    // The layer takes as long as its slowest rank; this rank's FLOPs and bytes over that time.
    measure::FillBandwidth(setup.bytes_per_launch, *slowest, setup.gpu.spec_peak_bandwidth_gbps(),
                           setup.gpu.measured_copy_bandwidth_gbps(),
                           *result.mutable_measurement());
    measure::FillFlops(setup.flops_per_launch, *slowest, setup.spec_peak_tflops,
                       *result.mutable_measurement());
    result.mutable_measurement()->mutable_kernel_time()->set_median_us(*slowest);
    return absl::OkStatus();
  }

  // Hopper's dense fp8 tensor rate is twice its bf16 rate (fp8 runs on compute capability 9.0
  // only): an fp8 prefill is judged against that.
  double spec_peak_tflops(const v1::GpuInfo& gpu) const override {
    return (fp8() ? 2.0 : 1.0) * gpu.spec_peak_bf16_tflops();
  }

  void DescribeKernels(v1::ExperimentResult& result) const override {
    auto& config = *result.mutable_kernel_config();
    config["phase"] = decode_ ? "decode" : "prefill";
    config["backend"] = EnumShortName(spec_.backend());
    config["launch"] = reference_backend_ ? "one block per (query row, head)" : launch_description_;
    if (!decode_tuning_.empty()) config["decode_tuning"] = decode_tuning_;
    config["group_size"] = absl::StrCat(shape_.group_size());
    config["pages"] = absl::StrCat(problem_->layout.num_pages);
    // The batch as the kernels saw it: ragged and drawn batches differ per sequence.
    auto summary = [](const std::vector<int32_t>& lens) {
      const auto [low, high] = std::minmax_element(lens.begin(), lens.end());
      int64_t sum = 0;
      for (int32_t len : lens) sum += len;
      return *low == *high ? absl::StrCat(*low, " each")
                           : absl::StrCat(*low, "..", *high, " (", sum, " in all)");
    };
    config["sequences"] = absl::StrCat(lengths_.batch(), "; q ", summary(lengths_.q_lens), "; kv ",
                                       summary(lengths_.kv_lens));
    if (fp8()) {
      // The inputs' dequantisation (MakeDeviceAttentionProblem's), for whoever reproduces them.
      const attention::AttentionShape& shape = problem_->problem.shape;
      config["fp8_scales"] = absl::StrFormat(
          "q %g, k %g, v %g (per tensor); output in %s", shape.q_scale, shape.k_scale,
          shape.v_scale, std::string(attention::DtypeName(attention::OutputDtype(shape.dtype))));
      config["peak_flops"] = "fp8 dense tensor rate (2x the bf16 spec peak)";
    }
  }

  absl::Status Verify(cudaStream_t stream, v1::Verification& verification) override {
    const int64_t elements = problem_->problem.lengths.total_q() * shape_.num_qo_heads * shape_.head_dim;
    RETURN_IF_ERROR(attention::PoisonBuffer(problem_->out, stream));
    RETURN_IF_ERROR(attention::PoisonBuffer(problem_->ref_out, stream));
    RETURN_IF_ERROR(attention::LaunchReferenceAttention(problem_->ReferenceProblem(), stream));
    RETURN_IF_ERROR(Launch(stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    ASSIGN_OR_RETURN(const std::vector<float> expected,
                     attention::DownloadAsFloat(problem_->ref_out.data(), elements, shape_.dtype,
                                                /*is_fp32=*/true));
    // The reference backend times the reference itself; its output is then fp32 too.
    ASSIGN_OR_RETURN(const std::vector<float> actual,
                     attention::DownloadAsFloat(
                         reference_backend_ ? problem_->ref_out.data() : problem_->out.data(),
                         elements, attention::OutputDtype(shape_.dtype), reference_backend_));
    const attention::AttentionErrorReport report = attention::CompareAttentionOutputs(
        actual, expected, attention::DefaultTolerance(shape_.dtype));
    verification.set_checked(true);
    verification.set_passed(report.passed);
    verification.set_method(absl::StrFormat(
        "every output element against an exact fp32 attention kernel on the same inputs; "
        "tolerance |a - e| <= %g + %g |e| and relative L2 error <= %g",
        report.tolerance.atol, report.tolerance.rtol, report.tolerance.max_rel_l2));
    verification.set_mismatches(report.mismatches + report.non_finite);
    verification.set_max_abs_error(report.max_abs_error);
    verification.set_message(report.ToString());
    return absl::OkStatus();
  }

 private:
  bool fp8() const { return shape_.dtype == attention::AttentionDtype::kFp8E4m3; }

  // Splits chosen by the plan, into the workspace sized for the most splits.
  attention::DecodeOptions DecodeOptionsFor() const {
    return {.num_splits = 0, .workspace = workspace_.data(), .workspace_bytes = workspace_bytes_};
  }

  const v1::AttentionSpec& spec_;
  const worker_protocol::ExperimentAssignment& assignment_;
  const int ranks_;
  comm::NcclCommunicator* communicator_ = nullptr;
  const bool decode_;
  const bool reference_backend_;
  const bool cudnn_backend_;
  attention::AttentionShape shape_;
  attention::SequenceLengths lengths_;
  std::optional<attention::DeviceAttentionProblem> problem_;
  std::unique_ptr<attention::CudnnAttention> cudnn_;  // after problem_: freed before it
  DeviceBuffer workspace_;
  size_t workspace_bytes_ = 0;
  attention::DecodeOptions decode_options_;  // the tuned kernel and split count
  std::string decode_tuning_;                // each candidate's trial time and the pick
  mutable std::string launch_description_;
};

}  // namespace

absl::StatusOr<v1::ExperimentResult> RunAttentionWorkload(const RunContext& context) {
  // Activated before the plan exists, so that its buffers are freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  AttentionPlan plan(context.assignment.request().attention(), context.assignment);
  return RunGpuWorkloadPlan(plan, context);
}

}  // namespace gpuprof::workloads
