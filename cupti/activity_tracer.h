// CUPTI activity tracing for one process: kernels, memcpy, memset, synchronisation, CUPTI's
// own overhead and the host's launch calls (cudaLaunchKernel, cuLaunchKernel, cudaGraphLaunch,
// ...; see LaunchRecordFilter for which are kept), converted to gpuprof::v1::ActivityRecord
// and placed in the workload's phases; the launches made between BeginScaffolding and
// EndScaffolding come out flagged.
//
//   ASSIGN_OR_RETURN(ActivityTracer tracer, ActivityTracer::Start({.gpu_id_by_device = {3}}));
//   tracer.SetPhase(v1::PHASE_WARMUP);
//   ... launch work ...
//   RETURN_IF_ERROR(tracer.Flush(/*forced=*/false));
//   v1::ActivityBatch batch = tracer.TakeBatch();
//
// CUPTI's activity state is per process, so at most one tracer lives at a time; Start fails
// while another is live. CUPTI calls two static trampolines that forward to that one tracer.
// Memory is bounded: at most max_buffers buffers are lent to CUPTI or waiting to be processed;
// past that CUPTI drops records, and every dropped record is counted in the next batch.
#ifndef GPUPROF_CUPTI_ACTIVITY_TRACER_H_
#define GPUPROF_CUPTI_ACTIVITY_TRACER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::cupti {

struct ActivityTracerTrampolines;

struct ActivityTracerOptions {
  // The daemon's GPU id of each CUDA device ordinal in this process (see
  // ActivityRecordConverter). Empty: ids are the ordinals.
  std::vector<int32_t> gpu_id_by_device;
  // A kernel record is about 200 bytes: 1 MiB holds about 5000.
  size_t buffer_bytes = 1 << 20;
  // Buffers lent to CUPTI or awaiting TakeBatch, at most.
  size_t max_buffers = 32;
  // Launch records kept over the tracer's life, at most (LaunchRecordFilter).
  int64_t max_launch_records = int64_t{1} << 17;
};

class ActivityTracer {
 public:
  // Registers the buffer callbacks and enables the activity kinds. FAILED_PRECONDITION when
  // another tracer is live in this process; the CUPTI error when kernel tracing cannot be
  // enabled. Kinds other than kernels that CUPTI refuses are listed in notes().
  static absl::StatusOr<ActivityTracer> Start(ActivityTracerOptions options);

  ActivityTracer(ActivityTracer&& other) noexcept;
  ActivityTracer& operator=(ActivityTracer&& other) noexcept;
  ActivityTracer(const ActivityTracer&) = delete;
  ActivityTracer& operator=(const ActivityTracer&) = delete;
  // Stops tracing (see Stop) and gives up the process's tracer slot; records not taken are lost
  // with the tracer, so take the last batch first.
  ~ActivityTracer();

  // Marks the start of `phase` (and the end of the previous one) at this moment on CUPTI's
  // clock, the clock of the GPU records.
  void SetPhase(gpuprof::v1::Phase phase);

  // Between these two, what the calling thread launches is tagged as the measurement core's
  // scaffolding (the launch's correlation id, from CUPTI's runtime API callback), and its kernel
  // and memset records come out of TakeBatch with `scaffolding` set.
  void BeginScaffolding();
  void EndScaffolding();

  // Asks CUPTI to hand over its buffers: with `forced`, also those holding records of work
  // still running. Holds no lock of the tracer while CUPTI delivers them (CUPTI calls back into
  // the tracer from inside cuptiActivityFlushAll).
  absl::Status Flush(bool forced);

  // The records delivered since the last call, converted, each placed in its phase, plus phase
  // markers of the phases that ended, plus the count of records CUPTI dropped in the meantime.
  // Conversion runs outside the lock that the CUPTI callbacks take.
  gpuprof::v1::ActivityBatch TakeBatch();

  // Ends the open phase, disables the activity kinds and flushes every buffer (forced). Later
  // TakeBatch calls still return what was delivered. Idempotent.
  absl::Status Stop();

  // What was not enabled and why, for ExperimentResult.not_collected.
  std::vector<std::string> notes() const;

  // Buffer requests refused because max_buffers were lent out (CUPTI dropped records then).
  size_t refused_buffer_requests() const;
  // Launch records past max_launch_records, left out so far.
  int64_t launch_records_left_out() const;
  int64_t max_launch_records() const;
  // Scaffolding tags CUPTI delivered so far, and those not matched to a GPU record yet.
  int64_t scaffolding_tags_learnt() const;
  size_t scaffolding_tags_pending() const;

 private:
  friend struct ActivityTracerTrampolines;
  struct State;
  explicit ActivityTracer(std::unique_ptr<State> state);
  // Subscribes to CUPTI's runtime API callbacks, which see the correlation id of every launch;
  // what CUPTI refuses (another subscriber) becomes a note, never a failure.
  void EnableScaffoldingTags();
  // Enables the runtime and driver API activity records (the converter keeps the launch calls
  // of RuntimeLaunchApis and DriverLaunchApis); what CUPTI refuses becomes a note.
  void EnableLaunchRecords();

  std::unique_ptr<State> state_;
};

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_ACTIVITY_TRACER_H_
