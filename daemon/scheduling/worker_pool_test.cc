// WorkerPool with real worker processes: the fake rank worker (tests/ranks), which speaks the
// worker protocol over the real pipes and does everything a worker does but the GPU work. The
// test plays the experiment manager: it holds the owner lock around every call and hears the
// workers' reports and exits on their reader threads.
#include "daemon/scheduling/worker_pool.h"

#include <csignal>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/gpus.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::UnorderedElementsAre;

// Two GPUs joined by NVLink, as the probe would report them.
v1::ListGpusResponse TwoGpus() {
  v1::ListGpusResponse inventory;
  for (int i = 0; i < 2; ++i) {
    v1::GpuInfo& gpu = *inventory.add_gpus();
    gpu.set_index(i);
    gpu.set_uuid(absl::StrCat("GPU-test-", i));
  }
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    v1::GpuLink& link = *inventory.add_links();
    link.set_gpu_a(a);
    link.set_gpu_b(b);
  }
  inventory.mutable_host()->set_hostname("worker-pool-test");
  return inventory;
}

v1::Experiment ExperimentOn(const std::string& id, const std::vector<int>& gpus,
                            const std::string& fault = "") {
  v1::Experiment experiment;
  experiment.set_id(id);
  experiment.mutable_request()->mutable_collective();
  if (!fault.empty()) (*experiment.mutable_request()->mutable_labels())["gpuprof.fault"] = fault;
  for (int gpu : gpus) experiment.add_gpu_ids(gpu);
  return experiment;
}

worker_protocol::CustomKernelLimits CompileLimits() {
  worker_protocol::CustomKernelLimits limits;
  limits.mutable_compile_timeout()->set_seconds(90);
  limits.set_compile_memory_bytes(int64_t{1} << 30);
  return limits;
}

class WorkerPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As gpuprofd does: a worker that died must not take the test with it through a write.
    signal(SIGPIPE, SIG_IGN);
    // Bazel runs a test in its runfiles tree, where the fake worker is at this path.
    MakePool("tests/ranks/fake_rank_worker", absl::Minutes(5));
  }

  void TearDown() override {
    std::vector<std::unique_ptr<WorkerProcess>> retired;
    {
      absl::MutexLock lock(&mutex_);
      pool_->RetireAll();
      retired = pool_->TakeRetired();
      for (auto& process : graveyard_) retired.push_back(std::move(process));
    }
    retired.clear();  // joins the reader threads, which take the lock
    pool_.reset();
  }

  void MakePool(const std::string& binary, absl::Duration idle_timeout) {
    pool_ = std::make_unique<WorkerPool>(
        mutex_, inventory_,
        WorkerPoolOptions{binary, /*allow_test_faults=*/true, idle_timeout, CompileLimits()},
        [this](int64_t worker, const worker_protocol::WorkerReport& report) {
          absl::MutexLock lock(&mutex_);
          if (report.has_rendezvous()) rendezvous_[worker] = report.rendezvous().nccl_unique_id();
          if (report.has_event() && report.event().has_progress()) {
            said_[worker] = report.event().progress().message();
          }
          if (report.has_finished()) {
            pool_->Finished(worker);
            ++finished_;
          }
          heard_.SignalAll();
        },
        [this](int64_t worker, const WorkerExit& exit) {
          absl::MutexLock lock(&mutex_);
          // As the manager does: a retired worker's exit is not news.
          if (std::optional<WorkerRun> run = pool_->Exited(worker); run.has_value()) {
            exits_[worker] = *run;
          }
          heard_.SignalAll();
        },
        [this] { ++retirements_; });
  }

  // A new group of two ranks on both GPUs, rendezvous made and `experiment_id` assigned.
  void StartGroup(const std::string& experiment_id, const std::string& fault, WorkerGroup& group)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const absl::StatusOr<WorkerGroup> acquired = pool_->Acquire(experiment_id, {0, 1}, true);
    ASSERT_TRUE(acquired.ok()) << acquired.status();
    group = *acquired;
    const size_t before = rendezvous_.size();
    pool_->StartRendezvous(group);
    ASSERT_TRUE(Await([&] { return rendezvous_.size() == before + 1; }));
    pool_->AssignRanks(ExperimentOn(experiment_id, {0, 1}, fault), group.workers,
                       rendezvous_[group.workers[0]], /*reused=*/false);
  }

  // Waits (lock held) until `done` holds; false after 20 s. A condition variable, not
  // Mutex::Await: abseil evaluates an Await condition on whichever thread unlocks, inside the
  // uninstrumented library, where ThreadSanitizer cannot see that the lock is held.
  bool Await(const std::function<bool()>& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!done()) {
      if (heard_.WaitWithDeadline(&mutex_, deadline)) return done();
    }
    return true;
  }

  absl::Mutex mutex_;
  // Signalled when a report or an exit was recorded.
  absl::CondVar heard_;
  const v1::ListGpusResponse inventory_ = TwoGpus();
  std::unique_ptr<WorkerPool> pool_;
  std::map<int64_t, std::string> rendezvous_ ABSL_GUARDED_BY(mutex_);
  std::map<int64_t, std::string> said_ ABSL_GUARDED_BY(mutex_);
  std::map<int64_t, WorkerRun> exits_ ABSL_GUARDED_BY(mutex_);
  int finished_ ABSL_GUARDED_BY(mutex_) = 0;
  int retirements_ ABSL_GUARDED_BY(mutex_) = 0;
  // Retired processes, destroyed in TearDown without the lock (their exits take it).
  std::vector<std::unique_ptr<WorkerProcess>> graveyard_ ABSL_GUARDED_BY(mutex_);
};

TEST_F(WorkerPoolTest, RankGroupMakesItsRendezvousAndIsReusedWithItsCommunicator) {
  absl::MutexLock lock(&mutex_);
  const absl::StatusOr<WorkerGroup> group = pool_->Acquire("exp-1", {0, 1}, true);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->workers.size(), 2u);
  EXPECT_FALSE(group->reused);
  for (int rank = 0; rank < 2; ++rank) {
    const std::optional<WorkerRun> run = pool_->Running(group->workers[rank]);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->experiment_id, "exp-1");
    EXPECT_EQ(run->rank, rank);
  }
  EXPECT_TRUE(pool_->AnyRunning("exp-1"));

  // Only rank 0 is asked for the NCCL id.
  pool_->StartRendezvous(*group);
  ASSERT_TRUE(Await([&] { return rendezvous_.size() == 1; }));
  ASSERT_TRUE(rendezvous_.contains(group->workers[0]));
  const std::string id = rendezvous_[group->workers[0]];

  const v1::Experiment first = ExperimentOn("exp-1", {0, 1});
  pool_->AssignRanks(first, group->workers, id, group->reused);
  ASSERT_TRUE(Await([&] { return finished_ == 2; }));
  const std::string id_text(id.c_str());
  // Each rank sees its own GPU and the link between the two; both got rank 0's id.
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(said_[group->workers[rank]], HasSubstr(absl::StrCat("rank ", rank, " of 2 ")));
    EXPECT_THAT(said_[group->workers[rank]],
                HasSubstr(absl::StrCat("id ", id_text, " reuse 0 gpus 1 links 2")));
  }
  EXPECT_FALSE(pool_->AnyRunning("exp-1"));
  EXPECT_FALSE(pool_->Running(group->workers[0]).has_value());

  // The next experiment on exactly these GPUs gets the same group, communicator and all.
  const absl::StatusOr<WorkerGroup> again = pool_->Acquire("exp-2", {0, 1}, true);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->reused);
  EXPECT_EQ(again->workers, group->workers);
  pool_->AssignRanks(ExperimentOn("exp-2", {0, 1}), again->workers, "", again->reused);
  ASSERT_TRUE(Await([&] { return finished_ == 4; }));
  for (int64_t worker : again->workers) EXPECT_THAT(said_[worker], HasSubstr("reuse 1"));
  EXPECT_EQ(retirements_, 0);
}

TEST_F(WorkerPoolTest, OneWorkerSeesAllItsGpusAndIdleWorkersOnThemAreStopped) {
  absl::MutexLock lock(&mutex_);
  WorkerGroup group;
  ASSERT_NO_FATAL_FAILURE(StartGroup("exp-1", "", group));
  ASSERT_TRUE(Await([&] { return finished_ == 2; }));

  // One worker for both GPUs: not the group's arrangement, and the idle ranks would share the
  // GPUs with it, so they are stopped (their exits are not reported as failures).
  const absl::StatusOr<WorkerGroup> single = pool_->Acquire("exp-2", {0, 1}, false);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_FALSE(single->reused);
  ASSERT_EQ(single->workers.size(), 1u);
  EXPECT_EQ(retirements_, 2);
  EXPECT_FALSE(pool_->Running(group.workers[0]).has_value());
  pool_->AssignRanks(ExperimentOn("exp-2", {0, 1}), single->workers, "", false);
  ASSERT_TRUE(Await([&] { return finished_ == 3; }));
  EXPECT_THAT(said_[single->workers[0]], HasSubstr("rank 0 of 1 "));
  EXPECT_THAT(said_[single->workers[0]], HasSubstr("gpus 2 links 2"));
  EXPECT_TRUE(exits_.empty());
}

TEST_F(WorkerPoolTest, KillEndsEveryRankOfTheExperimentAndTheirExitsSayWhatTheyRan) {
  absl::MutexLock lock(&mutex_);
  WorkerGroup group;
  ASSERT_NO_FATAL_FAILURE(StartGroup("exp-1", "hang", group));
  ASSERT_TRUE(Await([&] { return said_.size() == 2; }));

  // Both ranks hang: the description at the deadline names each with its GPU and pid.
  const std::string ranks = pool_->DescribeRanks("exp-1", group.workers, absl::Now());
  EXPECT_THAT(ranks, HasSubstr("; at the deadline: rank 0 (GPU 0, pid "));
  EXPECT_THAT(ranks, HasSubstr("; rank 1 (GPU 1, pid "));
  EXPECT_EQ(pool_->DescribeRanks("exp-1", {group.workers[0]}, absl::Now()), "");

  pool_->Kill("exp-1");
  ASSERT_TRUE(Await([&] { return exits_.size() == 2; }));
  EXPECT_EQ(exits_[group.workers[0]].experiment_id, "exp-1");
  EXPECT_EQ(exits_[group.workers[1]].rank, 1);
  EXPECT_FALSE(pool_->AnyRunning("exp-1"));
  // Gone ranks are "done" in the description.
  EXPECT_EQ(pool_->DescribeRanks("exp-1", group.workers, absl::Now()),
            "; at the deadline: rank 0 done; rank 1 done");
  graveyard_ = pool_->TakeRetired();
  EXPECT_EQ(graveyard_.size(), 2u);
}

TEST_F(WorkerPoolTest, IdleWorkersAreRetiredAfterTheTimeoutOrWhenTheirGpuIsDrained) {
  absl::MutexLock lock(&mutex_);
  const absl::StatusOr<WorkerGroup> on0 = pool_->Acquire("exp-0", {0}, false);
  const absl::StatusOr<WorkerGroup> on1 = pool_->Acquire("exp-1", {1}, false);
  ASSERT_TRUE(on0.ok() && on1.ok());
  EXPECT_EQ(pool_->RetireIdle(absl::Now()), absl::InfiniteFuture());  // none is idle
  pool_->Finished(on0->workers[0]);
  pool_->Finished(on1->workers[0]);

  // Idle for less than the timeout: kept, and the next check is due when it runs out.
  const absl::Time now = absl::Now();
  const absl::Time due = pool_->RetireIdle(now);
  EXPECT_GT(due, now + absl::Minutes(4));
  EXPECT_LE(due, now + absl::Minutes(5));
  EXPECT_EQ(retirements_, 0);

  pool_->RetireIdleOn(1);
  EXPECT_EQ(retirements_, 1);
  // After the timeout the other goes too.
  EXPECT_EQ(pool_->RetireIdle(now + absl::Minutes(6)), absl::InfiniteFuture());
  EXPECT_EQ(retirements_, 2);
  graveyard_ = pool_->TakeRetired();
  EXPECT_EQ(graveyard_.size(), 2u);
  const absl::StatusOr<WorkerGroup> fresh = pool_->Acquire("exp-2", {0}, false);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->reused);
}

TEST_F(WorkerPoolTest, ASingleUseWorkerIsNewAndRetiredWhenItsExperimentEnds) {
  absl::MutexLock lock(&mutex_);
  // A warm worker idles on GPU 0.
  const absl::StatusOr<WorkerGroup> warm = pool_->Acquire("exp-1", {0}, false);
  ASSERT_TRUE(warm.ok()) << warm.status();
  pool_->Finished(warm->workers[0]);
  EXPECT_EQ(retirements_, 0);

  // A custom kernel's experiment does not take it: a new worker, and the idle one (which would
  // share the GPU) is stopped.
  const absl::StatusOr<WorkerGroup> fresh =
      pool_->Acquire("exp-2", {0}, false, WorkerReuse::kSingleUse);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->reused);
  ASSERT_EQ(fresh->workers.size(), 1u);
  EXPECT_NE(fresh->workers[0], warm->workers[0]);
  EXPECT_EQ(retirements_, 1);
  v1::Experiment custom = ExperimentOn("exp-2", {0});
  custom.mutable_request()->mutable_custom_kernel()->set_kernel_name("my_gather");
  pool_->AssignRanks(custom, fresh->workers, "", fresh->reused);
  ASSERT_TRUE(Await([&] { return finished_ == 1; }));
  // The daemon's compile limits came with the assignment.
  EXPECT_THAT(said_[fresh->workers[0]], HasSubstr("compile limits 90 s 1073741824 bytes"));

  // Finished retires it (the test's report callback calls Finished): nothing runs, nothing
  // idles, and the next experiment on the GPU gets a new worker too.
  EXPECT_EQ(retirements_, 2);
  EXPECT_FALSE(pool_->AnyRunning("exp-2"));
  EXPECT_EQ(pool_->RetireIdle(absl::Now()), absl::InfiniteFuture());
  const absl::StatusOr<WorkerGroup> next = pool_->Acquire("exp-3", {0}, false);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->reused);
  EXPECT_NE(next->workers[0], fresh->workers[0]);
  // An experiment without a custom kernel is told no compile limits.
  pool_->AssignRanks(ExperimentOn("exp-3", {0}), next->workers, "", next->reused);
  ASSERT_TRUE(Await([&] { return finished_ == 2; }));
  EXPECT_THAT(said_[next->workers[0]], Not(HasSubstr("compile limits")));
  // Warm workers stay warm.
  EXPECT_EQ(retirements_, 2);
  graveyard_ = pool_->TakeRetired();
}

TEST_F(WorkerPoolTest, AGroupThatCannotStartLeavesNothingStarted) {
  {
    absl::MutexLock lock(&mutex_);
    pool_->RetireAll();
  }
  pool_.reset();
  MakePool("/nonexistent/gpuprof_worker", absl::Minutes(5));
  absl::MutexLock lock(&mutex_);
  const absl::StatusOr<WorkerGroup> group = pool_->Acquire("exp-1", {0, 1}, true);
  ASSERT_FALSE(group.ok());
  EXPECT_THAT(group.status().message(), HasSubstr("/nonexistent/gpuprof_worker"));
  EXPECT_FALSE(pool_->AnyRunning("exp-1"));
}

}  // namespace
}  // namespace gpuprof::daemon
