#include "daemon/store/group_commit.h"

#include <stdlib.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "daemon/store/sqlite_database.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store {
namespace {

class GroupCommitTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string directory_template = testing::TempDir() + "group_commit_test.XXXXXX";
    ASSERT_NE(mkdtemp(directory_template.data()), nullptr) << "mkdtemp: " << errno;
    directory_ = directory_template;
    const std::string path = directory_ + "/test.db";
    auto writer = SqliteDatabase::Open(path);
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->QueryText("PRAGMA journal_mode = WAL", "wal").ok());
    ASSERT_TRUE((*writer)->Execute("CREATE TABLE t (k INTEGER PRIMARY KEY)", "creating").ok());
    auto reader = SqliteDatabase::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    commit_ = std::make_unique<GroupCommit>(*std::move(writer), *std::move(reader));
  }
  void TearDown() override {
    commit_.reset();
    std::filesystem::remove_all(directory_);
  }

  static absl::Status Insert(SqliteDatabase& database, int64_t key) {
    return database.Execute(absl::StrCat("INSERT INTO t (k) VALUES (", key, ")"), "inserting");
  }
  int64_t Count() {
    return commit_->OnReader([](SqliteDatabase& database) {
      return database.QueryInt64("SELECT count(*) FROM t", "counting").value_or(-1);
    });
  }

  std::string directory_;
  std::unique_ptr<GroupCommit> commit_;
};

TEST_F(GroupCommitTest, AFailedWriteUndoesOnlyItself) {
  const absl::Status failed = commit_->Commit("two rows, then a failure", [](SqliteDatabase& db) {
    if (absl::Status s = Insert(db, 1); !s.ok()) return s;
    if (absl::Status s = Insert(db, 2); !s.ok()) return s;
    return absl::FailedPreconditionError("refused after writing");
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Count(), 0);
  EXPECT_TRUE(commit_->Commit("one row", [](SqliteDatabase& db) { return Insert(db, 3); }).ok());
  EXPECT_EQ(Count(), 1);
}

TEST_F(GroupCommitTest, AcknowledgedWritesAreVisibleToReadsAndKeepTheirOwnOutcome) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 40;
  std::atomic<int> refused = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int64_t key = t * kPerThread + i + 1;
        const absl::Status stored =
            commit_->Commit("insert", [&](SqliteDatabase& db) { return Insert(db, key); });
        EXPECT_TRUE(stored.ok()) << stored;
        // Acknowledged means committed: the read connection sees it at once.
        EXPECT_EQ(commit_->OnReader([&](SqliteDatabase& db) {
          return db.QueryInt64(absl::StrCat("SELECT count(*) FROM t WHERE k = ", key), "seek")
              .value_or(0);
        }),
                  1);
        // A duplicate, interleaved with the others' writes, fails alone.
        if (absl::IsAlreadyExists(commit_->Commit(
                "duplicate", [&](SqliteDatabase& db) { return Insert(db, key); }))) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(refused.load(), kThreads * kPerThread);
  EXPECT_EQ(Count(), kThreads * kPerThread);
}

TEST_F(GroupCommitTest, OnWriterSeesWhatWasCommitted) {
  ASSERT_TRUE(commit_->Commit("one row", [](SqliteDatabase& db) { return Insert(db, 9); }).ok());
  EXPECT_EQ(commit_->OnWriter([](SqliteDatabase& db) {
    return db.QueryInt64("SELECT k FROM t", "reading").value_or(0);
  }),
            9);
}

// max_page_count makes SQLite answer SQLITE_FULL as a full disk does.
TEST_F(GroupCommitTest, ADatabaseThatCannotGrowIsFullUntilAWriteCommits) {
  ASSERT_TRUE(commit_->OnWriter([](SqliteDatabase& db) {
    return db.Execute("PRAGMA max_page_count = " +
                          std::to_string(db.QueryInt64("PRAGMA page_count", "pages").value_or(2)),
                      "capping the file");
  }).ok());
  EXPECT_FALSE(commit_->disk_full());
  const absl::Status refused = commit_->Commit("many rows", [](SqliteDatabase& db) {
    for (int64_t key = 0; key < 5000; ++key) {
      if (absl::Status s = Insert(db, key); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(commit_->disk_full());
  EXPECT_EQ(Count(), 0);

  ASSERT_TRUE(commit_->OnWriter([](SqliteDatabase& db) {
    return db.Execute("PRAGMA max_page_count = 1000000", "uncapping the file");
  }).ok());
  EXPECT_TRUE(commit_->Commit("one row", [](SqliteDatabase& db) { return Insert(db, 1); }).ok());
  EXPECT_FALSE(commit_->disk_full());
  EXPECT_EQ(Count(), 1);
}

// A write's own ResourceExhausted (a quota, say) is not a full disk.
TEST_F(GroupCommitTest, AWritesOwnResourceExhaustedIsNotAFullDisk) {
  EXPECT_FALSE(commit_->Commit("refused", [](SqliteDatabase&) {
                        return absl::ResourceExhaustedError("quota");
                      }).ok());
  EXPECT_FALSE(commit_->disk_full());
}

}  // namespace
}  // namespace gpuprof::daemon::store
