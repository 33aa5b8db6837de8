#include "workloads/index/index_runner.h"

#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/collective.h"
#include "comm/collective_types.h"
#include "comm/nccl_communicator.h"
#include "common/byte_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/copy/copy_kernel_config.h"
#include "kernels/copy/copy_kernel_launch.h"
#include "kernels/copy/copy_kernel_params.h"
#include "kernels/copy/copy_reference.h"
#include "kernels/copy/device_inputs.h"
#include "workloads/gpu_driver/gpu_run_driver.h"
#include "workloads/gpu_driver/rank_group.h"
#include "workloads/gpu_driver/jit_kernel.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// Written over the output before the checked launch: rows the kernel skips keep it.
constexpr int kPoisonByte = 0xa5;

// With tp_degree N > 1 (one worker per rank), the vocabulary-parallel embedding of a
// tensor-parallel serving engine: each rank holds a shard of the table, gathers every token
// with the rows outside its shard reading as zeros, and an all-reduce sums the ranks' outputs
// into the full embedding on every rank.
class IndexPlan final : public GpuWorkloadPlan {
 public:
  IndexPlan(const v1::IndexSpec& spec, const worker_protocol::ExperimentAssignment& assignment)
      : spec_(spec),
        assignment_(assignment),
        host_inputs_(assignment.request().measurement().host_inputs()),
        ranks_(std::max(1, assignment.world_size())),
        deadline_(RankDeadline(assignment)) {}

  PlanMessages messages() const override {
    return {.jit = "specialising the gather kernel",
            .allocation = host_table() ? "allocating and filling the table on the host"
                                       : "allocating and filling the table on the GPU",
            .verification = "checking against the CPU gather"};
  }

  absl::Status Compile(const gpu::DeviceFacts& device, v1::ExperimentResult& result) override {
    ASSIGN_OR_RETURN(element_, ElementTypeOf(spec_.dtype()));
    sm_count_ = device.sm_count;
    tokens_ = spec_.num_tokens();
    row_bytes_ = spec_.hidden_dim() * kernels::ElementBytes(element_);
    masked_ = spec_.has_vocab_range() || ranks_ > 1;
    vocab_start_ = spec_.has_vocab_range() ? spec_.vocab_range().start() : 0;
    vocab_end_ = spec_.has_vocab_range() ? spec_.vocab_range().end() : spec_.vocab_size();
    if (ranks_ > 1) {
      // This rank's shard, as a serving engine splits its vocabulary (the last may be short).
      const int64_t shard = (spec_.vocab_size() + ranks_ - 1) / ranks_;
      vocab_start_ = std::min(spec_.vocab_size(), shard * assignment_.rank());
      vocab_end_ = std::min(spec_.vocab_size(), vocab_start_ + shard);
      ASSIGN_OR_RETURN(communicator_, RankGroupCommunicator(assignment_, deadline_));
      switch (element_) {
        case kernels::ElementType::kFloat32:
          nccl_type_ = ncclFloat32;
          break;
        case kernels::ElementType::kFloat16:
          nccl_type_ = ncclFloat16;
          break;
        case kernels::ElementType::kBFloat16:
          nccl_type_ = ncclBfloat16;
          break;
        default:
          return absl::InvalidArgumentError("index.dtype: tensor parallelism sums fp32, fp16 or bf16");
      }
    }
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
            .host_bytes = (host_table() ? table_bytes : 0) + 2 * out_bytes(),
            .host_purpose = host_table() ? "the table and the reference gather"
                                         : "the output and the reference gather"};
  }

  absl::StatusOr<std::string> Allocate(cudaStream_t stream) override {
    const int64_t table_bytes = (vocab_end_ - vocab_start_) * row_bytes_;
    ids_ = kernels::GenerateTokenIds(tokens_, spec_.vocab_size(), spec_.seed() ^ 0x1d5);
    ASSIGN_OR_RETURN(table_device_, DeviceBuffer::Allocate(table_bytes));
    ASSIGN_OR_RETURN(ids_device_, DeviceBuffer::Allocate(ids_bytes()));
    ASSIGN_OR_RETURN(out_device_, DeviceBuffer::Allocate(out_bytes()));
    if (ranks_ > 1) {
      // Every rank makes the whole table the same way and keeps its shard; the values are small
      // integers, so that the all-reduce's sum (one row plus zeros) is exact and comparable.
      full_table_ = SmallIntegerTable(spec_.vocab_size());
      table_.assign(full_table_.begin() + vocab_start_ * row_bytes_,
                    full_table_.begin() + vocab_end_ * row_bytes_);
    } else if (host_inputs_) {
      table_.resize(table_bytes);
      kernels::FillRandomBytes(table_, spec_.seed());
    } else {
      // The same bytes FillRandomBytes would give, made where they are used.
      RETURN_IF_ERROR(kernels::FillDeviceCounterBytes(table_device_.data(), table_bytes,
                                                      spec_.seed(), sm_count_, stream));
    }
    if (host_table()) {
      CUDA_RETURN_IF_ERROR(
          cudaMemcpy(table_device_.data(), table_.data(), table_bytes, cudaMemcpyHostToDevice));
    }
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(ids_device_.data(), ids_.data(), ids_bytes(), cudaMemcpyHostToDevice));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    params_ = {.table = table_device_.data(),
               .ids = ids_device_.data_as<int32_t>(),
               .out = out_device_.data(),
               .num_tokens = tokens_,
               .vocab_start = static_cast<int32_t>(vocab_start_),
               .vocab_end = static_cast<int32_t>(vocab_end_)};
    return absl::StrCat(DescribeBytes("table", table_bytes),
                        host_table() ? "" : " (filled on the GPU)", ", ",
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
    RETURN_IF_ERROR(kernels::LaunchIndexKernel(gather_, config_, params_, stream));
    return ranks_ > 1 ? AllReduce(stream) : absl::OkStatus();
  }

  std::function<absl::Status(cudaStream_t)> stream_waiter() const override {
    if (ranks_ == 1) return {};
    return [this](cudaStream_t stream) {
      return comm::WaitWithDeadline(*communicator_, stream, deadline_);
    };
  }

  bool kernels_can_be_replayed() const override { return ranks_ == 1; }

  // The gather and the all-reduce, each timed on its own, beside the total.
  absl::Status MeasureParts(const measure::MeasurementSetup& setup, cudaStream_t stream,
                            const measure::PhaseProgress& progress,
                            v1::ExperimentResult& result) override {
    if (ranks_ == 1) return absl::OkStatus();
    auto& config = *result.mutable_kernel_config();
    config["tp_ranks"] = absl::StrCat(ranks_);
    config["tp_vocab_shard"] = absl::StrCat("[", vocab_start_, ", ", vocab_end_, ")");
    config["tp_total_median_us"] =
        absl::StrFormat("%.2f", result.measurement().kernel_time().median_us());
    measure::MeasurementSetup part = setup;
    part.bytes_per_launch = 0;
    const measure::TimedStream gather{
        .stream = stream, .device = 0, .launch = [this](cudaStream_t on) {
          return kernels::LaunchIndexKernel(gather_, config_, params_, on);
        }};
    ASSIGN_OR_RETURN(const measure::MeasurementOutcome gathered,
                     measure::MeasureStreams(part, {&gather, 1}, progress));
    config["tp_gather_median_us"] =
        absl::StrFormat("%.2f", gathered.measurement.kernel_time().median_us());
    const measure::TimedStream reduce{
        .stream = stream, .device = 0,
        .launch = [this](cudaStream_t on) { return AllReduce(on); }};
    ASSIGN_OR_RETURN(const measure::MeasurementOutcome reduced,
                     measure::MeasureStreams(part, {&reduce, 1}, progress));
    config["tp_all_reduce_median_us"] =
        absl::StrFormat("%.2f", reduced.measurement.kernel_time().median_us());
    return absl::OkStatus();
  }

  void DescribeKernels(v1::ExperimentResult& result) const override {
    AddKernelConfig(kernels::DescribeCopyKernelConfig(config_, tokens_), gather_, result);
  }

  // Poisons the output, runs once, compares with the CPU gather bit for bit.
  absl::Status Verify(cudaStream_t stream, v1::Verification& verification) override {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out_device_.data(), kPoisonByte, out_bytes(), stream));
    RETURN_IF_ERROR(Launch(stream));
    if (ranks_ > 1) {
      RETURN_IF_ERROR(comm::WaitWithDeadline(*communicator_, stream, deadline_));
    } else {
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    }
    std::vector<std::byte> out(out_bytes());
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(out.data(), out_device_.data(), out_bytes(), cudaMemcpyDeviceToHost));
    std::vector<std::byte> expected(out_bytes());
    if (ranks_ > 1) {
      // After the all-reduce, every rank holds the whole embedding.
      kernels::ReferenceGather(full_table_, ids_, row_bytes_, /*masked=*/false, 0,
                               spec_.vocab_size(), expected);
    } else if (host_table()) {
      kernels::ReferenceGather(table_, ids_, row_bytes_, masked_, vocab_start_, vocab_end_,
                               expected);
    } else {
      // The rows the ids name, recomputed from the generator that filled the table.
      kernels::ReferenceGatherGenerated(spec_.seed(), ids_, row_bytes_, masked_, vocab_start_,
                                        vocab_end_, expected);
    }
    const kernels::ComparisonResult compared = kernels::CompareElements(expected, out, element_);
    verification.set_checked(true);
    verification.set_passed(compared.mismatches == 0);
    verification.set_method(
        ranks_ > 1
            ? absl::StrCat("bit-exact comparison of the all-reduced output of ", ranks_,
                           " vocabulary shards with a CPU gather of the whole table (small "
                           "integer values, so the sum is exact); output poisoned first")
            : absl::StrCat("bit-exact comparison of the whole output with a CPU gather of ",
                           host_table() ? "the same table (filled on the host)"
                                        : "the rows the ids name, recomputed from the "
                                          "counter-based generator that filled the table on "
                                          "the GPU",
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

  absl::Status AllReduce(cudaStream_t stream) const {
    return communicator_->FinishCall(
        ncclAllReduce(out_device_.data(), out_device_.data(),
                      static_cast<size_t>(out_bytes() / kernels::ElementBytes(element_)),
                      nccl_type_, ncclSum, communicator_->get(), stream),
        "all-reduce of the gathered rows");
  }

  // rows x hidden small integers (1..5) in the element type, the same on every rank.
  std::vector<std::byte> SmallIntegerTable(int64_t rows) const {
    const comm::CollectiveDtype dtype = element_ == kernels::ElementType::kFloat32
                                            ? comm::CollectiveDtype::kFloat32
                                        : element_ == kernels::ElementType::kFloat16
                                            ? comm::CollectiveDtype::kFloat16
                                            : comm::CollectiveDtype::kBfloat16;
    const int64_t element_bytes = kernels::ElementBytes(element_);
    std::vector<std::byte> table(rows * row_bytes_);
    for (int64_t i = 0; i < rows * (row_bytes_ / element_bytes); ++i) {
      comm::EncodeSmallInteger(dtype, static_cast<int>((i * 7 + spec_.seed()) % 5) + 1,
                               table.data() + i * element_bytes);
    }
    return table;
  }
  int64_t ids_bytes() const { return tokens_ * static_cast<int64_t>(sizeof(int32_t)); }
  // Whether the table is made on the host (tensor parallelism's small integers, or asked for).
  bool host_table() const { return ranks_ > 1 || host_inputs_; }

  const v1::IndexSpec& spec_;
  const worker_protocol::ExperimentAssignment& assignment_;
  const bool host_inputs_;
  const int ranks_;
  const absl::Time deadline_;
  int sm_count_ = 0;
  comm::NcclCommunicator* communicator_ = nullptr;
  ncclDataType_t nccl_type_ = ncclBfloat16;
  std::vector<std::byte> full_table_;
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
  IndexPlan plan(context.assignment.request().index(), context.assignment);
  return RunGpuWorkloadPlan(plan, context);
}

}  // namespace gpuprof::workloads
