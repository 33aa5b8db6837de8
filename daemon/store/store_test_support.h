// What the store's tests share: an ExperimentStore in a fresh directory, experiments and
// events to store, and raw SQLite access to the file as another process would have it.
#ifndef GPUPROF_DAEMON_STORE_STORE_TEST_SUPPORT_H_
#define GPUPROF_DAEMON_STORE_STORE_TEST_SUPPORT_H_

#include <sqlite3.h>
#include <stdlib.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "daemon/store/experiment_store.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "gtest/gtest.h"

#define TEST_CONCAT_INNER(a, b) a##b
#define TEST_CONCAT(a, b) TEST_CONCAT_INNER(a, b)

#define ASSERT_OK(expr)                             \
  do {                                              \
    const ::absl::Status test_status_ = (expr);     \
    ASSERT_TRUE(test_status_.ok()) << test_status_; \
  } while (false)

#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(TEST_CONCAT(test_statusor_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(statusor, lhs, expr) \
  auto statusor = (expr);                              \
  ASSERT_TRUE(statusor.ok()) << statusor.status();     \
  lhs = *std::move(statusor)

namespace gpuprof::daemon::store_testing {

inline v1::Experiment MakeExperiment(const std::string& user, v1::Workload workload,
                                     v1::ExperimentState state = v1::QUEUED) {
  v1::Experiment experiment;
  experiment.set_user(user);
  experiment.set_workload(workload);
  experiment.set_state(state);
  experiment.set_last_seq(1);
  experiment.mutable_created()->set_seconds(1'700'000'000);
  experiment.mutable_created()->set_nanos(123);
  experiment.mutable_request()->set_user(user);
  experiment.mutable_request()->set_description("test experiment");
  return experiment;
}

inline v1::ExperimentEvent StateEvent(int64_t seq, v1::ExperimentState state) {
  v1::ExperimentEvent event;
  event.set_seq(seq);
  event.mutable_time()->set_seconds(1'700'000'000 + seq);
  event.mutable_state()->set_state(state);
  return event;
}

inline v1::ExperimentEvent ProgressEvent(int64_t seq, int64_t done) {
  v1::ExperimentEvent event;
  event.set_seq(seq);
  event.mutable_progress()->set_phase(v1::PHASE_TIMED);
  event.mutable_progress()->set_done(done);
  event.mutable_progress()->set_total(100);
  return event;
}

inline std::vector<std::string> Ids(const std::vector<v1::Experiment>& experiments) {
  std::vector<std::string> ids;
  for (const v1::Experiment& experiment : experiments) ids.push_back(experiment.id());
  return ids;
}

inline std::vector<int64_t> Seqs(const std::vector<v1::ExperimentEvent>& events) {
  std::vector<int64_t> seqs;
  for (const v1::ExperimentEvent& event : events) seqs.push_back(event.seq());
  return seqs;
}

// Runs one statement through a separate raw connection, as another process would, and returns
// the first column of its first row as text ("" when there is none).
inline std::string RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  std::string value;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK &&
        sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0) != nullptr) {
      value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
    }
    sqlite3_finalize(statement);
  } else {
    ADD_FAILURE() << "cannot open " << path << ": " << sqlite3_errmsg(db);
  }
  sqlite3_close(db);
  return value;
}

// Creates a database file as another program would and runs `sql` in it.
inline void CreateRawDatabase(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr),
            SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  sqlite3_close(db);
}

// A decision that stores `target` as baseline `name` owned by `owner` whatever is stored,
// audited as `action` by `owner`.
inline ExperimentStore::BaselineDecision SaveAs(const std::string& name, const std::string& target,
                                                const std::string& owner,
                                                const std::string& action = "baseline-save") {
  return [=](const v1::Baseline*) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
    ExperimentStore::BaselineWrite write;
    write.baseline.emplace();
    write.baseline->set_name(name);
    write.baseline->set_target_id(target);
    write.baseline->set_user(owner);
    write.baseline->set_owner(owner);
    write.audit.set_actor(owner);
    write.audit.set_action(action);
    write.audit.set_experiment_id(target);
    return write;
  };
}

inline std::vector<std::string> AuditActions(ExperimentStore& store) {
  std::vector<std::string> actions;
  absl::StatusOr<std::vector<v1::AuditEntry>> entries = store.ListAudit("", "", 0);
  EXPECT_TRUE(entries.ok()) << entries.status();
  if (!entries.ok()) return actions;
  for (const v1::AuditEntry& entry : *entries) {
    actions.push_back(absl::StrCat(entry.actor(), " ", entry.action(), " ", entry.experiment_id()));
  }
  return actions;
}

class ExperimentStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string directory_template = testing::TempDir() + "experiment_store_test.XXXXXX";
    ASSERT_NE(mkdtemp(directory_template.data()), nullptr) << "mkdtemp: " << errno;
    directory_ = directory_template;
    // A parent directory that does not exist yet: Open creates it.
    path_ = directory_ + "/state/experiments.db";
    ASSERT_OK_AND_ASSIGN(store_, ExperimentStore::Open(path_));
  }

  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(directory_);
  }

  // Closes and reopens the store, as a restarted daemon does.
  void Reopen() {
    store_.reset();
    ASSERT_OK_AND_ASSIGN(store_, ExperimentStore::Open(path_));
  }

  // Creates an experiment with a QUEUED first event (seq 1); returns its id.
  std::string CreateQueued(const std::string& user, v1::Workload workload) {
    absl::StatusOr<std::string> id =
        store_->Create(MakeExperiment(user, workload), StateEvent(1, v1::QUEUED));
    EXPECT_TRUE(id.ok()) << id.status();
    return id.ok() ? *id : "";
  }

  std::string directory_;
  std::string path_;
  std::unique_ptr<ExperimentStore> store_;
};

}  // namespace gpuprof::daemon::store_testing

#endif  // GPUPROF_DAEMON_STORE_STORE_TEST_SUPPORT_H_
