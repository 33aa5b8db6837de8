#include "workloads/runner_table.h"

#include "gtest/gtest.h"
#include "workloads/spec_table.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

TEST(RunnerTableTest, EveryRunnerHasASpec) {
  for (const std::string& name : RunnableWorkloadNames()) {
    const auto* field = v1::ExperimentRequest::descriptor()->FindFieldByName(name);
    ASSERT_NE(field, nullptr) << name;
    const auto request_case = static_cast<v1::ExperimentRequest::WorkloadCase>(field->number());
    EXPECT_NE(FindWorkloadSpec(request_case), nullptr) << name;
    ASSERT_NE(FindWorkloadRunner(request_case), nullptr) << name;
    EXPECT_NE(FindWorkloadRunner(request_case)->run, nullptr) << name;
  }
}

TEST(RunnerTableTest, RunsTheBuiltWorkloadsOnly) {
  EXPECT_EQ(RunnableWorkloadNames(), (std::vector<std::string>{"index", "store", "radix", "collective", "attention", "copy"}));
  EXPECT_EQ(FindWorkloadRunner(v1::ExperimentRequest::WORKLOAD_NOT_SET), nullptr);
}

}  // namespace
}  // namespace gpuprof::workloads
