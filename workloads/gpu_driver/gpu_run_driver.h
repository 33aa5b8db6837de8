// The one run of a GPU workload that every GPU workload shares: device, JIT, memory checks
// before anything is allocated, allocation and fill, the timing loop (measure/), hardware
// metrics under CUPTI, and verification of the output. A workload supplies its plan; the
// driver reports the phases and assembles the result.
#ifndef GPUPROF_WORKLOADS_GPU_DRIVER_GPU_RUN_DRIVER_H_
#define GPUPROF_WORKLOADS_GPU_DRIVER_GPU_RUN_DRIVER_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/device_facts.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "measure/timing_loop.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// What a plan needs in memory, and how to say it when it does not fit.
struct MemoryNeeds {
  int64_t device_bytes = 0;
  // "table 2.00 GiB, output 1.00 GiB"
  std::string device_breakdown;
  int64_t host_bytes = 0;
  // "the table and the reference gather"
  std::string host_purpose;
};

// The work of one timed unit, against which the figures are computed.
struct WorkPerLaunch {
  // Bytes read + bytes written.
  int64_t bytes = 0;
  double flops = 0;
};

// Progress messages of the phases the plan owns.
struct PlanMessages {
  std::string jit;           // "specialising the gather kernel"
  std::string allocation;    // "allocating and filling the table"
  std::string verification;  // "checking against the CPU gather"
};

// One GPU workload's part of a run. Called in this order, on the leased GPU (device 0).
class GpuWorkloadPlan {
 public:
  virtual ~GpuWorkloadPlan() = default;

  virtual PlanMessages messages() const = 0;
  // Chooses and compiles kernels; records result.jit and the launch configuration.
  virtual absl::Status Compile(const gpu::DeviceFacts& device,
                               gpuprof::v1::ExperimentResult& result) = 0;
  virtual MemoryNeeds memory_needs() const = 0;
  // Allocates and fills the inputs; returns the message that ends the allocation phase.
  virtual absl::StatusOr<std::string> Allocate(cudaStream_t stream) = 0;
  virtual WorkPerLaunch work_per_launch() const = 0;
  // Enqueues one timed unit of work; must not synchronise the host.
  virtual absl::Status Launch(cudaStream_t stream) const = 0;
  // After timing: what the result says about the compiled kernels (registers, ...).
  virtual void DescribeKernels(gpuprof::v1::ExperimentResult& result) const = 0;
  // Runs the workload once more and checks its output against a reference.
  virtual absl::Status Verify(cudaStream_t stream, gpuprof::v1::Verification& verification) = 0;

  // ---- Optional. ----

  // How the timing loop waits for the stream; unset: cudaStreamSynchronize. A plan whose
  // launches wait on other ranks gives one that aborts at its deadline.
  virtual std::function<absl::Status(cudaStream_t)> stream_waiter() const { return {}; }
  // Whether CUPTI may replay the launch's kernels for hardware metrics (not when they wait on
  // other processes, which would not replay with them).
  virtual bool kernels_can_be_replayed() const { return true; }
  // After the main timing: parts of the launch timed on their own, into the result.
  virtual absl::Status MeasureParts(const measure::MeasurementSetup& setup, cudaStream_t stream,
                                    const measure::PhaseProgress& progress,
                                    gpuprof::v1::ExperimentResult& result) {
    return absl::OkStatus();
  }
  // After allocation, before any timing: checks of the plan's own (a submitted kernel run on
  // fresh inputs against our reference), recorded in the result. Returns whether the run goes
  // on to timing; false ends it with the result as it stands (a check failed, or only checks
  // were asked for), after DescribeKernels and FinishResult.
  virtual absl::StatusOr<bool> CheckBeforeTiming(cudaStream_t stream,
                                                 const measure::PhaseProgress& progress,
                                                 gpuprof::v1::ExperimentResult& result) {
    return true;
  }
  // The plan's last word on the result, after verification (or after CheckBeforeTiming ended
  // the run).
  virtual void FinishResult(gpuprof::v1::ExperimentResult& result) const {}
  // The spec peak its FLOP/s are a percentage of, called after Compile: the GPU's dense bf16
  // tensor rate unless the plan's element type runs at another.
  virtual double spec_peak_tflops(const gpuprof::v1::GpuInfo& gpu) const {
    return gpu.spec_peak_bf16_tflops();
  }
};

// Runs `plan` on the first leased GPU with the request's measurement options. Fills
// measurement, verification, jit, kernel_config and not_collected; the dispatcher adds
// provenance.
absl::StatusOr<gpuprof::v1::ExperimentResult> RunGpuWorkloadPlan(GpuWorkloadPlan& plan,
                                                                 const RunContext& context);

// The byte sizes of a plan's memory, as its messages print them: "table 2.00 GiB".
std::string DescribeBytes(const std::string& what, int64_t bytes);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_GPU_DRIVER_GPU_RUN_DRIVER_H_
