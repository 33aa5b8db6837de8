#include "workloads/custom_kernel/index_contract_plan.h"

#include <cstddef>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/copy/copy_reference.h"
#include "kernels/copy/device_inputs.h"
#include "kernels/custom/contract/gpuprof/contract.h"
#include "workloads/custom_kernel/custom_kernel_plan.h"
#include "workloads/gpu_driver/jit_kernel.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// Written over the output before each checked launch (as our gather's check does).
constexpr int kPoisonByte = 0xa5;

class IndexContractPlan final : public CustomKernelPlan {
 public:
  IndexContractPlan(const worker_protocol::ExperimentAssignment& assignment,
                     const cupti::TracingSession* tracing)
      : CustomKernelPlan(assignment, tracing), spec_(assignment.request().index()) {}

  MemoryNeeds memory_needs() const override {
    return {.device_bytes = table_bytes() + ids_bytes() + out_bytes() + 2 * kGuardBytes,
            .device_breakdown = absl::StrCat(DescribeBytes("table", table_bytes()), ", ",
                                             DescribeBytes("output", out_bytes()), ", ",
                                             DescribeBytes("ids", ids_bytes())),
            .host_bytes = 2 * out_bytes() + ids_bytes(),
            .host_purpose = "the output and the reference gather"};
  }

  // As ours counts it: the ids, every row read once, every row written once.
  WorkPerLaunch work_per_launch() const override {
    return {.bytes = ids_bytes() + 2 * out_bytes()};
  }

 protected:
  std::string contract_name() const override { return "index"; }

  absl::Status ResolveShape() override {
    if (spec_.has_vocab_range()) {
      return absl::InvalidArgumentError(
          "index.vocab_range: the index contract gathers from the whole table; a custom kernel "
          "runs without a vocabulary range");
    }
    ASSIGN_OR_RETURN(element_, ElementTypeOf(spec_.dtype()));
    element_bytes_ = kernels::ElementBytes(element_);
    row_bytes_ = spec_.hidden_dim() * element_bytes_;
    return absl::OkStatus();
  }

  int64_t items() const override { return spec_.num_tokens(); }

  std::vector<std::string> ContractMacros() const override {
    return {absl::StrCat("GPUPROF_ROW_BYTES=", row_bytes_),
            absl::StrCat("GPUPROF_ELEMENT_BYTES=", element_bytes_),
            absl::StrCat("GPUPROF_VOCAB_SIZE=", spec_.vocab_size())};
  }

  absl::StatusOr<std::string> AllocateBuffers(cudaStream_t stream) override {
    ASSIGN_OR_RETURN(table_, AllocateClearedDeviceBuffer(table_bytes()));
    ASSIGN_OR_RETURN(ids_device_, AllocateClearedDeviceBuffer(ids_bytes()));
    ASSIGN_OR_RETURN(out_, GuardedDeviceBuffer::Allocate(out_bytes()));
    return absl::StrCat(DescribeBytes("table", table_bytes()), ", ",
                        DescribeBytes("output", out_bytes()), " between ",
                        DescribeBytes("guards of", kGuardBytes));
  }

  absl::Status FillInputs(uint64_t seed, cudaStream_t stream) override {
    // As our gather's inputs: the table from the counter generator, the ids from `seed`.
    ids_ = kernels::GenerateTokenIds(spec_.num_tokens(), spec_.vocab_size(), seed ^ 0x1d5);
    RETURN_IF_ERROR(
        kernels::FillDeviceCounterBytes(table_.data(), table_bytes(), seed, sm_count(), stream));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ids_device_.data(), ids_.data(), ids_bytes(),
                                         cudaMemcpyHostToDevice, stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    params_ = {.table = table_.data(),
               .ids = ids_device_.data_as<int>(),
               .out = out_.data(),
               .num_tokens = spec_.num_tokens(),
               .vocab_size = spec_.vocab_size(),
               .row_bytes = row_bytes_,
               .element_bytes = element_bytes_};
    return absl::OkStatus();
  }

  absl::Status PoisonOutputs(cudaStream_t stream) override {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out_.data(), kPoisonByte, out_bytes(), stream));
    return absl::OkStatus();
  }

  const void* params() const override { return &params_; }

  absl::StatusOr<OutputComparison> CompareWithReference(uint64_t seed,
                                                        cudaStream_t stream) override {
    std::vector<std::byte> out(out_bytes());
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(out.data(), out_.data(), out_bytes(), cudaMemcpyDeviceToHost));
    std::vector<std::byte> expected(out_bytes());
    kernels::ReferenceGatherGenerated(seed, ids_, row_bytes_, /*masked=*/false, 0,
                                      spec_.vocab_size(), expected);
    const kernels::ComparisonResult compared = kernels::CompareElements(expected, out, element_);
    OutputComparison comparison{.elements = compared.elements,
                                .mismatches = compared.mismatches,
                                .max_abs_error = compared.max_abs_error};
    if (compared.mismatches > 0) {
      const int64_t per_row = row_bytes_ / element_bytes_;
      const int64_t at = compared.first_mismatch * element_bytes_;
      comparison.first_mismatch = absl::StrFormat(
          "token %d, element %d: got %s, expected %s", compared.first_mismatch / per_row,
          compared.first_mismatch % per_row, ElementHex(out.data() + at, element_bytes_),
          ElementHex(expected.data() + at, element_bytes_));
    }
    ASSIGN_OR_RETURN(const GuardDamage damage, out_.CheckGuards());
    comparison.guard_bytes_overwritten = damage.total();
    comparison.guard_message = DescribeGuardDamage(damage, "the output");
    return comparison;
  }

  std::string reference_method() const override {
    return "bit-exact comparison of the whole output with a CPU gather of the rows the ids "
           "name, recomputed from the counter-based generator that filled the table";
  }

  uint64_t timing_seed() const override { return spec_.seed(); }

 private:
  int64_t table_bytes() const { return spec_.vocab_size() * row_bytes_; }
  int64_t ids_bytes() const { return spec_.num_tokens() * static_cast<int64_t>(sizeof(int32_t)); }
  int64_t out_bytes() const { return spec_.num_tokens() * row_bytes_; }

  const v1::IndexSpec& spec_;
  kernels::ElementType element_ = kernels::ElementType::kBFloat16;
  int element_bytes_ = 2;
  int64_t row_bytes_ = 0;
  std::vector<int32_t> ids_;
  DeviceBuffer table_;
  DeviceBuffer ids_device_;
  GuardedDeviceBuffer out_;
  gpuprof_index_params params_{};
};

}  // namespace

absl::StatusOr<v1::ExperimentResult> RunIndexContractWorkload(const RunContext& context) {
  // Activated before the plan exists, so that its buffers are freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  IndexContractPlan plan(context.assignment, context.tracing);
  return RunGpuWorkloadPlan(plan, context);
}

}  // namespace gpuprof::workloads
