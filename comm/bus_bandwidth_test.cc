#include "comm/bus_bandwidth.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::comm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BusBandwidthTest, FactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kReduceScatter, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 1), 0.0);
}

TEST(BusBandwidthTest, AlgorithmBytesIsTheTotalArray) {
  // all_gather of 1 MiB total on 4 ranks: each rank sends 256 KiB; S is the 1 MiB output.
  CollectiveRequest all_gather{
      .op = CollectiveOp::kAllGather, .dtype = CollectiveDtype::kFloat32, .total_elements = 262144};
  EXPECT_EQ(AlgorithmBytes(*LayoutFor(all_gather, 4, 0), all_gather.dtype), 1u << 20);
  // all_reduce: the per-rank send buffer.
  CollectiveRequest all_reduce{
      .op = CollectiveOp::kAllReduce, .dtype = CollectiveDtype::kBfloat16, .total_elements = 1000};
  EXPECT_EQ(AlgorithmBytes(*LayoutFor(all_reduce, 8, 0), all_reduce.dtype), 2000u);
  // reduce_scatter: the per-rank input, n times the output.
  CollectiveRequest reduce_scatter{
      .op = CollectiveOp::kReduceScatter, .dtype = CollectiveDtype::kInt8, .total_elements = 800};
  const CollectiveLayout layout = *LayoutFor(reduce_scatter, 8, 0);
  EXPECT_EQ(AlgorithmBytes(layout, reduce_scatter.dtype), 800u);
  EXPECT_EQ(layout.recv_elements * 8, 800u);
}

TEST(BusBandwidthTest, ComputesGigabytesPerSecond) {
  // 1 GB in 10 ms on 2 ranks: algbw 100 GB/s; all_reduce busbw x1, all_gather x0.5.
  Bandwidth all_reduce = ComputeBandwidth(CollectiveOp::kAllReduce, 1'000'000'000, 0.01, 2);
  EXPECT_DOUBLE_EQ(all_reduce.algbw_gb_per_s, 100.0);
  EXPECT_DOUBLE_EQ(all_reduce.busbw_gb_per_s, 100.0);
  Bandwidth all_gather = ComputeBandwidth(CollectiveOp::kAllGather, 1'000'000'000, 0.01, 2);
  EXPECT_DOUBLE_EQ(all_gather.busbw_gb_per_s, 50.0);
  Bandwidth four = ComputeBandwidth(CollectiveOp::kAllReduce, 1'000'000'000, 0.01, 4);
  EXPECT_DOUBLE_EQ(four.busbw_gb_per_s, 150.0);
  EXPECT_EQ(ComputeBandwidth(CollectiveOp::kAllReduce, 8, 0, 2).algbw_gb_per_s, 0);
}

TEST(SizeSweepTest, EightBytesToOneGibibyteDoubling) {
  auto counts = SweepElementCounts({.min_bytes = 8, .max_bytes = size_t{1} << 30, .step_factor = 2},
                                   CollectiveOp::kAllReduce, CollectiveDtype::kFloat32, 2);
  ASSERT_TRUE(counts.ok()) << counts.status();
  ASSERT_EQ(counts->size(), 28u);
  EXPECT_EQ(counts->front(), 2u);
  EXPECT_EQ(counts->back(), size_t{1} << 28);
}

TEST(SizeSweepTest, RoundsToElementsAndRanks) {
  // 3 ranks, fp32 all_gather: 8 B -> 2 elements -> rounds up to 3 (the smallest valid count);
  // 16 B -> 4 -> 3 again (dropped); 32 B -> 8 -> 6; 64 B -> 16 -> 15.
  auto counts = SweepElementCounts({.min_bytes = 8, .max_bytes = 64, .step_factor = 2},
                                   CollectiveOp::kAllGather, CollectiveDtype::kFloat32, 3);
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_THAT(*counts, ElementsAre(3, 6, 15));
  // broadcast needs no divisibility; 10 B of fp32 -> 2 elements.
  counts = SweepElementCounts({.min_bytes = 10, .max_bytes = 10, .step_factor = 2},
                              CollectiveOp::kBroadcast, CollectiveDtype::kFloat32, 3);
  ASSERT_TRUE(counts.ok());
  EXPECT_THAT(*counts, ElementsAre(2));
  // A non-integer factor like nccl-tests' -f 1.5.
  counts = SweepElementCounts({.min_bytes = 100, .max_bytes = 400, .step_factor = 1.5},
                              CollectiveOp::kAllReduce, CollectiveDtype::kInt8, 2);
  ASSERT_TRUE(counts.ok());
  EXPECT_THAT(*counts, ElementsAre(100, 150, 225, 337));
}

TEST(SizeSweepTest, ValidationNamesTheField) {
  EXPECT_THAT(ValidateSizeSweep({.min_bytes = 0}, 2).message(), HasSubstr("min_bytes"));
  EXPECT_THAT(ValidateSizeSweep({.min_bytes = 64, .max_bytes = 8}, 2).message(),
              HasSubstr("max_bytes: 8 is below min_bytes 64"));
  EXPECT_THAT(ValidateSizeSweep({.step_factor = 1.0}, 2).message(), HasSubstr("step_factor"));
  EXPECT_THAT(ValidateSizeSweep({.step_factor = 1.0000001}, 2).message(),
              HasSubstr("gives more than 4096 sizes"));
  EXPECT_THAT(ValidateSizeSweep({}, 0).message(), HasSubstr("nranks"));
  EXPECT_EQ(ValidateSizeSweep({}, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(ValidateSizeSweep({}, 8).ok());
}

}  // namespace
}  // namespace gpuprof::comm
