#include "workloads/copy/copy_spec.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::HasSubstr;

constexpr int64_t kGpuMemory = int64_t{80} << 30;

v1::ListGpusResponse Inventory(int gpus) {
  v1::ListGpusResponse inventory;
  for (int i = 0; i < gpus; ++i) {
    auto& gpu = *inventory.add_gpus();
    gpu.set_index(i);
    gpu.set_total_memory_bytes(kGpuMemory);
  }
  return inventory;
}

// The request with the spec's defaults applied, validated on a host of `gpus` GPUs.
absl::Status Validate(v1::ExperimentRequest request, int gpus = 2) {
  const v1::ListGpusResponse inventory = Inventory(gpus);
  kCopySpec.apply_defaults(inventory, request);
  return kCopySpec.validate(request, HostLimitsOf(inventory));
}

v1::ExperimentRequest Copy(v1::CopyDirection direction) {
  v1::ExperimentRequest request;
  request.mutable_copy()->set_direction(direction);
  return request;
}

TEST(CopySpecTest, DefaultsToAQuarterGibDeviceCopy) {
  v1::ExperimentRequest request;
  request.mutable_copy();
  kCopySpec.apply_defaults(Inventory(1), request);
  EXPECT_EQ(request.copy().direction(), v1::COPY_DIRECTION_DEVICE_TO_DEVICE);
  EXPECT_EQ(request.copy().bytes(), int64_t{256} << 20);
  EXPECT_EQ(request.copy().host_memory(), v1::HOST_MEMORY_UNSPECIFIED);
  EXPECT_EQ(request.gpus().gpu_count(), 0);
  EXPECT_TRUE(kCopySpec.validate(request, HostLimitsOf(Inventory(1))).ok());
  EXPECT_EQ(kCopySpec.workload, v1::WORKLOAD_COPY);
  EXPECT_TRUE(kCopySpec.uses_gpu);
  EXPECT_FALSE(kCopySpec.supports_tensor_parallelism);
}

TEST(CopySpecTest, HostCopiesArePinnedUnlessAskedAndPeerLeasesAPair) {
  v1::ExperimentRequest request = Copy(v1::COPY_DIRECTION_HOST_TO_DEVICE);
  kCopySpec.apply_defaults(Inventory(2), request);
  EXPECT_EQ(request.copy().host_memory(), v1::HOST_MEMORY_PINNED);
  EXPECT_EQ(request.gpus().gpu_count(), 0);

  request = Copy(v1::COPY_DIRECTION_DEVICE_TO_HOST);
  request.mutable_copy()->set_host_memory(v1::HOST_MEMORY_PAGEABLE);
  kCopySpec.apply_defaults(Inventory(2), request);
  EXPECT_EQ(request.copy().host_memory(), v1::HOST_MEMORY_PAGEABLE);

  request = Copy(v1::COPY_DIRECTION_PEER);
  kCopySpec.apply_defaults(Inventory(4), request);
  EXPECT_EQ(request.gpus().gpu_count(), 2);
  // A choice of the request's own stays.
  request = Copy(v1::COPY_DIRECTION_PEER);
  request.mutable_gpus()->add_gpu_ids(3);
  request.mutable_gpus()->add_gpu_ids(1);
  kCopySpec.apply_defaults(Inventory(4), request);
  EXPECT_EQ(request.gpus().gpu_count(), 0);
}

TEST(CopySpecTest, EveryDirectionValidatesWithItsDefaults) {
  for (const auto direction :
       {v1::COPY_DIRECTION_DEVICE_TO_DEVICE, v1::COPY_DIRECTION_HOST_TO_DEVICE,
        v1::COPY_DIRECTION_DEVICE_TO_HOST, v1::COPY_DIRECTION_PEER}) {
    EXPECT_TRUE(Validate(Copy(direction)).ok()) << v1::CopyDirection_Name(direction);
  }
  v1::ExperimentRequest bidirectional = Copy(v1::COPY_DIRECTION_PEER);
  bidirectional.mutable_copy()->set_bidirectional(true);
  EXPECT_TRUE(Validate(bidirectional).ok());
  bidirectional = Copy(v1::COPY_DIRECTION_HOST_TO_DEVICE);
  bidirectional.mutable_copy()->set_bidirectional(true);
  EXPECT_TRUE(Validate(bidirectional).ok());
}

TEST(CopySpecTest, BytesOutOfRangeNameTheFieldValueAndRange) {
  v1::ExperimentRequest request = Copy(v1::COPY_DIRECTION_DEVICE_TO_DEVICE);
  request.mutable_copy()->set_bytes(-4096);
  const absl::Status status = Validate(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("copy.bytes: got -4096; must be in [1, 68719476736]"));
}

TEST(CopySpecTest, BuffersMustFitTheSmallestGpu) {
  // Two buffers of 48 GiB do not fit 80 GiB; one host-to-device destination does.
  v1::ExperimentRequest request = Copy(v1::COPY_DIRECTION_DEVICE_TO_DEVICE);
  request.mutable_copy()->set_bytes(int64_t{48} << 30);
  const absl::Status status = Validate(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("copy (buffers on each GPU)"));
  request = Copy(v1::COPY_DIRECTION_HOST_TO_DEVICE);
  request.mutable_copy()->set_bytes(int64_t{48} << 30);
  EXPECT_TRUE(Validate(request).ok());
}

TEST(CopySpecTest, HostMemoryOnlyForHostCopies) {
  v1::ExperimentRequest request = Copy(v1::COPY_DIRECTION_PEER);
  request.mutable_copy()->set_host_memory(v1::HOST_MEMORY_PAGEABLE);
  const absl::Status status = Validate(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("copy.host_memory: got pageable with direction peer; only "
                        "host-to-device and device-to-host"));
}

TEST(CopySpecTest, BidirectionalNeedsTwoDirectionsThatCanRunAtOnce) {
  v1::ExperimentRequest request = Copy(v1::COPY_DIRECTION_DEVICE_TO_DEVICE);
  request.mutable_copy()->set_bidirectional(true);
  absl::Status status = Validate(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("copy.bidirectional: a copy within one GPU has one direction"));

  request = Copy(v1::COPY_DIRECTION_HOST_TO_DEVICE);
  request.mutable_copy()->set_bidirectional(true);
  request.mutable_copy()->set_host_memory(v1::HOST_MEMORY_PAGEABLE);
  status = Validate(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("copy.bidirectional: pageable copies are synchronous"));
}

TEST(CopySpecTest, PageableCopiesRefuseGraphs) {
  v1::ExperimentRequest request = Copy(v1::COPY_DIRECTION_DEVICE_TO_HOST);
  request.mutable_copy()->set_host_memory(v1::HOST_MEMORY_PAGEABLE);
  request.mutable_measurement()->set_graph_launches_per_sample(10);
  const absl::Status status = Validate(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("measurement.graph_launches_per_sample: got 10; pageable copies"));
  request.mutable_copy()->set_host_memory(v1::HOST_MEMORY_PINNED);
  EXPECT_TRUE(Validate(request).ok());
}

TEST(CopySpecTest, PeerCopiesNeedTwoGpus) {
  v1::ExperimentRequest request = Copy(v1::COPY_DIRECTION_PEER);
  absl::Status status = Validate(request, /*gpus=*/1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("copy.direction: got peer; this host has 1 GPU"));

  request = Copy(v1::COPY_DIRECTION_PEER);
  request.mutable_gpus()->add_gpu_ids(1);
  status = Validate(request, /*gpus=*/2);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("copy.direction: got peer with 1 GPU selected; peer copies need at "
                        "least 2"));
}

}  // namespace
}  // namespace gpuprof::workloads
