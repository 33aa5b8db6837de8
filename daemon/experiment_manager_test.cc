// ExperimentManager's admission (quotas, rate limit, reservations) and watch-stream caps,
// against a real ExperimentStore on a temporary file and a real worker process: the fake rank
// worker (tests/ranks), which speaks the worker protocol and reports two fake GPUs, so that a
// hanging experiment holds them and everything after it stays queued.
#include "daemon/experiment_manager.h"

#include <stdlib.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/admission/access_policy.h"
#include "daemon/admission/racing_submits.h"
#include "daemon/admission/test_policy.h"
#include "daemon/store/experiment_store.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;

// A sink that keeps what it is told.
class RecordingSink : public EventSink {
 public:
  void OnEvent(const v1::ExperimentEvent& event) override {
    absl::MutexLock lock(&mutex_);
    ++events_;
  }
  void OnEnd() override {
    absl::MutexLock lock(&mutex_);
    ended_ = true;
  }
  bool ended() {
    absl::MutexLock lock(&mutex_);
    return ended_;
  }

 private:
  absl::Mutex mutex_;
  int events_ = 0;
  bool ended_ = false;
};

// The refusal metric's reasons, as the metrics exporter hears them.
class RefusalCounter : public ManagerObserver {
 public:
  void Refused(const std::string& reason) override {
    absl::MutexLock lock(&mutex_);
    ++counts_[reason];
  }
  int count(const std::string& reason) {
    absl::MutexLock lock(&mutex_);
    return counts_[reason];
  }

 private:
  absl::Mutex mutex_;
  std::map<std::string, int> counts_;
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

constexpr char kKernelSource[] =
    "extern \"C\" __global__ void my_gather(const gpuprof::IndexParams p) {}\n";

// An index run on GPU 0 with our kernel, or with a custom kernel.
v1::ExperimentRequest IndexOnGpu0(bool custom_kernel) {
  v1::ExperimentRequest request;
  request.mutable_index()->set_num_tokens(64);
  request.mutable_gpus()->add_gpu_ids(0);
  if (custom_kernel) {
    request.mutable_custom_kernel()->set_source(kKernelSource);
    request.mutable_custom_kernel()->set_kernel_name("my_gather");
    request.mutable_custom_kernel()->set_file_name("my_gather.cu");
  }
  return request;
}

const Actor kMallory{"mallory", "test", /*admin=*/false};
const Actor kAdmin{"root", "test", /*admin=*/true};

// Mallory's two-point sweep, as the sweep manager hands it to admission.
AdmissionRequest SweepOf(std::vector<v1::ExperimentRequest> points) {
  return AdmissionRequest{kMallory, "mallory", std::move(points), /*sweep=*/true, {}};
}

class ExperimentManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The fake worker's inventory; it pretends to run index too (custom kernels).
    setenv("FAKE_RANK_GPUS", "2", /*overwrite=*/1);
    setenv("FAKE_RANK_WORKLOADS", "collective,index", /*overwrite=*/1);
    dir_ = NewTestDir("manager");
    ASSERT_FALSE(dir_.empty());
    auto access =
        WriteTestPolicy(dir_, "users { user: \"mallory\" quota { max_queued_experiments: 2 } }\n");
    ASSERT_TRUE(access.ok()) << access.status();
    access_ = *std::move(access);
  }

  void TearDown() override {
    if (manager_ != nullptr) manager_->Shutdown();
  }

  void StartManager(int submits_per_minute = 0) {
    auto store = ExperimentStore::Open(dir_ + "/gpuprof.db");
    ASSERT_TRUE(store.ok()) << store.status();
    ManagerOptions options;
    options.worker_binary = testing::RunfilePath("tests/ranks/fake_rank_worker");
    options.limits.allow_test_faults = true;
    options.measure_copy_bandwidth = false;
    options.access = access_.get();
    options.submits_per_minute_per_user = submits_per_minute;
    options.max_watchers_per_experiment = 64;
    options.max_watchers_per_user_per_experiment = 8;
    options.max_watch_streams_per_user = 12;
    auto manager = ExperimentManager::Create(options, *std::move(store), &refusals_);
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
  }

  // An admin's experiment holding both GPUs until cancelled: what is submitted after it stays
  // queued.
  std::string Blocker() {
    auto running = manager_->Submit(Collective(/*hang=*/true), kAdmin);
    EXPECT_TRUE(running.ok()) << running.status();
    if (!running.ok()) return "";
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      auto now = manager_->Get(running->id());
      if (now.ok() && now->state() == v1::RUNNING) return running->id();
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << "the blocking experiment never ran";
    return running->id();
  }

  int QueuedOf(const std::string& user) {
    auto report = manager_->admission().QuotaOf(user, /*admin=*/false);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? report->queued_experiments() : -1;
  }

  // Every experiment of `user` in the store (what a refusal must not have added to).
  int StoredOf(const std::string& user) {
    ExperimentFilter filter;
    filter.user = user;
    auto page = manager_->List(filter, ExperimentStore::kMaxPageSize, "");
    EXPECT_TRUE(page.ok()) << page.status();
    return page.ok() ? static_cast<int>(page->experiments.size()) : -1;
  }

  // Waits for `id` to end; its state then.
  v1::ExperimentState Ended(const std::string& id) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      auto now = manager_->Get(id);
      if (now.ok() && now->state() != v1::QUEUED && now->state() != v1::RUNNING) {
        return now->state();
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    ADD_FAILURE() << id << " never ended";
    return v1::EXPERIMENT_STATE_UNSPECIFIED;
  }

  // The pid of the worker that ran `id`, as the fake worker reports it ("... pid N id ...").
  std::string WorkerPidOf(const std::string& id) {
    auto events = manager_->EventPage(id, 1, {});
    EXPECT_TRUE(events.ok()) << events.status();
    for (const v1::ExperimentEvent& event : events.value_or(std::vector<v1::ExperimentEvent>())) {
      const std::string& message = event.progress().message();
      const size_t pid = message.find(" pid ");
      if (pid == std::string::npos) continue;
      const size_t start = pid + 5;
      return message.substr(start, message.find(' ', start) - start);
    }
    ADD_FAILURE() << id << " has no progress naming its worker";
    return "";
  }

  std::string dir_;
  std::unique_ptr<AccessControl> access_;
  RefusalCounter refusals_;
  std::unique_ptr<ExperimentManager> manager_;
};

TEST_F(ExperimentManagerTest, ParallelSubmitsNeverExceedTheQueueQuota) {
  StartManager();
  Blocker();
  constexpr int kThreads = 32;
  const RaceResult race = RaceSubmits(
      kThreads,
      "quota max_queued_experiments for mallory (users entry) is 2; in use: 2 queued "
      "experiment(s)",
      [&](int) { return manager_->Submit(Collective(/*hang=*/false), kMallory).status(); });
  EXPECT_THAT(race.unexpected, ::testing::IsEmpty());
  EXPECT_EQ(race.admitted, 2);
  EXPECT_EQ(race.refused, kThreads - 2);
  EXPECT_EQ(QueuedOf("mallory"), 2);
  EXPECT_EQ(StoredOf("mallory"), 2);
  // Every refusal is in the audit trail.
  v1::ListAuditRequest audit;
  audit.set_user("mallory");
  audit.set_limit(1000);
  auto entries = manager_->Audit(audit);
  ASSERT_TRUE(entries.ok()) << entries.status();
  int refusals = 0;
  for (const v1::AuditEntry& entry : *entries) {
    if (entry.action() == "refuse") ++refusals;
  }
  EXPECT_EQ(refusals, kThreads - 2);
  EXPECT_EQ(refusals_.count("quota:max_queued_experiments"), kThreads - 2);
}

TEST_F(ExperimentManagerTest, AnAdmissionHoldsItsPlacesUntilDroppedThenGivesThemBack) {
  StartManager(/*submits_per_minute=*/2);
  Blocker();
  std::vector<v1::ExperimentRequest> points = {Collective(false), Collective(false)};
  for (v1::ExperimentRequest& point : points) point.set_user("mallory");
  {
    absl::StatusOr<Admission> held = manager_->admission().Admit(SweepOf(points));
    ASSERT_TRUE(held.ok()) << held.status();
    // Nothing is queued yet, but both places are taken: a submit does not fit.
    EXPECT_EQ(QueuedOf("mallory"), 0);
    auto refused = manager_->Submit(Collective(false), kMallory);
    ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
    EXPECT_THAT(refused.status().message(),
                HasSubstr("in use: 2 queued experiment(s) (2 of them being stored)"));
    // Dropped without being queued (e.g. the store refused the points): given back, token too.
  }
  EXPECT_TRUE(manager_->Submit(Collective(false), kMallory).ok());
  EXPECT_TRUE(manager_->Submit(Collective(false), kMallory).ok());
  EXPECT_EQ(QueuedOf("mallory"), 2);
}

TEST_F(ExperimentManagerTest, ARefusalTakesNoRateTokenAndStoresNothing) {
  StartManager(/*submits_per_minute=*/3);
  Blocker();
  auto first = manager_->Submit(Collective(false), kMallory);
  auto second = manager_->Submit(Collective(false), kMallory);
  ASSERT_TRUE(first.ok() && second.ok());
  // Refused by the queue quota, again and again: no token is spent on them.
  for (int i = 0; i < 5; ++i) {
    auto refused = manager_->Submit(Collective(false), kMallory);
    ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("quota max_queued_experiments"));
  }
  std::vector<v1::ExperimentRequest> points = {Collective(false), Collective(false)};
  for (v1::ExperimentRequest& point : points) point.set_user("mallory");
  EXPECT_TRUE(
      absl::IsResourceExhausted(manager_->admission().Admit(SweepOf(points)).status()));
  EXPECT_EQ(QueuedOf("mallory"), 2);
  EXPECT_EQ(StoredOf("mallory"), 2);
  // The third token is still there once a place frees up.
  ASSERT_TRUE(manager_->Cancel(first->id(), "", kMallory).ok());
  auto third = manager_->Submit(Collective(false), kMallory);
  EXPECT_TRUE(third.ok()) << third.status();
  // And that was the last one.
  ASSERT_TRUE(manager_->Cancel(second->id(), "", kMallory).ok());
  auto fourth = manager_->Submit(Collective(false), kMallory);
  ASSERT_TRUE(absl::IsResourceExhausted(fourth.status())) << fourth.status();
  EXPECT_THAT(fourth.status().message(), HasSubstr("--submits_per_minute_per_user"));
  EXPECT_EQ(StoredOf("mallory"), 3);
}

TEST_F(ExperimentManagerTest, AnotherUserCannotTakeTheOwnersWatchSlots) {
  StartManager();
  Blocker();
  // alice's experiment (she has no quota entry: the default, none).
  const Actor alice{"alice", "test", /*admin=*/false};
  auto experiment = manager_->Submit(Collective(false), alice);
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  const std::string id = experiment->id();
  std::vector<int64_t> mallorys;
  absl::Status refused;
  for (int i = 0; i < 64 && refused.ok(); ++i) {
    auto subscription =
        manager_->Subscribe(id, 1, std::make_shared<RecordingSink>(), Watcher{"mallory"});
    if (subscription.ok()) {
      mallorys.push_back(*subscription);
    } else {
      refused = subscription.status();
    }
  }
  EXPECT_EQ(mallorys.size(), 8u);
  ASSERT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_THAT(refused.message(),
              HasSubstr("mallory already holds 8 live streams on experiment " + id));
  EXPECT_THAT(refused.message(), HasSubstr("--max_watchers_per_user_per_experiment=8"));
  // The owner and an admin are answered.
  auto owners = manager_->Subscribe(id, 1, std::make_shared<RecordingSink>(), Watcher{"alice"});
  ASSERT_TRUE(owners.ok()) << owners.status();
  auto admins =
      manager_->Subscribe(id, 1, std::make_shared<RecordingSink>(), Watcher{"root", true});
  ASSERT_TRUE(admins.ok()) << admins.status();
  EXPECT_EQ(manager_->watch_slots().LiveOn(id), 10);

  // mallory's other streams (12 in all) hit the per-user cap on other experiments.
  auto other = manager_->Submit(Collective(false), alice);
  ASSERT_TRUE(other.ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(
        manager_->Subscribe(other->id(), 1, std::make_shared<RecordingSink>(), Watcher{"mallory"})
            .ok());
  }
  auto over =
      manager_->Subscribe(other->id(), 1, std::make_shared<RecordingSink>(), Watcher{"mallory"});
  ASSERT_TRUE(absl::IsResourceExhausted(over.status()));
  EXPECT_THAT(over.status().message(), HasSubstr("--max_watch_streams_per_user=12"));
  // Counted in the refusal metric by the cap they hit.
  EXPECT_EQ(refusals_.count("watch-cap:max_watchers_per_user_per_experiment"), 1);
  EXPECT_EQ(refusals_.count("watch-cap:max_watch_streams_per_user"), 1);

  // A stream's place is freed when it ends, also after the experiment ended.
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(manager_->Cancel(id, "", alice).ok());
  EXPECT_EQ(manager_->watch_slots().LiveOn(id), 10);
  for (int64_t subscription : mallorys) manager_->Unsubscribe(id, subscription);
  manager_->Unsubscribe(id, *owners);
  manager_->Unsubscribe(id, *admins);
  EXPECT_EQ(manager_->watch_slots().LiveOn(id), 0);
  EXPECT_EQ(manager_->watch_slots().LiveOf("mallory"), 4);
  // A replay of an ended experiment holds no place.
  auto replay = manager_->Subscribe(id, 1, sink, Watcher{"mallory"});
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(*replay, 0);
  EXPECT_TRUE(sink->ended());
  EXPECT_EQ(manager_->watch_slots().LiveOf("mallory"), 4);
}

TEST_F(ExperimentManagerTest, ACustomKernelIsRefusedUnlessThePolicyAllowsItAndNothingIsStored) {
  StartManager();
  auto refused = manager_->Submit(IndexOnGpu0(/*custom_kernel=*/true), kMallory);
  ASSERT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr("custom_kernel: mallory (test) may not submit custom kernels on this "
                        "daemon; the access policy's custom_kernel_users, custom_kernel_groups "
                        "or custom_kernels_for_everyone say who may"));
  EXPECT_EQ(StoredOf("mallory"), 0);
  EXPECT_EQ(refusals_.count("custom-kernel"), 1);
  // Refused before validation: an invalid kernel gets the same answer, naming the policy.
  v1::ExperimentRequest invalid = IndexOnGpu0(true);
  invalid.mutable_custom_kernel()->set_source(std::string(1 << 20, 'x'));
  EXPECT_TRUE(absl::IsPermissionDenied(manager_->Submit(invalid, kMallory).status()));
  // Her own kernels are not custom: admitted.
  EXPECT_TRUE(manager_->Submit(IndexOnGpu0(false), kMallory).ok());
  v1::ListAuditRequest audit;
  audit.set_user("mallory");
  auto entries = manager_->Audit(audit);
  ASSERT_TRUE(entries.ok()) << entries.status();
  int refusals = 0;
  for (const v1::AuditEntry& entry : *entries) {
    if (entry.action() == "refuse" && absl::StrContains(entry.detail(), "custom-kernel: ")) {
      ++refusals;
    }
  }
  EXPECT_EQ(refusals, 2);
}

TEST_F(ExperimentManagerTest, ACustomKernelRunsInANewWorkerThatIsNotKeptAndIsAudited) {
  StartManager();
  // Our kernel twice on GPU 0: the second run reuses the first one's warm worker.
  auto ours = manager_->Submit(IndexOnGpu0(false), kAdmin);
  ASSERT_TRUE(ours.ok()) << ours.status();
  ASSERT_EQ(Ended(ours->id()), v1::FINISHED);
  auto ours_again = manager_->Submit(IndexOnGpu0(false), kAdmin);
  ASSERT_TRUE(ours_again.ok()) << ours_again.status();
  ASSERT_EQ(Ended(ours_again->id()), v1::FINISHED);
  const std::string warm = WorkerPidOf(ours->id());
  EXPECT_EQ(WorkerPidOf(ours_again->id()), warm);

  // A custom kernel does not take that worker, and its own is not kept for the next run.
  auto custom = manager_->Submit(IndexOnGpu0(true), kAdmin);
  ASSERT_TRUE(custom.ok()) << custom.status();
  ASSERT_EQ(Ended(custom->id()), v1::FINISHED);
  auto custom_again = manager_->Submit(IndexOnGpu0(true), kAdmin);
  ASSERT_TRUE(custom_again.ok()) << custom_again.status();
  ASSERT_EQ(Ended(custom_again->id()), v1::FINISHED);
  auto after = manager_->Submit(IndexOnGpu0(false), kAdmin);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(Ended(after->id()), v1::FINISHED);
  const std::string first = WorkerPidOf(custom->id());
  const std::string second = WorkerPidOf(custom_again->id());
  const std::string next = WorkerPidOf(after->id());
  EXPECT_NE(first, warm);
  EXPECT_NE(second, first);
  EXPECT_NE(next, second);

  // The source is stored with the experiment; the audit names it by hash and size.
  auto stored = manager_->Get(custom->id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->request().custom_kernel().source(), kKernelSource);
  v1::ListAuditRequest audit;
  audit.set_experiment_id(custom->id());
  auto entries = manager_->Audit(audit);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ(entries->front().action(), "submit");
  EXPECT_EQ(entries->front().detail(),
            absl::StrCat("WORKLOAD_INDEX; custom kernel my_gather.cu (my_gather), source sha256 ",
                         Sha256Hex(kKernelSource), ", ", sizeof(kKernelSource) - 1, " bytes"));
}

}  // namespace
}  // namespace gpuprof::daemon
