// SweepManager's admission (a sweep's points take their queue places in one step with the
// check) and its watch-stream caps, against a real ExperimentStore on a temporary file and the
// fake rank worker (tests/ranks: the worker protocol over two fake GPUs).
#include "daemon/sweep_manager.h"

#include <stdlib.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/admission/access_policy.h"
#include "daemon/admission/racing_submits.h"
#include "daemon/admission/test_policy.h"
#include "daemon/experiment_manager.h"
#include "daemon/store/experiment_store.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/sweep.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;

class NullSweepSink : public SweepEventSink {
 public:
  void OnEvent(const v1::SweepEvent& event) override {}
  void OnEnd() override {}
};

// The fake worker's collective on both fake GPUs; `hang`: it runs until cancelled.
v1::ExperimentRequest Collective(bool hang) {
  v1::ExperimentRequest request;
  request.mutable_collective();
  request.mutable_gpus()->add_gpu_ids(0);
  request.mutable_gpus()->add_gpu_ids(1);
  if (hang) (*request.mutable_labels())["gpuprof.fault"] = "hang";
  return request;
}

// Two points: two message sizes.
v1::SweepRequest TwoPointSweep(const std::string& user) {
  v1::SweepRequest request;
  *request.mutable_base() = Collective(/*hang=*/false);
  request.set_user(user);
  v1::SweepAxis& sizes = *request.add_axes();
  sizes.set_field("bytes_per_rank");
  sizes.add_values("1M");
  sizes.add_values("2M");
  return request;
}

const Actor kMallory{"mallory", "test", /*admin=*/false};
const Actor kAdmin{"root", "test", /*admin=*/true};

class SweepManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAKE_RANK_GPUS", "2", /*overwrite=*/1);
    setenv("FAKE_RANK_WORKLOADS", "collective,index", /*overwrite=*/1);
    dir_ = NewTestDir("sweeps");
    ASSERT_FALSE(dir_.empty());
    auto access =
        WriteTestPolicy(dir_, "users { user: \"mallory\" quota { max_queued_experiments: 2 } }\n");
    ASSERT_TRUE(access.ok()) << access.status();
    access_ = *std::move(access);
    auto store = ExperimentStore::Open(dir_ + "/gpuprof.db");
    ASSERT_TRUE(store.ok()) << store.status();
    ManagerOptions options;
    options.worker_binary = testing::RunfilePath("tests/ranks/fake_rank_worker");
    options.limits.allow_test_faults = true;
    options.measure_copy_bandwidth = false;
    options.access = access_.get();
    options.submits_per_minute_per_user = 1000;
    options.max_watchers_per_experiment = 64;
    options.max_watchers_per_user_per_experiment = 8;
    options.max_watch_streams_per_user = 256;
    auto manager = ExperimentManager::Create(options, *std::move(store));
    ASSERT_TRUE(manager.ok()) << manager.status();
    experiments_ = *std::move(manager);
    auto sweeps = SweepManager::Create(experiments_.get());
    ASSERT_TRUE(sweeps.ok()) << sweeps.status();
    sweeps_ = *std::move(sweeps);
    // An admin's experiment holds both GPUs until cancelled: every point stays queued.
    auto running = experiments_->Submit(Collective(/*hang=*/true), kAdmin);
    ASSERT_TRUE(running.ok()) << running.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      auto now = experiments_->Get(running->id());
      if (now.ok() && now->state() == v1::RUNNING) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << "the blocking experiment never ran";
  }

  void TearDown() override {
    if (sweeps_ != nullptr) sweeps_->Shutdown();
    if (experiments_ != nullptr) experiments_->Shutdown();
  }

  int QueuedOf(const std::string& user) {
    auto report = experiments_->admission().QuotaOf(user, /*admin=*/false);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? report->queued_experiments() : -1;
  }

  int SweepsOf(const std::string& user) {
    auto page = experiments_->store().ListSweeps(user, ExperimentStore::kMaxPageSize, "");
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? static_cast<int>(page->sweeps.size()) : -1;
  }

  std::string dir_;
  std::unique_ptr<AccessControl> access_;
  std::unique_ptr<ExperimentManager> experiments_;
  std::unique_ptr<SweepManager> sweeps_;
};

TEST_F(SweepManagerTest, ParallelSweepsNeverExceedTheQueueQuota) {
  constexpr int kThreads = 16;
  const RaceResult race =
      RaceSubmits(kThreads, "quota max_queued_experiments for mallory", [&](int) {
        auto sweep = sweeps_->Submit(TwoPointSweep("mallory"), kMallory);
        if (sweep.ok() && (sweep->points_size() != 2 || sweep->points_failed() != 0)) {
          return absl::InternalError(sweep->DebugString());
        }
        return sweep.status();
      });
  EXPECT_THAT(race.unexpected, ::testing::IsEmpty());
  // Two places: one 2-point sweep, whole.
  EXPECT_EQ(race.admitted, 1);
  EXPECT_EQ(QueuedOf("mallory"), 2);
  // The refused ones stored nothing.
  EXPECT_EQ(SweepsOf("mallory"), 1);
}

TEST_F(SweepManagerTest, SweepsAndSubmitsRacingShareTheSamePlaces) {
  constexpr int kThreads = 18;
  std::atomic<int> points{0};
  const RaceResult race =
      RaceSubmits(kThreads, "quota max_queued_experiments for mallory", [&](int thread) {
        if (thread % 2 == 0) {
          const absl::Status submitted = experiments_->Submit(Collective(false), kMallory).status();
          if (submitted.ok()) ++points;
          return submitted;
        }
        auto sweep = sweeps_->Submit(TwoPointSweep("mallory"), kMallory);
        if (sweep.ok()) points += sweep->points_size();
        return sweep.status();
      });
  EXPECT_THAT(race.unexpected, ::testing::IsEmpty());
  EXPECT_GE(points.load(), 1);
  EXPECT_LE(points.load(), 2);
  EXPECT_EQ(QueuedOf("mallory"), points.load());
}

TEST_F(SweepManagerTest, ARefusedSweepChangesNothing) {
  ASSERT_TRUE(experiments_->Submit(Collective(false), kMallory).ok());
  const auto refused = sweeps_->Submit(TwoPointSweep("mallory"), kMallory);
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("quota max_queued_experiments for mallory (users entry) is 2; in use: 1 "
                        "queued experiment(s); the sweep would add 2 points"));
  EXPECT_EQ(QueuedOf("mallory"), 1);
  EXPECT_EQ(SweepsOf("mallory"), 0);
  // The place it did not get is still there for a submit.
  EXPECT_TRUE(experiments_->Submit(Collective(false), kMallory).ok());
}

TEST_F(SweepManagerTest, AnotherUserCannotTakeTheOwnersSweepStreams) {
  auto sweep = sweeps_->Submit(TwoPointSweep("alice"), kAdmin);
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  std::vector<int64_t> held;
  absl::Status refused;
  for (int i = 0; i < 64 && refused.ok(); ++i) {
    auto subscription =
        sweeps_->Subscribe(sweep->id(), 1, std::make_shared<NullSweepSink>(), Watcher{"mallory"});
    if (subscription.ok()) {
      held.push_back(*subscription);
    } else {
      refused = subscription.status();
    }
  }
  EXPECT_EQ(held.size(), 8u);
  ASSERT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("mallory already holds 8 live streams on sweep " + sweep->id()));
  auto owners =
      sweeps_->Subscribe(sweep->id(), 1, std::make_shared<NullSweepSink>(), Watcher{"alice"});
  EXPECT_TRUE(owners.ok()) << owners.status();
  // The sweep's streams count in the same per-user total as experiments'.
  EXPECT_EQ(experiments_->watch_slots().LiveOf("mallory"), 8);
  for (int64_t subscription : held) sweeps_->Unsubscribe(sweep->id(), subscription);
  EXPECT_EQ(experiments_->watch_slots().LiveOf("mallory"), 0);
}

TEST_F(SweepManagerTest, ASweepOverKernelsAuditsEachSourceAndItsPointsLeaveThemOut) {
  v1::SweepRequest request;
  request.set_user("root");
  request.mutable_base()->mutable_index()->set_num_tokens(64);
  request.mutable_base()->mutable_gpus()->add_gpu_ids(0);
  v1::SweepAxis& axis = *request.add_axes();
  axis.set_field("kernel");
  for (const char* name : {"ours", "a.cu", "b.cu"}) axis.add_values(name);
  axis.add_kernels();  // ours
  for (const char* name : {"a.cu", "b.cu"}) {
    v1::CustomKernel& kernel = *axis.add_kernels();
    kernel.set_source(absl::StrCat("extern \"C\" __global__ void k() {} // ", name));
    kernel.set_file_name(name);
    kernel.set_kernel_name("k");
  }
  auto sweep = sweeps_->Submit(request, kAdmin);
  ASSERT_TRUE(sweep.ok()) << sweep.status();

  v1::ListAuditRequest audit;
  audit.set_experiment_id(sweep->id());
  auto entries = experiments_->Audit(audit);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  const std::string a_source = "extern \"C\" __global__ void k() {} // a.cu";
  const std::string b_source = "extern \"C\" __global__ void k() {} // b.cu";
  EXPECT_EQ(entries->front().detail(),
            absl::StrCat("3 point(s); custom kernels a.cu (k), source sha256 ",
                         Sha256Hex(a_source), ", ", a_source.size(),
                         " bytes; b.cu (k), source sha256 ", Sha256Hex(b_source), ", ",
                         b_source.size(), " bytes"));

  // The sweep's points are summaries: which kernel, not its source; the experiment has it.
  auto stored = sweeps_->Get(sweep->id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  ASSERT_EQ(stored->points_size(), 3);
  const v1::SweepPoint& point = stored->points(1);
  EXPECT_EQ(point.experiment().request().custom_kernel().file_name(), "a.cu");
  EXPECT_EQ(point.experiment().request().custom_kernel().source(), "");
  auto experiment = experiments_->Get(point.experiment_id());
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  EXPECT_EQ(experiment->request().custom_kernel().source(),
            "extern \"C\" __global__ void k() {} // a.cu");
}

}  // namespace
}  // namespace gpuprof::daemon
