#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/store_test_support.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store_testing {
namespace {

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST_F(ExperimentStoreTest, CreateThenGetReturnsTheExperimentWithItsId) {
  v1::Experiment experiment = MakeExperiment("alice", v1::WORKLOAD_RADIX);
  experiment.mutable_request()->mutable_radix()->set_num_requests(1000);
  (*experiment.mutable_request()->mutable_labels())["sweep"] = "page-size";
  ASSERT_OK_AND_ASSIGN(std::string id, store_->Create(experiment, StateEvent(1, v1::QUEUED)));
  EXPECT_EQ(id, "exp-000001");

  ASSERT_OK_AND_ASSIGN(v1::Experiment stored, store_->Get(id));
  EXPECT_EQ(stored.id(), "exp-000001");
  EXPECT_EQ(stored.user(), "alice");
  EXPECT_EQ(stored.state(), v1::QUEUED);
  EXPECT_EQ(stored.request().radix().num_requests(), 1000);
  EXPECT_EQ(stored.request().labels().at("sweep"), "page-size");
  experiment.set_id(id);
  EXPECT_TRUE(MessageDifferencer::Equals(stored, experiment)) << stored.DebugString();

  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> events, store_->Events(id, 0));
  ASSERT_EQ(events.size(), 1);
  EXPECT_EQ(events[0].experiment_id(), "exp-000001");
  EXPECT_EQ(events[0].seq(), 1);
  EXPECT_EQ(events[0].state().state(), v1::QUEUED);
  EXPECT_EQ(events[0].time().seconds(), 1'700'000'001);
}

TEST_F(ExperimentStoreTest, SweepsAreStoredWithEventsAndLinkedPoints) {
  v1::Sweep sweep;
  sweep.set_user("alice");
  sweep.set_state(v1::SWEEP_RUNNING);
  sweep.add_points()->set_index(0);
  sweep.add_points()->set_index(1);
  v1::SweepEvent first;
  first.set_seq(1);
  *first.mutable_created() = sweep;
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(sweep, first));
  EXPECT_EQ(id, "swp-000001");

  // A point's experiment is linked in its own transaction; a second attempt adds a link.
  for (int attempt = 0; attempt < 2; ++attempt) {
    v1::Experiment point = MakeExperiment("alice", v1::WORKLOAD_RADIX);
    point.set_sweep_id(id);
    point.set_sweep_point(1);
    ASSERT_TRUE(store_->Create(point, StateEvent(1, v1::QUEUED)).ok());
  }
  Reopen();
  ASSERT_OK_AND_ASSIGN(auto links, store_->SweepPointExperiments(id));
  ASSERT_EQ(links.size(), 1u);
  EXPECT_EQ(links[1], (std::vector<std::string>{"exp-000001", "exp-000002"}));

  sweep.set_id(id);
  sweep.set_state(v1::SWEEP_FINISHED);
  sweep.set_last_seq(2);
  v1::SweepEvent ended;
  ended.set_seq(2);
  ended.set_ended("all 2 points finished");
  ASSERT_TRUE(store_->UpdateSweep(sweep, ended).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(store_->UpdateSweep(sweep, ended)));
  ASSERT_OK_AND_ASSIGN(const v1::Sweep stored, store_->GetSweepPage(id, 0, ""));
  EXPECT_EQ(stored.state(), v1::SWEEP_FINISHED);
  EXPECT_EQ(stored.points_size(), 2);
  ASSERT_OK_AND_ASSIGN(auto events, store_->SweepEvents(id, 2));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].ended(), "all 2 points finished");
  ASSERT_OK_AND_ASSIGN(auto running, store_->ListSweepsByState(v1::SWEEP_RUNNING));
  EXPECT_TRUE(running.empty());
  ASSERT_OK_AND_ASSIGN(SweepPage page, store_->ListSweeps("alice", 0, ""));
  ASSERT_EQ(page.sweeps.size(), 1u);
  EXPECT_EQ(page.sweeps[0].points_size(), 0);  // listings leave the points out
  EXPECT_TRUE(absl::IsNotFound(store_->GetSweep("swp-000009").status()));
}

TEST_F(ExperimentStoreTest, OpenCreatesTheFileInWalMode) {
  EXPECT_TRUE(std::filesystem::exists(path_));
  EXPECT_EQ(RawQuery(path_, "PRAGMA journal_mode"), "wal");
  EXPECT_EQ(RawQuery(path_, "PRAGMA user_version"),
            std::to_string(ExperimentStore::kSchemaVersion));
}

TEST_F(ExperimentStoreTest, UnknownIdIsNotFoundAndNamed) {
  absl::StatusOr<v1::Experiment> experiment = store_->Get("exp-000042");
  EXPECT_EQ(experiment.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(experiment.status().message(), HasSubstr("exp-000042"));

  absl::StatusOr<std::vector<v1::ExperimentEvent>> events = store_->Events("exp-000042", 0);
  EXPECT_EQ(events.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(events.status().message(), HasSubstr("exp-000042"));
}

TEST_F(ExperimentStoreTest, CreateNeedsAPositiveFirstSeq) {
  absl::StatusOr<std::string> id =
      store_->Create(MakeExperiment("alice", v1::WORKLOAD_INDEX), StateEvent(0, v1::QUEUED));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing was written, so the next id is still the first.
  EXPECT_EQ(CreateQueued("alice", v1::WORKLOAD_INDEX), "exp-000001");
}

TEST_F(ExperimentStoreTest, IdsIncreaseAndStayUniqueAcrossReopen) {
  EXPECT_EQ(CreateQueued("alice", v1::WORKLOAD_INDEX), "exp-000001");
  EXPECT_EQ(CreateQueued("bob", v1::WORKLOAD_STORE), "exp-000002");
  EXPECT_EQ(CreateQueued("alice", v1::WORKLOAD_ATTENTION), "exp-000003");
  Reopen();
  EXPECT_EQ(CreateQueued("carol", v1::WORKLOAD_INDEX), "exp-000004");
  ASSERT_OK_AND_ASSIGN(v1::Experiment first, store_->Get("exp-000001"));
  EXPECT_EQ(first.user(), "alice");
  ASSERT_OK_AND_ASSIGN(v1::Experiment fourth, store_->Get("exp-000004"));
  EXPECT_EQ(fourth.user(), "carol");
}

TEST_F(ExperimentStoreTest, ConcurrentCreatesGetDistinctConsecutiveIds) {
  constexpr int kThreads = 4;
  constexpr int kCreatesPerThread = 10;
  std::vector<std::vector<std::string>> ids_by_thread(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCreatesPerThread; ++i) {
        absl::StatusOr<std::string> id = store_->Create(
            MakeExperiment(absl::StrCat("user", t), v1::WORKLOAD_INDEX), StateEvent(1, v1::QUEUED));
        ids_by_thread[t].push_back(id.ok() ? *id : id.status().ToString());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  std::set<std::string> ids;
  for (const auto& thread_ids : ids_by_thread) ids.insert(thread_ids.begin(), thread_ids.end());
  std::set<std::string> expected;
  for (int i = 1; i <= kThreads * kCreatesPerThread; ++i) {
    expected.insert(absl::StrCat("exp-0000", i < 10 ? "0" : "", i));
  }
  EXPECT_EQ(ids, expected);
}

TEST_F(ExperimentStoreTest, UpdateReplacesTheExperimentAndAppendsTheEvent) {
  std::string id = CreateQueued("alice", v1::WORKLOAD_ATTENTION);

  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
  experiment.set_state(v1::RUNNING);
  experiment.add_gpu_ids(3);
  experiment.set_last_seq(2);
  v1::ExperimentEvent running = StateEvent(2, v1::RUNNING);
  running.mutable_state()->add_gpu_ids(3);
  ASSERT_OK(store_->Update(experiment, running));

  ASSERT_OK_AND_ASSIGN(v1::Experiment stored, store_->Get(id));
  EXPECT_EQ(stored.state(), v1::RUNNING);
  EXPECT_THAT(stored.gpu_ids(), ElementsAre(3));
  EXPECT_EQ(stored.last_seq(), 2);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> events, store_->Events(id, 0));
  EXPECT_THAT(Seqs(events), ElementsAre(1, 2));
  // The event's empty experiment_id was filled in.
  EXPECT_EQ(events[1].experiment_id(), id);
  EXPECT_EQ(events[1].state().state(), v1::RUNNING);

  // seq 0: the experiment changes, no event is appended.
  experiment.set_state(v1::FINISHED);
  experiment.mutable_result()->mutable_measurement()->set_bandwidth_gbps(3000.5);
  ASSERT_OK(store_->Update(experiment, v1::ExperimentEvent()));
  ASSERT_OK_AND_ASSIGN(stored, store_->Get(id));
  EXPECT_EQ(stored.state(), v1::FINISHED);
  EXPECT_EQ(stored.result().measurement().bandwidth_gbps(), 3000.5);
  ASSERT_OK_AND_ASSIGN(events, store_->Events(id, 0));
  EXPECT_THAT(Seqs(events), ElementsAre(1, 2));

  // The indexed state column followed the proto.
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> running_ones, store_->ListByState(v1::RUNNING));
  EXPECT_THAT(running_ones, IsEmpty());
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> finished, store_->ListByState(v1::FINISHED));
  EXPECT_THAT(Ids(finished), ElementsAre(id));
}

TEST_F(ExperimentStoreTest, OldestQueuedIsTheFirstSubmittedStillQueued) {
  ASSERT_OK_AND_ASSIGN(int64_t none, store_->OldestQueuedCreatedUnixNanos());
  EXPECT_EQ(none, -1);
  v1::Experiment first = MakeExperiment("alice", v1::WORKLOAD_RADIX);
  first.mutable_created()->set_seconds(1'700'000'010);
  ASSERT_OK_AND_ASSIGN(std::string first_id, store_->Create(first, StateEvent(1, v1::QUEUED)));
  v1::Experiment second = MakeExperiment("bob", v1::WORKLOAD_RADIX);
  second.mutable_created()->set_seconds(1'700'000'020);
  ASSERT_OK(store_->Create(second, StateEvent(1, v1::QUEUED)).status());
  ASSERT_OK_AND_ASSIGN(int64_t oldest, store_->OldestQueuedCreatedUnixNanos());
  EXPECT_EQ(oldest, int64_t{1'700'000'010} * 1'000'000'000 + 123);
  // Once the first runs, the second is the oldest waiting.
  first.set_id(first_id);
  first.set_state(v1::RUNNING);
  ASSERT_OK(store_->Update(first, v1::ExperimentEvent()));
  ASSERT_OK_AND_ASSIGN(oldest, store_->OldestQueuedCreatedUnixNanos());
  EXPECT_EQ(oldest, int64_t{1'700'000'020} * 1'000'000'000 + 123);
}

TEST_F(ExperimentStoreTest, EventsReplayFromSeq) {
  std::string id = CreateQueued("alice", v1::WORKLOAD_STORE);
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
  for (int seq = 2; seq <= 5; ++seq) {
    experiment.set_last_seq(seq);
    ASSERT_OK(store_->Update(experiment, ProgressEvent(seq, seq * 10)));
  }

  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> all, store_->Events(id, 0));
  EXPECT_THAT(Seqs(all), ElementsAre(1, 2, 3, 4, 5));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> tail, store_->Events(id, 3));
  EXPECT_THAT(Seqs(tail), ElementsAre(3, 4, 5));
  ASSERT_EQ(tail.size(), 3);
  EXPECT_EQ(tail[0].progress().done(), 30);
  EXPECT_EQ(tail[2].progress().done(), 50);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> none, store_->Events(id, 6));
  EXPECT_THAT(none, IsEmpty());
}

TEST_F(ExperimentStoreTest, DuplicateSeqIsRejectedAndNothingIsWritten) {
  std::string id = CreateQueued("alice", v1::WORKLOAD_INDEX);
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
  experiment.set_state(v1::FAILED);
  v1::ExperimentEvent duplicate = StateEvent(1, v1::FAILED);

  absl::Status status = store_->Update(experiment, duplicate);
  EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
  EXPECT_THAT(status.message(), HasSubstr(id));

  // The transaction rolled back: the experiment row did not change either.
  ASSERT_OK_AND_ASSIGN(v1::Experiment stored, store_->Get(id));
  EXPECT_EQ(stored.state(), v1::QUEUED);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> events, store_->Events(id, 0));
  ASSERT_EQ(events.size(), 1);
  EXPECT_EQ(events[0].state().state(), v1::QUEUED);
}

TEST_F(ExperimentStoreTest, AuditEntriesAreStoredWithTheirWriteOrNotAtAll) {
  v1::AuditEntry submit;
  submit.set_actor("alice");
  submit.set_action("submit");
  submit.mutable_time()->set_seconds(1'700'000'000);
  ASSERT_OK_AND_ASSIGN(std::string id, store_->Create(MakeExperiment("alice", v1::WORKLOAD_RADIX),
                                                      StateEvent(1, v1::QUEUED), &submit));
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));

  // A write the store refuses (a seq already stored) takes its audit entry with it.
  v1::AuditEntry refused_cancel;
  refused_cancel.set_actor("alice");
  refused_cancel.set_action("cancel");
  refused_cancel.set_experiment_id(id);
  experiment.set_state(v1::CANCELLED);
  EXPECT_EQ(store_->Update(experiment, StateEvent(1, v1::CANCELLED), &refused_cancel).code(),
            absl::StatusCode::kAlreadyExists);

  v1::AuditEntry cancel = refused_cancel;
  cancel.set_detail("stored");
  ASSERT_OK(store_->Update(experiment, StateEvent(2, v1::CANCELLED), &cancel));

  Reopen();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::AuditEntry> entries, store_->ListAudit("", id, 0));
  std::vector<std::string> stored;
  for (const v1::AuditEntry& entry : entries) {
    EXPECT_EQ(entry.experiment_id(), id);  // Create filled in the id it chose.
    stored.push_back(absl::StrCat(entry.action(), ":", entry.detail()));
  }
  EXPECT_THAT(stored, ElementsAre("cancel:stored", "submit:"));
}

TEST_F(ExperimentStoreTest, UpdateOfAnUnknownExperimentIsNotFound) {
  v1::Experiment experiment = MakeExperiment("alice", v1::WORKLOAD_INDEX);
  experiment.set_id("exp-000077");
  absl::Status status = store_->Update(experiment, StateEvent(2, v1::RUNNING));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(status.message(), HasSubstr("exp-000077"));
  EXPECT_EQ(RawQuery(path_, "SELECT COUNT(*) FROM events"), "0");
}

TEST_F(ExperimentStoreTest, EventOfAnotherExperimentIsRejected) {
  std::string first = CreateQueued("alice", v1::WORKLOAD_INDEX);
  std::string second = CreateQueued("alice", v1::WORKLOAD_INDEX);
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(first));
  v1::ExperimentEvent event = StateEvent(2, v1::RUNNING);
  event.set_experiment_id(second);
  EXPECT_EQ(store_->Update(experiment, event).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ExperimentStoreTest, UpdateManyWritesAllOrNothing) {
  std::vector<std::string> ids = {CreateQueued("alice", v1::WORKLOAD_INDEX),
                                  CreateQueued("bob", v1::WORKLOAD_INDEX),
                                  CreateQueued("carol", v1::WORKLOAD_INDEX)};
  // The second pair repeats seq 1: the whole batch must fail.
  std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> failing;
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(ids[i]));
    experiment.set_state(v1::INTERRUPTED);
    failing.emplace_back(experiment, StateEvent(i == 1 ? 1 : 2, v1::INTERRUPTED));
  }
  EXPECT_EQ(store_->UpdateMany(failing).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> queued, store_->ListByState(v1::QUEUED));
  EXPECT_EQ(Ids(queued), ids);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> first_events, store_->Events(ids[0], 0));
  EXPECT_THAT(Seqs(first_events), ElementsAre(1));

  failing[1].second.set_seq(2);
  ASSERT_OK(store_->UpdateMany(failing));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> interrupted,
                       store_->ListByState(v1::INTERRUPTED));
  EXPECT_EQ(Ids(interrupted), ids);
  for (const std::string& id : ids) {
    ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> events, store_->Events(id, 0));
    EXPECT_THAT(Seqs(events), ElementsAre(1, 2));
  }
  ASSERT_OK(store_->UpdateMany({}));
}

TEST_F(ExperimentStoreTest, ListFiltersByUserStateAndWorkload) {
  std::string alice_index = CreateQueued("alice", v1::WORKLOAD_INDEX);  // exp-000001
  std::string bob_index = CreateQueued("bob", v1::WORKLOAD_INDEX);      // exp-000002
  std::string alice_radix = CreateQueued("alice", v1::WORKLOAD_RADIX);  // exp-000003
  std::string bob_radix = CreateQueued("bob", v1::WORKLOAD_RADIX);      // exp-000004
  ASSERT_OK_AND_ASSIGN(v1::Experiment running, store_->Get(alice_radix));
  running.set_state(v1::RUNNING);
  ASSERT_OK(store_->Update(running, StateEvent(2, v1::RUNNING)));
  ASSERT_OK_AND_ASSIGN(v1::Experiment failed, store_->Get(bob_index));
  failed.set_state(v1::FAILED);
  ASSERT_OK(store_->Update(failed, StateEvent(2, v1::FAILED)));

  auto list = [&](const ExperimentFilter& filter) -> std::vector<std::string> {
    absl::StatusOr<ExperimentPage> page = store_->List(filter, 0, "");
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) return {};
    EXPECT_EQ(page->next_page_token, "");
    return Ids(page->experiments);
  };
  EXPECT_THAT(list({}), ElementsAre(bob_radix, alice_radix, bob_index, alice_index));
  EXPECT_THAT(list({.user = "alice"}), ElementsAre(alice_radix, alice_index));
  EXPECT_THAT(list({.user = "nobody"}), IsEmpty());
  EXPECT_THAT(list({.states = {v1::QUEUED}}), ElementsAre(bob_radix, alice_index));
  EXPECT_THAT(list({.states = {v1::RUNNING, v1::FAILED}}), ElementsAre(alice_radix, bob_index));
  EXPECT_THAT(list({.workload = v1::WORKLOAD_RADIX}), ElementsAre(bob_radix, alice_radix));
  EXPECT_THAT(list({.user = "bob", .states = {v1::QUEUED}, .workload = v1::WORKLOAD_RADIX}),
              ElementsAre(bob_radix));
  EXPECT_THAT(list({.user = "bob", .states = {v1::QUEUED}, .workload = v1::WORKLOAD_INDEX}),
              IsEmpty());
}

TEST_F(ExperimentStoreTest, ListPagesNewestFirstAndStops) {
  for (int i = 0; i < 7; ++i) CreateQueued(i % 2 == 0 ? "alice" : "bob", v1::WORKLOAD_INDEX);

  ASSERT_OK_AND_ASSIGN(ExperimentPage first, store_->List({}, 3, ""));
  EXPECT_THAT(Ids(first.experiments), ElementsAre("exp-000007", "exp-000006", "exp-000005"));
  ASSERT_NE(first.next_page_token, "");
  ASSERT_OK_AND_ASSIGN(ExperimentPage second, store_->List({}, 3, first.next_page_token));
  EXPECT_THAT(Ids(second.experiments), ElementsAre("exp-000004", "exp-000003", "exp-000002"));
  ASSERT_NE(second.next_page_token, "");
  ASSERT_OK_AND_ASSIGN(ExperimentPage third, store_->List({}, 3, second.next_page_token));
  EXPECT_THAT(Ids(third.experiments), ElementsAre("exp-000001"));
  EXPECT_EQ(third.next_page_token, "");

  // A page that ends exactly at the last experiment has no next token.
  ASSERT_OK_AND_ASSIGN(ExperimentPage all, store_->List({}, 7, ""));
  EXPECT_EQ(all.experiments.size(), 7);
  EXPECT_EQ(all.next_page_token, "");

  // Paging with a filter: alice has exp-000001, 3, 5, 7.
  ExperimentFilter alice{.user = "alice"};
  ASSERT_OK_AND_ASSIGN(ExperimentPage alice_first, store_->List(alice, 2, ""));
  EXPECT_THAT(Ids(alice_first.experiments), ElementsAre("exp-000007", "exp-000005"));
  ASSERT_OK_AND_ASSIGN(ExperimentPage alice_second,
                       store_->List(alice, 2, alice_first.next_page_token));
  EXPECT_THAT(Ids(alice_second.experiments), ElementsAre("exp-000003", "exp-000001"));
  EXPECT_EQ(alice_second.next_page_token, "");
}

TEST_F(ExperimentStoreTest, ListReturnsSummariesWithoutProvenance) {
  std::string id = CreateQueued("alice", v1::WORKLOAD_INDEX);
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
  experiment.set_state(v1::FINISHED);
  experiment.set_reason("done");
  experiment.mutable_result()->mutable_measurement()->set_bandwidth_gbps(1234.0);
  experiment.mutable_result()->mutable_provenance()->set_hostname("node7");
  ASSERT_OK(store_->Update(experiment, StateEvent(2, v1::FINISHED)));

  ASSERT_OK_AND_ASSIGN(ExperimentPage page, store_->List({}, 10, ""));
  ASSERT_EQ(page.experiments.size(), 1);
  EXPECT_EQ(page.experiments[0].state(), v1::FINISHED);
  EXPECT_EQ(page.experiments[0].reason(), "done");
  EXPECT_EQ(page.experiments[0].result().measurement().bandwidth_gbps(), 1234.0);
  EXPECT_FALSE(page.experiments[0].result().has_provenance());
  ASSERT_OK_AND_ASSIGN(v1::Experiment full, store_->Get(id));
  EXPECT_EQ(full.result().provenance().hostname(), "node7");
}

TEST_F(ExperimentStoreTest, ACustomKernelsSourceAndSassAreStoredButNotListed) {
  std::string id = CreateQueued("alice", v1::WORKLOAD_INDEX);
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
  // The largest source admitted by default (256 KiB) and the most SASS the compile keeps
  // (50,000 instructions): one row holds both (SQLite's limit is 1 GB a value).
  const std::string source = std::string(256 << 10, 'k');
  v1::CustomKernel& kernel = *experiment.mutable_request()->mutable_custom_kernel();
  kernel.set_source(source);
  kernel.set_kernel_name("my_gather");
  kernel.set_file_name("my_gather.cu");
  experiment.set_state(v1::FINISHED);
  experiment.mutable_result()->mutable_custom_kernel()->set_source_sha256("ab12");
  experiment.mutable_result()->mutable_custom_kernel()->set_registers_per_thread(40);
  for (int i = 0; i < 50'000; ++i) {
    v1::SassLine& line = *experiment.mutable_result()->add_sass();
    line.set_pc_offset(16 * i);
    line.set_text("LDG.E.128.CONSTANT R4, desc[UR6][R2.64] ;");
    line.set_source_line("my_gather.cu:14");
  }
  ASSERT_OK(store_->Update(experiment, StateEvent(2, v1::FINISHED)));

  ASSERT_OK_AND_ASSIGN(v1::Experiment full, store_->Get(id));
  EXPECT_EQ(full.request().custom_kernel().source(), source);
  EXPECT_EQ(full.result().sass_size(), 50'000);
  EXPECT_EQ(full.result().sass(49'999).pc_offset(), 16 * 49'999);

  // A listing keeps which kernel ran and its resources, not the bulk.
  ASSERT_OK_AND_ASSIGN(ExperimentPage page, store_->List({}, 10, ""));
  ASSERT_EQ(page.experiments.size(), 1);
  const v1::Experiment& listed = page.experiments[0];
  EXPECT_EQ(listed.request().custom_kernel().source(), "");
  EXPECT_EQ(listed.request().custom_kernel().kernel_name(), "my_gather");
  EXPECT_EQ(listed.request().custom_kernel().file_name(), "my_gather.cu");
  EXPECT_EQ(listed.result().sass_size(), 0);
  EXPECT_EQ(listed.result().custom_kernel().source_sha256(), "ab12");
  EXPECT_EQ(listed.result().custom_kernel().registers_per_thread(), 40);
  EXPECT_LT(listed.ByteSizeLong(), 1024u);
}

TEST_F(ExperimentStoreTest, ListedSweepsLeaveOutTheirKernelsSources) {
  v1::Sweep sweep;
  sweep.set_user("alice");
  sweep.set_state(v1::SWEEP_RUNNING);
  v1::SweepRequest& request = *sweep.mutable_request();
  request.mutable_base()->mutable_custom_kernel()->set_source("base source");
  v1::SweepAxis& axis = *request.add_axes();
  axis.set_field("kernel");
  axis.add_values("a.cu");
  axis.add_kernels()->set_source("a source");
  axis.add_kernels()->set_file_name("ours");
  v1::SweepEvent first;
  first.set_seq(1);
  *first.mutable_created() = sweep;
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(sweep, first));

  ASSERT_OK_AND_ASSIGN(SweepPage page, store_->ListSweeps("alice", 0, ""));
  ASSERT_EQ(page.sweeps.size(), 1u);
  const v1::SweepRequest& listed = page.sweeps[0].request();
  EXPECT_EQ(listed.base().custom_kernel().source(), "");
  ASSERT_EQ(listed.axes(0).kernels_size(), 2);
  EXPECT_EQ(listed.axes(0).kernels(0).source(), "");
  EXPECT_EQ(listed.axes(0).kernels(1).file_name(), "ours");
  // The sweep itself keeps them, for its points and their reruns.
  ASSERT_OK_AND_ASSIGN(const v1::Sweep stored, store_->GetSweepPage(id, 0, ""));
  EXPECT_EQ(stored.request().base().custom_kernel().source(), "base source");
  EXPECT_EQ(stored.request().axes(0).kernels(0).source(), "a source");
}

TEST_F(ExperimentStoreTest, ListPageSizeDefaultsAndBounds) {
  for (int i = 0; i < ExperimentStore::kDefaultPageSize + 2; ++i) {
    CreateQueued("alice", v1::WORKLOAD_INDEX);
  }
  ASSERT_OK_AND_ASSIGN(ExperimentPage page, store_->List({}, 0, ""));
  EXPECT_EQ(page.experiments.size(), ExperimentStore::kDefaultPageSize);
  EXPECT_NE(page.next_page_token, "");
  ASSERT_OK_AND_ASSIGN(ExperimentPage rest, store_->List({}, 0, page.next_page_token));
  EXPECT_THAT(Ids(rest.experiments), ElementsAre("exp-000002", "exp-000001"));

  ASSERT_OK_AND_ASSIGN(ExperimentPage capped, store_->List({}, 1'000'000, ""));
  EXPECT_EQ(capped.experiments.size(), ExperimentStore::kDefaultPageSize + 2);

  absl::StatusOr<ExperimentPage> negative = store_->List({}, -1, "");
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.status().message(), HasSubstr("page_size"));
}

TEST_F(ExperimentStoreTest, InvalidPageTokenIsInvalidArgument) {
  CreateQueued("alice", v1::WORKLOAD_INDEX);
  for (const std::string& token :
       {std::string("garbage!"), std::string("12"), absl::WebSafeBase64Escape("before-seq:x"),
        absl::WebSafeBase64Escape("before-seq:-4"), absl::WebSafeBase64Escape("other:5")}) {
    absl::StatusOr<ExperimentPage> page = store_->List({}, 10, token);
    EXPECT_EQ(page.status().code(), absl::StatusCode::kInvalidArgument) << token;
    EXPECT_THAT(page.status().message(), HasSubstr("page_token")) << token;
  }
}

TEST_F(ExperimentStoreTest, ListByStateIsInSubmissionOrder) {
  std::string first = CreateQueued("alice", v1::WORKLOAD_INDEX);
  std::string second = CreateQueued("bob", v1::WORKLOAD_INDEX);
  std::string third = CreateQueued("carol", v1::WORKLOAD_INDEX);
  std::string fourth = CreateQueued("dave", v1::WORKLOAD_INDEX);
  // Update the older ones last, so that update order differs from submission order.
  for (const std::string& id : {third, first}) {
    ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
    experiment.set_state(v1::RUNNING);
    ASSERT_OK(store_->Update(experiment, StateEvent(2, v1::RUNNING)));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> running, store_->ListByState(v1::RUNNING));
  EXPECT_THAT(Ids(running), ElementsAre(first, third));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> queued, store_->ListByState(v1::QUEUED));
  EXPECT_THAT(Ids(queued), ElementsAre(second, fourth));
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> cancelled, store_->ListByState(v1::CANCELLED));
  EXPECT_THAT(cancelled, IsEmpty());
}

TEST_F(ExperimentStoreTest, DataSurvivesClosingAndReopening) {
  std::string id = CreateQueued("alice", v1::WORKLOAD_COLLECTIVE);
  ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
  experiment.set_state(v1::FINISHED);
  experiment.set_last_seq(3);
  experiment.mutable_result()->mutable_collective()->set_busbw_gbps(400.25);
  ASSERT_OK(store_->Update(experiment, ProgressEvent(2, 100)));
  ASSERT_OK(store_->Update(experiment, StateEvent(3, v1::FINISHED)));

  Reopen();
  ASSERT_OK_AND_ASSIGN(v1::Experiment stored, store_->Get(id));
  EXPECT_TRUE(MessageDifferencer::Equals(stored, experiment)) << stored.DebugString();
  ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> events, store_->Events(id, 0));
  EXPECT_THAT(Seqs(events), ElementsAre(1, 2, 3));
  EXPECT_EQ(events[1].progress().done(), 100);
  ASSERT_OK_AND_ASSIGN(std::vector<v1::Experiment> finished, store_->ListByState(v1::FINISHED));
  EXPECT_THAT(Ids(finished), ElementsAre(id));

  ASSERT_OK_AND_ASSIGN(int64_t size, store_->SizeBytes());
  const int64_t page_size = std::stoll(RawQuery(path_, "PRAGMA page_size"));
  EXPECT_GT(size, 0);
  EXPECT_EQ(size % page_size, 0);
  EXPECT_EQ(size, page_size * std::stoll(RawQuery(path_, "PRAGMA page_count")));
}

// Group commit: writes from many threads at once share transactions; each keeps its own
// outcome (a refused write undoes only itself) and every acknowledged one is stored.
TEST_F(ExperimentStoreTest, ConcurrentWritesShareCommitsButKeepTheirOwnOutcome) {
  constexpr int kThreads = 16;
  constexpr int kPerThread = 25;
  ASSERT_OK_AND_ASSIGN(
      const std::string shared,
      store_->Create(MakeExperiment("bob", v1::WORKLOAD_RADIX), StateEvent(1, v1::QUEUED)));
  std::vector<std::vector<std::string>> created(kThreads);
  std::atomic<int> refused = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        auto id =
            store_->Create(MakeExperiment("alice", v1::WORKLOAD_RADIX), StateEvent(1, v1::QUEUED));
        if (id.ok()) created[t].push_back(*id);
        // A write that must fail (seq 1 is taken), interleaved with the others.
        v1::Experiment experiment = MakeExperiment("bob", v1::WORKLOAD_RADIX, v1::RUNNING);
        experiment.set_id(shared);
        if (absl::IsAlreadyExists(store_->Update(experiment, StateEvent(1, v1::RUNNING)))) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(refused.load(), kThreads * kPerThread);
  std::set<std::string> ids;
  for (const auto& per_thread : created) {
    EXPECT_EQ(per_thread.size(), kPerThread);
    ids.insert(per_thread.begin(), per_thread.end());
  }
  EXPECT_EQ(ids.size(), kThreads * kPerThread);
  for (const std::string& id : ids) {
    ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
    ASSERT_OK_AND_ASSIGN(auto events, store_->Events(id, 0));
    EXPECT_THAT(Seqs(events), ElementsAre(1));
  }
  // The refused updates changed nothing.
  ASSERT_OK_AND_ASSIGN(v1::Experiment unchanged, store_->Get(shared));
  EXPECT_EQ(unchanged.state(), v1::QUEUED);
}

TEST_F(ExperimentStoreTest, SweepWritesJoinTheGroupCommitWithTheirOwnOutcome) {
  // Sweeps with their points, sweep updates and plain experiments from several threads share
  // commits; each sweep's points are stored together and linked to it, and a refused write
  // (a duplicate sweep event) fails alone.
  constexpr int kThreads = 6;
  constexpr int kPoints = 5;
  std::vector<std::string> sweep_ids(kThreads);
  std::vector<absl::Status> duplicate(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      v1::Sweep sweep;
      sweep.set_user("alice");
      sweep.set_state(v1::SWEEP_RUNNING);
      v1::SweepEvent first;
      first.set_seq(1);
      absl::StatusOr<std::string> id = store_->CreateSweep(sweep, first);
      ASSERT_OK(id.status());
      sweep_ids[t] = *id;
      std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> points;
      for (int point = 0; point < kPoints; ++point) {
        v1::Experiment experiment = MakeExperiment("alice", v1::WORKLOAD_RADIX);
        experiment.set_sweep_id(*id);
        experiment.set_sweep_point(point);
        points.emplace_back(experiment, StateEvent(1, v1::QUEUED));
      }
      ASSERT_OK(store_->CreateMany(points).status());
      ASSERT_OK(store_->Create(MakeExperiment("bob", v1::WORKLOAD_RADIX), StateEvent(1, v1::QUEUED))
                    .status());
      sweep.set_id(*id);
      v1::SweepEvent again;
      again.set_seq(1);
      duplicate[t] = store_->UpdateSweep(sweep, again);
    });
  }
  for (std::thread& thread : threads) thread.join();
  Reopen();
  std::set<std::string> distinct(sweep_ids.begin(), sweep_ids.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_TRUE(absl::IsAlreadyExists(duplicate[t])) << duplicate[t];
    ASSERT_OK_AND_ASSIGN(auto links, store_->SweepPointExperiments(sweep_ids[t]));
    EXPECT_EQ(links.size(), static_cast<size_t>(kPoints));
    ASSERT_OK_AND_ASSIGN(auto events, store_->SweepEvents(sweep_ids[t], 0));
    EXPECT_EQ(events.size(), 1u);
  }
  ASSERT_OK_AND_ASSIGN(ExperimentPage page, store_->List(ExperimentFilter{}, 1000, ""));
  EXPECT_EQ(page.experiments.size(), static_cast<size_t>(kThreads * (kPoints + 1)));
}

// The writer the killed child runs: creates experiments and moves each through events 2..4,
// reporting "<id> <last_seq>\n" on `ack_fd` after every call returns (the acknowledgement).
// Another thread sends SIGKILL once enough calls were acknowledged, while writes go on.
[[noreturn]] void WriteUntilKilled(const std::string& path, int ack_fd, int acks_before_kill) {
  absl::StatusOr<std::unique_ptr<ExperimentStore>> store = ExperimentStore::Open(path);
  if (!store.ok()) _exit(3);
  std::atomic<int> acknowledged = 0;
  std::thread killer([&] {
    while (acknowledged.load() < acks_before_kill) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    kill(getpid(), SIGKILL);
  });
  auto acknowledge = [&](const std::string& id, int64_t seq) {
    std::string line = absl::StrCat(id, " ", seq, "\n");
    if (write(ack_fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(4);
    acknowledged.fetch_add(1);
  };
  while (true) {
    v1::Experiment experiment = MakeExperiment("killed", v1::WORKLOAD_RADIX);
    absl::StatusOr<std::string> id = (*store)->Create(experiment, StateEvent(1, v1::QUEUED));
    if (!id.ok()) _exit(5);
    acknowledge(*id, 1);
    experiment.set_id(*id);
    experiment.set_state(v1::RUNNING);
    for (int seq = 2; seq <= 4; ++seq) {
      experiment.set_last_seq(seq);
      if (!(*store)->Update(experiment, ProgressEvent(seq, seq)).ok()) _exit(6);
      acknowledge(*id, seq);
    }
  }
}

TEST_F(ExperimentStoreTest, ProcessKilledMidWriteLosesNothingItAcknowledged) {
  constexpr int kAcksBeforeKill = 30;
  store_.reset();  // The child must not inherit an open connection.
  int ack_pipe[2];
  ASSERT_EQ(pipe(ack_pipe), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ack_pipe[0]);
    WriteUntilKilled(path_, ack_pipe[1], kAcksBeforeKill);
  }
  close(ack_pipe[1]);
  std::string acks;
  char buffer[4096];
  while (true) {
    ssize_t n = read(ack_pipe[0], buffer, sizeof(buffer));
    if (n > 0) {
      acks.append(buffer, n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(ack_pipe[0]);
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wait_status))
      << "the child exited with " << WEXITSTATUS(wait_status) << " instead of being killed";
  ASSERT_EQ(WTERMSIG(wait_status), SIGKILL);
  // Killed without closing: the committed data is only in the write-ahead log.
  EXPECT_TRUE(std::filesystem::exists(path_ + "-wal"));

  // The highest acknowledged seq per experiment.
  std::map<std::string, int64_t> acknowledged;
  int ack_count = 0;
  for (absl::string_view line : absl::StrSplit(acks, '\n', absl::SkipEmpty())) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    ASSERT_EQ(fields.size(), 2) << line;
    int64_t seq = 0;
    ASSERT_TRUE(absl::SimpleAtoi(fields[1], &seq)) << line;
    acknowledged[fields[0]] = std::max(acknowledged[fields[0]], seq);
    ++ack_count;
  }
  ASSERT_GE(ack_count, kAcksBeforeKill);

  ASSERT_OK_AND_ASSIGN(store_, ExperimentStore::Open(path_));
  for (const auto& [id, seq] : acknowledged) {
    ASSERT_OK_AND_ASSIGN(v1::Experiment experiment, store_->Get(id));
    EXPECT_GE(experiment.last_seq(), seq) << id;
    ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> events, store_->Events(id, 0));
    EXPECT_GE(static_cast<int64_t>(events.size()), seq) << id;
  }
  // Every write was atomic, acknowledged or not: each stored experiment has exactly the events
  // up to its last_seq, even the one a write was cut short in.
  ASSERT_OK_AND_ASSIGN(ExperimentPage page, store_->List({}, ExperimentStore::kMaxPageSize, ""));
  EXPECT_GE(page.experiments.size(), acknowledged.size());
  EXPECT_LE(page.experiments.size(), acknowledged.size() + 1);
  for (const v1::Experiment& experiment : page.experiments) {
    ASSERT_OK_AND_ASSIGN(std::vector<v1::ExperimentEvent> events,
                         store_->Events(experiment.id(), 0));
    ASSERT_EQ(static_cast<int64_t>(events.size()), experiment.last_seq()) << experiment.id();
    for (int i = 0; i < static_cast<int>(events.size()); ++i) {
      EXPECT_EQ(events[i].seq(), i + 1) << experiment.id();
    }
  }
  // New ids continue after everything the child wrote.
  const std::string next = CreateQueued("alice", v1::WORKLOAD_INDEX);
  EXPECT_GT(next, page.experiments.front().id());
}

}  // namespace
}  // namespace gpuprof::daemon::store_testing
