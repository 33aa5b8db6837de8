#include "comm/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <functional>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/nccl_status.h"
#include "common/status_macros.h"

namespace gpuprof::comm {
namespace {

// Torn down with this much time when the owner did not call Close itself.
constexpr absl::Duration kDestructorTeardownTimeout = absl::Seconds(10);

// Waits between polls: yields first so that a call finishing within microseconds is seen at
// once, then sleeps so that a long wait does not hold a core.
class PollBackoff {
 public:
  void Wait() {
    ++polls_;
    if (polls_ < 256) {
      std::this_thread::yield();
    } else if (polls_ < 2048) {
      absl::SleepFor(absl::Microseconds(50));
    } else {
      absl::SleepFor(absl::Milliseconds(1));
    }
  }

 private:
  int polls_ = 0;
};

// Runs `call` on a detached thread with `device` current and waits at most `timeout` for it.
// nullopt when it did not return in time: the thread is left behind (it holds only shared
// state), since a hung NCCL teardown cannot be interrupted from outside.
std::optional<ncclResult_t> RunWithTimeout(int device, absl::Duration timeout,
                                           std::function<ncclResult_t()> call) {
  struct Outcome {
    absl::Mutex mu;
    bool done = false;
    ncclResult_t result = ncclSuccess;
  };
  auto outcome = std::make_shared<Outcome>();
  try {
    std::thread([outcome, device, call = std::move(call)] {
      cudaSetDevice(device);  // NCCL sets its device too; this only keeps CUDA calls on it
      const ncclResult_t result = call();
      absl::MutexLock lock(&outcome->mu);
      outcome->result = result;
      outcome->done = true;
    }).detach();
  } catch (const std::system_error&) {
    // No thread to be had: call inline rather than not at all.
    return call();
  }
  absl::MutexLock lock(&outcome->mu);
  if (!outcome->mu.AwaitWithTimeout(absl::Condition(&outcome->done), timeout)) return std::nullopt;
  return outcome->result;
}

std::string NcclErrorText(ncclResult_t result, absl::string_view step) {
  return std::string(NcclStatus(result, std::string_view(step.data(), step.size())).message());
}

}  // namespace

absl::StatusOr<ncclUniqueId> CreateUniqueId() {
  ncclUniqueId id;
  NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  return id;
}

std::string SerializeUniqueId(const ncclUniqueId& id) {
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<ncclUniqueId> ParseUniqueId(absl::string_view bytes) {
  ncclUniqueId id;
  static_assert(sizeof(id.internal) == kUniqueIdBytes);
  if (bytes.size() != kUniqueIdBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("unique_id: ", bytes.size(), " bytes; an ncclUniqueId is ", kUniqueIdBytes));
  }
  std::memcpy(id.internal, bytes.data(), kUniqueIdBytes);
  return id;
}

absl::StatusOr<int> LoadedNcclVersion() {
  int version = 0;
  NCCL_RETURN_IF_ERROR(ncclGetVersion(&version));
  return version;
}

absl::Status ValidateCommunicatorOptions(const CommunicatorOptions& options) {
  if (options.nranks < 1) {
    return absl::InvalidArgumentError(absl::StrCat("nranks: ", options.nranks, " < 1"));
  }
  if (options.rank < 0 || options.rank >= options.nranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", options.rank, " is outside [0, ", options.nranks, ")"));
  }
  if (options.device < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device: ", options.device, " < 0"));
  }
  const std::pair<absl::string_view, absl::Duration> timeouts[] = {
      {"init_timeout", options.init_timeout},
      {"call_timeout", options.call_timeout},
      {"abort_timeout", options.abort_timeout}};
  for (const auto& [field, timeout] : timeouts) {
    if (timeout <= absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", absl::FormatDuration(timeout), " must be positive and finite"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NcclCommunicator> NcclCommunicator::Create(const CommunicatorOptions& options) {
  RETURN_IF_ERROR(ValidateCommunicatorOptions(options));
  CUDA_RETURN_IF_ERROR(cudaSetDevice(options.device));

  NcclCommunicator communicator;
  communicator.options_ = options;
  communicator.rank_ = options.rank;
  communicator.nranks_ = options.nranks;
  communicator.device_ = options.device;
  communicator.handle_ = std::make_shared<Handle>();

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every call returns at once; we poll against deadlines instead
  if (!communicator.options_.name.empty()) config.commName = communicator.options_.name.c_str();

  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.init_timeout;
  ncclComm_t comm = nullptr;
  const ncclResult_t result =
      ncclCommInitRankConfig(&comm, options.nranks, options.unique_id, options.rank, &config);
  communicator.handle_->control = comm;
  if (result != ncclSuccess && result != ncclInProgress) {
    return communicator.AbortAfter(absl::InternalError(
        absl::StrCat(communicator.Describe(),
                     ": init failed: ", NcclErrorText(result, "ncclCommInitRankConfig"))));
  }
  if (comm == nullptr) {
    return absl::InternalError(
        absl::StrCat(communicator.Describe(), ": init returned no communicator"));
  }
  RETURN_IF_ERROR(communicator.WaitUntilIdleSince(start, deadline, "init"));
  if (options.collective_path == CollectivePath::kBlocking) {
    RETURN_IF_ERROR(communicator.InitBlockingCommunicator(deadline));
  }
  return communicator;
}

absl::Status NcclCommunicator::InitBlockingCommunicator(absl::Time deadline) {
  ASSIGN_OR_RETURN(const ncclUniqueId id, ShareUniqueIdFromRankZero(deadline));
  // Written by the helper thread; shared so that an init that never returns writes into
  // memory that is still alive.
  auto child = std::make_shared<ncclComm_t>(nullptr);
  const int nranks = nranks_;
  const int rank = rank_;
  const absl::Duration timeout = std::max(deadline - absl::Now(), absl::Seconds(1));
  const std::optional<ncclResult_t> result =
      RunWithTimeout(device_, timeout, [child, id, nranks, rank] {
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 1;
        return ncclCommInitRankConfig(child.get(), nranks, id, rank, &config);
      });
  if (!result.has_value()) {
    // Every rank was alive a moment ago (the id broadcast finished), so this is rare; the
    // blocking init cannot be cancelled, so its thread is left to the process's exit.
    return AbortAfter(absl::DeadlineExceededError(
        absl::StrCat(Describe(), ": init of the blocking communicator did not finish within ",
                     absl::FormatDuration(timeout), "; the process must exit")));
  }
  if (*result != ncclSuccess) {
    // A blocking init that fails cleans up after itself; only the first communicator is left.
    return AbortAfter(absl::InternalError(absl::StrCat(
        Describe(), ": ", NcclErrorText(*result, "ncclCommInitRankConfig (blocking)"))));
  }
  handle_->collectives = *child;
  return absl::OkStatus();
}

absl::StatusOr<ncclUniqueId> NcclCommunicator::ShareUniqueIdFromRankZero(absl::Time deadline) {
  ncclUniqueId id{};
  if (rank_ == 0) NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&id));
  ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(sizeof(id)));
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(buffer.data(), &id, sizeof(id), cudaMemcpyHostToDevice, stream.get()));
  RETURN_IF_ERROR(FinishCall(ncclBroadcast(buffer.data(), buffer.data(), sizeof(id), ncclUint8,
                                           /*root=*/0, get(), stream.get()),
                             "ncclBroadcast of the blocking communicator's id"));
  RETURN_IF_ERROR(
      WaitForStream(stream.get(), deadline, "broadcast of the blocking communicator's id"));
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(&id, buffer.data(), sizeof(id), cudaMemcpyDeviceToHost, stream.get()));
  RETURN_IF_ERROR(stream.Synchronize());
  return id;
}

absl::Status NcclCommunicator::WaitForStream(cudaStream_t stream, absl::Time deadline,
                                             absl::string_view step) {
  const absl::Time start = absl::Now();
  PollBackoff backoff;
  while (true) {
    const cudaError_t query = cudaStreamQuery(stream);
    if (query != cudaSuccess && query != cudaErrorNotReady) {
      return AbortAfter(absl::InternalError(absl::StrCat(
          Describe(), ": ", step, ": ", CudaStatus(query, "cudaStreamQuery").message())));
    }
    if (absl::Status async = AsyncError(); !async.ok()) return AbortAfter(async);
    if (query == cudaSuccess) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return AbortAfter(absl::DeadlineExceededError(
          absl::StrCat(Describe(), ": ", step, " did not finish within ",
                       absl::FormatDuration(now - start), " (a peer may have stopped)")));
    }
    backoff.Wait();
  }
}

NcclCommunicator& NcclCommunicator::operator=(NcclCommunicator&& other) noexcept {
  if (this != &other) {
    if (usable()) LogStatusToStderr(Close(absl::Now() + kDestructorTeardownTimeout));
    handle_ = std::move(other.handle_);
    options_ = std::move(other.options_);
    rank_ = std::exchange(other.rank_, -1);
    nranks_ = std::exchange(other.nranks_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

NcclCommunicator::~NcclCommunicator() {
  if (usable()) LogStatusToStderr(Close(absl::Now() + kDestructorTeardownTimeout));
}

ncclComm_t NcclCommunicator::get() const { return handle_ ? handle_->comm() : nullptr; }

std::string NcclCommunicator::Describe() const {
  return absl::StrCat("rank ", rank_, " of ", nranks_, " (device ", device_, ")");
}

absl::Status NcclCommunicator::AsyncError() const {
  if (!usable()) {
    return absl::FailedPreconditionError(absl::StrCat(Describe(), ": communicator is closed"));
  }
  ncclResult_t async = ncclSuccess;
  NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(get(), &async));
  if (async == ncclSuccess || async == ncclInProgress) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(Describe(), ": ", NcclErrorText(async, "asynchronous NCCL operation")));
}

absl::Status NcclCommunicator::AbortAfter(absl::Status cause) {
  const absl::Status abort = Abort();
  std::string message = absl::StrCat(cause.message(), "; communicator aborted");
  if (!abort.ok()) absl::StrAppend(&message, " (", abort.message(), ")");
  return absl::Status(cause.code(), message);
}

absl::Status NcclCommunicator::FinishCall(ncclResult_t result, absl::string_view step) {
  // A bad argument leaves the communicator intact; anything else may have broken it.
  if (result == ncclInvalidArgument || result == ncclInvalidUsage) {
    return absl::Status(NcclResultToStatusCode(result),
                        absl::StrCat(Describe(), ": ", NcclErrorText(result, step)));
  }
  if (result != ncclSuccess && result != ncclInProgress) {
    return AbortAfter(
        absl::InternalError(absl::StrCat(Describe(), ": ", NcclErrorText(result, step))));
  }
  // Even a call that returned ncclSuccess may have left work in the background (window
  // registration does), and NCCL refuses the next call until it is done: check once, and poll
  // only when it is still in progress.
  return WaitUntilIdle(absl::Now() + options_.call_timeout, step);
}

absl::Status NcclCommunicator::WaitUntilIdle(absl::Time deadline, absl::string_view step) {
  return WaitUntilIdleSince(absl::Now(), deadline, step);
}

absl::Status NcclCommunicator::WaitUntilIdleSince(absl::Time start, absl::Time deadline,
                                                  absl::string_view step) {
  if (!usable()) {
    return absl::FailedPreconditionError(
        absl::StrCat(Describe(), ": ", step, ": communicator is closed or aborted"));
  }
  PollBackoff backoff;
  while (true) {
    ncclResult_t async = ncclInProgress;
    const ncclResult_t query = ncclCommGetAsyncError(get(), &async);
    if (query != ncclSuccess) {
      return AbortAfter(absl::InternalError(absl::StrCat(
          Describe(), ": ", step, ": ", NcclErrorText(query, "ncclCommGetAsyncError"))));
    }
    if (async == ncclSuccess) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (async != ncclInProgress) {
      return AbortAfter(absl::InternalError(absl::StrCat(Describe(), ": ", step, " failed after ",
                                                         absl::FormatDuration(now - start), ": ",
                                                         NcclErrorText(async, step))));
    }
    if (now >= deadline) {
      return AbortAfter(absl::DeadlineExceededError(absl::StrCat(
          Describe(), ": ", step, " did not finish within ", absl::FormatDuration(deadline - start),
          " (gave up after ", absl::FormatDuration(now - start),
          "; a peer may have stopped or never joined)")));
    }
    backoff.Wait();
  }
}

absl::Status NcclCommunicator::Abort() {
  if (!usable()) return absl::OkStatus();
  // One deadline for both communicators, so that the bound holds whatever happens.
  const absl::Time deadline = absl::Now() + options_.abort_timeout;
  absl::Status status;
  for (ncclComm_t* slot : {&handle_->collectives, &handle_->control}) {
    if (*slot == nullptr) continue;
    ncclComm_t comm = std::exchange(*slot, nullptr);
    const std::optional<ncclResult_t> result =
        RunWithTimeout(device_, std::max(deadline - absl::Now(), absl::ZeroDuration()),
                       [comm] { return ncclCommAbort(comm); });
    if (!result.has_value()) {
      status.Update(absl::DeadlineExceededError(
          absl::StrCat(Describe(), ": ncclCommAbort did not return within ",
                       absl::FormatDuration(options_.abort_timeout),
                       "; the process must exit to free the GPU")));
    } else {
      status.Update(NcclStatus(*result, "ncclCommAbort"));
    }
  }
  return status;
}

absl::Status NcclCommunicator::Close(absl::Time deadline) {
  if (!usable()) return absl::OkStatus();
  if (handle_->collectives != nullptr) {
    // Blocking calls: each runs on a helper thread against the deadline.
    ncclComm_t comm = handle_->collectives;
    const std::optional<ncclResult_t> finalized =
        RunWithTimeout(device_, std::max(deadline - absl::Now(), absl::ZeroDuration()),
                       [comm] { return ncclCommFinalize(comm); });
    if (!finalized.has_value()) {
      // Finalize still runs on it: nothing can be aborted safely any more.
      handle_->collectives = handle_->control = nullptr;
      return absl::DeadlineExceededError(
          absl::StrCat(Describe(),
                       ": ncclCommFinalize did not finish by the deadline; the "
                       "process must exit to free the GPU"));
    }
    if (*finalized != ncclSuccess) {
      return AbortAfter(absl::InternalError(
          absl::StrCat(Describe(), ": ", NcclErrorText(*finalized, "ncclCommFinalize"))));
    }
    handle_->collectives = nullptr;
    RETURN_IF_ERROR(Destroy(comm, deadline));
  }
  const ncclResult_t finalize = ncclCommFinalize(handle_->control);
  if (finalize != ncclSuccess && finalize != ncclInProgress) {
    return AbortAfter(absl::InternalError(
        absl::StrCat(Describe(), ": ", NcclErrorText(finalize, "ncclCommFinalize"))));
  }
  RETURN_IF_ERROR(WaitUntilIdle(deadline, "finalize"));
  return Destroy(std::exchange(handle_->control, nullptr), deadline);
}

absl::Status NcclCommunicator::Destroy(ncclComm_t comm, absl::Time deadline) {
  const absl::Duration timeout = std::max(deadline - absl::Now(), options_.abort_timeout);
  const std::optional<ncclResult_t> destroyed =
      RunWithTimeout(device_, timeout, [comm] { return ncclCommDestroy(comm); });
  if (!destroyed.has_value()) {
    return absl::DeadlineExceededError(
        absl::StrCat(Describe(), ": ncclCommDestroy did not return within ",
                     absl::FormatDuration(timeout), "; the process must exit"));
  }
  return NcclStatus(*destroyed, "ncclCommDestroy");
}

}  // namespace gpuprof::comm
