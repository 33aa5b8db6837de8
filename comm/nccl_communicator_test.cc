// CPU-only checks of the communicator layer: unique-id relay bytes, option and mode validation,
// the dtype table. Nothing here needs a GPU.
#include "comm/nccl_communicator.h"

#include "comm/collective.h"
#include "comm/collective_buffers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::comm {
namespace {

using ::testing::HasSubstr;

TEST(UniqueIdTest, SerialisesToExactly128BytesAndBack) {
  ncclUniqueId id;
  for (size_t i = 0; i < kUniqueIdBytes; ++i) id.internal[i] = static_cast<char>(i * 7 + 1);
  id.internal[5] = '\0';  // binary: embedded zeros survive
  const std::string bytes = SerializeUniqueId(id);
  ASSERT_EQ(bytes.size(), 128u);
  auto parsed = ParseUniqueId(bytes);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(std::string(parsed->internal, kUniqueIdBytes), bytes);
}

TEST(UniqueIdTest, RejectsAnyOtherLength) {
  absl::StatusOr<ncclUniqueId> parsed = ParseUniqueId(std::string(127, 'x'));
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("unique_id: 127 bytes"));
  EXPECT_FALSE(ParseUniqueId(std::string(129, 'x')).ok());
  EXPECT_FALSE(ParseUniqueId("").ok());
}

TEST(CommunicatorOptionsTest, ValidationNamesTheField) {
  CommunicatorOptions options{.nranks = 2, .rank = 1, .device = 0};
  EXPECT_TRUE(ValidateCommunicatorOptions(options).ok());
  EXPECT_EQ(options.collective_path, CollectivePath::kBlocking);
  options.rank = 2;
  EXPECT_THAT(ValidateCommunicatorOptions(options).message(),
              HasSubstr("rank: 2 is outside [0, 2)"));
  options.rank = 0;
  options.nranks = 0;
  EXPECT_THAT(ValidateCommunicatorOptions(options).message(), HasSubstr("nranks: 0 < 1"));
  options.nranks = 2;
  options.device = -1;
  EXPECT_THAT(ValidateCommunicatorOptions(options).message(), HasSubstr("device: -1"));
  options.device = 0;
  options.init_timeout = absl::ZeroDuration();
  EXPECT_THAT(ValidateCommunicatorOptions(options).message(), HasSubstr("init_timeout"));
  options.init_timeout = absl::InfiniteDuration();
  EXPECT_THAT(ValidateCommunicatorOptions(options).message(), HasSubstr("init_timeout"));
}

TEST(CommunicatorTest, AnUnusedCommunicatorIsHarmless) {
  NcclCommunicator communicator;
  EXPECT_FALSE(communicator.usable());
  EXPECT_TRUE(communicator.Abort().ok());
  EXPECT_TRUE(communicator.Close(absl::Now()).ok());
  EXPECT_EQ(communicator.AsyncError().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BufferModeTest, NamesAndVersions) {
  for (BufferMode mode : AllBufferModes()) {
    auto parsed = ParseBufferMode(BufferModeName(mode));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, mode);
  }
  EXPECT_THAT(ParseBufferMode("pinned").status().message(), HasSubstr("buffer_mode: unknown"));
  EXPECT_TRUE(CheckBufferModeSupported(BufferMode::kDevice, 2000).ok());
  EXPECT_TRUE(CheckBufferModeSupported(BufferMode::kSymmetric, 22803).ok());
  absl::Status old = CheckBufferModeSupported(BufferMode::kSymmetric, 22603);
  EXPECT_EQ(old.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(old.message(),
              HasSubstr("symmetric needs NCCL >= 2.27.0; the loaded library is 2.26.3"));
  EXPECT_EQ(CheckBufferModeSupported(BufferMode::kRegistered, 21806).code(),
            absl::StatusCode::kUnimplemented);
}

TEST(SymmetricWindowTest, RefusesWhatNccl228MisHandles) {
  CollectiveRequest all_gather{
      .op = CollectiveOp::kAllGather, .dtype = CollectiveDtype::kFloat32, .total_elements = 4098};
  // 2049-element chunks: 8196 bytes, not a multiple of 16.
  absl::Status status = CheckSymmetricWindowUse(all_gather, *LayoutFor(all_gather, 2, 0));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("this chunk is 8196 bytes"));
  all_gather.total_elements = 4096;
  EXPECT_TRUE(CheckSymmetricWindowUse(all_gather, *LayoutFor(all_gather, 2, 0)).ok());
  all_gather.placement = BufferPlacement::kInPlace;
  EXPECT_EQ(CheckSymmetricWindowUse(all_gather, *LayoutFor(all_gather, 2, 1)).code(),
            absl::StatusCode::kInvalidArgument);
  // all_reduce keeps one offset on every rank, in place or not, and any count.
  CollectiveRequest all_reduce{.op = CollectiveOp::kAllReduce,
                               .dtype = CollectiveDtype::kFloat16,
                               .total_elements = 4099,
                               .placement = BufferPlacement::kInPlace};
  EXPECT_TRUE(CheckSymmetricWindowUse(all_reduce, *LayoutFor(all_reduce, 2, 1)).ok());
}

TEST(NcclDataTypeTest, EveryDtypeMapsWithNccl228) {
  EXPECT_EQ(*NcclDataTypeFor(CollectiveDtype::kFloat32), ncclFloat32);
  EXPECT_EQ(*NcclDataTypeFor(CollectiveDtype::kFloat16), ncclFloat16);
  EXPECT_EQ(*NcclDataTypeFor(CollectiveDtype::kBfloat16), ncclBfloat16);
  EXPECT_EQ(*NcclDataTypeFor(CollectiveDtype::kInt8), ncclInt8);
  EXPECT_EQ(*NcclDataTypeFor(CollectiveDtype::kInt32), ncclInt32);
  EXPECT_EQ(*NcclDataTypeFor(CollectiveDtype::kFloat8E4M3), ncclFloat8e4m3);
  EXPECT_EQ(*NcclDataTypeFor(CollectiveDtype::kFloat8E5M2), ncclFloat8e5m2);
}

TEST(EnqueueTest, ClosedCommunicatorIsRefusedBeforeAnyNcclCall) {
  NcclCommunicator communicator;
  CollectiveRequest request{.total_elements = 8};
  absl::Status status = EnqueueCollective(communicator, request, CollectivePointers{}, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(WaitWithDeadline(communicator, nullptr, absl::Now()).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gpuprof::comm
