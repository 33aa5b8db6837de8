// One row whose stored proto no longer parses (pages intact, the blob damaged) must not hide
// the rest: listings and start-up's reads skip it and name it, a get of it says what to do,
// and --check-db lists every such row.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/store_test_support.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/sweep.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store_testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Bytes no message parses: a varint cut short.
constexpr char kGarbage[] = "X'ffffffffff'";

std::vector<std::string> DamagedIds(const std::vector<store::DamagedRow>& rows) {
  std::vector<std::string> ids;
  for (const store::DamagedRow& row : rows) ids.push_back(absl::StrCat(row.table, "/", row.id));
  return ids;
}

class DamagedRowsTest : public ExperimentStoreTest {
 protected:
  // Overwrites the row's proto through another connection, as damage from outside would.
  void Damage(const std::string& table, const std::string& key_column, const std::string& key) {
    RawQuery(path_, absl::StrCat("UPDATE ", table, " SET proto = ", kGarbage, " WHERE ", key_column,
                                 " = '", key, "'"));
  }
};

TEST_F(DamagedRowsTest, ListSkipsADamagedExperimentAndNamesIt) {
  const std::string first = CreateQueued("alice", v1::WORKLOAD_RADIX);
  const std::string damaged = CreateQueued("alice", v1::WORKLOAD_RADIX);
  const std::string last = CreateQueued("alice", v1::WORKLOAD_RADIX);
  Damage("experiments", "id", damaged);

  ASSERT_OK_AND_ASSIGN(ExperimentPage page, store_->List({}, 0, ""));
  EXPECT_THAT(Ids(page.experiments), ElementsAre(last, first));
  ASSERT_EQ(page.damaged.size(), 1u);
  EXPECT_EQ(page.damaged[0].table, "experiments");
  EXPECT_EQ(page.damaged[0].id, damaged);
  EXPECT_THAT(page.damaged[0].error, HasSubstr(absl::StrCat(damaged, " does not parse")));

  // Paging one row at a time still walks every row; the damaged one is reported on its page.
  std::vector<std::string> listed, reported;
  std::string token;
  do {
    ASSERT_OK_AND_ASSIGN(ExperimentPage one, store_->List({}, 1, token));
    for (const auto& experiment : one.experiments) listed.push_back(experiment.id());
    for (const auto& row : one.damaged) reported.push_back(row.id);
    token = one.next_page_token;
  } while (!token.empty());
  EXPECT_THAT(listed, ElementsAre(last, first));
  EXPECT_THAT(reported, ElementsAre(damaged));
  EXPECT_THAT(DamagedIds(store_->DamagedRowsMet()), ElementsAre("experiments/" + damaged));
}

TEST_F(DamagedRowsTest, StartUpReadsSkipDamagedQueuedAndRunningExperiments) {
  const std::string queued = CreateQueued("alice", v1::WORKLOAD_RADIX);
  const std::string damaged_queued = CreateQueued("alice", v1::WORKLOAD_RADIX);
  ASSERT_OK_AND_ASSIGN(const std::string damaged_running,
                       store_->Create(MakeExperiment("bob", v1::WORKLOAD_RADIX, v1::RUNNING),
                                      StateEvent(1, v1::QUEUED)));
  Damage("experiments", "id", damaged_queued);
  Damage("experiments", "id", damaged_running);
  Reopen();  // As a restarted daemon: its start-up reads by state.
  EXPECT_THAT(store_->DamagedRowsMet(), IsEmpty());

  ASSERT_OK_AND_ASSIGN(auto running, store_->ListByState(v1::RUNNING));
  EXPECT_THAT(running, IsEmpty());
  ASSERT_OK_AND_ASSIGN(auto queued_now, store_->ListByState(v1::QUEUED));
  EXPECT_THAT(Ids(queued_now), ElementsAre(queued));
  EXPECT_THAT(DamagedIds(store_->DamagedRowsMet()),
              ElementsAre("experiments/" + damaged_queued, "experiments/" + damaged_running));
  // Met again, counted once.
  ASSERT_OK(store_->ListByState(v1::QUEUED).status());
  EXPECT_EQ(store_->DamagedRowsMet().size(), 2u);

  // A quota's look-back counts what it can read rather than refusing the user.
  ASSERT_OK_AND_ASSIGN(auto recent, store_->ListUserCreatedSince("alice", 0));
  EXPECT_THAT(Ids(recent), ElementsAre(queued));
}

TEST_F(DamagedRowsTest, GetOfADamagedExperimentIsDataLossNamingItAndWhatToDo) {
  const std::string damaged = CreateQueued("alice", v1::WORKLOAD_RADIX);
  const std::string intact = CreateQueued("alice", v1::WORKLOAD_RADIX);
  Damage("experiments", "id", damaged);

  const absl::Status got = store_->Get(damaged).status();
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.message(), HasSubstr(damaged));
  EXPECT_THAT(got.message(), HasSubstr("backup"));
  EXPECT_THAT(got.message(), HasSubstr("gpuprofd --check-db"));
  EXPECT_TRUE(store_->Get(intact).ok());
  EXPECT_EQ(store_->Get("exp-999999").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(DamagedIds(store_->DamagedRowsMet()), ElementsAre("experiments/" + damaged));
}

TEST_F(DamagedRowsTest, SweepListingsSkipADamagedSweep) {
  v1::Sweep sweep;
  sweep.set_user("alice");
  sweep.set_state(v1::SWEEP_RUNNING);
  v1::SweepEvent first;
  first.set_seq(1);
  ASSERT_OK_AND_ASSIGN(const std::string intact, store_->CreateSweep(sweep, first));
  ASSERT_OK_AND_ASSIGN(const std::string damaged, store_->CreateSweep(sweep, first));
  Damage("sweeps", "id", damaged);

  ASSERT_OK_AND_ASSIGN(SweepPage page, store_->ListSweeps("", 0, ""));
  ASSERT_EQ(page.sweeps.size(), 1u);
  EXPECT_EQ(page.sweeps[0].id(), intact);
  EXPECT_THAT(DamagedIds(page.damaged), ElementsAre("sweeps/" + damaged));

  ASSERT_OK_AND_ASSIGN(auto running, store_->ListSweepsByState(v1::SWEEP_RUNNING));
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].id(), intact);

  const absl::Status got = store_->GetSweep(damaged).status();
  EXPECT_EQ(got.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(got.message(), HasSubstr(damaged));
  EXPECT_THAT(got.message(), HasSubstr("gpuprofd --check-db"));
}

TEST_F(DamagedRowsTest, CheckDatabaseListsEveryDamagedRow) {
  const std::string finished = CreateQueued("alice", v1::WORKLOAD_RADIX);
  const std::string queued = CreateQueued("alice", v1::WORKLOAD_RADIX);
  const std::string intact = CreateQueued("alice", v1::WORKLOAD_RADIX);
  ASSERT_OK(store_->ChangeBaseline("main", SaveAs("main", intact, "alice")));
  store_.reset();
  Damage("experiments", "id", finished);
  Damage("experiments", "id", queued);
  Damage("events", "experiment_id", intact);
  Damage("baselines", "name", "main");

  const absl::StatusOr<std::string> verdict = ExperimentStore::CheckDatabase(path_);
  ASSERT_EQ(verdict.status().code(), absl::StatusCode::kDataLoss);
  const std::string message(verdict.status().message());
  EXPECT_THAT(message, HasSubstr("4 damaged row(s)"));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("table experiments, ", finished, ": ")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("table experiments, ", queued, ": ")));
  EXPECT_THAT(message, HasSubstr(absl::StrCat("table events, ", intact, " seq 1: ")));
  EXPECT_THAT(message, HasSubstr("table baselines, main: "));
  EXPECT_THAT(message, HasSubstr("backup"));
}

}  // namespace
}  // namespace gpuprof::daemon::store_testing
