// The files the store refuses to open (newer, foreign, damaged) and gpuprofd --check-db.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/store_test_support.h"
#include "gmock/gmock.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/workloads.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store_testing {
namespace {

using ::testing::HasSubstr;

TEST_F(ExperimentStoreTest, FutureSchemaVersionIsRefused) {
  store_.reset();
  const std::string newer = std::to_string(ExperimentStore::kSchemaVersion + 1);
  RawQuery(path_, "PRAGMA user_version = " + newer);
  ASSERT_EQ(RawQuery(path_, "PRAGMA user_version"), newer);
  absl::StatusOr<std::unique_ptr<ExperimentStore>> store = ExperimentStore::Open(path_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("schema version " + newer));
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
}

TEST_F(ExperimentStoreTest, FileThatIsNotADatabaseIsRefused) {
  const std::string path = directory_ + "/not-a-database.db";
  std::ofstream(path) << std::string(8192, 'x');
  absl::StatusOr<std::unique_ptr<ExperimentStore>> store = ExperimentStore::Open(path);
  EXPECT_FALSE(store.ok());
  EXPECT_THAT(store.status().message(), HasSubstr("sqlite: "));
  EXPECT_THAT(store.status().message(), HasSubstr("not a database"));
}

TEST_F(ExperimentStoreTest, NewDatabaseIsMarkedAsGpuprofs) {
  EXPECT_EQ(RawQuery(path_, "PRAGMA application_id"), std::to_string(0x47505046));
}

TEST_F(ExperimentStoreTest, AnotherApplicationsDatabaseIsRefusedUntouched) {
  const std::string path = directory_ + "/other-app.db";
  CreateRawDatabase(path,
                    "CREATE TABLE accounts (name TEXT); INSERT INTO accounts VALUES ('kept')");
  absl::StatusOr<std::unique_ptr<ExperimentStore>> store = ExperimentStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("another application"));
  EXPECT_THAT(store.status().message(), HasSubstr(path));
  EXPECT_THAT(store.status().message(), HasSubstr("--check-db"));
  // Nothing was added to it.
  EXPECT_EQ(RawQuery(path, "SELECT count(*) FROM sqlite_master WHERE name = 'experiments'"), "0");
  EXPECT_EQ(RawQuery(path, "SELECT name FROM accounts"), "kept");
  EXPECT_EQ(ExperimentStore::CheckDatabase(path).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(ExperimentStoreTest, ForeignApplicationIdIsRefused) {
  const std::string path = directory_ + "/foreign-id.db";
  CreateRawDatabase(path, "PRAGMA application_id = 1234");
  absl::StatusOr<std::unique_ptr<ExperimentStore>> store = ExperimentStore::Open(path);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(store.status().message(), HasSubstr("application_id 0x000004d2"));
}

TEST_F(ExperimentStoreTest, CheckDatabaseSummarisesAnIntactDatabase) {
  for (int i = 0; i < 3; ++i) {
    ASSERT_OK(store_->Create(MakeExperiment("alice", v1::WORKLOAD_RADIX), StateEvent(1, v1::QUEUED))
                  .status());
  }
  ASSERT_OK_AND_ASSIGN(std::string verdict, ExperimentStore::CheckDatabase(path_));
  EXPECT_THAT(verdict, HasSubstr("intact"));
  EXPECT_THAT(verdict, HasSubstr("3 experiments, 3 events"));
  EXPECT_EQ(ExperimentStore::CheckDatabase(directory_ + "/missing.db").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ExperimentStoreTest, CheckDatabaseParsesSweepsAndBaselinesToo) {
  v1::Sweep sweep;
  sweep.set_user("alice");
  sweep.set_state(v1::SWEEP_RUNNING);
  v1::SweepEvent first;
  first.set_seq(1);
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(sweep, first));
  ASSERT_OK(store_->ChangeBaseline("main", SaveAs("main", id, "alice")));
  ASSERT_OK_AND_ASSIGN(std::string verdict, ExperimentStore::CheckDatabase(path_));
  EXPECT_THAT(verdict, HasSubstr("1 sweeps, 1 sweep events, 1 baselines"));

  // Pages intact, but the stored sweep no longer parses: only the record check sees it.
  store_.reset();
  RawQuery(path_, "UPDATE sweeps SET proto = X'ffffffffff'");
  absl::StatusOr<std::string> damaged = ExperimentStore::CheckDatabase(path_);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(damaged.status().message(), HasSubstr("table sweeps"));
}

TEST_F(ExperimentStoreTest, DamagedDatabaseIsRefusedAndTheCheckSaysWhere) {
  // Enough rows for several b-tree pages, then garbage over pages in the middle of the file.
  std::string description(600, 'd');
  for (int i = 0; i < 300; ++i) {
    v1::Experiment experiment = MakeExperiment("alice", v1::WORKLOAD_RADIX);
    experiment.mutable_request()->set_description(description);
    ASSERT_OK(store_->Create(experiment, StateEvent(1, v1::QUEUED)).status());
  }
  store_.reset();  // Closing the last connection checkpoints the WAL into the file.
  const int64_t page_size = std::stoll(RawQuery(path_, "PRAGMA page_size"));
  const int64_t pages = std::stoll(RawQuery(path_, "PRAGMA page_count"));
  ASSERT_GT(pages, 20);
  {
    std::fstream file(path_, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(page_size * (pages / 2));
    const std::string garbage(page_size * 3, '\xa5');
    file.write(garbage.data(), static_cast<std::streamsize>(garbage.size()));
    ASSERT_TRUE(file.good());
  }
  absl::StatusOr<std::unique_ptr<ExperimentStore>> store = ExperimentStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(store.status().message(), HasSubstr(path_));
  EXPECT_THAT(store.status().message(), HasSubstr("--check-db"));

  absl::StatusOr<std::string> verdict = ExperimentStore::CheckDatabase(path_);
  EXPECT_EQ(verdict.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(verdict.status().message(), HasSubstr("damaged"));
}

}  // namespace
}  // namespace gpuprof::daemon::store_testing
