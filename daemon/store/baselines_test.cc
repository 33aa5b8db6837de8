// Baselines and their owners, through the store: each change written with its audit entry.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/store_test_support.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store_testing {
namespace {

using ::testing::ElementsAre;

TEST_F(ExperimentStoreTest, BaselineChangesAreStoredWithTheirAuditEntries) {
  ASSERT_OK(store_->ChangeBaseline("main", SaveAs("main", "swp-000001", "alice")));
  // The next decision sees what is stored, owner included, and replaces it.
  std::string seen;
  ASSERT_OK(store_->ChangeBaseline(
      "main", [&](const v1::Baseline* stored) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
        if (stored != nullptr) seen = absl::StrCat(stored->target_id(), " of ", stored->owner());
        return SaveAs("main", "swp-000002", "alice", "baseline-replace")(stored);
      }));
  EXPECT_EQ(seen, "swp-000001 of alice");
  Reopen();
  ASSERT_OK_AND_ASSIGN(auto named, store_->ListBaselines("main"));
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].target_id(), "swp-000002");
  EXPECT_EQ(named[0].owner(), "alice");
  EXPECT_EQ(RawQuery(path_, "SELECT owner FROM baselines WHERE name = 'main'"), "alice");
  ASSERT_OK_AND_ASSIGN(auto none, store_->ListBaselines("other"));
  EXPECT_TRUE(none.empty());
  EXPECT_THAT(AuditActions(*store_),
              ElementsAre("alice baseline-replace swp-000002", "alice baseline-save swp-000001"));

  // Deleting: the baseline goes, its audit entry stays.
  ASSERT_OK(store_->ChangeBaseline(
      "main", [](const v1::Baseline* stored) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
        ExperimentStore::BaselineWrite write;
        write.audit.set_actor("alice");
        write.audit.set_action("baseline-delete");
        write.audit.set_experiment_id(stored->target_id());
        return write;
      }));
  ASSERT_OK_AND_ASSIGN(auto gone, store_->ListBaselines(""));
  EXPECT_TRUE(gone.empty());
  EXPECT_THAT(AuditActions(*store_),
              ElementsAre("alice baseline-delete swp-000002", "alice baseline-replace swp-000002",
                          "alice baseline-save swp-000001"));
}

TEST_F(ExperimentStoreTest, ARefusedBaselineChangeWritesNothing) {
  ASSERT_OK(store_->ChangeBaseline("main", SaveAs("main", "exp-000001", "alice")));
  const absl::Status refused = store_->ChangeBaseline(
      "main", [](const v1::Baseline* stored) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
        return absl::PermissionDeniedError(absl::StrCat("belongs to ", stored->owner()));
      });
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(refused.message(), "belongs to alice");
  // A decision that renames the baseline is refused too, with nothing written.
  EXPECT_EQ(store_->ChangeBaseline("main", SaveAs("other", "exp-000009", "bob")).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_OK_AND_ASSIGN(auto all, store_->ListBaselines(""));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].target_id(), "exp-000001");
  EXPECT_THAT(AuditActions(*store_), ElementsAre("alice baseline-save exp-000001"));
}

TEST_F(ExperimentStoreTest, BaselineDecisionsOnOneNameCannotInterleave) {
  // Every thread creates "main" only if nobody has: with the decision and the write in one
  // transaction exactly one succeeds, and the owner stored is the winner's.
  constexpr int kThreads = 8;
  std::atomic<int> created{0};
  std::vector<std::string> winners(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const std::string user = absl::StrCat("user", i);
      const absl::Status status = store_->ChangeBaseline(
          "main",
          [&](const v1::Baseline* stored) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
            if (stored != nullptr) return absl::AlreadyExistsError(stored->owner());
            return SaveAs("main", "exp-000001", user)(stored);
          });
      if (status.ok()) {
        ++created;
        winners[i] = user;
      } else {
        EXPECT_EQ(status.code(), absl::StatusCode::kAlreadyExists) << status;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(created.load(), 1);
  ASSERT_OK_AND_ASSIGN(auto stored, store_->ListBaselines("main"));
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_THAT(winners, ::testing::Contains(stored[0].owner()));
  EXPECT_EQ(AuditActions(*store_).size(), 1u);
}

TEST_F(ExperimentStoreTest, BaselinesFromBeforeOwnersGetNone) {
  // The table as a gpuprofd before owners wrote it: no owner column. Its row's proto even claims
  // an owner (as a forged or newer row could); the column added at open is the owner of record.
  store_.reset();
  v1::Baseline legacy;
  legacy.set_name("main");
  legacy.set_target_id("exp-000001");
  legacy.set_user("mallory");  // the last one to save it, when anyone could
  legacy.set_owner("mallory");
  RawQuery(path_, "DROP TABLE baselines");
  RawQuery(path_,
           "CREATE TABLE baselines (name TEXT PRIMARY KEY NOT NULL, proto BLOB NOT NULL) WITHOUT "
           "ROWID");
  RawQuery(path_, absl::StrCat("INSERT INTO baselines (name, proto) VALUES ('main', X'",
                               absl::BytesToHexString(legacy.SerializeAsString()), "')"));
  ASSERT_EQ(RawQuery(path_, "SELECT count(*) FROM baselines"), "1");
  ASSERT_OK_AND_ASSIGN(store_, ExperimentStore::Open(path_));
  EXPECT_EQ(
      RawQuery(path_, "SELECT count(*) FROM pragma_table_info('baselines') WHERE name = 'owner'"),
      "1");
  ASSERT_OK_AND_ASSIGN(auto listed, store_->ListBaselines(""));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].target_id(), "exp-000001");  // still usable by compare
  EXPECT_EQ(listed[0].user(), "mallory");
  EXPECT_EQ(listed[0].owner(), "");
  std::string owner_seen = "unset";
  ASSERT_OK(store_->ChangeBaseline(
      "main", [&](const v1::Baseline* stored) -> absl::StatusOr<ExperimentStore::BaselineWrite> {
        owner_seen = stored->owner();
        return SaveAs("main", "exp-000002", "")(stored);
      }));
  EXPECT_EQ(owner_seen, "");
  // Opening again leaves the migrated table as it is.
  Reopen();
  ASSERT_OK_AND_ASSIGN(listed, store_->ListBaselines("main"));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].target_id(), "exp-000002");
}

}  // namespace
}  // namespace gpuprof::daemon::store_testing
