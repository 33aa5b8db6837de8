#include "workloads/store/store_runner.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/enum_names.h"
#include "common/status_macros.h"
#include "kernels/copy/copy_kernel_config.h"
#include "kernels/copy/copy_kernel_launch.h"
#include "kernels/copy/copy_kernel_params.h"
#include "kernels/copy/copy_reference.h"
#include "kernels/copy/device_inputs.h"
#include "workloads/gpu_driver/gpu_run_driver.h"
#include "workloads/gpu_driver/jit_kernel.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// The caches start as this byte: slots the kernel must not touch have to keep it.
constexpr int kCacheFillByte = 0x5a;
// The cache is checked in pieces of about this size, so host memory stays small.
constexpr int64_t kVerifyChunkBytes = int64_t{64} << 20;

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

class StorePlan final : public GpuWorkloadPlan {
 public:
  StorePlan(const v1::StoreSpec& spec, bool host_inputs)
      : spec_(spec), host_inputs_(host_inputs) {}

  PlanMessages messages() const override {
    return {.jit = "specialising the scatter kernel",
            .allocation = "allocating the K and V caches",
            .verification = host_inputs_ ? "checking both caches against the CPU scatter"
                                         : "checking both caches on the GPU"};
  }

  absl::Status Compile(const gpu::DeviceFacts& device, v1::ExperimentResult& result) override {
    ASSIGN_OR_RETURN(element_, ElementTypeOf(spec_.dtype()));
    sm_count_ = device.sm_count;
    ASSIGN_OR_RETURN(pattern_, SlotPatternOf(spec_.slot_pattern()));
    tokens_ = spec_.num_tokens();
    row_bytes_ = spec_.num_kv_heads() * spec_.head_dim() * kernels::ElementBytes(element_);
    fused_ = spec_.launch() != v1::STORE_LAUNCH_SEPARATE_KV;
    ASSIGN_OR_RETURN(config_,
                     kernels::ChooseCopyKernelConfig({.kind = kernels::CopyKernelKind::kStore,
                                                      .row_bytes = row_bytes_,
                                                      .num_tokens = tokens_,
                                                      .use_pdl = spec_.use_pdl(),
                                                      .fused_kv = fused_,
                                                      .sm_count = device.sm_count}));
    ASSIGN_OR_RETURN(const kernels::JitRequest request, kernels::CopyKernelJitRequest(config_));
    ASSIGN_OR_RETURN(scatter_, CompileJitKernel(request, device, result));
    return absl::OkStatus();
  }

  MemoryNeeds memory_needs() const override {
    const int64_t check_bytes = host_inputs_ ? 0 : slot_map_bytes();
    return {.device_bytes = 2 * cache_bytes() + 2 * input_bytes() + slots_bytes() + check_bytes,
            .device_breakdown = absl::StrCat(
                DescribeBytes("K and V caches 2 x", cache_bytes()), ", ",
                DescribeBytes("K and V inputs 2 x", input_bytes()), ", ",
                DescribeBytes("slots", slots_bytes()),
                host_inputs_ ? "" : absl::StrCat(", ", DescribeBytes("slot map", check_bytes))),
            .host_bytes = host_inputs_ ? 2 * input_bytes() + 2 * kVerifyChunkBytes
                                       : slot_map_bytes(),
            .host_purpose = host_inputs_ ? "the K and V inputs and the cache check"
                                         : "the slot map of the cache check"};
  }

  absl::StatusOr<std::string> Allocate(cudaStream_t stream) override {
    ASSIGN_OR_RETURN(slots_, kernels::GenerateSlots(pattern_, tokens_, spec_.cache_slots(),
                                                    spec_.page_size(), spec_.seed() ^ 0x51075));
    ASSIGN_OR_RETURN(k_device_, DeviceBuffer::Allocate(input_bytes()));
    ASSIGN_OR_RETURN(v_device_, DeviceBuffer::Allocate(input_bytes()));
    ASSIGN_OR_RETURN(k_cache_device_, DeviceBuffer::Allocate(cache_bytes()));
    ASSIGN_OR_RETURN(v_cache_device_, DeviceBuffer::Allocate(cache_bytes()));
    ASSIGN_OR_RETURN(slots_device_, DeviceBuffer::Allocate(slots_bytes()));
    if (host_inputs_) {
      k_.resize(input_bytes());
      v_.resize(input_bytes());
      kernels::FillRandomBytes(k_, k_seed());
      kernels::FillRandomBytes(v_, v_seed());
      CUDA_RETURN_IF_ERROR(
          cudaMemcpy(k_device_.data(), k_.data(), input_bytes(), cudaMemcpyHostToDevice));
      CUDA_RETURN_IF_ERROR(
          cudaMemcpy(v_device_.data(), v_.data(), input_bytes(), cudaMemcpyHostToDevice));
    } else {
      // The same bytes as the host fill, made where they are used.
      RETURN_IF_ERROR(kernels::FillDeviceCounterBytes(k_device_.data(), input_bytes(), k_seed(),
                                                      sm_count_, stream));
      RETURN_IF_ERROR(kernels::FillDeviceCounterBytes(v_device_.data(), input_bytes(), v_seed(),
                                                      sm_count_, stream));
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    }
    CUDA_RETURN_IF_ERROR(
        cudaMemcpy(slots_device_.data(), slots_.data(), slots_bytes(), cudaMemcpyHostToDevice));
    params_ = {.k = k_device_.data(),
               .v = v_device_.data(),
               .k_cache = k_cache_device_.data(),
               .v_cache = v_cache_device_.data(),
               .slots = slots_device_.data_as<int32_t>(),
               .num_tokens = tokens_};
    return absl::StrCat(DescribeBytes("caches 2 x", cache_bytes()), ", ",
                        DescribeBytes("inputs 2 x", input_bytes()));
  }

  // Bytes moved: K and V read and written once each; the slots read once per launch.
  WorkPerLaunch work_per_launch() const override {
    return {.bytes = 4 * input_bytes() + launches() * slots_bytes()};
  }

  absl::Status Launch(cudaStream_t stream) const override {
    return kernels::LaunchStoreKernel(scatter_, config_, params_, stream);
  }

  void DescribeKernels(v1::ExperimentResult& result) const override {
    AddKernelConfig(kernels::DescribeCopyKernelConfig(config_, tokens_), scatter_, result);
    auto& kernel_config = *result.mutable_kernel_config();
    kernel_config["launches_per_store"] = absl::StrCat(launches());
    kernel_config["page_size"] = absl::StrCat(spec_.page_size());
    kernel_config["slot_pattern"] = EnumShortName(spec_.slot_pattern());
  }

  // Refills the caches, scatters once, compares every slot of both caches.
  absl::Status Verify(cudaStream_t stream, v1::Verification& verification) override {
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(k_cache_device_.data(), kCacheFillByte, cache_bytes(), stream));
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(v_cache_device_.data(), kCacheFillByte, cache_bytes(), stream));
    RETURN_IF_ERROR(Launch(stream));
    kernels::ComparisonResult compared;
    if (host_inputs_) {
      CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      std::vector<std::pair<int32_t, int64_t>> slot_to_token(tokens_);
      for (int64_t t = 0; t < tokens_; ++t) slot_to_token[t] = {slots_[t], t};
      std::sort(slot_to_token.begin(), slot_to_token.end());
      RETURN_IF_ERROR(VerifyCache(k_cache_device_, spec_.cache_slots(), row_bytes_,
                                  slot_to_token, k_, element_, compared));
      RETURN_IF_ERROR(VerifyCache(v_cache_device_, spec_.cache_slots(), row_bytes_,
                                  slot_to_token, v_, element_, compared));
    } else {
      RETURN_IF_ERROR(CheckCachesOnDevice(stream, compared));
    }
    verification.set_checked(true);
    verification.set_passed(compared.mismatches == 0);
    verification.set_method(
        host_inputs_
            ? "bit-exact comparison of every slot of both caches, copied back, with a CPU "
              "scatter of the same inputs and slots (untouched slots must keep the fill byte)"
            : "bit-exact check of every slot of both caches on the GPU: each written slot "
              "against its token's row recomputed from the counter-based generator that made "
              "the inputs, every other slot against the fill byte");
    verification.set_mismatches(compared.mismatches);
    verification.set_max_abs_error(compared.max_abs_error);
    verification.set_message(
        compared.mismatches == 0
            ? absl::StrFormat("%d of %d elements match", compared.elements, compared.elements)
            : absl::StrFormat("%d of %d elements differ; first at element %d of the caches",
                              compared.mismatches, compared.elements, compared.first_mismatch));
    return absl::OkStatus();
  }

 private:
  // Both caches checked where they are: a map from slot to token, then one pass per cache.
  absl::Status CheckCachesOnDevice(cudaStream_t stream, kernels::ComparisonResult& total) const {
    std::vector<int32_t> slot_tokens(spec_.cache_slots(), -1);
    for (int64_t t = 0; t < tokens_; ++t) slot_tokens[slots_[t]] = static_cast<int32_t>(t);
    ASSIGN_OR_RETURN(DeviceBuffer slot_map, DeviceBuffer::Allocate(slot_map_bytes()));
    CUDA_RETURN_IF_ERROR(cudaMemcpy(slot_map.data(), slot_tokens.data(), slot_map_bytes(),
                                    cudaMemcpyHostToDevice));
    const int64_t elements_per_cache =
        spec_.cache_slots() * (row_bytes_ / kernels::ElementBytes(element_));
    for (const auto& [cache, seed, first_element] :
         {std::tuple{&k_cache_device_, k_seed(), int64_t{0}},
          std::tuple{&v_cache_device_, v_seed(), elements_per_cache}}) {
      ASSIGN_OR_RETURN(const kernels::ComparisonResult checked,
                       kernels::CheckScatteredCacheOnDevice(
                           {.cache = cache->data(),
                            .slots = spec_.cache_slots(),
                            .row_bytes = row_bytes_,
                            .element = element_,
                            .slot_tokens = slot_map.data_as<int32_t>(),
                            .source_seed = seed,
                            .fill_byte = static_cast<uint8_t>(kCacheFillByte)},
                           sm_count_, stream));
      if (checked.mismatches > 0 && total.first_mismatch < 0) {
        total.first_mismatch = first_element + checked.first_mismatch;
      }
      total.elements += checked.elements;
      total.mismatches += checked.mismatches;
    }
    return absl::OkStatus();
  }

  uint64_t k_seed() const { return spec_.seed(); }
  uint64_t v_seed() const { return spec_.seed() ^ 0x7e11; }
  int64_t slot_map_bytes() const {
    return spec_.cache_slots() * static_cast<int64_t>(sizeof(int32_t));
  }
  int64_t input_bytes() const { return tokens_ * row_bytes_; }
  int64_t cache_bytes() const { return spec_.cache_slots() * row_bytes_; }
  int64_t slots_bytes() const { return tokens_ * static_cast<int64_t>(sizeof(int32_t)); }
  int launches() const { return fused_ ? 1 : 2; }

  const v1::StoreSpec& spec_;
  const bool host_inputs_;
  int sm_count_ = 0;
  kernels::ElementType element_ = kernels::ElementType::kBFloat16;
  kernels::SlotPattern pattern_ = kernels::SlotPattern::kSequential;
  int64_t tokens_ = 0;
  int64_t row_bytes_ = 0;
  bool fused_ = true;
  kernels::CopyKernelConfig config_;
  kernels::JitKernel scatter_;
  std::vector<int32_t> slots_;
  std::vector<std::byte> k_;
  std::vector<std::byte> v_;
  DeviceBuffer k_device_;
  DeviceBuffer v_device_;
  DeviceBuffer k_cache_device_;
  DeviceBuffer v_cache_device_;
  DeviceBuffer slots_device_;
  kernels::StoreKernelParams params_{};
};

}  // namespace

absl::StatusOr<v1::ExperimentResult> RunStoreWorkload(const RunContext& context) {
  // Activated before the plan exists, so that its buffers are freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  StorePlan plan(context.assignment.request().store(),
                 context.assignment.request().measurement().host_inputs());
  return RunGpuWorkloadPlan(plan, context);
}

}  // namespace gpuprof::workloads
