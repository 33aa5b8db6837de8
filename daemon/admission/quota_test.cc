#include "daemon/admission/quota.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

ResolvedQuota Quota(const std::string& text_source) {
  ResolvedQuota quota;
  quota.source = text_source;
  return quota;
}

TEST(QuotaTest, TheQuotasTimeoutCapsTheDefaultOnlyWhenNoneIsAsked) {
  ResolvedQuota quota = Quota("default_quota");
  quota.limits.mutable_max_timeout()->set_seconds(600);
  v1::ExperimentRequest request;
  ApplyQuotaTimeout(quota, absl::Minutes(30), request);
  EXPECT_EQ(TimeUtil::DurationToSeconds(request.timeout()), 600);
  // A default below the cap stays the default (left unset, for the defaults to fill).
  v1::ExperimentRequest short_default;
  ApplyQuotaTimeout(quota, absl::Minutes(5), short_default);
  EXPECT_FALSE(short_default.has_timeout());
  // What the request asks for is the per-request check's to judge.
  v1::ExperimentRequest asked;
  asked.mutable_timeout()->set_seconds(3600);
  ApplyQuotaTimeout(quota, absl::Minutes(30), asked);
  EXPECT_EQ(TimeUtil::DurationToSeconds(asked.timeout()), 3600);
  const absl::Status refused = CheckRequestQuota(asked, "pat", quota);
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("quota max_timeout for pat (default_quota) is 10m; "
                                           "the request asks for 1h"));
}

TEST(QuotaTest, QueuedQuotaCountsPlacesBeingStored) {
  ResolvedQuota quota = Quota("group gpu-team");
  EXPECT_TRUE(CheckQueuedQuota("alice", quota, 100, 100, 100).ok());  // no such quota
  quota.limits.set_max_queued_experiments(4);
  EXPECT_TRUE(CheckQueuedQuota("alice", quota, 1, 1, 2).ok());
  const absl::Status refused = CheckQueuedQuota("alice", quota, 1, 2, 2);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_EQ(refused.message(),
            "quota max_queued_experiments for alice (group gpu-team) is 4; in use: 3 queued "
            "experiment(s) (2 of them being stored); the sweep would add 2 points");
}

TEST(QuotaTest, GpuHoursQuotaIsReachedAtItsValue) {
  ResolvedQuota quota = Quota("users entry");
  quota.limits.set_max_gpu_hours_per_day(2);
  EXPECT_TRUE(CheckGpuHoursQuota("gina", quota, 1.999).ok());
  const absl::Status refused = CheckGpuHoursQuota("gina", quota, 2);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("is 2; in use: 2.000 GPU-hours"));
}

TEST(QuotaTest, ReasonNamesTheQuotaAlsoAfterAPointPrefix) {
  EXPECT_EQ(QuotaReason(absl::PermissionDeniedError("quota max_priority for a (b) is 1")),
            "quota:max_priority");
  EXPECT_EQ(QuotaReason(absl::PermissionDeniedError("point 3: quota max_timeout for a")),
            "quota:max_timeout");
  EXPECT_EQ(QuotaReason(absl::InternalError("disk I/O error")), "quota");
}

v1::Experiment Ran(absl::Time started, std::optional<absl::Time> finished, int gpus) {
  v1::Experiment experiment;
  *experiment.mutable_started() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(started));
  if (finished.has_value()) {
    *experiment.mutable_finished() = TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(*finished));
  }
  for (int i = 0; i < gpus; ++i) experiment.add_gpu_ids(i);
  return experiment;
}

TEST(QuotaTest, GpuHoursCountOnlyTheRunInsideTheWindow) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  const absl::Time since = now - absl::Hours(24);
  const std::vector<v1::Experiment> experiments = {
      // Straddles the window's start: only its last hour counts, on 2 GPUs.
      Ran(since - absl::Hours(1), since + absl::Hours(1), 2),
      // Still running: up to now, on 1 GPU.
      Ran(now - absl::Minutes(30), std::nullopt, 1),
      // Ended before the window, and one that never ran on a GPU.
      Ran(since - absl::Hours(3), since - absl::Hours(2), 4),
      Ran(now - absl::Hours(2), now - absl::Hours(1), 0),
  };
  EXPECT_DOUBLE_EQ(GpuHoursBetween(experiments, since, now), 2.5);
}

}  // namespace
}  // namespace gpuprof::daemon
