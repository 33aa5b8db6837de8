#include "daemon/worker/index_runner.h"

#include <cstddef>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "daemon/worker/copy_workload_kernels.h"
#include "kernels/copy_kernel_config.h"
#include "kernels/copy_kernel_launch.h"
#include "kernels/copy_reference.h"
#include "kernels/jit_cache.h"
#include "kernels/kernel_params.h"

namespace gpuprof::worker {
namespace {

namespace api = ::gpuprof::v1;

// Written over the output before the checked launch: rows the kernel skips keep it.
constexpr int kPoisonByte = 0xa5;

}  // namespace

absl::StatusOr<api::ExperimentResult> RunIndexWorkload(const v1::RunExperiment& run,
                                                       const PhaseProgress& progress,
                                                       TracingSession* tracing) {
  if (run.gpus_size() < 1) return absl::FailedPreconditionError("index: no GPU was leased");
  const api::IndexSpec& spec = run.request().index();
  const api::GpuInfo& gpu = run.gpus(0);
  // Declared first so that every buffer below is freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice scoped_device, ScopedCudaDevice::Activate(0));
  ASSIGN_OR_RETURN(const DeviceFacts device, CurrentDeviceFacts());
  ASSIGN_OR_RETURN(const kernels::ElementType element, ElementTypeOf(spec.dtype()));
  const int64_t tokens = spec.num_tokens();
  const int64_t row_bytes = spec.hidden_dim() * kernels::ElementBytes(element);
  const bool masked = spec.has_vocab_range();
  const int64_t vocab_start = masked ? spec.vocab_range().start() : 0;
  const int64_t vocab_end = masked ? spec.vocab_range().end() : spec.vocab_size();
  const int64_t table_rows = vocab_end - vocab_start;
  api::ExperimentResult result;

  // JIT: the gather specialised for this row size and launch shape, and the stream blocker.
  progress(api::PHASE_JIT, 0, 2, "specialising the gather kernel");
  ASSIGN_OR_RETURN(const kernels::CopyKernelConfig config,
                   kernels::ChooseCopyKernelConfig({.kind = kernels::CopyKernelKind::kIndex,
                                                    .row_bytes = row_bytes,
                                                    .num_tokens = tokens,
                                                    .num_splits = spec.num_splits(),
                                                    .threads = spec.threads(),
                                                    .max_occupancy = spec.max_occupancy(),
                                                    .use_pdl = spec.use_pdl(),
                                                    .variant = masked,
                                                    .sm_count = device.sm_count}));
  ASSIGN_OR_RETURN(CopyWorkloadKernels jit,
                   CompileCopyWorkloadKernels(config, device.arch, progress, result));
  const WorkloadKernel& gather = jit.copy;
  const WorkloadKernel& blocker = jit.blocker;

  // Allocation: refuse what does not fit before taking any of it.
  progress(api::PHASE_ALLOCATION, 0, 1, "allocating and filling the table");
  const bool cold = run.request().measurement().l2_mode() == api::MeasurementOptions::L2_MODE_COLD;
  const int64_t table_bytes = table_rows * row_bytes;
  const int64_t out_bytes = tokens * row_bytes;
  const int64_t ids_bytes = tokens * static_cast<int64_t>(sizeof(int32_t));
  const int64_t flush_bytes = cold ? L2FlushBytes(gpu) : 0;
  ASSIGN_OR_RETURN(const int64_t free_bytes, FreeDeviceMemoryBytes());
  RETURN_IF_ERROR(CheckFitsInFreeMemory(
      "index", table_bytes + out_bytes + ids_bytes + flush_bytes,
      absl::StrCat("table ", FormatBytes(table_bytes), ", output ", FormatBytes(out_bytes),
                   ", ids ", FormatBytes(ids_bytes),
                   cold ? absl::StrCat(", L2 flush ", FormatBytes(flush_bytes)) : ""),
      free_bytes, gpu.index()));
  RETURN_IF_ERROR(CheckFitsInHostMemory("index", table_bytes + 2 * out_bytes,
                                        "the table and the reference gather"));
  std::vector<std::byte> table(table_bytes);
  kernels::FillRandomBytes(table, spec.seed());
  const std::vector<int32_t> ids =
      kernels::GenerateTokenIds(tokens, spec.vocab_size(), spec.seed() ^ 0x1d5);
  ASSIGN_OR_RETURN(DeviceBuffer table_device, DeviceBuffer::Allocate(table_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer ids_device, DeviceBuffer::Allocate(ids_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer out_device, DeviceBuffer::Allocate(out_bytes));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(table_device.data(), table.data(), table_bytes, cudaMemcpyHostToDevice));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(ids_device.data(), ids.data(), ids_bytes, cudaMemcpyHostToDevice));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
  progress(api::PHASE_ALLOCATION, 1, 1,
           absl::StrCat("table ", FormatBytes(table_bytes), ", output ", FormatBytes(out_bytes)));

  const kernels::IndexKernelParams params{.table = table_device.data(),
                                          .ids = ids_device.data_as<int32_t>(),
                                          .out = out_device.data(),
                                          .num_tokens = tokens,
                                          .vocab_start = static_cast<int32_t>(vocab_start),
                                          .vocab_end = static_cast<int32_t>(vocab_end)};
  auto launch = [&](cudaStream_t on) {
    return kernels::LaunchIndexKernel(gather.kernel, config, params, on);
  };

  // Bytes moved: the ids, the rows read (only in-shard rows when masked), the rows written.
  int64_t rows_read = tokens;
  if (masked) {
    rows_read = 0;
    for (int32_t id : ids) rows_read += (id >= vocab_start && id < vocab_end) ? 1 : 0;
  }
  MeasurementSetup setup{.options = run.request().measurement(),
                         .bytes_per_launch = ids_bytes + rows_read * row_bytes + out_bytes,
                         .gpu = gpu};
  ASSIGN_OR_RETURN(MeasurementOutcome outcome,
                   MeasureGpuWorkload(setup, launch, &blocker.kernel, stream.get(), progress));
  *result.mutable_measurement() = outcome.measurement;
  if (tracing != nullptr) {
    RETURN_IF_ERROR(tracing->ProfileKernels([&]() -> absl::Status {
      RETURN_IF_ERROR(launch(stream.get()));
      return CudaStatus(cudaStreamSynchronize(stream.get()), "cudaStreamSynchronize");
    }));
  }
  for (const std::string& note : outcome.not_collected) result.add_not_collected(note);
  AddCopyKernelConfig(config, tokens, gather.kernel, result);

  // Verification: poison the output, run once, compare with the CPU gather bit for bit.
  progress(api::PHASE_VERIFICATION, 0, 1, "checking against the CPU gather");
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(out_device.data(), kPoisonByte, out_bytes, stream.get()));
  RETURN_IF_ERROR(launch(stream.get()));
  RETURN_IF_ERROR(stream.Synchronize());
  std::vector<std::byte> out(out_bytes);
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(out.data(), out_device.data(), out_bytes, cudaMemcpyDeviceToHost));
  std::vector<std::byte> expected(out_bytes);
  kernels::ReferenceGather(table, ids, row_bytes, masked, vocab_start, vocab_end, expected);
  const kernels::ComparisonResult compared = kernels::CompareElements(expected, out, element);
  api::Verification& verification = *result.mutable_verification();
  verification.set_checked(true);
  verification.set_passed(compared.mismatches == 0);
  verification.set_method(
      absl::StrCat("bit-exact comparison with a CPU gather of the same table and ids",
                   masked ? " (ids outside the vocabulary range give zero rows)" : "",
                   "; output poisoned before the checked launch"));
  verification.set_mismatches(compared.mismatches);
  verification.set_max_abs_error(compared.max_abs_error);
  if (compared.mismatches == 0) {
    verification.set_message(
        absl::StrFormat("%d of %d elements match", compared.elements, compared.elements));
  } else {
    const int64_t elements_per_row = row_bytes / kernels::ElementBytes(element);
    verification.set_message(absl::StrFormat(
        "%d of %d elements differ; first at token %d, element %d", compared.mismatches,
        compared.elements, compared.first_mismatch / elements_per_row,
        compared.first_mismatch % elements_per_row));
  }
  progress(api::PHASE_VERIFICATION, 1, 1, verification.passed() ? "passed" : "FAILED");
  return result;
}

}  // namespace gpuprof::worker
