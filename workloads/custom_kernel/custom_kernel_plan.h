// What every contract's run of a submitted kernel shares: NVRTC compilation under the daemon's
// limits with the contract header and the shape macros, loading, the launch shape (block
// threads, items per block, dynamic shared memory), the kernel's resources, occupancy and
// SASS in the result, and the checks: several fresh random inputs before any timing (the run
// ends at the first failure, or after the checks in MODE_TEST), and one more after timing.
// Outputs are poisoned before each checked launch and sit between guard bytes.
//
// A contract (index, store, decode) supplies the shape, buffers, inputs and reference:
//
//   class IndexContractPlan final : public CustomKernelPlan { ... };
//   IndexContractPlan plan(context.assignment);
//   return RunGpuWorkloadPlan(plan, context);
#ifndef GPUPROF_WORKLOADS_CUSTOM_KERNEL_CUSTOM_KERNEL_PLAN_H_
#define GPUPROF_WORKLOADS_CUSTOM_KERNEL_CUSTOM_KERNEL_PLAN_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cupti/tracing_session.h"
#include "gpu/device_facts.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"
#include "kernels/custom/user_kernel_compile.h"
#include "kernels/jit/jit_cache.h"
#include "kernels/jit/jit_module.h"
#include "measure/timing_loop.h"
#include "workloads/custom_kernel/guarded_buffer.h"
#include "workloads/gpu_driver/gpu_run_driver.h"

namespace gpuprof::workloads {

// Fresh random inputs a submitted kernel must get right before it is timed.
inline constexpr int kChecksBeforeTiming = 3;

// How one checked launch's output compared with our reference.
struct OutputComparison {
  int64_t elements = 0;
  int64_t mismatches = 0;
  double max_abs_error = 0;
  // The first mismatching element and its bytes, when there is one:
  // "token 17, element 5: got 0x3f80, expected 0x4000".
  std::string first_mismatch;
  // Guard bytes changed around the outputs, and what that says ("out-of-bounds write: ...").
  int64_t guard_bytes_overwritten = 0;
  std::string guard_message;
};

// An element's bytes as the little-endian number they are: "0x3f80" for a bf16 1.0.
std::string ElementHex(const std::byte* element, int element_bytes);

// How a submitted kernel is launched: CustomKernel's fields with their defaults applied.
struct CustomLaunchShape {
  int block_threads = 256;
  int64_t items_per_block = 1;
  int64_t dynamic_shared_bytes = 0;
};

// The NVRTC request for a submitted kernel under contract `contract_name` ("index"): its source
// and file name, the contract header as <gpuprof/contract.h>, the submitter's options, then
// -D macros: GPUPROF_CONTRACT_<NAME>=1, the launch shape's GPUPROF_BLOCK_THREADS,
// GPUPROF_ITEMS_PER_BLOCK and GPUPROF_DYNAMIC_SHARED_BYTES, and `contract_macros`
// ("GPUPROF_ROW_BYTES=14336"). MODE_PROFILE adds -lineinfo.
kernels::UserKernelCompileRequest MakeUserKernelCompileRequest(
    const gpuprof::v1::CustomKernel& kernel, const std::string& contract_name,
    const CustomLaunchShape& shape, const std::vector<std::string>& contract_macros,
    kernels::GpuArchitecture arch);

class CustomKernelPlan : public GpuWorkloadPlan {
 public:
  // `tracing` (the run's, may be null): in MODE_PROFILE its PC samples are attributed to the
  // kernel's SASS lines.
  explicit CustomKernelPlan(const worker_protocol::ExperimentAssignment& assignment,
                            const cupti::TracingSession* tracing = nullptr);

  PlanMessages messages() const override;
  absl::Status Compile(const gpu::DeviceFacts& device,
                       gpuprof::v1::ExperimentResult& result) final;
  absl::StatusOr<std::string> Allocate(cudaStream_t stream) final;
  absl::Status Launch(cudaStream_t stream) const final;
  absl::StatusOr<bool> CheckBeforeTiming(cudaStream_t stream,
                                         const measure::PhaseProgress& progress,
                                         gpuprof::v1::ExperimentResult& result) final;
  void DescribeKernels(gpuprof::v1::ExperimentResult& result) const final;
  absl::Status Verify(cudaStream_t stream, gpuprof::v1::Verification& verification) final;
  void FinishResult(gpuprof::v1::ExperimentResult& result) const override;

 protected:
  // ---- The contract's part. ----

  // "index": names the contract in messages and in the GPUPROF_CONTRACT_<NAME> macro.
  virtual std::string contract_name() const = 0;
  // Reads the request's spec into the shape every later call uses; called first by Compile.
  virtual absl::Status ResolveShape() = 0;
  // Items of the grid rule (tokens for index and store).
  virtual int64_t items() const = 0;
  // The contract's -D macros ("GPUPROF_ROW_BYTES=14336", ...), beside the launch shape's.
  virtual std::vector<std::string> ContractMacros() const = 0;
  // Allocates every buffer (AllocateClearedDeviceBuffer for inputs, GuardedDeviceBuffer for
  // outputs); returns the allocation phase's closing message.
  virtual absl::StatusOr<std::string> AllocateBuffers(cudaStream_t stream) = 0;
  // Makes the inputs of `seed` (the counter generator) and points the parameters at them.
  virtual absl::Status FillInputs(uint64_t seed, cudaStream_t stream) = 0;
  // Writes the poison over the outputs, before a checked launch.
  virtual absl::Status PoisonOutputs(cudaStream_t stream) = 0;
  // The parameter struct the kernel is launched with.
  virtual const void* params() const = 0;
  // After a checked launch (the stream synchronised): the outputs against our reference for
  // the inputs of `seed`, and the guard bytes.
  virtual absl::StatusOr<OutputComparison> CompareWithReference(uint64_t seed,
                                                                cudaStream_t stream) = 0;
  // What the check compares against ("bit-exact comparison with a CPU gather ...").
  virtual std::string reference_method() const = 0;
  // The inputs that are timed (and checked after timing): the spec's seed.
  virtual uint64_t timing_seed() const = 0;

  // ---- For the contract. ----
  const gpuprof::v1::ExperimentRequest& request() const { return assignment_.request(); }
  const gpuprof::v1::CustomKernel& custom_kernel() const { return request().custom_kernel(); }
  int sm_count() const { return device_.sm_count; }

 private:
  // Fills the inputs of `seed` unless they are there, poisons, launches, waits, compares.
  absl::StatusOr<gpuprof::v1::Verification> RunCheck(uint64_t seed, cudaStream_t stream);
  // Registers, shared memory, occupancy and its limiter into the custom-kernel result.
  void DescribeResources(gpuprof::v1::ExperimentResult& result) const;

  // PC samples per SASS line, when the run's tracing sampled the kernel.
  void AttributeStallsToSass(gpuprof::v1::ExperimentResult& result) const;

  const worker_protocol::ExperimentAssignment& assignment_;
  const cupti::TracingSession* tracing_;
  gpu::DeviceFacts device_;
  int block_threads_ = 256;
  int64_t items_per_block_ = 1;
  int64_t dynamic_shared_bytes_ = 0;
  int64_t blocks_ = 0;
  std::string file_name_;
  kernels::JitKernel kernel_;
  std::optional<uint64_t> inputs_seed_;
  // The check after timing, appended to the result's checks by FinishResult.
  std::optional<gpuprof::v1::Verification> after_timing_;
  int64_t guard_bytes_overwritten_ = 0;
};

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CUSTOM_KERNEL_CUSTOM_KERNEL_PLAN_H_
