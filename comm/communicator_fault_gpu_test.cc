// Hangs that must end: a peer that never joins init, and a peer that stops mid-collective.
// Each ends within the deadline plus 2 s, and the GPUs take a new communicator afterwards.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "comm/collective.h"
#include "comm/collective_buffers.h"
#include "comm/collective_testing.h"
#include "comm/nccl_communicator.h"
#include "common/cuda_raii.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::comm {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kDeadline = absl::Seconds(3);
constexpr absl::Duration kGrace = absl::Seconds(2);
// Abort gets less than the grace so that even a stuck abort keeps the bound.
constexpr absl::Duration kAbortTimeout = absl::Milliseconds(1500);

// Should a CUDA call wedge behind a kernel that never ends, the binary still ends (and says
// why) instead of holding the GPUs until someone kills it.
const bool kWatchdogStarted = [] {
  std::thread([] {
    absl::SleepFor(absl::Seconds(90));
    std::fprintf(stderr, "watchdog: test binary still running after 90 s; exiting\n");
    std::_Exit(3);
  }).detach();
  return true;
}();

bool HaveGpus(int wanted) {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count >= wanted;
}

TEST(CommunicatorFaultTest, InitEndsWhenAPeerNeverJoins) {
  if (!HaveGpus(1)) GTEST_SKIP() << "needs a GPU";
  auto id = CreateUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  const absl::Time start = absl::Now();
  // Rank 1 never calls init.
  absl::StatusOr<NcclCommunicator> comm =
      NcclCommunicator::Create({.unique_id = *id,
                                .nranks = 2,
                                .rank = 0,
                                .device = 0,
                                .init_timeout = kDeadline,
                                .abort_timeout = kAbortTimeout});
  const absl::Duration took = absl::Now() - start;
  std::printf("init without peer: %s after %s\n", comm.status().ToString().c_str(),
              absl::FormatDuration(took).c_str());
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(comm.status().message()), HasSubstr("rank 0 of 2 (device 0): init"));
  EXPECT_GE(took, kDeadline);
  EXPECT_LE(took, kDeadline + kGrace);
}

class PeerStopsTest : public ::testing::TestWithParam<CollectivePath> {};

INSTANTIATE_TEST_SUITE_P(BothPaths, PeerStopsTest,
                         ::testing::Values(CollectivePath::kBlocking, CollectivePath::kNonBlocking),
                         [](const auto& info) {
                           return info.param == CollectivePath::kBlocking ? "Blocking"
                                                                          : "NonBlocking";
                         });

TEST_P(PeerStopsTest, WaitAbortsWhenAPeerStopsMidCollective) {
  if (!HaveGpus(2)) GTEST_SKIP() << "needs 2 GPUs";
  const CollectivePath path = GetParam();
  auto id = CreateUniqueId();
  auto second_id = CreateUniqueId();
  ASSERT_TRUE(id.ok() && second_id.ok());
  absl::Notification rank0_gave_up;
  absl::Duration rank0_took;
  absl::Status rank0_wait;
  absl::Duration rank1_close_took;
  absl::Status rank1_close;

  const CollectiveRequest request{.op = CollectiveOp::kAllReduce,
                                  .dtype = CollectiveDtype::kFloat32,
                                  .total_elements = size_t{16} << 20};
  const auto statuses = RunOnRankThreads(2, [&](int rank) -> absl::Status {
    {
      ASSIGN_OR_RETURN(NcclCommunicator comm,
                       NcclCommunicator::Create({.unique_id = *id,
                                                 .nranks = 2,
                                                 .rank = rank,
                                                 .device = rank,
                                                 .abort_timeout = kAbortTimeout,
                                                 .collective_path = path}));
      ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
      ASSIGN_OR_RETURN(
          CollectiveBuffers buffers,
          CollectiveBuffers::Allocate(comm, BufferMode::kDevice, request.total_elements * 4));
      // One collective together, so the connections are up before the peer stops.
      RETURN_IF_ERROR(EnqueueCollective(comm, request, buffers, stream.get()));
      RETURN_IF_ERROR(WaitWithDeadline(comm, stream.get(), absl::Now() + absl::Seconds(30)));
      if (rank == 0) {
        RETURN_IF_ERROR(EnqueueCollective(comm, request, buffers, stream.get()));
        const absl::Time start = absl::Now();
        rank0_wait = WaitWithDeadline(comm, stream.get(), start + kDeadline);
        rank0_took = absl::Now() - start;
        rank0_gave_up.Notify();
      } else {
        // The stopped peer: it enqueues nothing until rank 0 has given up, then leaves.
        rank0_gave_up.WaitForNotification();
        const absl::Time start = absl::Now();
        rank1_close = comm.Close(start + kDeadline);
        rank1_close_took = absl::Now() - start;
      }
      buffers.Reset();
    }
    // The same GPUs take a fresh communicator and a collective right after.
    ASSIGN_OR_RETURN(NcclCommunicator fresh,
                     NcclCommunicator::Create({.unique_id = *second_id,
                                               .nranks = 2,
                                               .rank = rank,
                                               .device = rank,
                                               .init_timeout = absl::Seconds(30)}));
    ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
    ASSIGN_OR_RETURN(CollectiveBuffers buffers,
                     CollectiveBuffers::Allocate(fresh, BufferMode::kDevice, 4096));
    RETURN_IF_ERROR(EnqueueCollective(
        fresh, {.op = CollectiveOp::kAllReduce, .total_elements = 1024}, buffers, stream.get()));
    RETURN_IF_ERROR(WaitWithDeadline(fresh, stream.get(), absl::Now() + absl::Seconds(30)));
    buffers.Reset();
    return fresh.Close(absl::Now() + absl::Seconds(20));
  });
  std::printf("rank 0 wait: %s after %s\n", rank0_wait.ToString().c_str(),
              absl::FormatDuration(rank0_took).c_str());
  std::printf("rank 1 close: %s after %s\n", rank1_close.ToString().c_str(),
              absl::FormatDuration(rank1_close_took).c_str());
  EXPECT_TRUE(FirstFailure(statuses).ok()) << FirstFailure(statuses);
  EXPECT_EQ(rank0_wait.code(), absl::StatusCode::kDeadlineExceeded) << rank0_wait;
  EXPECT_THAT(std::string(rank0_wait.message()), HasSubstr("rank 0 of 2 (device 0)"));
  EXPECT_THAT(std::string(rank0_wait.message()), HasSubstr("communicator aborted"));
  EXPECT_LE(rank0_took, kDeadline + kGrace);
  // The stopped peer's teardown is bounded too, whatever it returns.
  EXPECT_LE(rank1_close_took, kDeadline + kGrace);
}

}  // namespace
}  // namespace gpuprof::comm
