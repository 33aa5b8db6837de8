#include "daemon/store/sqlite_database.h"

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuprof/v1/access.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon::store {
namespace {

class SqliteDatabaseTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string directory_template = testing::TempDir() + "sqlite_database_test.XXXXXX";
    ASSERT_NE(mkdtemp(directory_template.data()), nullptr) << "mkdtemp: " << errno;
    directory_ = directory_template;
    path_ = directory_ + "/nested/test.db";
    absl::StatusOr<std::unique_ptr<SqliteDatabase>> database = SqliteDatabase::Open(path_);
    ASSERT_TRUE(database.ok()) << database.status();
    database_ = *std::move(database);
    ASSERT_TRUE(
        database_->Execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER, b BLOB)", "creating t")
            .ok());
  }
  void TearDown() override {
    database_.reset();
    std::filesystem::remove_all(directory_);
  }

  int64_t Count() {
    absl::StatusOr<int64_t> count = database_->QueryInt64("SELECT count(*) FROM t", "counting");
    EXPECT_TRUE(count.ok()) << count.status();
    return count.value_or(-1);
  }

  absl::Status Insert(const std::string& key, int64_t n) {
    absl::StatusOr<SqliteStatement> insert =
        database_->Prepare("INSERT INTO t (k, n, b) VALUES (?1, ?2, ?3)", "inserting");
    if (!insert.ok()) return insert.status();
    if (absl::Status s = insert->BindText(1, key); !s.ok()) return s;
    if (absl::Status s = insert->BindInt64(2, n); !s.ok()) return s;
    if (absl::Status s = insert->BindBlob(3, ""); !s.ok()) return s;
    return insert->Run();
  }

  std::string directory_;
  std::string path_;
  std::unique_ptr<SqliteDatabase> database_;
};

TEST_F(SqliteDatabaseTest, OpenCreatesParentDirectoriesAndTheFile) {
  EXPECT_TRUE(std::filesystem::exists(path_));
}

TEST_F(SqliteDatabaseTest, StatementsBindStepAndReadColumns) {
  ASSERT_TRUE(Insert("a", 7).ok());
  absl::StatusOr<SqliteStatement> select =
      database_->Prepare("SELECT k, n, b FROM t WHERE k = ?1", "reading");
  ASSERT_TRUE(select.ok()) << select.status();
  ASSERT_TRUE(select->BindText(1, "a").ok());
  ASSERT_EQ(select->Step().value_or(false), true);
  EXPECT_EQ(select->ColumnText(0), "a");
  EXPECT_EQ(select->ColumnInt64(1), 7);
  // An empty blob is stored as an empty blob, not NULL.
  EXPECT_TRUE(select->ColumnBlob(2).empty());
  absl::StatusOr<std::string> type =
      database_->QueryText("SELECT typeof(b) FROM t WHERE k = 'a'", "typeof");
  EXPECT_EQ(type.value_or(""), "blob");
  EXPECT_EQ(select->Step().value_or(true), false);
}

TEST_F(SqliteDatabaseTest, ErrorsNameTheOperationAndMapTheCode) {
  ASSERT_TRUE(Insert("a", 1).ok());
  const absl::Status duplicate = Insert("a", 2);
  EXPECT_EQ(duplicate.code(), absl::StatusCode::kAlreadyExists) << duplicate;
  EXPECT_NE(duplicate.message().find("sqlite: inserting: UNIQUE constraint failed"),
            std::string::npos)
      << duplicate;
  const absl::Status bad_sql = database_->Prepare("SELEKT 1", "a typo").status();
  EXPECT_EQ(bad_sql.code(), absl::StatusCode::kInternal);
  EXPECT_NE(bad_sql.message().find("sqlite: a typo: "), std::string::npos) << bad_sql;
  EXPECT_EQ(database_->QueryInt64("SELECT n FROM t WHERE k = 'none'", "looking").status().code(),
            absl::StatusCode::kInternal);
}

TEST_F(SqliteDatabaseTest, ColumnMessageParsesOrReportsDataLoss) {
  v1::AuditEntry entry;
  entry.set_actor("alice");
  absl::StatusOr<SqliteStatement> insert =
      database_->Prepare("INSERT INTO t (k, n, b) VALUES ('good', 0, ?1), ('bad', 0, ?2)", "x");
  ASSERT_TRUE(insert.ok());
  ASSERT_TRUE(insert->BindBlob(1, entry.SerializeAsString()).ok());
  ASSERT_TRUE(insert->BindBlob(2, "\xff\xff\xff").ok());
  ASSERT_TRUE(insert->Run().ok());
  absl::StatusOr<SqliteStatement> select = database_->Prepare("SELECT b FROM t ORDER BY k", "y");
  ASSERT_TRUE(select.ok());
  ASSERT_TRUE(select->Step().value_or(false));  // 'bad'
  v1::AuditEntry parsed;
  const absl::Status bad = select->ColumnMessage(0, parsed, "row bad");
  EXPECT_EQ(bad.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(bad.message(), "stored row bad does not parse");
  ASSERT_TRUE(select->Step().value_or(false));  // 'good'
  ASSERT_TRUE(select->ColumnMessage(0, parsed, "row good").ok());
  EXPECT_EQ(parsed.actor(), "alice");
}

TEST_F(SqliteDatabaseTest, TransactionRollsBackUnlessCommitted) {
  {
    absl::StatusOr<SqliteTransaction> transaction = SqliteTransaction::Begin(*database_, "t1");
    ASSERT_TRUE(transaction.ok()) << transaction.status();
    ASSERT_TRUE(Insert("a", 1).ok());
    EXPECT_TRUE(database_->InTransaction());
  }
  EXPECT_FALSE(database_->InTransaction());
  EXPECT_EQ(Count(), 0);
  {
    absl::StatusOr<SqliteTransaction> transaction = SqliteTransaction::Begin(*database_, "t2");
    ASSERT_TRUE(transaction.ok());
    ASSERT_TRUE(Insert("b", 1).ok());
    ASSERT_TRUE(transaction->Commit().ok());
  }
  EXPECT_EQ(Count(), 1);
  EXPECT_EQ(database_->ChangedRows(), 1);
}

TEST_F(SqliteDatabaseTest, ReadOnlyConnectionCannotWrite) {
  ASSERT_TRUE(Insert("a", 1).ok());
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> reader = SqliteDatabase::OpenReadOnly(path_);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->QueryInt64("SELECT count(*) FROM t", "counting").value_or(-1), 1);
  const absl::Status write = (*reader)->Execute("DELETE FROM t", "deleting");
  EXPECT_EQ(write.code(), absl::StatusCode::kPermissionDenied) << write;
}

TEST_F(SqliteDatabaseTest, OpeningAMissingFileReadOnlyFails) {
  absl::StatusOr<std::unique_ptr<SqliteDatabase>> missing =
      SqliteDatabase::OpenReadOnly(directory_ + "/absent.db");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition) << missing.status();
  EXPECT_NE(missing.status().message().find("opening " + directory_ + "/absent.db"),
            std::string::npos);
}

TEST_F(SqliteDatabaseTest, ReusedStatementsStartWithNoBindingsAndNoRowLeftOpen) {
  ASSERT_TRUE(Insert("a", 1).ok());
  ASSERT_TRUE(Insert("b", 2).ok());
  {
    // Left mid-read: handing it back must end the read, or a TRUNCATE checkpoint would fail.
    absl::StatusOr<SqliteStatement> select =
        database_->Prepare("SELECT n FROM t ORDER BY k", "selecting");
    ASSERT_TRUE(select.ok()) << select.status();
    absl::StatusOr<bool> row = select->Step();
    ASSERT_TRUE(row.ok() && *row);
  }
  EXPECT_TRUE(database_->CheckpointWal(/*truncate=*/true).ok());
  // The same SQL again: the cached statement, from its first row, with no binding kept.
  absl::StatusOr<SqliteStatement> select =
      database_->Prepare("SELECT n FROM t ORDER BY k", "selecting again");
  ASSERT_TRUE(select.ok()) << select.status();
  absl::StatusOr<bool> row = select->Step();
  ASSERT_TRUE(row.ok() && *row);
  EXPECT_EQ(select->ColumnInt64(0), 1);
  // The error names this use's operation, not the first one's.
  EXPECT_EQ(select->operation(), "selecting again");
  {
    absl::StatusOr<SqliteStatement> insert =
        database_->Prepare("INSERT INTO t (k, n, b) VALUES (?1, ?2, ?3)", "inserting");
    ASSERT_TRUE(insert.ok());
    ASSERT_TRUE(insert->BindText(1, "unbound").ok());
  }
  absl::StatusOr<SqliteStatement> insert =
      database_->Prepare("INSERT INTO t (k, n, b) VALUES (?1, ?2, ?3)", "inserting");
  ASSERT_TRUE(insert.ok());
  ASSERT_TRUE(insert->Run().ok());  // k NULL: the binding of the earlier use is gone.
  EXPECT_EQ(database_->QueryInt64("SELECT count(*) FROM t WHERE k IS NULL", "counting").value(), 1);
}

TEST_F(SqliteDatabaseTest, OneSqlTextInUseTwiceGetsTwoStatements) {
  ASSERT_TRUE(Insert("a", 1).ok());
  ASSERT_TRUE(Insert("b", 2).ok());
  const char* const kSql = "SELECT n FROM t ORDER BY k";
  absl::StatusOr<SqliteStatement> outer = database_->Prepare(kSql, "outer");
  ASSERT_TRUE(outer.ok());
  ASSERT_TRUE(outer->Step().value());
  absl::StatusOr<SqliteStatement> inner = database_->Prepare(kSql, "inner");
  ASSERT_TRUE(inner.ok());
  ASSERT_TRUE(inner->Step().value());
  ASSERT_TRUE(outer->Step().value());
  EXPECT_EQ(inner->ColumnInt64(0), 1);
  EXPECT_EQ(outer->ColumnInt64(0), 2);
}

TEST_F(SqliteDatabaseTest, SqlWithTrailingTextRunsEachTime) {
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int64_t> count =
        database_->QueryInt64("SELECT count(*) FROM t;  -- trailing comment", "counting");
    ASSERT_TRUE(count.ok()) << count.status();
    EXPECT_EQ(*count, 0);
  }
}

TEST_F(SqliteDatabaseTest, AStatementMayOutliveItsConnection) {
  ASSERT_TRUE(Insert("a", 1).ok());
  {
    // Idle in the cache when the connection closes: finalized with it.
    absl::StatusOr<SqliteStatement> idle = database_->Prepare("SELECT k FROM t", "selecting");
    ASSERT_TRUE(idle.ok());
  }
  absl::StatusOr<SqliteStatement> select = database_->Prepare("SELECT n FROM t", "selecting");
  ASSERT_TRUE(select.ok());
  ASSERT_TRUE(select->Step().value());
  // The connection closes (close_v2) once this statement, still held, is finalized: its
  // destruction after the database's must neither touch the freed cache nor leak (ASan's leak
  // check runs this test).
  database_.reset();
}

}  // namespace
}  // namespace gpuprof::daemon::store
