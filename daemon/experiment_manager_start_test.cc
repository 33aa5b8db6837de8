// A dispatched experiment's workers start and its RUNNING event is committed without the
// manager's lock. These tests hold that window open (ManagerOptions::while_starting_for_test)
// and cancel, watch or shut down inside it, against a real store and real worker processes
// (the fake rank worker), then check what was stored and streamed.
#include <stdlib.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/admission/test_policy.h"
#include "daemon/experiment_manager.h"
#include "daemon/store/experiment_store.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::daemon {
namespace {

using ::testing::ElementsAre;

// Every state a stream delivered, in order, and whether it ended.
class StateRecorder : public EventSink {
 public:
  void OnEvent(const v1::ExperimentEvent& event) override {
    absl::MutexLock lock(&mutex_);
    seqs_.push_back(event.seq());
    if (event.has_state()) states_.push_back(event.state().state());
  }
  void OnEnd() override {
    absl::MutexLock lock(&mutex_);
    ended_ = true;
  }
  bool WaitForEnd(absl::Duration timeout) {
    absl::MutexLock lock(&mutex_);
    return mutex_.AwaitWithTimeout(absl::Condition(&ended_), timeout);
  }
  std::vector<v1::ExperimentState> states() {
    absl::MutexLock lock(&mutex_);
    return states_;
  }
  std::vector<int64_t> seqs() {
    absl::MutexLock lock(&mutex_);
    return seqs_;
  }

 private:
  absl::Mutex mutex_;
  std::vector<v1::ExperimentState> states_;
  std::vector<int64_t> seqs_;
  bool ended_ = false;
};

// The fake worker's collective on both fake GPUs, running until cancelled with `hang`.
v1::ExperimentRequest Collective(bool hang) {
  v1::ExperimentRequest request;
  request.set_user("alice");
  request.mutable_collective();
  request.mutable_gpus()->add_gpu_ids(0);
  request.mutable_gpus()->add_gpu_ids(1);
  if (hang) (*request.mutable_labels())["gpuprof.fault"] = "hang";
  return request;
}

const Actor kAlice{"alice", "test", /*admin=*/false};

std::vector<v1::ExperimentState> StoredStates(ExperimentStore& store, const std::string& id) {
  std::vector<v1::ExperimentState> states;
  absl::StatusOr<std::vector<v1::ExperimentEvent>> events = store.Events(id, 1);
  EXPECT_TRUE(events.ok()) << events.status();
  if (!events.ok()) return states;
  int64_t seq = 0;
  for (const v1::ExperimentEvent& event : *events) {
    EXPECT_EQ(event.seq(), ++seq) << "seqs are dense and in order";
    if (event.has_state()) states.push_back(event.state().state());
  }
  return states;
}

class ExperimentManagerStartTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FAKE_RANK_GPUS", "2", /*overwrite=*/1);
    dir_ = NewTestDir("manager-start");
    ASSERT_FALSE(dir_.empty());
  }

  void TearDown() override {
    // Let any start held open go on, so that Shutdown can join the control thread.
    if (!release_.HasBeenNotified()) release_.Notify();
    if (manager_ != nullptr) manager_->Shutdown();
  }

  // A manager whose first start waits, without the lock, until release_ is notified.
  void StartManager() {
    auto store = ExperimentStore::Open(dir_ + "/gpuprof.db");
    ASSERT_TRUE(store.ok()) << store.status();
    ManagerOptions options;
    options.worker_binary = testing::RunfilePath("tests/ranks/fake_rank_worker");
    options.limits.allow_test_faults = true;
    options.measure_copy_bandwidth = false;
    options.while_starting_for_test = [this](const std::string& id) {
      if (held_.HasBeenNotified()) return;
      held_id_ = id;
      held_.Notify();
      release_.WaitForNotificationWithTimeout(absl::Seconds(30));
    };
    auto manager = ExperimentManager::Create(options, *std::move(store));
    ASSERT_TRUE(manager.ok()) << manager.status();
    manager_ = *std::move(manager);
  }

  // Waits until `id` is in `state` (as Get reports it).
  bool WaitForState(const std::string& id, v1::ExperimentState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      absl::StatusOr<v1::Experiment> now = manager_->Get(id);
      if (now.ok() && now->state() == state) return true;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  std::string dir_;
  std::unique_ptr<ExperimentManager> manager_;
  absl::Notification held_;
  absl::Notification release_;
  std::string held_id_;  // written before held_ is notified
};

TEST_F(ExperimentManagerStartTest, ACancelWhileStartingComesAfterRunningAndStopsTheWorker) {
  StartManager();
  absl::StatusOr<v1::Experiment> submitted = manager_->Submit(Collective(/*hang=*/true), kAlice);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  const std::string id = submitted->id();
  ASSERT_TRUE(held_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_EQ(held_id_, id);

  // A watcher and a cancel arrive while the worker has started and RUNNING is not yet stored.
  auto watcher = std::make_shared<StateRecorder>();
  absl::StatusOr<int64_t> subscription;
  absl::StatusOr<v1::Experiment> cancelled;
  absl::Notification watching, cancel_returned;
  std::thread watch([&] {
    subscription = manager_->Subscribe(id, 1, watcher, Watcher{"alice"});
    watching.Notify();
  });
  std::thread cancel([&] {
    cancelled = manager_->Cancel(id, "changed my mind", kAlice);
    cancel_returned.Notify();
  });
  // Both wait for the start to be published; neither is answered meanwhile.
  EXPECT_FALSE(cancel_returned.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  EXPECT_FALSE(watching.HasBeenNotified());
  // Other RPCs do not wait: the manager's lock is free while the start is held.
  absl::StatusOr<v1::Experiment> other = manager_->Submit(Collective(/*hang=*/false), kAlice);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_TRUE(manager_->Get(id).ok());
  release_.Notify();
  watch.join();
  cancel.join();

  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::CANCELLED);
  EXPECT_EQ(cancelled->reason(), "changed my mind");
  ASSERT_TRUE(subscription.ok()) << subscription.status();
  ASSERT_TRUE(watcher->WaitForEnd(absl::Seconds(30)));
  // The stream and the store agree: queued, running, cancelled, each once, in seq order. A
  // rank's setup progress may come between RUNNING and the cancel (a slow build lets the run
  // command reach the workers first), so the seqs are checked for being dense, not counted.
  EXPECT_THAT(watcher->states(), ElementsAre(v1::QUEUED, v1::RUNNING, v1::CANCELLED));
  const std::vector<int64_t> seqs = watcher->seqs();
  for (size_t i = 0; i < seqs.size(); ++i) {
    EXPECT_EQ(seqs[i], static_cast<int64_t>(i) + 1) << "stream seqs are dense and in order";
  }
  absl::StatusOr<std::vector<v1::ExperimentEvent>> stored_events = manager_->store().Events(id, 1);
  ASSERT_TRUE(stored_events.ok()) << stored_events.status();
  EXPECT_EQ(seqs.size(), stored_events->size()) << "the stream delivered every stored event";
  EXPECT_THAT(StoredStates(manager_->store(), id),
              ElementsAre(v1::QUEUED, v1::RUNNING, v1::CANCELLED));
  // The cancelled run's worker was stopped and its GPUs freed: the next experiment runs.
  EXPECT_TRUE(WaitForState(other->id(), v1::FINISHED));
  EXPECT_THAT(StoredStates(manager_->store(), other->id()),
              ElementsAre(v1::QUEUED, v1::RUNNING, v1::FINISHED));
}

TEST_F(ExperimentManagerStartTest, AShutdownWhileStartingInterruptsTheStartedRun) {
  StartManager();
  absl::StatusOr<v1::Experiment> submitted = manager_->Submit(Collective(/*hang=*/true), kAlice);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(held_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  std::thread stop([&] { manager_->Shutdown(); });
  absl::SleepFor(absl::Milliseconds(100));
  release_.Notify();
  stop.join();
  // It did start (its worker ran), so it is interrupted, after its RUNNING.
  EXPECT_THAT(StoredStates(manager_->store(), submitted->id()),
              ElementsAre(v1::QUEUED, v1::RUNNING, v1::INTERRUPTED));
  absl::StatusOr<v1::Experiment> stored = manager_->store().Get(submitted->id());
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::INTERRUPTED);
}

}  // namespace
}  // namespace gpuprof::daemon
