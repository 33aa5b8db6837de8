#include "client/fleet_sweep.h"

#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "sweep/sweep_expansion.h"

namespace gpuprof::client {
namespace {

using ::testing::ElementsAre;

TEST(SplitPoints, InProportionToTheWeightsWithLargestRemainders) {
  EXPECT_THAT(SplitPoints(12, {1, 1, 1}), ElementsAre(4, 4, 4));
  EXPECT_THAT(SplitPoints(10, {1, 1, 1}), ElementsAre(4, 3, 3));
  // 8 GPUs, 2 GPUs, none free.
  EXPECT_THAT(SplitPoints(10, {8, 2, 0}), ElementsAre(8, 2, 0));
  EXPECT_THAT(SplitPoints(2, {1, 1, 1}), ElementsAre(1, 1, 0));
  EXPECT_THAT(SplitPoints(5, {0, 0}), ElementsAre(0, 0));
}

TEST(AssignPoints, InterleavesTheSharesOverTheGrid) {
  EXPECT_THAT(AssignPoints({2, 2, 2}), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(AssignPoints({4, 2, 0}), ElementsAre(0, 1, 0, 0, 1, 0));
}

TEST(ShareRequest, ANodesShareIsAZippedSweepOfItsPointsWithTheFleetLabels) {
  v1::SweepRequest request;
  request.mutable_base()->mutable_radix()->set_num_requests(300);
  request.set_max_concurrent_gpus(2);
  v1::SweepAxis* requests = request.add_axes();
  requests->set_field("num_requests");
  requests->mutable_powers_of_two()->set_min(256);
  requests->mutable_powers_of_two()->set_max(1024);
  v1::SweepAxis* priority = request.add_axes();
  priority->set_field("priority");
  priority->add_values("1");
  priority->add_values("2");
  const absl::StatusOr<std::vector<sweep::ExpandedPoint>> points = sweep::ExpandSweep(request);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 6u);

  const v1::SweepRequest share = ShareRequest(request, *points, {1, 4}, "fsw-0001", "a,b");
  EXPECT_EQ(share.combination(), v1::SweepRequest::ZIPPED);
  EXPECT_EQ(share.max_concurrent_gpus(), 2);
  EXPECT_EQ(share.base().labels().at(kFleetSweepLabel), "fsw-0001");
  EXPECT_EQ(share.base().labels().at(kFleetNodesLabel), "a,b");
  ASSERT_EQ(share.axes_size(), 2);
  EXPECT_THAT(share.axes(0).values(), ElementsAre("256", "1024"));
  EXPECT_THAT(share.axes(1).values(), ElementsAre("2", "1"));
  // The share expands to exactly those points of the fleet's grid.
  const absl::StatusOr<std::vector<sweep::ExpandedPoint>> mine = sweep::ExpandSweep(share);
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ(mine->at(0).parameters, points->at(1).parameters);
  EXPECT_EQ(mine->at(1).parameters, points->at(4).parameters);
}

TEST(ShareRequest, AKernelAxisSendsEachPointItsOwnSource) {
  v1::SweepRequest request;
  request.mutable_base()->mutable_index();
  v1::SweepAxis* kernels = request.add_axes();
  kernels->set_field("kernel");
  for (const char* name : {"ours", "a.cu", "b.cu"}) {
    kernels->add_values(name);
    v1::CustomKernel* kernel = kernels->add_kernels();
    if (std::string(name) != "ours") {
      kernel->set_source(absl::StrCat("// ", name));
      kernel->set_file_name(name);
    }
  }
  v1::SweepAxis* tokens = request.add_axes();
  tokens->set_field("num_tokens");
  tokens->add_values("1");
  tokens->add_values("64");
  const absl::StatusOr<std::vector<sweep::ExpandedPoint>> points = sweep::ExpandSweep(request);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 6u);

  const v1::SweepRequest share = ShareRequest(request, *points, {0, 5}, "fsw-0002", "a,b");
  EXPECT_THAT(share.axes(0).values(), ElementsAre("ours", "b.cu"));
  ASSERT_EQ(share.axes(0).kernels_size(), 2);
  const absl::StatusOr<std::vector<sweep::ExpandedPoint>> mine = sweep::ExpandSweep(share);
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_EQ(mine->size(), 2u);
  EXPECT_EQ(mine->at(0).parameters, points->at(0).parameters);
  EXPECT_FALSE(mine->at(0).request.has_custom_kernel());
  EXPECT_EQ(mine->at(1).parameters, points->at(5).parameters);
  EXPECT_EQ(mine->at(1).request.custom_kernel().source(), "// b.cu");
}

}  // namespace
}  // namespace gpuprof::client
