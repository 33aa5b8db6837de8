// A sweep of more points than one page, through the real daemon and the real CLI: `sweep get`
// prints every point once and in order in each format, `sweep list` counts them without
// carrying them, and `sweep watch` of it prints lines of counts (or every point when asked).
// The sweep and its history are written into the database before the daemon starts, through
// the store's own code: running 1,200 points would take minutes.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/daemon_config.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/sqlite_database.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/sweep.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof {
namespace {

using ::gpuprof::daemon::ExperimentStore;
using ::gpuprof::daemon::store::SqliteDatabase;
using ::gpuprof::daemon::store::SqliteTransaction;
using ::gpuprof::testing::CommandResult;
using ::gpuprof::testing::DaemonProcess;
using ::gpuprof::testing::MakeTempDir;
using ::testing::HasSubstr;

// More than two pages of the daemon's default 500.
constexpr int kPoints = 1'200;
// Every 100th point failed.
bool Failed(int index) { return index % 100 == 99; }

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

class HugeSweepE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = MakeTempDir("gpuprofd");
    ASSERT_FALSE(state_dir_.empty());
    WriteEndedSweep();
    daemon_ = std::make_unique<DaemonProcess>(state_dir_);
    ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
  }

  // swp-000001: kPoints radix points over num_requests, ended, with an event per point.
  void WriteEndedSweep() {
    const std::string path = daemon::DefaultDatabasePath(state_dir_);
    v1::Sweep sweep;
    sweep.set_user("alice");
    sweep.set_state(v1::SWEEP_INCOMPLETE);
    sweep.mutable_created()->set_seconds(1'700'000'000);
    sweep.mutable_finished()->set_seconds(1'700'003'600);
    sweep.mutable_request()->mutable_base()->mutable_radix();
    v1::SweepAxis& axis = *sweep.mutable_request()->add_axes();
    axis.set_field("num_requests");
    axis.mutable_range()->set_start(1);
    axis.mutable_range()->set_end(kPoints);
    std::vector<v1::SweepEvent> events;
    v1::SweepEvent created;
    created.set_seq(1);
    created.set_state(v1::SWEEP_RUNNING);
    created.set_points_total(kPoints);
    events.push_back(created);
    int failed = 0;
    for (int index = 0; index < kPoints; ++index) {
      v1::SweepPoint& point = *sweep.add_points();
      point.set_index(index);
      (*point.mutable_parameters())["num_requests"] = absl::StrCat(index + 1);
      point.set_state(Failed(index) ? v1::FAILED : v1::FINISHED);
      point.set_experiment_id(absl::StrCat("exp-", 100'000 + index));
      point.set_attempt(1);
      failed += Failed(index) ? 1 : 0;
      v1::SweepEvent ended;
      ended.set_seq(index + 2);
      ended.set_state(v1::SWEEP_RUNNING);
      ended.set_points_total(kPoints);
      ended.set_points_finished(index + 1 - failed);
      ended.set_points_failed(failed);
      *ended.mutable_point() = point;
      events.push_back(std::move(ended));
    }
    v1::SweepEvent last;
    last.set_seq(kPoints + 2);
    last.set_state(v1::SWEEP_INCOMPLETE);
    last.set_points_total(kPoints);
    last.set_points_finished(kPoints - failed);
    last.set_points_failed(failed);
    last.set_ended(absl::StrCat(failed, " of ", kPoints, " points did not finish"));
    events.push_back(last);
    sweep.set_points_total(kPoints);
    sweep.set_points_finished(kPoints - failed);
    sweep.set_points_failed(failed);
    sweep.set_reason(last.ended());
    sweep.set_last_seq(last.seq());
    {
      auto store = ExperimentStore::Open(path);
      ASSERT_TRUE(store.ok()) << store.status();
      auto id = (*store)->CreateSweep(sweep, created);
      ASSERT_TRUE(id.ok()) << id.status();
      ASSERT_EQ(*id, "swp-000001");
    }
    // The rest of its history in one transaction, as the daemon would have stored it.
    auto database = SqliteDatabase::Open(path);
    ASSERT_TRUE(database.ok()) << database.status();
    auto transaction = SqliteTransaction::Begin(**database, "writing the sweep's events");
    ASSERT_TRUE(transaction.ok()) << transaction.status();
    for (size_t i = 1; i < events.size(); ++i) {
      events[i].set_sweep_id("swp-000001");
      auto insert = (*database)->Prepare(
          "INSERT INTO sweep_events (sweep_id, seq, proto) VALUES (?1, ?2, ?3)", "appending");
      ASSERT_TRUE(insert.ok()) << insert.status();
      ASSERT_TRUE(insert->BindText(1, "swp-000001").ok());
      ASSERT_TRUE(insert->BindInt64(2, events[i].seq()).ok());
      ASSERT_TRUE(insert->BindBlob(3, events[i].SerializeAsString()).ok());
      ASSERT_TRUE(insert->Run().ok());
    }
    ASSERT_TRUE(transaction->Commit().ok());
  }

  std::string state_dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(HugeSweepE2eTest, SweepGetPrintsEveryPointOnceInOrder) {
  const CommandResult csv = daemon_->Cli({"sweep", "get", "swp-000001", "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err << daemon_->Log();
  const std::vector<std::string> rows = Lines(csv.out);
  ASSERT_EQ(rows.size(), kPoints + 1u) << csv.out.substr(0, 2000);
  EXPECT_TRUE(absl::StartsWith(rows[0], "point,num_requests,state,experiment,"));
  for (int index = 0; index < kPoints; ++index) {
    const std::vector<std::string> cells = absl::StrSplit(rows[index + 1], ',');
    ASSERT_GE(cells.size(), 4u) << rows[index + 1];
    ASSERT_EQ(cells[0], absl::StrCat(index)) << "row " << index + 1 << ": " << rows[index + 1];
    EXPECT_EQ(cells[1], absl::StrCat(index + 1));
    EXPECT_EQ(cells[2], Failed(index) ? "failed" : "finished");
  }

  const CommandResult table = daemon_->Cli({"sweep", "get", "swp-000001"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("1200 points: 1188 finished, 0 running, 0 queued, 12 failed"));
  int point_rows = 0;
  for (const std::string& line : Lines(table.out)) point_rows += absl::StrContains(line, "exp-1");
  EXPECT_EQ(point_rows, kPoints);

  const CommandResult json = daemon_->Cli({"sweep", "get", "swp-000001", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::Sweep whole;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &whole).ok());
  ASSERT_EQ(whole.points_size(), kPoints);
  for (int index = 0; index < kPoints; ++index) EXPECT_EQ(whole.points(index).index(), index);
  EXPECT_TRUE(whole.next_points_page_token().empty());

  // A listing counts the points without carrying them.
  const CommandResult list = daemon_->Cli({"sweep", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const auto listed = gpuprof::testing::ParseJsonLines<v1::Sweep>(list.out);
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].points_size(), 0);
  EXPECT_EQ((*listed)[0].points_total(), kPoints);
}

TEST_F(HugeSweepE2eTest, SweepWatchSummarisesUnlessEveryEventIsAsked) {
  const CommandResult watched = daemon_->Cli({"sweep", "watch", "swp-000001"});
  // Not every point finished: exit 1, as for any incomplete sweep.
  EXPECT_EQ(watched.exit_code, 1) << watched.err;
  std::vector<std::string> counts;
  for (const std::string& line : Lines(watched.out)) {
    EXPECT_FALSE(absl::StrContains(line, "exp-1")) << "a row per point: " << line;
    if (absl::StrContains(line, "/1200 points: ")) counts.push_back(line);
  }
  // 100, 200, ... 1100 ended, and the final counts (and a line every 2 s on a slow machine).
  ASSERT_GE(counts.size(), 12u) << watched.out;
  EXPECT_LT(counts.size(), 100u) << watched.out;
  EXPECT_THAT(watched.out, HasSubstr("100/1200 points: 99 finished, 1 failed, 0 running, 1100 queued"));
  EXPECT_THAT(watched.out, HasSubstr("1100/1200 points: 1089 finished, 11 failed"));
  EXPECT_THAT(counts.back(), HasSubstr("1200/1200 points: 1188 finished, 12 failed, 0 running, 0 queued"));
  EXPECT_THAT(watched.out, HasSubstr("swp-000001: incomplete (12 of 1200 points did not finish)"));

  const CommandResult every = daemon_->Cli({"sweep", "watch", "swp-000001", "--every-event"});
  EXPECT_EQ(every.exit_code, 1) << every.err;
  int point_rows = 0;
  for (const std::string& line : Lines(every.out)) point_rows += absl::StrContains(line, "exp-1");
  EXPECT_EQ(point_rows, kPoints);
}

}  // namespace
}  // namespace gpuprof
