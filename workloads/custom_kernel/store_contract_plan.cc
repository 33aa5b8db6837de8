#include "workloads/custom_kernel/store_contract_plan.h"

#include <cstddef>
#include <span>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

// The caches hold this byte before each checked launch: slots no token names must keep it.
constexpr int kCacheFillByte = 0x5a;

class StoreContractPlan final : public CustomKernelPlan {
 public:
  StoreContractPlan(const worker_protocol::ExperimentAssignment& assignment,
                     const cupti::TracingSession* tracing)
      : CustomKernelPlan(assignment, tracing), spec_(assignment.request().store()) {}

  MemoryNeeds memory_needs() const override {
    return {.device_bytes = 2 * (cache_bytes() + 2 * kGuardBytes) + 2 * input_bytes() +
                            slots_bytes() + slot_map_bytes(),
            .device_breakdown = absl::StrCat(
                DescribeBytes("K and V caches 2 x", cache_bytes()), ", ",
                DescribeBytes("K and V inputs 2 x", input_bytes()), ", ",
                DescribeBytes("slots", slots_bytes()), ", ",
                DescribeBytes("slot map", slot_map_bytes())),
            .host_bytes = slot_map_bytes() + slots_bytes(),
            .host_purpose = "the slot map of the cache check"};
  }

  // As ours counts a fused store: K and V read and written once each, the slots read once.
  WorkPerLaunch work_per_launch() const override {
    return {.bytes = 4 * input_bytes() + slots_bytes()};
  }

 protected:
  std::string contract_name() const override { return "store"; }

  absl::Status ResolveShape() override {
    if (spec_.launch() == v1::STORE_LAUNCH_SEPARATE_KV) {
      return absl::InvalidArgumentError(
          "store.launch: a custom kernel writes K and V in one launch (the store contract); "
          "leave launch unset or fused");
    }
    ASSIGN_OR_RETURN(element_, ElementTypeOf(spec_.dtype()));
    ASSIGN_OR_RETURN(pattern_, SlotPatternOf(spec_.slot_pattern()));
    element_bytes_ = kernels::ElementBytes(element_);
    row_bytes_ = spec_.num_kv_heads() * spec_.head_dim() * element_bytes_;
    return absl::OkStatus();
  }

  int64_t items() const override { return spec_.num_tokens(); }

  std::vector<std::string> ContractMacros() const override {
    return {absl::StrCat("GPUPROF_ROW_BYTES=", row_bytes_),
            absl::StrCat("GPUPROF_ELEMENT_BYTES=", element_bytes_),
            absl::StrCat("GPUPROF_PAGE_SIZE=", spec_.page_size())};
  }

  absl::StatusOr<std::string> AllocateBuffers(cudaStream_t stream) override {
    ASSIGN_OR_RETURN(k_, AllocateClearedDeviceBuffer(input_bytes()));
    ASSIGN_OR_RETURN(v_, AllocateClearedDeviceBuffer(input_bytes()));
    ASSIGN_OR_RETURN(slots_device_, AllocateClearedDeviceBuffer(slots_bytes()));
    ASSIGN_OR_RETURN(slot_map_device_, AllocateClearedDeviceBuffer(slot_map_bytes()));
    ASSIGN_OR_RETURN(k_cache_, GuardedDeviceBuffer::Allocate(cache_bytes()));
    ASSIGN_OR_RETURN(v_cache_, GuardedDeviceBuffer::Allocate(cache_bytes()));
    return absl::StrCat(DescribeBytes("caches 2 x", cache_bytes()), " between ",
                        DescribeBytes("guards of", kGuardBytes), ", ",
                        DescribeBytes("inputs 2 x", input_bytes()));
  }

  absl::Status FillInputs(uint64_t seed, cudaStream_t stream) override {
    // As our scatter's inputs: the slots of the spec's pattern, K and V from the generator.
    ASSIGN_OR_RETURN(slots_, kernels::GenerateSlots(pattern_, spec_.num_tokens(),
                                                    spec_.cache_slots(), spec_.page_size(),
                                                    seed ^ 0x51075));
    slot_tokens_.assign(spec_.cache_slots(), -1);
    for (int64_t t = 0; t < spec_.num_tokens(); ++t) {
      slot_tokens_[slots_[t]] = static_cast<int32_t>(t);
    }
    RETURN_IF_ERROR(
        kernels::FillDeviceCounterBytes(k_.data(), input_bytes(), k_seed(seed), sm_count(), stream));
    RETURN_IF_ERROR(
        kernels::FillDeviceCounterBytes(v_.data(), input_bytes(), v_seed(seed), sm_count(), stream));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slots_device_.data(), slots_.data(), slots_bytes(),
                                         cudaMemcpyHostToDevice, stream));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot_map_device_.data(), slot_tokens_.data(),
                                         slot_map_bytes(), cudaMemcpyHostToDevice, stream));
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    params_ = {.k = k_.data(),
               .v = v_.data(),
               .k_cache = k_cache_.data(),
               .v_cache = v_cache_.data(),
               .slots = slots_device_.data_as<int>(),
               .num_tokens = spec_.num_tokens(),
               .cache_slots = spec_.cache_slots(),
               .row_bytes = row_bytes_,
               .element_bytes = element_bytes_,
               .page_size = static_cast<int>(spec_.page_size())};
    return absl::OkStatus();
  }

  absl::Status PoisonOutputs(cudaStream_t stream) override {
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(k_cache_.data(), kCacheFillByte, cache_bytes(), stream));
    CUDA_RETURN_IF_ERROR(cudaMemsetAsync(v_cache_.data(), kCacheFillByte, cache_bytes(), stream));
    return absl::OkStatus();
  }

  const void* params() const override { return &params_; }

  // Every slot of both caches, on the GPU (as our scatter's check without host inputs); the
  // first mismatching element's bytes are read back to be named.
  absl::StatusOr<OutputComparison> CompareWithReference(uint64_t seed,
                                                        cudaStream_t stream) override {
    OutputComparison comparison;
    std::vector<std::string> guard_messages;
    for (const auto& [cache, source_seed, name] :
         {std::tuple{&k_cache_, k_seed(seed), "K"}, std::tuple{&v_cache_, v_seed(seed), "V"}}) {
      ASSIGN_OR_RETURN(const kernels::ComparisonResult checked,
                       kernels::CheckScatteredCacheOnDevice(
                           {.cache = cache->data(),
                            .slots = spec_.cache_slots(),
                            .row_bytes = row_bytes_,
                            .element = element_,
                            .slot_tokens = slot_map_device_.data_as<int32_t>(),
                            .source_seed = source_seed,
                            .fill_byte = static_cast<uint8_t>(kCacheFillByte)},
                           sm_count(), stream));
      if (checked.mismatches > 0 && comparison.first_mismatch.empty()) {
        ASSIGN_OR_RETURN(comparison.first_mismatch,
                         DescribeMismatch(*cache, name, source_seed, checked.first_mismatch));
      }
      comparison.elements += checked.elements;
      comparison.mismatches += checked.mismatches;
      ASSIGN_OR_RETURN(const GuardDamage damage, cache->CheckGuards());
      comparison.guard_bytes_overwritten += damage.total();
      const std::string message = DescribeGuardDamage(damage, absl::StrCat("the ", name, " cache"));
      if (!message.empty()) guard_messages.push_back(message);
    }
    comparison.guard_message = absl::StrJoin(guard_messages, "; ");
    return comparison;
  }

  std::string reference_method() const override {
    return "bit-exact check of every slot of both caches on the GPU: each written slot against "
           "its token's row recomputed from the counter-based generator that made the inputs, "
           "every other slot against the fill byte";
  }

  uint64_t timing_seed() const override { return spec_.seed(); }

 private:
  // "token 3 (K cache slot 17), element 5: got 0x..., expected 0x..."
  absl::StatusOr<std::string> DescribeMismatch(const GuardedDeviceBuffer& cache,
                                               const char* name, uint64_t source_seed,
                                               int64_t element) const {
    const int64_t per_row = row_bytes_ / element_bytes_;
    const int64_t slot = element / per_row;
    const int64_t in_row = element % per_row;
    std::vector<std::byte> got(element_bytes_);
    CUDA_RETURN_IF_ERROR(cudaMemcpy(got.data(),
                                    static_cast<const char*>(cache.data()) + element * element_bytes_,
                                    element_bytes_, cudaMemcpyDeviceToHost));
    std::vector<std::byte> expected(element_bytes_, std::byte{kCacheFillByte});
    const int32_t token = slot_tokens_[slot];
    if (token >= 0) {
      kernels::FillCounterBytes(source_seed, token * row_bytes_ + in_row * element_bytes_,
                                std::span<std::byte>(expected));
      return absl::StrFormat("token %d (%s cache slot %d), element %d: got %s, expected %s",
                             token, name, slot, in_row, ElementHex(got.data(), element_bytes_),
                             ElementHex(expected.data(), element_bytes_));
    }
    return absl::StrFormat(
        "%s cache slot %d (no token is stored there, so it must keep its bytes), element %d: "
        "got %s, expected %s",
        name, slot, in_row, ElementHex(got.data(), element_bytes_),
        ElementHex(expected.data(), element_bytes_));
  }

  static uint64_t k_seed(uint64_t seed) { return seed; }
  static uint64_t v_seed(uint64_t seed) { return seed ^ 0x7e11; }
  int64_t input_bytes() const { return spec_.num_tokens() * row_bytes_; }
  int64_t cache_bytes() const { return spec_.cache_slots() * row_bytes_; }
  int64_t slots_bytes() const { return spec_.num_tokens() * static_cast<int64_t>(sizeof(int32_t)); }
  int64_t slot_map_bytes() const {
    return spec_.cache_slots() * static_cast<int64_t>(sizeof(int32_t));
  }

  const v1::StoreSpec& spec_;
  kernels::ElementType element_ = kernels::ElementType::kBFloat16;
  kernels::SlotPattern pattern_ = kernels::SlotPattern::kSequential;
  int element_bytes_ = 2;
  int64_t row_bytes_ = 0;
  std::vector<int32_t> slots_;
  // Per cache slot, the token stored there or -1.
  std::vector<int32_t> slot_tokens_;
  DeviceBuffer k_;
  DeviceBuffer v_;
  DeviceBuffer slots_device_;
  DeviceBuffer slot_map_device_;
  GuardedDeviceBuffer k_cache_;
  GuardedDeviceBuffer v_cache_;
  gpuprof_store_params params_{};
};

}  // namespace

absl::StatusOr<v1::ExperimentResult> RunStoreContractWorkload(const RunContext& context) {
  // Activated before the plan exists, so that its buffers are freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  StoreContractPlan plan(context.assignment, context.tracing);
  return RunGpuWorkloadPlan(plan, context);
}

}  // namespace gpuprof::workloads
