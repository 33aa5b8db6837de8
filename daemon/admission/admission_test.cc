#include "daemon/admission/admission.h"

#include <stdlib.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/admission/access_policy.h"
#include "daemon/admission/racing_submits.h"
#include "daemon/admission/test_inventory.h"
#include "daemon/admission/test_policy.h"
#include "daemon/store/experiment_store.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::google::protobuf::util::TimeUtil;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);

TEST(AdmissionLedgerTest, CheckingARateTakesNoToken) {
  AdmissionLedger ledger(/*submits_per_minute=*/2);
  // However often it is checked, the bucket keeps both tokens until one is taken.
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(ledger.CheckRate("mallory", kStart).ok());
  ledger.TakeToken("mallory", kStart);
  EXPECT_TRUE(ledger.CheckRate("mallory", kStart).ok());
  ledger.TakeToken("mallory", kStart);
  const absl::Status refused = ledger.CheckRate("mallory", kStart);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("submit rate limit for mallory is 2 per minute "
                                           "(--submits_per_minute_per_user); retry in 30s"));
  // Other users have buckets of their own.
  EXPECT_TRUE(ledger.CheckRate("alice", kStart).ok());
  // Refilled at the rate: half a minute gives one token back.
  EXPECT_TRUE(ledger.CheckRate("mallory", kStart + absl::Seconds(30)).ok());
}

TEST(AdmissionLedgerTest, ARefundedTokenCanBeTakenAgainButNeverOverfills) {
  AdmissionLedger ledger(/*submits_per_minute=*/1);
  ledger.TakeToken("alice", kStart);
  EXPECT_FALSE(ledger.CheckRate("alice", kStart).ok());
  ledger.RefundToken("alice");
  EXPECT_TRUE(ledger.CheckRate("alice", kStart).ok());
  // A refund on a full bucket does not make a second token.
  ledger.RefundToken("alice");
  ledger.TakeToken("alice", kStart);
  EXPECT_FALSE(ledger.CheckRate("alice", kStart).ok());
}

TEST(AdmissionLedgerTest, NoLimitWhenTheRateIsZero) {
  AdmissionLedger ledger(/*submits_per_minute=*/0);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(ledger.CheckRate("alice", kStart).ok());
    ledger.TakeToken("alice", kStart);
  }
}

TEST(AdmissionLedgerTest, ReservedPlacesAreCountedPerUserUntilReleased) {
  AdmissionLedger ledger(/*submits_per_minute=*/0);
  EXPECT_EQ(ledger.reserved("alice"), 0);
  ledger.Reserve("alice", 2);
  ledger.Reserve("alice", 1);
  ledger.Reserve("bob", 5);
  EXPECT_EQ(ledger.reserved("alice"), 3);
  EXPECT_EQ(ledger.reserved("bob"), 5);
  ledger.Release("alice", 2);
  EXPECT_EQ(ledger.reserved("alice"), 1);
  ledger.Release("alice", 1);
  EXPECT_EQ(ledger.reserved("alice"), 0);
  // Releasing what is not held changes nothing (and never goes negative).
  ledger.Release("alice", 4);
  EXPECT_EQ(ledger.reserved("alice"), 0);
  EXPECT_EQ(ledger.reserved("bob"), 5);
}

v1::ExperimentRequest Index(int64_t tokens, int gpus = 1) {
  v1::ExperimentRequest request;
  request.mutable_index()->set_num_tokens(tokens);
  request.mutable_gpus()->set_gpu_count(gpus);
  return request;
}

v1::ExperimentRequest Radix() {
  v1::ExperimentRequest request;
  request.mutable_radix();
  return request;
}

const Actor kMallory{"mallory", "test", /*admin=*/false};
const Actor kPat{"pat", "test", /*admin=*/false};
const Actor kGina{"gina", "test", /*admin=*/false};
const Actor kRoot{"root", "test", /*admin=*/true};

// AdmissionControl against a real store and policy; the queue it counts is the test's own,
// filled by Settle as the experiment manager fills its queue.
class AdmissionControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = NewTestDir("admission");
    ASSERT_FALSE(dir_.empty());
    auto access = WriteTestPolicy(
        dir_,
        "users { user: \"mallory\" quota { max_queued_experiments: 2 } }\n"
        "users { user: \"pat\" quota { max_priority: 5 max_timeout { seconds: 600 } "
        "max_concurrent_gpus: 1 } }\n"
        "users { user: \"gina\" quota { max_gpu_hours_per_day: 1 } }\n"
        "custom_kernel_users: \"pat\"\n"
        "capture_users: \"pat\"\n");
    ASSERT_TRUE(access.ok()) << access.status();
    access_ = *std::move(access);
    auto store = ExperimentStore::Open(dir_ + "/gpuprof.db");
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    Start(/*submits_per_minute=*/0);
  }

  void Start(int submits_per_minute) {
    AdmissionOptions options;
    options.access = access_.get();
    options.submits_per_minute_per_user = submits_per_minute;
    options.limits.capture_tools.ncu.path = "/usr/local/cuda/bin/ncu";
    options.use_by_user = [this] {
      absl::MutexLock lock(&mutex_);
      return use_;
    };
    options.refused = [this](const std::string& reason) {
      absl::MutexLock lock(&mutex_);
      ++refusals_[reason];
    };
    control_ = std::make_unique<AdmissionControl>(std::move(options), inventory_, *store_);
  }

  // Puts what `admission` admitted into the test's queue, as the manager does once stored.
  void Queue(Admission& admission) {
    control_->Settle(admission, [&] {
      absl::MutexLock lock(&mutex_);
      use_[admission.user()].queued += static_cast<int>(admission.requests().size());
    });
  }

  int queued(const std::string& user) {
    absl::MutexLock lock(&mutex_);
    return use_[user].queued;
  }
  int refusals(const std::string& reason) {
    absl::MutexLock lock(&mutex_);
    return refusals_[reason];
  }
  // The "refuse" entries of the audit trail about `user`.
  std::vector<std::string> RefusalsAudited(const std::string& user) {
    auto entries = store_->ListAudit(user, "", 1000);
    EXPECT_TRUE(entries.ok()) << entries.status();
    std::vector<std::string> details;
    if (!entries.ok()) return details;
    for (const v1::AuditEntry& entry : *entries) {
      if (entry.action() == "refuse") details.push_back(entry.detail());
    }
    return details;
  }

  std::string dir_;
  const v1::ListGpusResponse inventory_ = TwoNvlinkGpus({"index", "radix"});
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<ExperimentStore> store_;
  std::unique_ptr<AdmissionControl> control_;
  absl::Mutex mutex_;
  std::map<std::string, UserUse> use_ ABSL_GUARDED_BY(mutex_);
  std::map<std::string, int> refusals_ ABSL_GUARDED_BY(mutex_);
};

AdmissionRequest Single(const Actor& actor, v1::ExperimentRequest request,
                        const std::string& user = "") {
  return AdmissionRequest{actor, user, {std::move(request)}};
}

AdmissionRequest Sweep(const Actor& actor, std::vector<v1::ExperimentRequest> points,
                       const std::string& user = "") {
  AdmissionRequest submission{actor, user, std::move(points), /*sweep=*/true, {}};
  for (const v1::ExperimentRequest& point : submission.requests) {
    submission.point_parameters.push_back(absl::StrCat("tokens=", point.index().num_tokens()));
  }
  return submission;
}

TEST_F(AdmissionControlTest, OnlyAdminsSubmitForAnotherUser) {
  auto refused = control_->Admit(Single(kMallory, Index(64), "alice"));
  ASSERT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("user: you are mallory (test); only admins may submit on behalf of "
                        "another user (asked for alice)"));
  auto sweep = control_->Admit(Sweep(kMallory, {Index(64), Index(128)}, "alice"));
  ASSERT_TRUE(absl::IsPermissionDenied(sweep.status())) << sweep.status();
  EXPECT_THAT(sweep.status().message(),
              HasSubstr("only admins may submit a sweep on behalf of another user"));
  EXPECT_EQ(refusals("on-behalf-of"), 2);
  EXPECT_EQ(RefusalsAudited("mallory").size(), 2u);

  auto admitted = control_->Admit(Single(kRoot, Index(64), "alice"));
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_TRUE(admitted->on_behalf());
  EXPECT_EQ(admitted->user(), "alice");
  EXPECT_EQ(admitted->requests().front().user(), "alice");
  // Without a user, the experiment is the actor's own.
  auto own = control_->Admit(Single(kMallory, Index(64)));
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_FALSE(own->on_behalf());
  EXPECT_EQ(own->requests().front().user(), "mallory");
}

v1::ExperimentRequest WithCustomKernel(v1::ExperimentRequest request,
                                       const std::string& source = "extern \"C\" __global__ "
                                                                   "void k() {}") {
  request.mutable_custom_kernel()->set_source(source);
  request.mutable_custom_kernel()->set_kernel_name("k");
  return request;
}

TEST_F(AdmissionControlTest, OnlyThoseThePolicyNamesSubmitCustomKernels) {
  // Mallory is not named: refused before validation, naming the policy's fields (and the
  // point, in a sweep), counted and audited.
  auto refused = control_->Admit(Single(kMallory, WithCustomKernel(Index(64))));
  ASSERT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_EQ(refused.status().message(),
            "custom_kernel: mallory (test) may not submit custom kernels on this daemon; the "
            "access policy's custom_kernel_users, custom_kernel_groups or "
            "custom_kernels_for_everyone say who may (ask an admin)");
  auto sweep = control_->Admit(Sweep(kMallory, {Index(64), WithCustomKernel(Index(128))}));
  ASSERT_TRUE(absl::IsPermissionDenied(sweep.status())) << sweep.status();
  EXPECT_THAT(sweep.status().message(), HasSubstr("point 1 (tokens=128): custom_kernel: mallory"));
  EXPECT_EQ(refusals("custom-kernel"), 2);
  EXPECT_EQ(RefusalsAudited("mallory").size(), 2u);
  EXPECT_EQ(queued("mallory"), 0);
  // Our kernels are anyone's.
  EXPECT_TRUE(control_->Admit(Single(kMallory, Index(64))).ok());

  // Pat is named: admitted with the kernel's defaults; an invalid kernel is the caller's error.
  auto admitted = control_->Admit(Single(kPat, WithCustomKernel(Index(64))));
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(admitted->requests().front().custom_kernel().block_threads(), 256);
  auto oversized =
      control_->Admit(Single(kPat, WithCustomKernel(Index(64), std::string(300'000, ' '))));
  ASSERT_TRUE(absl::IsInvalidArgument(oversized.status())) << oversized.status();
  EXPECT_THAT(oversized.status().message(),
              HasSubstr("custom_kernel.source: 300000 bytes; at most 262144 allowed"));
  EXPECT_TRUE(RefusalsAudited("pat").empty());

  // Admins always may, for themselves and on behalf of others.
  EXPECT_TRUE(control_->Admit(Single(kRoot, WithCustomKernel(Index(64)), "mallory")).ok());
}

TEST_F(AdmissionControlTest, OnlyThoseThePolicyNamesAskForCaptures) {
  v1::ExperimentRequest captured = Index(64);
  captured.mutable_capture()->set_tool(v1::NsightCapture::TOOL_NCU);
  auto refused = control_->Admit(Single(kMallory, captured));
  ASSERT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_EQ(refused.status().message(),
            "capture: mallory (test) may not have experiments run under Nsight tools on this "
            "daemon; the access policy's capture_users, capture_groups or captures_for_everyone "
            "say who may (ask an admin)");
  EXPECT_EQ(refusals("capture"), 1);
  EXPECT_EQ(RefusalsAudited("mallory").size(), 1u);
  EXPECT_EQ(queued("mallory"), 0);
  auto admitted = control_->Admit(Single(kPat, captured));
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ(admitted->requests().front().capture().ncu_set(), "basic");
  EXPECT_TRUE(control_->Admit(Single(kRoot, captured, "mallory")).ok());
}

TEST_F(AdmissionControlTest, AdmittedRequestsAreTheValidatedRequestsWithDefaults) {
  auto admitted = control_->Admit(Single(kMallory, Index(64)));
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  const v1::ExperimentRequest& request = admitted->requests().front();
  EXPECT_EQ(request.tp_degree(), 1);
  EXPECT_EQ(TimeUtil::DurationToSeconds(request.timeout()), 30 * 60);
  EXPECT_EQ(request.measurement().min_iterations(), 100);

  // An invalid request is an error of the caller's, not a refusal: nothing taken or audited.
  auto invalid = control_->Admit(Single(kMallory, Index(-5)));
  ASSERT_TRUE(absl::IsInvalidArgument(invalid.status())) << invalid.status();
  EXPECT_THAT(invalid.status().message(), HasSubstr("index.num_tokens: got -5"));
  auto sweep = control_->Admit(Sweep(kMallory, {Index(64), Index(-5)}));
  ASSERT_TRUE(absl::IsInvalidArgument(sweep.status())) << sweep.status();
  EXPECT_THAT(sweep.status().message(), HasSubstr("point 1 (tokens=-5): index.num_tokens"));
  EXPECT_TRUE(RefusalsAudited("mallory").empty());
  // One place is held (the first admission): one more fits mallory's 2.
  EXPECT_TRUE(control_->Admit(Single(kMallory, Index(64))).ok());
}

TEST_F(AdmissionControlTest, PerRequestQuotasNameTheQuotaAndThePoint) {
  v1::ExperimentRequest urgent = Index(64);
  urgent.set_priority(6);
  auto refused = control_->Admit(Single(kPat, urgent));
  ASSERT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("quota max_priority for pat (users entry) is 5; the request asks for 6"));

  auto wide = control_->Admit(Sweep(kPat, {Index(64), Index(128, /*gpus=*/2)}));
  ASSERT_TRUE(absl::IsPermissionDenied(wide.status())) << wide.status();
  EXPECT_THAT(wide.status().message(),
              HasSubstr("point 1: quota max_concurrent_gpus for pat (users entry) is 1; the "
                        "request needs 2 GPU(s) at once"));

  v1::ExperimentRequest slow = Index(64);
  slow.mutable_timeout()->set_seconds(3600);
  auto long_one = control_->Admit(Single(kPat, slow));
  ASSERT_TRUE(absl::IsPermissionDenied(long_one.status())) << long_one.status();
  EXPECT_THAT(long_one.status().message(), HasSubstr("quota max_timeout for pat"));
  EXPECT_EQ(refusals("quota:max_priority"), 1);
  EXPECT_EQ(refusals("quota:max_concurrent_gpus"), 1);
  EXPECT_EQ(refusals("quota:max_timeout"), 1);
  EXPECT_EQ(RefusalsAudited("pat").size(), 3u);

  // Without a timeout, pat's experiments get the quota's cap instead of the daemon's default.
  auto capped = control_->Admit(Single(kPat, Index(64)));
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_EQ(TimeUtil::DurationToSeconds(capped->requests().front().timeout()), 600);
  // Admins have no quota.
  EXPECT_TRUE(control_->Admit(Single(kRoot, urgent, "pat")).ok());
}

TEST_F(AdmissionControlTest, TheQueueQuotaCountsQueuedAndAdmittedPlaces) {
  auto first = control_->Admit(Single(kMallory, Index(64)));
  ASSERT_TRUE(first.ok()) << first.status();
  Queue(*first);
  EXPECT_EQ(queued("mallory"), 1);
  EXPECT_EQ(first->places(), 0);
  auto second = control_->Admit(Single(kMallory, Index(64)));
  ASSERT_TRUE(second.ok()) << second.status();
  // One queued and one place held: no room for a third, nor for a 2-point sweep.
  auto third = control_->Admit(Single(kMallory, Index(64)));
  ASSERT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(third.status().message(),
              HasSubstr("quota max_queued_experiments for mallory (users entry) is 2; in use: 2 "
                        "queued experiment(s) (1 of them being stored)"));
  *second = Admission();  // never stored: its place is given back
  auto sweep = control_->Admit(Sweep(kMallory, {Index(64), Index(128)}));
  ASSERT_TRUE(absl::IsResourceExhausted(sweep.status())) << sweep.status();
  EXPECT_THAT(sweep.status().message(), HasSubstr("in use: 1 queued experiment(s); the sweep "
                                                  "would add 2 points"));
  EXPECT_TRUE(control_->Admit(Single(kMallory, Index(64))).ok());
  EXPECT_EQ(refusals("quota:max_queued_experiments"), 2);
}

TEST_F(AdmissionControlTest, ASubmissionTakesOneRateTokenGivenBackIfNeverStored) {
  Start(/*submits_per_minute=*/2);
  {
    // A sweep is one submission, however many points.
    auto sweep = control_->Admit(Sweep(kGina, {Index(64), Index(128), Index(256)}));
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    Queue(*sweep);
  }
  {
    auto dropped = control_->Admit(Single(kGina, Index(64)));
    ASSERT_TRUE(dropped.ok()) << dropped.status();
    // Dropped unstored: its token comes back.
  }
  auto second = control_->Admit(Single(kGina, Index(64)));
  ASSERT_TRUE(second.ok()) << second.status();
  Queue(*second);
  auto third = control_->Admit(Single(kGina, Radix()));
  ASSERT_TRUE(absl::IsResourceExhausted(third.status())) << third.status();
  EXPECT_THAT(third.status().message(), HasSubstr("--submits_per_minute_per_user"));
  EXPECT_EQ(refusals("submit-rate"), 1);
  // Admins are not rate limited.
  EXPECT_TRUE(control_->Admit(Single(kRoot, Radix(), "gina")).ok());
}

TEST_F(AdmissionControlTest, GpuHoursOfTheLastDayBoundGpuWorkOnly) {
  // Gina's experiment ran on 2 GPUs for 40 minutes, ending 10 minutes ago: 1.333 GPU-hours.
  const absl::Time now = absl::Now();
  v1::Experiment ran;
  ran.set_user("gina");
  ran.set_state(v1::FINISHED);
  *ran.mutable_created() =
      TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now - absl::Minutes(55)));
  *ran.mutable_started() =
      TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now - absl::Minutes(50)));
  *ran.mutable_finished() =
      TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(now - absl::Minutes(10)));
  ran.add_gpu_ids(0);
  ran.add_gpu_ids(1);
  v1::ExperimentEvent first;
  first.set_seq(1);
  ASSERT_TRUE(store_->Create(ran, first).ok());

  auto refused = control_->Admit(Single(kGina, Index(64)));
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("quota max_gpu_hours_per_day for gina (users entry) is 1; in use: "
                        "1.333 GPU-hours over the last 24 hours"));
  EXPECT_EQ(refusals("quota:max_gpu_hours_per_day"), 1);
  // Work on the CPU needs no GPU-hours.
  EXPECT_TRUE(control_->Admit(Single(kGina, Radix())).ok());
  auto report = control_->QuotaOf("gina", /*admin=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NEAR(report->gpu_hours_last_day(), 4.0 / 3, 0.01);
  EXPECT_EQ(report->source(), "users entry");
  EXPECT_EQ(report->limits().max_gpu_hours_per_day(), 1);
}

TEST_F(AdmissionControlTest, QuotaReportsShowUseByUserAndEveryoneElse) {
  {
    absl::MutexLock lock(&mutex_);
    use_["mallory"] = UserUse{.queued = 2, .running_gpus = 1};
    use_["alice"] = UserUse{.queued = 1, .running_gpus = 2};
    use_["bob"] = UserUse{.queued = 3, .running_gpus = 0};
  }
  auto mallory = control_->QuotaOf("mallory", /*admin=*/false);
  ASSERT_TRUE(mallory.ok()) << mallory.status();
  EXPECT_EQ(mallory->queued_experiments(), 2);
  EXPECT_EQ(mallory->running_gpus(), 1);
  EXPECT_EQ(mallory->limits().max_queued_experiments(), 2);
  auto admin = control_->QuotaOf("root", /*admin=*/true);
  ASSERT_TRUE(admin.ok()) << admin.status();
  EXPECT_EQ(admin->source(), "admin: no limits apply");

  const std::vector<v1::QuotaReport> reports = control_->QuotaUseForMetrics();
  ASSERT_EQ(reports.size(), 4u);  // mallory, pat, gina, then everyone else
  EXPECT_EQ(reports.back().user(), kOtherUsers);
  EXPECT_EQ(reports.back().queued_experiments(), 4);
  EXPECT_EQ(reports.back().running_gpus(), 2);
}

// Experiments and sweeps race for mallory's 2 queue places through the one admission step:
// never more than 2 are admitted, and every refusal is counted and audited.
TEST_F(AdmissionControlTest, ParallelSubmitsAndSweepsNeverExceedTheQueueQuota) {
  constexpr int kThreads = 32;
  std::atomic<int> admitted_places{0};
  const RaceResult race =
      RaceSubmits(kThreads, "quota max_queued_experiments for mallory", [&](int thread) {
        // Even threads submit one experiment, odd ones a 2-point sweep.
        auto admission = thread % 2 == 0
                             ? control_->Admit(Single(kMallory, Index(64)))
                             : control_->Admit(Sweep(kMallory, {Index(64), Index(128)}));
        if (!admission.ok()) return admission.status();
        admitted_places += admission->places();
        Queue(*admission);
        return absl::OkStatus();
      });
  EXPECT_THAT(race.unexpected, ::testing::IsEmpty());
  // One sweep or two single experiments, never more.
  EXPECT_EQ(admitted_places.load(), 2);
  EXPECT_EQ(queued("mallory"), 2);
  EXPECT_EQ(race.admitted + race.refused, kThreads);
  EXPECT_EQ(refusals("quota:max_queued_experiments"), race.refused);
  EXPECT_EQ(static_cast<int>(RefusalsAudited("mallory").size()), race.refused);
}

}  // namespace
}  // namespace gpuprof::daemon
