#include "daemon/worker/store_runner.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
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

// The caches start as this byte: slots the kernel must not touch have to keep it.
constexpr int kCacheFillByte = 0x5a;
// The cache is checked in pieces of about this size, so host memory stays small.
constexpr int64_t kVerifyChunkBytes = int64_t{64} << 20;

absl::StatusOr<kernels::SlotPattern> SlotPatternOf(api::SlotPattern pattern) {
  switch (pattern) {
    case api::SLOT_PATTERN_SEQUENTIAL:
      return kernels::SlotPattern::kSequential;
    case api::SLOT_PATTERN_RANDOM:
      return kernels::SlotPattern::kRandom;
    case api::SLOT_PATTERN_SORTED:
      return kernels::SlotPattern::kSorted;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("store.slot_pattern: got ", api::SlotPattern_Name(pattern),
                       "; must be one of sequential, random, sorted"));
  }
}

// Compares one cache on the device with what the scatter must leave there: the token's row
// in each written slot, the fill byte everywhere else.
absl::Status VerifyCache(const DeviceBuffer& cache_device, int64_t cache_slots, int64_t row_bytes,
                         const std::vector<std::pair<int32_t, int64_t>>& slot_to_token,
                         const std::vector<std::byte>& source, kernels::ElementType element,
                         kernels::ComparisonResult& total) {
  const int64_t chunk_rows = std::max<int64_t>(1, kVerifyChunkBytes / row_bytes);
  std::vector<std::byte> actual;
  std::vector<std::byte> expected;
  auto next = slot_to_token.begin();
  const int64_t elements_per_row = row_bytes / kernels::ElementBytes(element);
  for (int64_t first = 0; first < cache_slots; first += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, cache_slots - first);
    actual.resize(rows * row_bytes);
    expected.assign(rows * row_bytes, std::byte{kCacheFillByte});
    CUDA_RETURN_IF_ERROR(cudaMemcpy(actual.data(),
                                    cache_device.data_as<std::byte>() + first * row_bytes,
                                    actual.size(), cudaMemcpyDeviceToHost));
    for (; next != slot_to_token.end() && next->first < first + rows; ++next) {
      std::memcpy(expected.data() + (next->first - first) * row_bytes,
                  source.data() + next->second * row_bytes, row_bytes);
    }
    const kernels::ComparisonResult chunk = kernels::CompareElements(expected, actual, element);
    if (chunk.mismatches > 0 && total.first_mismatch < 0) {
      total.first_mismatch = first * elements_per_row + chunk.first_mismatch;
    }
    total.elements += chunk.elements;
    total.mismatches += chunk.mismatches;
    total.max_abs_error = std::max(total.max_abs_error, chunk.max_abs_error);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<api::ExperimentResult> RunStoreWorkload(const v1::RunExperiment& run,
                                                       const PhaseProgress& progress,
                                                       TracingSession* tracing) {
  if (run.gpus_size() < 1) return absl::FailedPreconditionError("store: no GPU was leased");
  const api::StoreSpec& spec = run.request().store();
  const api::GpuInfo& gpu = run.gpus(0);
  // Declared first so that every buffer below is freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice scoped_device, ScopedCudaDevice::Activate(0));
  ASSIGN_OR_RETURN(const DeviceFacts device, CurrentDeviceFacts());
  ASSIGN_OR_RETURN(const kernels::ElementType element, ElementTypeOf(spec.dtype()));
  ASSIGN_OR_RETURN(const kernels::SlotPattern pattern, SlotPatternOf(spec.slot_pattern()));
  const int64_t tokens = spec.num_tokens();
  const int64_t row_bytes = spec.num_kv_heads() * spec.head_dim() * kernels::ElementBytes(element);
  const int64_t cache_slots = spec.cache_slots();
  const bool fused = spec.launch() != api::STORE_LAUNCH_SEPARATE_KV;
  api::ExperimentResult result;

  progress(api::PHASE_JIT, 0, 2, "specialising the scatter kernel");
  ASSIGN_OR_RETURN(const kernels::CopyKernelConfig config,
                   kernels::ChooseCopyKernelConfig({.kind = kernels::CopyKernelKind::kStore,
                                                    .row_bytes = row_bytes,
                                                    .num_tokens = tokens,
                                                    .use_pdl = spec.use_pdl(),
                                                    .variant = fused,
                                                    .sm_count = device.sm_count}));
  ASSIGN_OR_RETURN(CopyWorkloadKernels jit,
                   CompileCopyWorkloadKernels(config, device.arch, progress, result));
  const WorkloadKernel& scatter = jit.copy;
  const WorkloadKernel& blocker = jit.blocker;

  progress(api::PHASE_ALLOCATION, 0, 1, "allocating the K and V caches");
  const bool cold = run.request().measurement().l2_mode() == api::MeasurementOptions::L2_MODE_COLD;
  const int64_t input_bytes = tokens * row_bytes;
  const int64_t cache_bytes = cache_slots * row_bytes;
  const int64_t slots_bytes = tokens * static_cast<int64_t>(sizeof(int32_t));
  const int64_t flush_bytes = cold ? L2FlushBytes(gpu) : 0;
  ASSIGN_OR_RETURN(const int64_t free_bytes, FreeDeviceMemoryBytes());
  RETURN_IF_ERROR(CheckFitsInFreeMemory(
      "store", 2 * cache_bytes + 2 * input_bytes + slots_bytes + flush_bytes,
      absl::StrCat("K and V caches 2 x ", FormatBytes(cache_bytes), ", K and V inputs 2 x ",
                   FormatBytes(input_bytes), ", slots ", FormatBytes(slots_bytes),
                   cold ? absl::StrCat(", L2 flush ", FormatBytes(flush_bytes)) : ""),
      free_bytes, gpu.index()));
  RETURN_IF_ERROR(CheckFitsInHostMemory("store", 2 * input_bytes + 2 * kVerifyChunkBytes,
                                        "the K and V inputs and the cache check"));
  ASSIGN_OR_RETURN(const std::vector<int32_t> slots,
                   kernels::GenerateSlots(pattern, tokens, cache_slots, spec.page_size(),
                                          spec.seed() ^ 0x51075));
  std::vector<std::byte> k(input_bytes);
  std::vector<std::byte> v(input_bytes);
  kernels::FillRandomBytes(k, spec.seed());
  kernels::FillRandomBytes(v, spec.seed() ^ 0x7e11);
  ASSIGN_OR_RETURN(DeviceBuffer k_device, DeviceBuffer::Allocate(input_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer v_device, DeviceBuffer::Allocate(input_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer k_cache_device, DeviceBuffer::Allocate(cache_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer v_cache_device, DeviceBuffer::Allocate(cache_bytes));
  ASSIGN_OR_RETURN(DeviceBuffer slots_device, DeviceBuffer::Allocate(slots_bytes));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(k_device.data(), k.data(), input_bytes, cudaMemcpyHostToDevice));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(v_device.data(), v.data(), input_bytes, cudaMemcpyHostToDevice));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(slots_device.data(), slots.data(), slots_bytes, cudaMemcpyHostToDevice));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
  progress(api::PHASE_ALLOCATION, 1, 1,
           absl::StrCat("caches 2 x ", FormatBytes(cache_bytes), ", inputs 2 x ",
                        FormatBytes(input_bytes)));

  const kernels::StoreKernelParams params{.k = k_device.data(),
                                          .v = v_device.data(),
                                          .k_cache = k_cache_device.data(),
                                          .v_cache = v_cache_device.data(),
                                          .slots = slots_device.data_as<int32_t>(),
                                          .num_tokens = tokens};
  auto launch = [&](cudaStream_t on) {
    return kernels::LaunchStoreKernel(scatter.kernel, config, params, on);
  };
  // Bytes moved: K and V read and written once each; the slots read once per launch.
  const int launches = fused ? 1 : 2;
  MeasurementSetup setup{.options = run.request().measurement(),
                         .bytes_per_launch = 4 * input_bytes + launches * slots_bytes,
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
  AddCopyKernelConfig(config, tokens, scatter.kernel, result);
  (*result.mutable_kernel_config())["launches_per_store"] = absl::StrCat(launches);
  (*result.mutable_kernel_config())["page_size"] = absl::StrCat(spec.page_size());
  (*result.mutable_kernel_config())["slot_pattern"] =
      absl::AsciiStrToLower(api::SlotPattern_Name(spec.slot_pattern()).substr(13));

  // Verification: refill the caches, scatter once, compare every slot of both caches.
  progress(api::PHASE_VERIFICATION, 0, 1, "checking both caches against the CPU scatter");
  CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(k_cache_device.data(), kCacheFillByte, cache_bytes, stream.get()));
  CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(v_cache_device.data(), kCacheFillByte, cache_bytes, stream.get()));
  RETURN_IF_ERROR(launch(stream.get()));
  RETURN_IF_ERROR(stream.Synchronize());
  std::vector<std::pair<int32_t, int64_t>> slot_to_token(tokens);
  for (int64_t t = 0; t < tokens; ++t) slot_to_token[t] = {slots[t], t};
  std::sort(slot_to_token.begin(), slot_to_token.end());
  kernels::ComparisonResult compared;
  RETURN_IF_ERROR(
      VerifyCache(k_cache_device, cache_slots, row_bytes, slot_to_token, k, element, compared));
  RETURN_IF_ERROR(
      VerifyCache(v_cache_device, cache_slots, row_bytes, slot_to_token, v, element, compared));
  api::Verification& verification = *result.mutable_verification();
  verification.set_checked(true);
  verification.set_passed(compared.mismatches == 0);
  verification.set_method(
      "bit-exact comparison of every slot of both caches with a CPU scatter of the same inputs "
      "and slots (untouched slots must keep the fill byte)");
  verification.set_mismatches(compared.mismatches);
  verification.set_max_abs_error(compared.max_abs_error);
  verification.set_message(
      compared.mismatches == 0
          ? absl::StrFormat("%d of %d elements match", compared.elements, compared.elements)
          : absl::StrFormat("%d of %d elements differ; first at element %d of the caches",
                            compared.mismatches, compared.elements, compared.first_mismatch));
  progress(api::PHASE_VERIFICATION, 1, 1, verification.passed() ? "passed" : "FAILED");
  return result;
}

}  // namespace gpuprof::worker
