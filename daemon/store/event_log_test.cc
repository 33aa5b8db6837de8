#include "daemon/store/event_log.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/store/sqlite_database.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/sweep.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A log of its own tables, to show the pattern is not tied to experiments or sweeps.
constexpr char kSchema[] = R"sql(
CREATE TABLE plans (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL,
                    user TEXT NOT NULL, state INTEGER NOT NULL, proto BLOB NOT NULL);
CREATE TABLE plan_events (plan_id TEXT NOT NULL, seq INTEGER NOT NULL, proto BLOB NOT NULL,
                          PRIMARY KEY (plan_id, seq)) WITHOUT ROWID;
)sql";

const EventLogKind<v1::Sweep, v1::SweepEvent> kPlans = {
    .tables = {.noun = "plan",
               .noun_with_article = "a plan",
               .entity_table = "plans",
               .event_table = "plan_events",
               .owner_column = "plan_id",
               .id_prefix = "pln-"},
    .columns =
        [](const v1::Sweep& plan) {
          return std::vector<Column>{{"user", plan.user()}, {"state", int64_t{plan.state()}}};
        },
    .assign_id =
        [](const std::string& id, v1::Sweep& plan, v1::SweepEvent& first) {
          plan.set_id(id);
          first.set_sweep_id(id);
        },
    .owner = &v1::SweepEvent::sweep_id,
    .set_owner = [](v1::SweepEvent& event, const std::string& id) { event.set_sweep_id(id); },
    .summarize = [](v1::Sweep& plan) { plan.clear_points(); },
};

v1::Sweep Plan(const std::string& user, v1::SweepState state = v1::SWEEP_RUNNING) {
  v1::Sweep plan;
  plan.set_user(user);
  plan.set_state(state);
  plan.add_points()->set_index(0);
  return plan;
}

v1::SweepEvent Event(int64_t seq) {
  v1::SweepEvent event;
  event.set_seq(seq);
  return event;
}

template <typename T>
T Ok(absl::StatusOr<T> value) {
  EXPECT_TRUE(value.ok()) << value.status();
  return value.ok() ? *std::move(value) : T();
}

class EventLogTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string directory_template = testing::TempDir() + "event_log_test.XXXXXX";
    ASSERT_NE(mkdtemp(directory_template.data()), nullptr) << "mkdtemp: " << errno;
    directory_ = directory_template;
    auto database = SqliteDatabase::Open(directory_ + "/test.db");
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *std::move(database);
    ASSERT_TRUE(database_->Execute(kSchema, "creating").ok());
  }
  void TearDown() override {
    database_.reset();
    std::filesystem::remove_all(directory_);
  }

  std::string Create(const std::string& user, v1::SweepState state = v1::SWEEP_RUNNING) {
    v1::Sweep plan = Plan(user, state);
    v1::SweepEvent first = Event(1);
    return Ok(log_.Create(*database_, plan, first));
  }

  std::vector<std::string> Ids(const std::vector<v1::Sweep>& plans) {
    std::vector<std::string> ids;
    for (const v1::Sweep& plan : plans) ids.push_back(plan.id());
    return ids;
  }

  std::string directory_;
  std::unique_ptr<SqliteDatabase> database_;
  EventLog<v1::Sweep, v1::SweepEvent> log_{kPlans};
};

TEST_F(EventLogTest, CreateAssignsIdsThatAreNeverReused) {
  EXPECT_EQ(Create("alice"), "pln-000001");
  EXPECT_EQ(Create("alice"), "pln-000002");
  ASSERT_TRUE(database_->Execute("DELETE FROM plans WHERE id = 'pln-000002'", "deleting").ok());
  EXPECT_EQ(Create("bob"), "pln-000003");
  const v1::Sweep stored = Ok(log_.Get(*database_, "pln-000001"));
  EXPECT_EQ(stored.id(), "pln-000001");
  EXPECT_EQ(stored.user(), "alice");
  const std::vector<v1::SweepEvent> events = Ok(log_.Events(*database_, "pln-000001", 0));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].sweep_id(), "pln-000001");
}

TEST_F(EventLogTest, FirstEventNeedsAPositiveSeq) {
  const absl::Status refused = log_.CheckFirstEvent(Event(0));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "creating a plan: the first event needs a positive seq, not 0");
  EXPECT_TRUE(log_.CheckFirstEvent(Event(1)).ok());
}

TEST_F(EventLogTest, UpdateReplacesTheEntityKeepsTheColumnsInSyncAndAppends) {
  const std::string id = Create("alice");
  v1::Sweep plan = Ok(log_.Get(*database_, id));
  plan.set_state(v1::SWEEP_FINISHED);
  ASSERT_TRUE(log_.Update(*database_, plan, Event(2)).ok());
  // seq <= 0: the entity only.
  ASSERT_TRUE(log_.Update(*database_, plan, Event(0)).ok());
  EXPECT_EQ(Ok(log_.Get(*database_, id)).state(), v1::SWEEP_FINISHED);
  EXPECT_EQ(Ok(database_->QueryInt64("SELECT state FROM plans", "state")), v1::SWEEP_FINISHED);
  const std::vector<v1::SweepEvent> events = Ok(log_.Events(*database_, id, 2));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].seq(), 2);
  // An event without its entity's id is stored with it.
  EXPECT_EQ(events[0].sweep_id(), id);
}

TEST_F(EventLogTest, UpdateRefusalsNameWhatWasWrong) {
  const std::string id = Create("alice");
  v1::Sweep plan = Ok(log_.Get(*database_, id));
  const absl::Status duplicate = log_.Update(*database_, plan, Event(1));
  EXPECT_EQ(duplicate.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(duplicate.message(), "plan pln-000001 already has an event with seq 1");
  v1::SweepEvent foreign = Event(2);
  foreign.set_sweep_id("pln-000009");
  const absl::Status mismatch = log_.Update(*database_, plan, foreign);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(mismatch.message(), "updating plan pln-000001 with an event of plan pln-000009");
  plan.set_id("pln-000042");
  const absl::Status missing = log_.Update(*database_, plan, Event(2));
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "plan pln-000042 not found");
  EXPECT_EQ(log_.Events(*database_, "pln-000042", 0).status().code(), absl::StatusCode::kNotFound);
  plan.clear_id();
  EXPECT_EQ(log_.Update(*database_, plan, Event(2)).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(EventLogTest, ListPagesNewestFirstWithSummariesAndFilters) {
  for (int i = 0; i < 5; ++i) Create(i % 2 == 0 ? "alice" : "bob");
  auto first = Ok(log_.List(*database_, {}, 2, ""));
  EXPECT_THAT(Ids(first.entities), ElementsAre("pln-000005", "pln-000004"));
  EXPECT_EQ(first.entities[0].points_size(), 0);  // summarized
  auto second = Ok(log_.List(*database_, {}, 2, first.next_page_token));
  EXPECT_THAT(Ids(second.entities), ElementsAre("pln-000003", "pln-000002"));
  auto last = Ok(log_.List(*database_, {}, 2, second.next_page_token));
  EXPECT_THAT(Ids(last.entities), ElementsAre("pln-000001"));
  EXPECT_TRUE(last.next_page_token.empty());

  auto alice = Ok(log_.List(*database_, {{"user = ?", {std::string("alice")}}}, 0, ""));
  EXPECT_THAT(Ids(alice.entities), ElementsAre("pln-000005", "pln-000003", "pln-000001"));

  EXPECT_EQ(log_.List(*database_, {}, -1, "").status().code(), absl::StatusCode::kInvalidArgument);
  const absl::Status token = log_.List(*database_, {}, 2, "not-a-token").status();
  EXPECT_EQ(token.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(token.message(), HasSubstr("pass the next_page_token of a previous page"));
}

TEST_F(EventLogTest, ListAllIsOldestFirstAndWhole) {
  Create("alice", v1::SWEEP_RUNNING);
  Create("bob", v1::SWEEP_FINISHED);
  Create("carol", v1::SWEEP_RUNNING);
  const std::vector<v1::Sweep> running =
      Ok(log_.ListAll(*database_, {{"state = ?", {int64_t{v1::SWEEP_RUNNING}}}},
                      "listing running plans"))
          .entities;
  EXPECT_THAT(Ids(running), ElementsAre("pln-000001", "pln-000003"));
  EXPECT_EQ(running[0].points_size(), 1);  // not summarized
}

TEST_F(EventLogTest, AStoredProtoThatDoesNotParseIsDataLoss) {
  const std::string id = Create("alice");
  ASSERT_TRUE(database_->Execute("UPDATE plans SET proto = x'ffffff'", "damaging the proto").ok());
  const absl::Status damaged = log_.Get(*database_, id).status();
  EXPECT_EQ(damaged.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(damaged.message(), "stored plan pln-000001 does not parse");
}

TEST_F(EventLogTest, ListingsSkipARowThatDoesNotParseAndReportIt) {
  Create("alice", v1::SWEEP_RUNNING);
  const std::string damaged = Create("bob", v1::SWEEP_RUNNING);
  Create("carol", v1::SWEEP_RUNNING);
  ASSERT_TRUE(database_
                  ->Execute(absl::StrCat("UPDATE plans SET proto = x'ffffff' WHERE id = '",
                                         damaged, "'"),
                            "damaging the proto")
                  .ok());
  auto page = Ok(log_.List(*database_, {}, 0, ""));
  EXPECT_THAT(Ids(page.entities), ElementsAre("pln-000003", "pln-000001"));
  ASSERT_EQ(page.damaged.size(), 1u);
  EXPECT_EQ(page.damaged[0].table, "plans");
  EXPECT_EQ(page.damaged[0].id, damaged);
  EXPECT_EQ(page.damaged[0].error, "stored plan pln-000002 does not parse");

  auto all = Ok(log_.ListAll(*database_, {}, "listing plans"));
  EXPECT_THAT(Ids(all.entities), ElementsAre("pln-000001", "pln-000003"));
  ASSERT_EQ(all.damaged.size(), 1u);
  EXPECT_EQ(all.damaged[0].id, damaged);
}

}  // namespace
}  // namespace gpuprof::daemon::store
