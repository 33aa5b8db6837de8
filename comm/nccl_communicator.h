// One rank's NCCL communicator, owned RAII-style, that never waits forever.
//
// The communicator is created non-blocking (ncclCommInitRankConfig with blocking = 0): init
// returns at once and this class polls ncclCommGetAsyncError against a deadline, so a peer that
// never joins ends init with DEADLINE_EXCEEDED. On a timeout or an error it calls
// ncclCommAbort, which also stops kernels stuck waiting for a dead peer, and reports which rank,
// which step and how long. ncclCommAbort runs on a helper thread with its own deadline: should
// it hang too, the status says so and the process must exit (the daemon's rank workers are
// separate processes for that reason).
//
// Collectives: NCCL 2.28 hands every operation on a non-blocking communicator to a new host
// thread (ncclGroupEnd returns ncclInProgress), which cost about 45 us per collective on
// 2 x H200 (docs/gpu-runs/comm-nccl.md), and one split from it behaved the same there. So
// by default (CollectivePath::kBlocking) Create then makes a second, blocking communicator over
// the same ranks for collectives and buffer registration, launched on the calling thread as
// nccl-tests does: rank 0 broadcasts its id over the first communicator (bounded by the
// deadline, so callers still relay one id) and the blocking init runs on a helper thread
// against the same init deadline. A stuck collective is still caught by WaitWithDeadline
// (collective.h), which aborts both. CollectivePath::kNonBlocking keeps everything on the
// non-blocking communicator: no NCCL call can block the caller, at that launch cost.
//
// Rank 0 calls CreateUniqueId and hands SerializeUniqueId's 128 bytes to the other ranks (the
// daemon relays them over its pipes); each rank parses them and calls Create.
#ifndef GPUPROF_COMM_NCCL_COMMUNICATOR_H_
#define GPUPROF_COMM_NCCL_COMMUNICATOR_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuprof::comm {

inline constexpr size_t kUniqueIdBytes = NCCL_UNIQUE_ID_BYTES;

// ncclGetUniqueId: also starts NCCL's bootstrap root in this process, so call it on rank 0.
absl::StatusOr<ncclUniqueId> CreateUniqueId();
// Exactly kUniqueIdBytes bytes, binary (not text).
std::string SerializeUniqueId(const ncclUniqueId& id);
// INVALID_ARGUMENT unless `bytes` holds exactly kUniqueIdBytes bytes.
absl::StatusOr<ncclUniqueId> ParseUniqueId(absl::string_view bytes);

// ncclGetVersion of the library loaded at run time (which may differ from the headers').
absl::StatusOr<int> LoadedNcclVersion();

enum class CollectivePath {
  kBlocking,     // collectives on a second, blocking communicator made after init (fast launch)
  kNonBlocking,  // collectives on the non-blocking communicator (no call ever blocks)
};

struct CommunicatorOptions {
  ncclUniqueId unique_id{};
  int nranks = 0;
  int rank = -1;
  int device = -1;  // CUDA device of this rank
  // The whole init, including waiting for the other ranks to join.
  absl::Duration init_timeout = absl::Seconds(60);
  // Bounds each later NCCL call that returns ncclInProgress (enqueue, registration).
  absl::Duration call_timeout = absl::Seconds(60);
  // ncclCommAbort (on a helper thread) gets this long before the process is declared stuck.
  absl::Duration abort_timeout = absl::Seconds(10);
  std::string name;  // NCCL's commName, shown in its logs
  CollectivePath collective_path = CollectivePath::kBlocking;
};

// INVALID_ARGUMENT naming the field: nranks < 1, rank outside [0, nranks), device < 0,
// non-positive timeouts.
absl::Status ValidateCommunicatorOptions(const CommunicatorOptions& options);

class NcclCommunicator {
 public:
  // Creates the communicator and waits until every rank has joined or `init_timeout` passes
  // (which also bounds the blocking communicator's init).
  // DEADLINE_EXCEEDED ("rank 0 of 2 (device 0): init did not finish within 5s; aborted") when
  // a peer never joins; INTERNAL with NCCL's error when init fails. Makes `device` current on
  // the calling thread.
  static absl::StatusOr<NcclCommunicator> Create(const CommunicatorOptions& options);

  NcclCommunicator() = default;
  NcclCommunicator(NcclCommunicator&&) noexcept = default;
  NcclCommunicator& operator=(NcclCommunicator&& other) noexcept;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  // Close() with the default teardown timeout; failures are logged, never thrown.
  ~NcclCommunicator();

  // The handle collectives and registrations use (the blocking one by default), or nullptr
  // once closed or aborted.
  ncclComm_t get() const;
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  int device() const { return device_; }
  bool usable() const { return get() != nullptr; }
  const CommunicatorOptions& options() const { return options_; }

  // OK, or the error NCCL recorded asynchronously (a failed collective, a dead peer). Does not
  // abort.
  absl::Status AsyncError() const;

  // Turns the result of an NCCL call on this communicator into a status, and waits (polling,
  // up to call_timeout) while NCCL still finishes the call in the background, as it may after
  // ncclInProgress or even ncclSuccess on a non-blocking communicator. A timeout or an error
  // other than a bad argument aborts the communicator. `step` names the call in messages.
  absl::Status FinishCall(ncclResult_t result, absl::string_view step);

  // Polls ncclCommGetAsyncError until NCCL is idle (not ncclInProgress), an error, or
  // `deadline`; aborts on the last two.
  absl::Status WaitUntilIdle(absl::Time deadline, absl::string_view step);

  // Aborts now: cancels outstanding work (kernels waiting on peers exit) and frees both
  // communicators. Returns OK when ncclCommAbort returned within abort_timeout.
  absl::Status Abort();

  // Orderly teardown of both communicators: ncclCommFinalize (flushes this rank's outstanding
  // work) until `deadline`, then ncclCommDestroy; aborts instead when finalize fails or runs
  // past the deadline. The communicator is unusable afterwards whatever the result.
  absl::Status Close(absl::Time deadline);

  // "rank 1 of 2 (device 1)", the prefix of every message.
  std::string Describe() const;

  // Shared with CollectiveBuffers, whose registrations must not outlive the handle.
  struct Handle;
  std::shared_ptr<Handle> shared_handle() const { return handle_; }

 private:
  absl::Status AbortAfter(absl::Status cause);
  absl::Status InitBlockingCommunicator(absl::Time deadline);
  absl::StatusOr<ncclUniqueId> ShareUniqueIdFromRankZero(absl::Time deadline);
  absl::Status WaitForStream(cudaStream_t stream, absl::Time deadline, absl::string_view step);
  absl::Status Destroy(ncclComm_t comm, absl::Time deadline);
  absl::Status WaitUntilIdleSince(absl::Time start, absl::Time deadline, absl::string_view step);

  std::shared_ptr<Handle> handle_;
  CommunicatorOptions options_;
  int rank_ = -1;
  int nranks_ = 0;
  int device_ = -1;
};

// The raw handles; null once destroyed or aborted.
struct NcclCommunicator::Handle {
  ncclComm_t control = nullptr;      // non-blocking: init, teardown, and kNonBlocking collectives
  ncclComm_t collectives = nullptr;  // blocking, made after `control` (kBlocking only)
  ncclComm_t comm() const { return collectives != nullptr ? collectives : control; }
};

}  // namespace gpuprof::comm

#endif  // GPUPROF_COMM_NCCL_COMMUNICATOR_H_
