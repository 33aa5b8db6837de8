#include "workloads/spec_table.h"

#include <set>

#include "gtest/gtest.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// Every oneof case of the request has exactly one spec, and every spec a distinct Workload.
TEST(SpecTableTest, CoversEveryWorkloadOfTheApiOnce) {
  const auto* oneof = v1::ExperimentRequest::descriptor()->FindOneofByName("workload");
  ASSERT_NE(oneof, nullptr);
  EXPECT_EQ(static_cast<int>(WorkloadSpecs().size()), oneof->field_count());
  std::set<v1::Workload> workloads;
  for (int i = 0; i < oneof->field_count(); ++i) {
    const auto request_case =
        static_cast<v1::ExperimentRequest::WorkloadCase>(oneof->field(i)->number());
    const WorkloadSpec* spec = FindWorkloadSpec(request_case);
    ASSERT_NE(spec, nullptr) << oneof->field(i)->name();
    EXPECT_NE(spec->apply_defaults, nullptr);
    EXPECT_NE(spec->validate, nullptr);
    EXPECT_TRUE(workloads.insert(spec->workload).second);
    EXPECT_EQ(FindWorkloadSpec(spec->workload), spec);
  }
}

TEST(SpecTableTest, NamesComeFromTheRequest) {
  v1::ExperimentRequest request;
  EXPECT_EQ(WorkloadName(request), "");
  EXPECT_EQ(WorkloadOf(request), v1::WORKLOAD_UNSPECIFIED);
  EXPECT_FALSE(IsGpuWorkload(request));
  request.mutable_collective();
  EXPECT_EQ(WorkloadName(request), "collective");
  EXPECT_EQ(WorkloadOf(request), v1::WORKLOAD_COLLECTIVE);
  EXPECT_TRUE(IsGpuWorkload(request));
  request.mutable_radix();
  EXPECT_EQ(WorkloadName(request), "radix");
  EXPECT_FALSE(IsGpuWorkload(request));
  EXPECT_EQ(RequiredGpuCount(request), 0);
}

TEST(SpecTableTest, RequiredGpusFollowIdsCountThenTp) {
  v1::ExperimentRequest request;
  request.mutable_index();
  EXPECT_EQ(RequiredGpuCount(request), 1);
  request.set_tp_degree(4);
  EXPECT_EQ(RequiredGpuCount(request), 4);
  request.mutable_gpus()->set_gpu_count(2);
  EXPECT_EQ(RequiredGpuCount(request), 2);
  request.mutable_gpus()->add_gpu_ids(3);
  EXPECT_EQ(RequiredGpuCount(request), 1);
}

}  // namespace
}  // namespace gpuprof::workloads
