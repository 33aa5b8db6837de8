// The pure half of activity tracing: CUPTI activity records -> gpuprof::v1::ActivityRecord,
// the workload's phases on CUPTI's clock, and the accounting of the activity buffers handed to
// CUPTI. Nothing here calls into libcupti, so it is tested on CPU with real CUpti_Activity*
// structs built by the test.
#ifndef GPUPROF_CUPTI_ACTIVITY_RECORDS_H_
#define GPUPROF_CUPTI_ACTIVITY_RECORDS_H_

#include <cupti_activity.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/enum_names.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::cupti {

// "void foo<int>(float*)" for "_Z3fooIiEvPf"; the input unchanged when it is not a mangled
// C++ name (extern "C" kernels) or cannot be demangled.
std::string DemangleKernelName(absl::string_view mangled);

// "htod", "dtoh", "dtod", ... for CUpti_ActivityMemcpyKind.
absl::string_view MemcpyKindName(uint32_t copy_kind);

// A CUDA call whose activity record the tracer keeps as a launch (KIND_LAUNCH): it made GPU
// work, whose records carry its correlation id.
struct LaunchApi {
  CUpti_CallbackId cbid;
  absl::string_view name;  // without CUPTI's version suffix: "cudaLaunchKernel"
};

// Kernel, cooperative kernel and graph launches, and the copies and memsets that make GPU
// records, of the runtime API (cupti_runtime_cbid.h) and of the driver API
// (cupti_driver_cbid.h).
absl::Span<const LaunchApi> RuntimeLaunchApis();
absl::Span<const LaunchApi> DriverLaunchApis();

// Converts CUPTI activity records of the kinds the tracer enables. Keeps the context -> device
// mapping it learns from kernel and copy records, so that synchronisation records (which carry
// only a context) land on the right GPU.
class ActivityRecordConverter {
 public:
  // `gpu_id_by_device[d]` is the daemon's GPU id of CUDA device ordinal d in this process (the
  // worker sees only its leased GPUs, renumbered from 0). Devices past the end keep their
  // ordinal.
  explicit ActivityRecordConverter(std::vector<int32_t> gpu_id_by_device);

  // The record as proto, or nullopt for kinds gpuprof does not keep (and API calls that are
  // not in RuntimeLaunchApis / DriverLaunchApis). `phase` is left unset.
  std::optional<gpuprof::v1::ActivityRecord> Convert(const CUpti_Activity& activity);

  int32_t GpuIdOfDevice(uint32_t device) const;

 private:
  std::vector<int32_t> gpu_id_by_device_;
  absl::flat_hash_map<uint32_t, uint32_t> device_by_context_;
};

// The correlation ids of scaffolding launches (the measurement core's stream blocker and L2
// flush), as the tracer's runtime API callback saw them, so that the kernel and memset records
// of those launches can be flagged. A launch is tagged when it is made, before its GPU record
// can exist. Bounded: one id is forgotten once its record is flagged (a scaffolding launch is
// never part of a graph, so it makes one record), and past `max_pending` unmatched ids the
// oldest go (their records were dropped by CUPTI, or the call launched nothing).
class ScaffoldingCorrelations {
 public:
  static constexpr size_t kDefaultMaxPending = 1 << 16;

  explicit ScaffoldingCorrelations(size_t max_pending = kDefaultMaxPending);

  // Remembers the correlation id of a scaffolding launch (0, no launch, is ignored).
  void Tag(uint32_t correlation_id);

  // Sets `scaffolding` on a kernel, copy or memset record whose launch was tagged.
  void Flag(gpuprof::v1::ActivityRecord& record);

  size_t pending() const { return pending_.size(); }
  // Tags learnt so far (flagged or still pending), for diagnostics.
  int64_t learnt() const { return learnt_; }

 private:
  size_t max_pending_;
  // Ordered, so that the oldest (smallest) ids are the ones dropped past the cap.
  std::set<uint32_t> pending_;
  int64_t learnt_ = 0;
};

// The launch records the tracer keeps, batch by batch. A driver launch that lies inside a
// runtime launch of the same thread is the runtime's own call into the driver (the GPU records
// carry the runtime call's correlation id), so it goes. Past `max_kept` launches the rest are
// counted, not kept: they only draw arrows in the trace, and the GPU records they would point
// at are bounded by CUPTI's buffers while these would double the count.
class LaunchRecordFilter {
 public:
  static constexpr int64_t kDefaultMaxKept = int64_t{1} << 17;

  explicit LaunchRecordFilter(int64_t max_kept = kDefaultMaxKept);

  // `launches` of one batch (KIND_LAUNCH records), `from_driver[i]` whether launches[i] is a
  // driver API record; those kept, in their order.
  std::vector<gpuprof::v1::ActivityRecord> Filter(std::vector<gpuprof::v1::ActivityRecord> launches,
                                                  const std::vector<bool>& from_driver);

  int64_t max_kept() const { return max_kept_; }
  // Launch records past max_kept, so far.
  int64_t left_out() const { return left_out_; }

 private:
  int64_t max_kept_;
  int64_t kept_ = 0;
  int64_t left_out_ = 0;
};

// The workload's phases as intervals on CUPTI's clock, so that every GPU record can be placed
// in the phase during which it started. Phases are few (one per step of a workload), so all of
// them are kept for the tracer's life.
class PhaseTimeline {
 public:
  // Ends the open phase (if any) at `timestamp_ns` and opens `phase` there. Timestamps that go
  // backwards are clamped to the previous one, so intervals never overlap.
  void Begin(gpuprof::v1::Phase phase, int64_t timestamp_ns);
  // Ends the open phase, if any.
  void End(int64_t timestamp_ns);

  // The phase whose interval holds `timestamp_ns`: [begin, end), the open phase from its begin
  // on. PHASE_UNSPECIFIED before the first phase or in a gap.
  gpuprof::v1::Phase PhaseAt(int64_t timestamp_ns) const;

  // KIND_PHASE records for the phases that ended since the last call, oldest first.
  std::vector<gpuprof::v1::ActivityRecord> TakeEndedPhaseMarkers(int32_t gpu_id);

  bool has_open_phase() const { return open_.has_value(); }

 private:
  struct Interval {
    gpuprof::v1::Phase phase;
    int64_t begin_ns;
    int64_t end_ns;
  };
  std::vector<Interval> ended_;
  size_t markers_taken_ = 0;
  std::optional<Interval> open_;
};

// The activity buffers lent to CUPTI: each `buffer_bytes` long, aligned as CUPTI requires, at
// most `max_buffers` lent out at once (given to CUPTI, or completed and not yet processed).
// Beyond that, Acquire refuses and CUPTI drops records, which it counts; so memory stays
// bounded however far the consumer falls behind. Not thread-safe: the tracer locks around it.
class ActivityBufferPool {
 public:
  static constexpr size_t kAlignment = ACTIVITY_RECORD_ALIGNMENT;

  ActivityBufferPool(size_t buffer_bytes, size_t max_buffers);
  ~ActivityBufferPool();
  ActivityBufferPool(const ActivityBufferPool&) = delete;
  ActivityBufferPool& operator=(const ActivityBufferPool&) = delete;

  // A buffer of buffer_bytes(), or nullptr when max_buffers are lent out (counted in
  // refused_requests()) or memory ran out.
  uint8_t* Acquire();
  // Takes back a buffer from Acquire; it is kept for reuse. A buffer this pool did not lend is
  // freed (it was allocated by FreeOrphanBuffer's rules), never reused.
  void Release(uint8_t* buffer);

  size_t buffer_bytes() const { return buffer_bytes_; }
  size_t max_buffers() const { return max_buffers_; }
  size_t lent_out() const { return lent_out_; }
  size_t refused_requests() const { return refused_requests_; }

  // Frees a buffer whose pool is gone (CUPTI returned it after the tracer ended). Buffers are
  // plain aligned allocations, so this needs no pool.
  static void FreeOrphanBuffer(uint8_t* buffer);

 private:
  size_t buffer_bytes_;
  size_t max_buffers_;
  size_t lent_out_ = 0;
  size_t refused_requests_ = 0;
  std::vector<uint8_t*> free_buffers_;
  std::vector<uint8_t*> lent_buffers_;
};

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_ACTIVITY_RECORDS_H_
