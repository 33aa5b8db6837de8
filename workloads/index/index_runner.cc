#include "workloads/index/index_runner.h"

#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/byte_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/copy/copy_kernel_config.h"
#include "kernels/copy/copy_kernel_launch.h"
#include "kernels/copy/copy_kernel_params.h"
#include "kernels/copy/copy_reference.h"
#include "workloads/gpu_driver/gpu_run_driver.h"
#include "workloads/gpu_driver/jit_kernel.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// Written over the output before the checked launch: rows the kernel skips keep it.
constexpr int kPoisonByte = 0xa5;

class IndexPlan final : public GpuWorkloadPlan {
 public:
  explicit IndexPlan(const v1::IndexSpec& spec) : spec_(spec) {}

  PlanMessages messages() const override {
    return {.jit = "specialising the gather kernel",
            .allocation = "allocating and filling the table",
            .verification = "checking against the CPU gather"};
  }

  absl::Status Compile(const gpu::DeviceFacts& device, v1::ExperimentResult& result) override {
    ASSIGN_OR_RETURN(element_, ElementTypeOf(spec_.dtype()));
    tokens_ = spec_.num_tokens();
    row_bytes_ = spec_.hidden_dim() * kernels::ElementBytes(element_);
    masked_ = spec_.has_vocab_range();
    vocab_start_ = masked_ ? spec_.vocab_range().start() : 0;
    vocab_end_ = masked_ ? spec_.vocab_range().end() : spec_.vocab_size();
    ASSIGN_OR_RETURN(config_,
                     kernels::ChooseCopyKernelConfig({.kind = kernels::CopyKernelKind::kIndex,
                                                      .row_bytes = row_bytes_,
                                                      .num_tokens = tokens_,
                                                      .num_splits = spec_.num_splits(),
                                                      .threads = spec_.threads(),
                                                      .max_occupancy = spec_.max_occupancy(),
                                                      .use_pdl = spec_.use_pdl(),
                                                      .masked = masked_,
                                                      .sm_count = device.sm_count}));
    ASSIGN_OR_RETURN(const kernels::JitRequest request, kernels::CopyKernelJitRequest(config_));
    ASSIGN_OR_RETURN(gather_, CompileJitKernel(request, device, result));
    return absl::OkStatus();
  }

  MemoryNeeds memory_needs() const override {
    const int64_t table_bytes = (vocab_end_ - vocab_start_) * row_bytes_;
    return {.device_bytes = table_bytes + out_bytes() + ids_bytes(),
            .device_breakdown = absl::StrCat(DescribeBytes("table", table_bytes), ", ",
                                             DescribeBytes("output", out_bytes()), ", ",
                                             DescribeBytes("ids", ids_bytes())),
            .host_bytes = table_bytes + 2 * out_bytes(),
            .host_purpose = "the table and the reference gather"};
  }

  absl::StatusOr<std::string> Allocate(cudaStream_t) override {
    const int64_t table_bytes = (vocab_end_ - vocab_start_) * row_bytes_;
    table_.resize(table_bytes);
    kernels::FillRandomBytes(table_, spec_.seed());
    ids_ = kernels::GenerateTokenIds(tokens_, spec_.vocab_size(), spec_.seed() ^ 0x1d5);
    ASSIGN_OR_RETURN(table_device_, DeviceBuffer::Allocate(table_bytes));
    ASSIGN_OR_RETURN(ids_device_, DeviceBuffer::Allocate(ids_bytes()));
    ASSIGN_OR_RETURN(out_device_, DeviceBuffer::Allocate(out_bytes()));
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(table_device_.data(), table_.data(), table_bytes, cudaMemcpyHostToDevice));
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(ids_device_.data(), ids_.data(), ids_bytes(), cudaMemcpyHostToDevice));
    params_ = {.table = table_device_.data(),
               .ids = ids_device_.data_as<int32_t>(),
               .out = out_device_.data(),
               .num_tokens = tokens_,
               .vocab_start = static_cast<int32_t>(vocab_start_),
               .vocab_end = static_cast<int32_t>(vocab_end_)};
    return absl::StrCat(DescribeBytes("table", table_bytes), ", ",
                        DescribeBytes("output", out_bytes()));
  }

  // Bytes moved: the ids, the rows read (only in-shard rows when masked), the rows written.
  WorkPerLaunch work_per_launch() const override {
    int64_t rows_read = tokens_;
    if (masked_) {
      rows_read = 0;
      for (int32_t id : ids_) rows_read += (id >= vocab_start_ && id < vocab_end_) ? 1 : 0;
    }
    return {.bytes = ids_bytes() + rows_read * row_bytes_ + out_bytes()};
  }

  absl::Status Launch(cudaStream_t stream) const override {
    return kernels::LaunchIndexKernel(gather_, config_, params_, stream);
  }

  void DescribeKernels(v1::ExperimentResult& result) const override {
    AddKernelConfig(kernels::DescribeCopyKernelConfig(config_, tokens_), gather_, result);
  }

  // Poisons the output, runs once, compares with the CPU gather bit for bit.
  absl::Status Verify(cudaStream_t stream, v1::Verification& verification) override {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out_device_.data(), kPoisonByte, out_bytes(), stream));
    RETURN_IF_ERROR(Launch(stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::vector<std::byte> out(out_bytes());
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(out.data(), out_device_.data(), out_bytes(), cudaMemcpyDeviceToHost));
    std::vector<std::byte> expected(out_bytes());
    kernels::ReferenceGather(table_, ids_, row_bytes_, masked_, vocab_start_, vocab_end_,
                             expected);
    const kernels::ComparisonResult compared = kernels::CompareElements(expected, out, element_);
    verification.set_checked(true);
    verification.set_passed(compared.mismatches == 0);
    verification.set_method(
        absl::StrCat("bit-exact comparison with a CPU gather of the same table and ids",
                     masked_ ? " (ids outside the vocabulary range give zero rows)" : "",
                     "; output poisoned before the checked launch"));
    verification.set_mismatches(compared.mismatches);
    verification.set_max_abs_error(compared.max_abs_error);
    if (compared.mismatches == 0) {
      verification.set_message(
          absl::StrFormat("%d of %d elements match", compared.elements, compared.elements));
    } else {
      const int64_t elements_per_row = row_bytes_ / kernels::ElementBytes(element_);
      verification.set_message(absl::StrFormat(
          "%d of %d elements differ; first at token %d, element %d", compared.mismatches,
          compared.elements, compared.first_mismatch / elements_per_row,
          compared.first_mismatch % elements_per_row));
    }
    return absl::OkStatus();
  }

 private:
  int64_t out_bytes() const { return tokens_ * row_bytes_; }
  int64_t ids_bytes() const { return tokens_ * static_cast<int64_t>(sizeof(int32_t)); }

  const v1::IndexSpec& spec_;
  kernels::ElementType element_ = kernels::ElementType::kBFloat16;
  int64_t tokens_ = 0;
  int64_t row_bytes_ = 0;
  bool masked_ = false;
  int64_t vocab_start_ = 0;
  int64_t vocab_end_ = 0;
  kernels::CopyKernelConfig config_;
  kernels::JitKernel gather_;
  std::vector<std::byte> table_;
  std::vector<int32_t> ids_;
  DeviceBuffer table_device_;
  DeviceBuffer ids_device_;
  DeviceBuffer out_device_;
  kernels::IndexKernelParams params_{};
};

}  // namespace

absl::StatusOr<v1::ExperimentResult> RunIndexWorkload(const RunContext& context) {
  // Activated before the plan exists, so that its buffers are freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  IndexPlan plan(context.assignment.request().index());
  return RunGpuWorkloadPlan(plan, context);
}

}  // namespace gpuprof::workloads
