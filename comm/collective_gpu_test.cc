// Every op x dtype x placement x buffer mode on two GPUs, one thread per rank, each result
// compared exactly with the expected integers. Needs 2 GPUs (skips otherwise).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "comm/collective.h"
#include "comm/collective_buffers.h"
#include "comm/collective_testing.h"
#include "comm/collective_types.h"
#include "comm/nccl_communicator.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"

namespace gpuprof::comm {
namespace {

constexpr int kRanks = 2;
// Sizes in elements: the smallest split, chunks that are not a multiple of 16 bytes (4098,
// 1048578) and ones that are (4096, 1 Mi).
constexpr size_t kElementCounts[] = {2, 4096, 4098, 1048576, 1048578};
constexpr absl::Duration kCollectiveTimeout = absl::Seconds(20);

// Should a CUDA call wedge behind a kernel that never ends, the binary still ends (and says
// why) instead of holding the GPUs until someone kills it.
const bool kWatchdogStarted = [] {
  std::thread([] {
    absl::SleepFor(absl::Seconds(240));
    std::fprintf(stderr, "watchdog: test binary still running after 240 s; exiting\n");
    std::_Exit(3);
  }).detach();
  return true;
}();

bool HaveGpus(int wanted) {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count >= wanted;
}

std::vector<CollectiveRequest> AllRequests() {
  std::vector<CollectiveRequest> requests;
  for (CollectiveOp op : AllCollectiveOps()) {
    for (CollectiveDtype dtype : AllCollectiveDtypes()) {
      if (!CheckDtypeCompiledIn(dtype).ok()) continue;
      for (BufferPlacement placement : {BufferPlacement::kOutOfPlace, BufferPlacement::kInPlace}) {
        if (placement == BufferPlacement::kInPlace && !OpSupportsInPlace(op)) continue;
        for (size_t elements : kElementCounts) {
          requests.push_back(CollectiveRequest{.op = op,
                                               .dtype = dtype,
                                               .total_elements = elements,
                                               .placement = placement,
                                               .root = op == CollectiveOp::kBroadcast ? 1 : 0});
        }
      }
    }
  }
  return requests;
}

// Fills the buffers with an all-ones sentinel (NaN or -1), uploads this rank's input where the
// layout reads it, runs the collective and compares what lands in the receive region.
absl::Status RunAndCheck(NcclCommunicator& comm, const CollectiveBuffers& buffers,
                         cudaStream_t stream, const CollectiveRequest& request) {
  ASSIGN_OR_RETURN(const CollectiveLayout layout, LayoutFor(request, comm.nranks(), comm.rank()));
  ASSIGN_OR_RETURN(const CollectivePointers pointers, buffers.PointersFor(layout, request));
  const size_t element_bytes = DtypeSizeBytes(request.dtype);
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffers.send(), 0xff, buffers.bytes_per_buffer(), stream));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(buffers.recv(), 0xff, buffers.bytes_per_buffer(), stream));
  const std::vector<uint8_t> input = EncodeInput(request, layout, comm.rank());
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<void*>(pointers.send), input.data(), input.size(),
                                       cudaMemcpyHostToDevice, stream));
  RETURN_IF_ERROR(EnqueueCollective(comm, request, pointers, stream));
  RETURN_IF_ERROR(WaitWithDeadline(comm, stream, absl::Now() + kCollectiveTimeout));
  std::vector<uint8_t> output(layout.recv_elements * element_bytes);
  CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(output.data(), pointers.recv, output.size(), cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return CheckOutput(request, layout, comm.nranks(), comm.rank(), output);
}

// One communicator per rank; every request in `mode`. Wrong results are collected (so both
// ranks stay in step); a failed NCCL call ends the rank at once. In SYMMETRIC mode the
// requests CheckSymmetricWindowUse refuses must be refused, before any NCCL call.
void RunEveryRequest(BufferMode mode, CollectivePath path = CollectivePath::kBlocking) {
  auto id = CreateUniqueId();
  ASSERT_TRUE(id.ok()) << id.status();
  // The id travels as bytes, as the daemon will relay it.
  const std::string id_bytes = SerializeUniqueId(*id);
  const std::vector<CollectiveRequest> requests = AllRequests();
  std::vector<std::vector<std::string>> wrong(kRanks);
  std::vector<int> checked(kRanks, 0);
  std::vector<int> refused(kRanks, 0);

  auto rank_body = [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(const ncclUniqueId rank_id, ParseUniqueId(id_bytes));
    ASSIGN_OR_RETURN(NcclCommunicator comm,
                     NcclCommunicator::Create({.unique_id = rank_id,
                                               .nranks = kRanks,
                                               .rank = rank,
                                               .device = rank,
                                               .init_timeout = absl::Seconds(60),
                                               .name = "collective_gpu_test",
                                               .collective_path = path}));
    ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
    size_t max_bytes = 0;
    for (const CollectiveRequest& request : requests) {
      ASSIGN_OR_RETURN(const CollectiveLayout layout, LayoutFor(request, kRanks, rank));
      max_bytes = std::max(max_bytes, layout.BufferElements() * DtypeSizeBytes(request.dtype));
    }
    {
      ASSIGN_OR_RETURN(CollectiveBuffers buffers,
                       CollectiveBuffers::Allocate(comm, mode, max_bytes));
      for (const CollectiveRequest& request : requests) {
        absl::Status refusal;
        if (mode == BufferMode::kSymmetric) {
          ASSIGN_OR_RETURN(const CollectiveLayout layout, LayoutFor(request, kRanks, rank));
          refusal = CheckSymmetricWindowUse(request, layout);
        }
        absl::Status status = RunAndCheck(comm, buffers, stream.get(), request);
        if (!comm.usable()) return status;  // NCCL failed: the peer will time out too
        ++checked[rank];
        if (!refusal.ok()) {
          ++refused[rank];
          if (status.code() != refusal.code()) {
            wrong[rank].push_back(
                absl::StrCat("expected refusal ", refusal.ToString(), ", got ", status.ToString()));
          }
        } else if (!status.ok()) {
          wrong[rank].push_back(std::string(status.message()));
        }
      }
    }
    return comm.Close(absl::Now() + absl::Seconds(20));
  };
  const std::vector<absl::Status> statuses = RunOnRankThreads(kRanks, rank_body);
  for (int rank = 0; rank < kRanks; ++rank) {
    if (statuses[rank].code() == absl::StatusCode::kUnimplemented) {
      GTEST_SKIP() << statuses[rank];
    }
    EXPECT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
    EXPECT_TRUE(wrong[rank].empty()) << "rank " << rank << ", " << wrong[rank].size() << " wrong:\n"
                                     << absl::StrJoin(wrong[rank], "\n");
    std::printf(
        "mode %s (%s collectives) rank %d: %d requests, %d refused as designed, %zu "
        "wrong\n",
        std::string(BufferModeName(mode)).c_str(),
        path == CollectivePath::kBlocking ? "blocking" : "non-blocking", rank, checked[rank],
        refused[rank], wrong[rank].size());
  }
  EXPECT_EQ(checked[0], static_cast<int>(requests.size()));
}

class CollectiveGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveGpus(kRanks)) GTEST_SKIP() << "needs " << kRanks << " GPUs";
    auto version = LoadedNcclVersion();
    ASSERT_TRUE(version.ok()) << version.status();
    std::printf("NCCL loaded %s, headers %s\n", NcclVersionString(*version).c_str(),
                CompiledNcclVersion().c_str());
  }
};

TEST_F(CollectiveGpuTest, DeviceBuffers) { RunEveryRequest(BufferMode::kDevice); }
TEST_F(CollectiveGpuTest, RegisteredBuffers) { RunEveryRequest(BufferMode::kRegistered); }
TEST_F(CollectiveGpuTest, SymmetricWindows) { RunEveryRequest(BufferMode::kSymmetric); }
TEST_F(CollectiveGpuTest, DeviceBuffersOnTheNonBlockingPath) {
  RunEveryRequest(BufferMode::kDevice, CollectivePath::kNonBlocking);
}

TEST_F(CollectiveGpuTest, TooSmallBuffersAreRefusedBeforeNccl) {
  auto id = CreateUniqueId();
  ASSERT_TRUE(id.ok());
  const auto statuses = RunOnRankThreads(kRanks, [&](int rank) -> absl::Status {
    ASSIGN_OR_RETURN(NcclCommunicator comm,
                     NcclCommunicator::Create(
                         {.unique_id = *id, .nranks = kRanks, .rank = rank, .device = rank}));
    ASSIGN_OR_RETURN(CollectiveBuffers buffers,
                     CollectiveBuffers::Allocate(comm, BufferMode::kDevice, 1024));
    ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
    const absl::Status status = EnqueueCollective(
        comm, {.op = CollectiveOp::kAllReduce, .total_elements = 1024}, buffers, stream.get());
    if (status.code() != absl::StatusCode::kOutOfRange) {
      return absl::InternalError(absl::StrCat("expected OUT_OF_RANGE, got ", status.ToString()));
    }
    buffers.Reset();
    return comm.Close(absl::Now() + absl::Seconds(20));
  });
  EXPECT_TRUE(FirstFailure(statuses).ok()) << FirstFailure(statuses);
}

}  // namespace
}  // namespace gpuprof::comm
