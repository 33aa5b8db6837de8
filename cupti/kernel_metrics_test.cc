#include "cupti/kernel_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cupti/metric_names.h"

namespace gpuprof::cupti {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(KernelMetricNamesTest, DefaultsThenNewExtras) {
  const std::vector<std::string> names =
      KernelMetricNames({"smsp__inst_executed.sum", std::string(kDramThroughputPct), ""});
  ASSERT_EQ(names.size(), kDefaultKernelMetrics.size() + 1);
  EXPECT_EQ(names[0], kDramThroughputPct);
  EXPECT_EQ(names[1], kSmThroughputPct);
  EXPECT_EQ(names.back(), "smsp__inst_executed.sum");
  EXPECT_THAT(KernelMetricNames({}),
              ElementsAre(kDramThroughputPct, kSmThroughputPct, kAchievedOccupancyPct,
                          kL2HitRatePct, kTensorPipePct));
}

TEST(NotCollectedLineTest, SaysWhatWouldFixIt) {
  EXPECT_EQ(NotCollectedLine("hardware metrics",
                             absl::PermissionDeniedError("cuptiProfilerGetCounterAvailability "
                                                         "failed: CUPTI_ERROR_INSUFFICIENT_"
                                                         "PRIVILEGES")),
            "hardware metrics: not collected: cuptiProfilerGetCounterAvailability failed: "
            "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (reading GPU counters needs root or the driver "
            "option NVreg_RestrictProfilingToAdminUsers=0)");
  EXPECT_THAT(NotCollectedLine("warp stalls", absl::UnimplementedError("MIG")),
              HasSubstr("not supported on this GPU"));
  EXPECT_THAT(NotCollectedLine("hardware metrics", absl::UnavailableError("busy")),
              HasSubstr("another profiler"));
  EXPECT_EQ(NotCollectedLine("x", absl::InternalError("boom")), "x: not collected: boom");
}

}  // namespace
}  // namespace gpuprof::cupti
