#include "workloads/gpu_driver/gpu_run_driver.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/byte_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "measure/l2_flush.h"
#include "measure/timing_loop.h"
#include "workloads/spec_table.h"

namespace gpuprof::workloads {

namespace v1 = ::gpuprof::v1;

std::string DescribeBytes(const std::string& what, int64_t bytes) {
  return absl::StrCat(what, " ", FormatBinaryBytes(bytes));
}

absl::StatusOr<v1::ExperimentResult> RunGpuWorkloadPlan(GpuWorkloadPlan& plan,
                                                        const RunContext& context) {
  const auto& assignment = context.assignment;
  const std::string name = WorkloadName(assignment.request());
  if (assignment.gpus_size() < 1) {
    return absl::FailedPreconditionError(absl::StrCat(name, ": no GPU was leased"));
  }
  const v1::GpuInfo& gpu = assignment.gpus(0);
  const v1::MeasurementOptions& options = assignment.request().measurement();
  const PlanMessages messages = plan.messages();
  // Declared first so that every buffer of the plan is freed while the device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice scoped_device, ScopedCudaDevice::Activate(0));
  ASSIGN_OR_RETURN(const gpu::DeviceFacts device, gpu::CurrentDeviceFacts());
  v1::ExperimentResult result;

  context.progress(v1::PHASE_JIT, 0, 1, messages.jit);
  RETURN_IF_ERROR(plan.Compile(device, result));
  const v1::JitInfo& jit = result.jit();
  context.progress(v1::PHASE_JIT, 1, 1,
                   jit.cache_hit()          ? absl::StrCat("cache hit: ", jit.cache_key())
                   : jit.compile_ms() > 0   ? absl::StrFormat("compiled in %.1f ms", jit.compile_ms())
                                            : jit.cache_key());

  // Allocation: refuse what does not fit before taking any of it.
  context.progress(v1::PHASE_ALLOCATION, 0, 1, messages.allocation);
  const MemoryNeeds needs = plan.memory_needs();
  const bool cold = options.l2_mode() == v1::MeasurementOptions::L2_MODE_COLD;
  const int64_t flush_bytes = cold ? measure::L2FlushBytes(gpu) : 0;
  ASSIGN_OR_RETURN(const int64_t free_bytes, gpu::FreeDeviceMemoryBytes());
  RETURN_IF_ERROR(gpu::CheckFitsInFreeMemory(
      name, needs.device_bytes + flush_bytes,
      absl::StrCat(needs.device_breakdown, cold ? absl::StrCat(", ", DescribeBytes("L2 flush",
                                                                                    flush_bytes))
                                                : ""),
      free_bytes, gpu.index()));
  RETURN_IF_ERROR(gpu::CheckFitsInHostMemory(name, needs.host_bytes, needs.host_purpose));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
  ASSIGN_OR_RETURN(const std::string allocated, plan.Allocate(stream.get()));
  context.progress(v1::PHASE_ALLOCATION, 1, 1, allocated);
  ASSIGN_OR_RETURN(const bool go_on_to_timing,
                   plan.CheckBeforeTiming(stream.get(), context.progress, result));
  if (!go_on_to_timing) {
    plan.DescribeKernels(result);
    plan.FinishResult(result);
    return result;
  }

  const WorkPerLaunch work = plan.work_per_launch();
  const measure::MeasurementSetup setup{
      .options = options,
      .bytes_per_launch = work.bytes,
      .flops_per_launch = work.flops,
      .spec_peak_tflops = plan.spec_peak_tflops(gpu),
      .gpu = gpu,
      .scaffolding_marker =
          context.tracing != nullptr ? context.tracing->scaffolding_marker() : nullptr,
      .wait_for_stream = plan.stream_waiter()};
  const measure::TimedStream timed{
      .stream = stream.get(),
      .device = 0,
      .launch = [&plan](cudaStream_t on) { return plan.Launch(on); }};
  ASSIGN_OR_RETURN(measure::MeasurementOutcome outcome,
                   measure::MeasureStreams(setup, {&timed, 1}, context.progress));
  *result.mutable_measurement() = outcome.measurement;
  RETURN_IF_ERROR(plan.MeasureParts(setup, stream.get(), context.progress, result));
  if (context.tracing != nullptr && !plan.kernels_can_be_replayed() &&
      context.tracing->level() >= v1::TracingOptions::LEVEL_METRICS) {
    result.add_not_collected(
        "hardware metrics: the kernels wait on other ranks, which would not replay with them");
  } else if (context.tracing != nullptr) {
    RETURN_IF_ERROR(context.tracing->ProfileKernels([&]() -> absl::Status {
      RETURN_IF_ERROR(plan.Launch(stream.get()));
      return setup.wait_for_stream ? setup.wait_for_stream(stream.get()) : stream.Synchronize();
    }));
  }
  for (const std::string& note : outcome.not_collected) result.add_not_collected(note);
  plan.DescribeKernels(result);

  context.progress(v1::PHASE_VERIFICATION, 0, 1, messages.verification);
  v1::Verification& verification = *result.mutable_verification();
  RETURN_IF_ERROR(plan.Verify(stream.get(), verification));
  context.progress(v1::PHASE_VERIFICATION, 1, 1, verification.passed() ? "passed" : "FAILED");
  plan.FinishResult(result);
  return result;
}

}  // namespace gpuprof::workloads
