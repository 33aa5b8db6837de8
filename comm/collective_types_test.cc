#include "comm/collective_types.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "comm/collective_testing.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::comm {
namespace {

using ::testing::HasSubstr;

TEST(CollectiveTypesTest, NamesRoundTrip) {
  for (CollectiveOp op : AllCollectiveOps()) {
    auto parsed = ParseCollectiveOp(CollectiveOpName(op));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, op);
  }
  for (CollectiveDtype dtype : AllCollectiveDtypes()) {
    auto parsed = ParseCollectiveDtype(CollectiveDtypeName(dtype));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, dtype);
  }
  EXPECT_EQ(AllCollectiveOps().size(), 5u);
  EXPECT_EQ(AllCollectiveDtypes().size(), 7u);
}

TEST(CollectiveTypesTest, UnknownNamesListTheChoices) {
  EXPECT_THAT(ParseCollectiveOp("allreduce").status().message(),
              HasSubstr("op: unknown collective 'allreduce' (one of all_reduce"));
  EXPECT_THAT(ParseCollectiveDtype("fp64").status().message(), HasSubstr("dtype: unknown 'fp64'"));
}

TEST(CollectiveTypesTest, DtypeTable) {
  EXPECT_EQ(DtypeSizeBytes(CollectiveDtype::kFloat32), 4u);
  EXPECT_EQ(DtypeSizeBytes(CollectiveDtype::kInt32), 4u);
  EXPECT_EQ(DtypeSizeBytes(CollectiveDtype::kFloat16), 2u);
  EXPECT_EQ(DtypeSizeBytes(CollectiveDtype::kBfloat16), 2u);
  EXPECT_EQ(DtypeSizeBytes(CollectiveDtype::kInt8), 1u);
  EXPECT_EQ(DtypeSizeBytes(CollectiveDtype::kFloat8E4M3), 1u);
  EXPECT_EQ(DtypeSizeBytes(CollectiveDtype::kFloat8E5M2), 1u);
  // The headers here are NCCL 2.28, which has fp8.
  EXPECT_TRUE(CheckDtypeCompiledIn(CollectiveDtype::kFloat8E4M3).ok());
}

TEST(CollectiveTypesTest, OpTable) {
  EXPECT_TRUE(OpReduces(CollectiveOp::kAllReduce));
  EXPECT_TRUE(OpReduces(CollectiveOp::kReduceScatter));
  EXPECT_FALSE(OpReduces(CollectiveOp::kAllGather));
  EXPECT_TRUE(OpSplitsAcrossRanks(CollectiveOp::kAllGather));
  EXPECT_TRUE(OpSplitsAcrossRanks(CollectiveOp::kAllToAll));
  EXPECT_FALSE(OpSplitsAcrossRanks(CollectiveOp::kBroadcast));
  EXPECT_FALSE(OpSupportsInPlace(CollectiveOp::kAllToAll));
  EXPECT_TRUE(OpSupportsInPlace(CollectiveOp::kReduceScatter));
}

TEST(CollectiveTypesTest, VersionStrings) {
  EXPECT_EQ(NcclVersionString(22803), "2.28.3");
  EXPECT_EQ(NcclVersionString(2708), "2.7.8");
}

CollectiveLayout Layout(CollectiveOp op, size_t total, int nranks, int rank,
                        BufferPlacement placement = BufferPlacement::kOutOfPlace) {
  CollectiveRequest request{.op = op, .total_elements = total, .placement = placement};
  auto layout = LayoutFor(request, nranks, rank);
  EXPECT_TRUE(layout.ok()) << layout.status();
  return layout.value_or(CollectiveLayout{});
}

TEST(CollectiveLayoutTest, FollowsNcclTests) {
  CollectiveLayout all_reduce = Layout(CollectiveOp::kAllReduce, 1000, 4, 1);
  EXPECT_EQ(all_reduce.send_elements, 1000u);
  EXPECT_EQ(all_reduce.recv_elements, 1000u);
  EXPECT_EQ(all_reduce.nccl_count, 1000u);

  CollectiveLayout all_gather = Layout(CollectiveOp::kAllGather, 1000, 4, 3);
  EXPECT_EQ(all_gather.send_elements, 250u);
  EXPECT_EQ(all_gather.recv_elements, 1000u);
  EXPECT_EQ(all_gather.nccl_count, 250u);
  EXPECT_EQ(all_gather.in_place_send_offset, 750u);
  EXPECT_EQ(all_gather.in_place_recv_offset, 0u);
  EXPECT_EQ(all_gather.BufferElements(), 1000u);

  CollectiveLayout reduce_scatter = Layout(CollectiveOp::kReduceScatter, 1000, 4, 2);
  EXPECT_EQ(reduce_scatter.send_elements, 1000u);
  EXPECT_EQ(reduce_scatter.recv_elements, 250u);
  EXPECT_EQ(reduce_scatter.nccl_count, 250u);
  EXPECT_EQ(reduce_scatter.in_place_send_offset, 0u);
  EXPECT_EQ(reduce_scatter.in_place_recv_offset, 500u);

  CollectiveLayout broadcast = Layout(CollectiveOp::kBroadcast, 7, 4, 0);
  EXPECT_EQ(broadcast.nccl_count, 7u);

  CollectiveLayout all_to_all = Layout(CollectiveOp::kAllToAll, 1000, 4, 0);
  EXPECT_EQ(all_to_all.send_elements, 1000u);
  EXPECT_EQ(all_to_all.recv_elements, 1000u);
  EXPECT_EQ(all_to_all.nccl_count, 250u);
  EXPECT_EQ(all_to_all.chunk_elements, 250u);
}

TEST(CollectiveLayoutTest, ValidationNamesTheField) {
  CollectiveRequest request{.op = CollectiveOp::kAllGather, .total_elements = 10};
  EXPECT_THAT(ValidateCollectiveRequest(request, 4, 0).message(),
              HasSubstr("total_elements: 10 does not divide by 4 ranks"));
  EXPECT_THAT(ValidateCollectiveRequest(request, 0, 0).message(), HasSubstr("nranks: 0 < 1"));
  EXPECT_THAT(ValidateCollectiveRequest(request, 2, 2).message(), HasSubstr("rank: 2 is outside"));
  request.total_elements = 0;
  EXPECT_THAT(ValidateCollectiveRequest(request, 2, 0).message(), HasSubstr("total_elements"));
  CollectiveRequest broadcast{.op = CollectiveOp::kBroadcast, .total_elements = 8, .root = 3};
  EXPECT_THAT(ValidateCollectiveRequest(broadcast, 2, 0).message(), HasSubstr("root: 3"));
  CollectiveRequest all_to_all{
      .op = CollectiveOp::kAllToAll, .total_elements = 8, .placement = BufferPlacement::kInPlace};
  absl::Status status = ValidateCollectiveRequest(all_to_all, 2, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("placement: all_to_all runs out-of-place only"));
  // Ops that do not split accept any count.
  CollectiveRequest all_reduce{.op = CollectiveOp::kAllReduce, .total_elements = 7};
  EXPECT_TRUE(ValidateCollectiveRequest(all_reduce, 4, 3).ok());
}

TEST(SmallIntegerCodecTest, ExactForEveryAllowedValue) {
  for (CollectiveDtype dtype : AllCollectiveDtypes()) {
    const int limit = std::min(MaxExactInteger(dtype), 4096);
    for (int value = 0; value <= limit; ++value) {
      uint8_t bytes[4] = {};
      EncodeSmallInteger(dtype, value, bytes);
      EXPECT_EQ(DecodeElement(dtype, bytes), value) << CollectiveDtypeName(dtype);
    }
  }
}

TEST(SmallIntegerCodecTest, KnownBitPatterns) {
  uint8_t bytes[4] = {};
  EncodeSmallInteger(CollectiveDtype::kFloat16, 1, bytes);
  EXPECT_EQ(bytes[0] | (bytes[1] << 8), 0x3c00);
  EncodeSmallInteger(CollectiveDtype::kBfloat16, 3, bytes);
  EXPECT_EQ(bytes[0] | (bytes[1] << 8), 0x4040);
  EncodeSmallInteger(CollectiveDtype::kFloat8E4M3, 1, bytes);
  EXPECT_EQ(bytes[0], 0x38);
  EncodeSmallInteger(CollectiveDtype::kFloat8E5M2, 1, bytes);
  EXPECT_EQ(bytes[0], 0x3c);
  EncodeSmallInteger(CollectiveDtype::kFloat8E4M3, 16, bytes);
  EXPECT_EQ(bytes[0], 0x58);
}

TEST(SmallIntegerCodecTest, AllOnesSentinelNeverMatchesForFloats) {
  const uint8_t ones[4] = {0xff, 0xff, 0xff, 0xff};
  for (CollectiveDtype dtype : AllCollectiveDtypes()) {
    const double decoded = DecodeElement(dtype, ones);
    if (dtype == CollectiveDtype::kInt8 || dtype == CollectiveDtype::kInt32) {
      EXPECT_EQ(decoded, -1);
    } else {
      EXPECT_TRUE(std::isnan(decoded)) << CollectiveDtypeName(dtype);
    }
  }
}

// The expected values the GPU tests compare with, checked against a plain simulation of each
// collective over every rank's inputs.
std::vector<std::vector<int>> Simulate(const CollectiveRequest& request, int nranks) {
  std::vector<CollectiveLayout> layouts;
  std::vector<std::vector<int>> inputs(nranks);
  for (int r = 0; r < nranks; ++r) {
    layouts.push_back(*LayoutFor(request, nranks, r));
    for (size_t i = 0; i < layouts[r].send_elements; ++i) {
      inputs[r].push_back(InputValue(request, layouts[r], r, i));
    }
  }
  std::vector<std::vector<int>> outputs(nranks);
  const size_t total = request.total_elements;
  const size_t chunk = layouts[0].chunk_elements;
  for (int q = 0; q < nranks; ++q) {
    std::vector<int>& out = outputs[q];
    out.assign(layouts[q].recv_elements, 0);
    for (size_t j = 0; j < out.size(); ++j) {
      switch (request.op) {
        case CollectiveOp::kAllReduce:
          for (int r = 0; r < nranks; ++r) out[j] += inputs[r][j];
          break;
        case CollectiveOp::kReduceScatter:
          for (int r = 0; r < nranks; ++r) out[j] += inputs[r][q * chunk + j];
          break;
        case CollectiveOp::kAllGather:
          out[j] = inputs[j / chunk][j % chunk];
          break;
        case CollectiveOp::kBroadcast:
          out[j] = inputs[request.root][j];
          break;
        case CollectiveOp::kAllToAll:
          out[j] = inputs[j / chunk][q * chunk + j % chunk];
          break;
      }
    }
  }
  (void)total;
  return outputs;
}

TEST(CollectiveTestingTest, ExpectedValuesMatchASimulation) {
  for (int nranks : {1, 2, 4}) {
    for (CollectiveOp op : AllCollectiveOps()) {
      CollectiveRequest request{.op = op, .total_elements = 24, .root = nranks - 1};
      const auto outputs = Simulate(request, nranks);
      for (int q = 0; q < nranks; ++q) {
        const CollectiveLayout layout = *LayoutFor(request, nranks, q);
        for (size_t j = 0; j < layout.recv_elements; ++j) {
          ASSERT_EQ(ExpectedValue(request, layout, nranks, q, j), outputs[q][j])
              << CollectiveOpName(op) << " nranks " << nranks << " rank " << q << " index " << j;
          // Every value stays exact in the narrowest dtype.
          ASSERT_LE(outputs[q][j], MaxExactInteger(CollectiveDtype::kFloat8E5M2));
        }
      }
    }
  }
}

TEST(CollectiveTestingTest, CheckOutputReportsTheFirstWrongElement) {
  CollectiveRequest request{
      .op = CollectiveOp::kAllReduce, .dtype = CollectiveDtype::kBfloat16, .total_elements = 6};
  const CollectiveLayout layout = *LayoutFor(request, 2, 0);
  std::vector<uint8_t> recv(12);
  for (size_t i = 0; i < 6; ++i) {
    EncodeSmallInteger(request.dtype, ExpectedValue(request, layout, 2, 0, i), &recv[2 * i]);
  }
  EXPECT_TRUE(CheckOutput(request, layout, 2, 0, recv).ok());
  recv[4] = recv[5] = 0xff;  // element 2 -> NaN
  EXPECT_THAT(CheckOutput(request, layout, 2, 0, recv).message(),
              HasSubstr("1 of 6 wrong; element 2 is nan"));
}

TEST(CollectiveTestingTest, RunOnRankThreadsKeepsRankOrder) {
  auto statuses = RunOnRankThreads(
      3, [](int rank) { return rank == 1 ? absl::InternalError("boom") : absl::OkStatus(); });
  ASSERT_EQ(statuses.size(), 3u);
  EXPECT_TRUE(statuses[0].ok());
  EXPECT_THAT(FirstFailure(statuses).message(), HasSubstr("rank 1: boom"));
}

}  // namespace
}  // namespace gpuprof::comm
