// RAII owners of SQLite's handles: a connection, a prepared statement and a write transaction,
// each reporting SQLite's errors as absl::Status with the operation they were for.
#ifndef GPUPROF_DAEMON_STORE_SQLITE_DATABASE_H_
#define GPUPROF_DAEMON_STORE_SQLITE_DATABASE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace google::protobuf {
class MessageLite;
}  // namespace google::protobuf

namespace gpuprof::daemon::store {

// "sqlite: <operation>: <SQLite's message>", with a code that says what the caller can do
// (busy: Unavailable, constraint: AlreadyExists / FailedPrecondition, corrupt: DataLoss, full:
// ResourceExhausted, ...). `db` may be null (no connection yet).
absl::Status SqliteError(sqlite3* db, int result_code, absl::string_view operation);

// Prepared statements of one connection kept for reuse, by their SQL. Parsing is most of what
// a short statement costs (a measured 13% of the daemon's CPU at 500 submits a second went to
// SQLite, most of it the parser and its allocations).
struct SqliteStatementCache;

// A prepared statement. One that came from its connection's cache is reset, its bindings
// cleared, and handed back on destruction, so that it can never be left active holding a read
// snapshot; any other is finalized.
class SqliteStatement {
 public:
  SqliteStatement(SqliteStatement&& other) noexcept;
  SqliteStatement& operator=(SqliteStatement&& other) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement();

  // Parameters are 1-based, as in SQL's ?1, ?2, ...
  absl::Status BindInt64(int index, int64_t value);
  absl::Status BindText(int index, absl::string_view value);
  // An empty value binds an empty blob, never NULL.
  absl::Status BindBlob(int index, absl::string_view value);

  // Advances to the next row: true if there is one, false when the statement is done.
  absl::StatusOr<bool> Step();
  // Runs a statement that returns no rows.
  absl::Status Run();

  // Column accessors read the current row; columns are 0-based.
  int64_t ColumnInt64(int column) const;
  std::string ColumnText(int column) const;
  // Valid until the next Step.
  absl::string_view ColumnBlob(int column) const;
  // Parses the column's blob into `message`; DataLoss naming `what` when it does not parse.
  absl::Status ColumnMessage(int column, google::protobuf::MessageLite& message,
                             absl::string_view what) const;

  const std::string& operation() const { return operation_; }

 private:
  friend class SqliteDatabase;
  SqliteStatement(sqlite3* db, sqlite3_stmt* statement, std::string operation,
                  std::shared_ptr<SqliteStatementCache> cache);
  absl::Status Check(int result) const;
  // Finalizes the statement or hands it back to its cache.
  void Release();

  sqlite3* db_;              // Not owned.
  sqlite3_stmt* statement_;  // Owned; null when moved from.
  std::string operation_;    // What the statement is for, for error messages.
  // Where the statement goes back to; null for one that is finalized.
  std::shared_ptr<SqliteStatementCache> cache_;
};

// An open connection; closed on destruction. Used by one thread at a time (opened NOMUTEX):
// its owner serializes the calls.
class SqliteDatabase {
 public:
  // Opens an existing database file without writing to it.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> OpenReadOnly(const std::string& path);
  // Opens (creating if needed) the database file, and its parent directories.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(const std::string& path);

  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;
  // close_v2 (unlike close) cannot fail for statements still alive: it closes after them.
  ~SqliteDatabase();

  sqlite3* handle() const { return handle_; }

  // A statement for `sql`, from the connection's cache when one is idle there (one SQL text
  // may be prepared more than once while an earlier one is still in use).
  absl::StatusOr<SqliteStatement> Prepare(absl::string_view sql, std::string operation);
  // Runs `sql`, one or more statements that return no rows.
  absl::Status Execute(const std::string& sql, absl::string_view operation);
  // Runs `sql`, one statement that returns no rows, prepared once and kept (for those run on
  // every write, such as SAVEPOINT and RELEASE).
  absl::Status RunStatement(absl::string_view sql, std::string operation);
  // The first column of the single row `sql` returns.
  absl::StatusOr<int64_t> QueryInt64(absl::string_view sql, std::string operation);
  absl::StatusOr<std::string> QueryText(absl::string_view sql, std::string operation);

  // Rows changed by the last INSERT, UPDATE or DELETE on this connection.
  int64_t ChangedRows() const;
  // Whether a transaction is open (SQLite ends one by itself on some errors).
  bool InTransaction() const;
  // Whether the open transaction has changed something (a write it would have to commit).
  bool TransactionWrites() const;

  // Keeps the -wal and -shm files when the last connection closes (the WAL emptied). A
  // restart on a full disk can then read: SQLite's first connection rebuilds the -shm in the
  // space that file already holds, where without it the file cannot be created and every read
  // fails with "disk I/O error".
  absl::Status KeepWalFilesOnClose();
  // Copies the WAL into the database file. `truncate`: and empties the WAL file, giving its
  // space back, without waiting for readers (the writer's lock is held meanwhile; one mid-read
  // makes it Unavailable, and a later one tries again); otherwise it waits for them as any
  // statement does, and the next write starts the WAL over in the space it holds.
  absl::Status CheckpointWal(bool truncate);

 private:
  explicit SqliteDatabase(sqlite3* handle);
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> OpenWithFlags(const std::string& path,
                                                                       int flags);

  sqlite3* handle_;  // Owned.
  // Shared with the statements handed out, which may outlive the connection.
  std::shared_ptr<SqliteStatementCache> statement_cache_;
};

// A write transaction, rolled back on destruction unless committed.
class SqliteTransaction {
 public:
  // IMMEDIATE takes the write lock up front, so that a busy database makes the transaction
  // wait (busy_timeout) at its start instead of failing a read-to-write upgrade midway.
  static absl::StatusOr<SqliteTransaction> Begin(SqliteDatabase& database,
                                                 absl::string_view operation);

  SqliteTransaction(SqliteTransaction&& other) noexcept;
  SqliteTransaction& operator=(SqliteTransaction&&) = delete;
  SqliteTransaction(const SqliteTransaction&) = delete;
  SqliteTransaction& operator=(const SqliteTransaction&) = delete;
  ~SqliteTransaction();

  // With synchronous=FULL the WAL is synced before COMMIT returns: the write is durable.
  absl::Status Commit();

 private:
  SqliteTransaction(SqliteDatabase* database, absl::string_view operation);

  SqliteDatabase* database_;  // Not owned; null once committed or moved from.
  std::string operation_;
};

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_SQLITE_DATABASE_H_
