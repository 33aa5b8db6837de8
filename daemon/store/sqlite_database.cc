#include "daemon/store/sqlite_database.h"

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "google/protobuf/message_lite.h"

namespace gpuprof::daemon::store {
namespace {

// How long a statement waits for another connection's lock before failing with "database is
// locked". Only another process (a second daemon, the sqlite3 shell) can hold one.
constexpr int kBusyTimeoutMs = 5000;

absl::StatusCode StatusCodeForSqliteResult(int extended_result_code) {
  switch (extended_result_code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::StatusCode::kUnavailable;
    case SQLITE_CONSTRAINT:
      if (extended_result_code == SQLITE_CONSTRAINT_PRIMARYKEY ||
          extended_result_code == SQLITE_CONSTRAINT_UNIQUE) {
        return absl::StatusCode::kAlreadyExists;
      }
      return absl::StatusCode::kFailedPrecondition;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::StatusCode::kDataLoss;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return absl::StatusCode::kResourceExhausted;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::StatusCode::kPermissionDenied;
    case SQLITE_CANTOPEN:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status SqliteError(sqlite3* db, int result_code, absl::string_view operation) {
  int extended_code = db != nullptr ? sqlite3_extended_errcode(db) : result_code;
  // The connection's message describes the last failed call, which is this one; without a
  // connection, fall back to the generic text for the code.
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(result_code);
  return absl::Status(StatusCodeForSqliteResult(extended_code),
                      absl::StrCat("sqlite: ", operation, ": ", message));
}

// ---- SqliteStatementCache ----

struct SqliteStatementCache {
  // Beyond this many idle statements, returned ones are finalized: SQL built with values in
  // its text would otherwise fill the cache.
  static constexpr size_t kMaxIdle = 128;

  // Called by the connection's destructor; nothing is cached after it (`closed`), so the
  // cache itself, kept alive by statements still held, has nothing left to finalize.
  void FinalizeAll() {
    for (auto& [sql, statement] : idle) sqlite3_finalize(statement);
    idle.clear();
  }

  // Set once the connection is closing: statements returned after that are finalized.
  bool closed = false;
  // Idle statements by SQL text; the connection is used by one thread at a time, and so is this.
  absl::flat_hash_map<std::string, sqlite3_stmt*> idle;
};

// ---- SqliteStatement ----

SqliteStatement::SqliteStatement(sqlite3* db, sqlite3_stmt* statement, std::string operation,
                                 std::shared_ptr<SqliteStatementCache> cache)
    : db_(db), statement_(statement), operation_(std::move(operation)), cache_(std::move(cache)) {}

SqliteStatement::SqliteStatement(SqliteStatement&& other) noexcept
    : db_(other.db_),
      statement_(std::exchange(other.statement_, nullptr)),
      operation_(std::move(other.operation_)),
      cache_(std::move(other.cache_)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& other) noexcept {
  if (this != &other) {
    Release();
    db_ = other.db_;
    statement_ = std::exchange(other.statement_, nullptr);
    operation_ = std::move(other.operation_);
    cache_ = std::move(other.cache_);
  }
  return *this;
}

SqliteStatement::~SqliteStatement() { Release(); }

void SqliteStatement::Release() {
  if (statement_ == nullptr) return;
  sqlite3_stmt* const statement = std::exchange(statement_, nullptr);
  if (cache_ != nullptr && !cache_->closed &&
      cache_->idle.size() < SqliteStatementCache::kMaxIdle) {
    // Reset ends the statement's read (and its snapshot) whatever state it was left in.
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
    if (cache_->idle.try_emplace(sqlite3_sql(statement), statement).second) return;
  }
  sqlite3_finalize(statement);
}

absl::Status SqliteStatement::BindInt64(int index, int64_t value) {
  return Check(sqlite3_bind_int64(statement_, index, value));
}

absl::Status SqliteStatement::BindText(int index, absl::string_view value) {
  return Check(sqlite3_bind_text64(statement_, index, value.data(), value.size(), SQLITE_TRANSIENT,
                                   SQLITE_UTF8));
}

absl::Status SqliteStatement::BindBlob(int index, absl::string_view value) {
  // A null data pointer would bind NULL rather than an empty blob.
  if (value.empty()) return Check(sqlite3_bind_zeroblob(statement_, index, 0));
  return Check(
      sqlite3_bind_blob64(statement_, index, value.data(), value.size(), SQLITE_TRANSIENT));
}

absl::StatusOr<bool> SqliteStatement::Step() {
  int result = sqlite3_step(statement_);
  if (result == SQLITE_ROW) return true;
  if (result == SQLITE_DONE) return false;
  return SqliteError(db_, result, operation_);
}

absl::Status SqliteStatement::Run() {
  ASSIGN_OR_RETURN(bool has_row, Step());
  if (has_row) return absl::InternalError(absl::StrCat(operation_, ": unexpected row"));
  return absl::OkStatus();
}

int64_t SqliteStatement::ColumnInt64(int column) const {
  return sqlite3_column_int64(statement_, column);
}

std::string SqliteStatement::ColumnText(int column) const {
  const unsigned char* text = sqlite3_column_text(statement_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(statement_, column));
}

absl::string_view SqliteStatement::ColumnBlob(int column) const {
  const void* data = sqlite3_column_blob(statement_, column);
  if (data == nullptr) return {};  // NULL or an empty blob.
  return absl::string_view(static_cast<const char*>(data),
                           sqlite3_column_bytes(statement_, column));
}

absl::Status SqliteStatement::ColumnMessage(int column, google::protobuf::MessageLite& message,
                                            absl::string_view what) const {
  const absl::string_view bytes = ColumnBlob(column);
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat("stored ", what, " does not parse"));
  }
  return absl::OkStatus();
}

absl::Status SqliteStatement::Check(int result) const {
  if (result == SQLITE_OK) return absl::OkStatus();
  return SqliteError(db_, result, operation_);
}

// ---- SqliteDatabase ----

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::OpenWithFlags(
    const std::string& path, int flags) {
  sqlite3* handle = nullptr;
  const int result = sqlite3_open_v2(path.c_str(), &handle, flags, /*zVfs=*/nullptr);
  // SQLite hands back a connection (holding the error message) even when opening fails.
  auto database = std::unique_ptr<SqliteDatabase>(new SqliteDatabase(handle));
  if (result != SQLITE_OK) return SqliteError(handle, result, absl::StrCat("opening ", path));
  sqlite3_extended_result_codes(handle, 1);
  sqlite3_busy_timeout(handle, kBusyTimeoutMs);
  return database;
}

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::OpenReadOnly(
    const std::string& path) {
  return OpenWithFlags(path, SQLITE_OPEN_READONLY);
}

absl::StatusOr<std::unique_ptr<SqliteDatabase>> SqliteDatabase::Open(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code error;
    std::filesystem::create_directories(parent, error);
    if (error) {
      return absl::FailedPreconditionError(absl::StrCat("creating directory ", parent.string(),
                                                        " for the database: ", error.message()));
    }
  }
  // NOMUTEX: the connection's owner already keeps it to one thread at a time.
  return OpenWithFlags(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
}

SqliteDatabase::SqliteDatabase(sqlite3* handle)
    : handle_(handle), statement_cache_(std::make_shared<SqliteStatementCache>()) {}

SqliteDatabase::~SqliteDatabase() {
  // Statements still held elsewhere keep the connection open (close_v2) until finalized.
  statement_cache_->closed = true;
  statement_cache_->FinalizeAll();
  sqlite3_close_v2(handle_);
}

absl::StatusOr<SqliteStatement> SqliteDatabase::Prepare(absl::string_view sql,
                                                        std::string operation) {
  const auto idle = statement_cache_->idle.find(sql);
  if (idle != statement_cache_->idle.end()) {
    sqlite3_stmt* const statement = idle->second;
    statement_cache_->idle.erase(idle);
    return SqliteStatement(handle_, statement, std::move(operation), statement_cache_);
  }
  sqlite3_stmt* statement = nullptr;
  // PERSISTENT: the statement is kept and reused, so SQLite allocates it outside its lookaside.
  const int result = sqlite3_prepare_v3(handle_, sql.data(), static_cast<int>(sql.size()),
                                        SQLITE_PREPARE_PERSISTENT, &statement, /*pzTail=*/nullptr);
  // Cached under the statement's own text, which is `sql` unless `sql` held more than one
  // statement or trailing text; such a statement is finalized after use instead.
  const bool cacheable = statement != nullptr && absl::string_view(sqlite3_sql(statement)) == sql;
  SqliteStatement wrapper(handle_, statement, std::move(operation),
                          cacheable ? statement_cache_ : nullptr);
  if (result != SQLITE_OK) return SqliteError(handle_, result, wrapper.operation());
  return wrapper;
}

absl::Status SqliteDatabase::Execute(const std::string& sql, absl::string_view operation) {
  int result = sqlite3_exec(handle_, sql.c_str(), /*callback=*/nullptr, /*arg=*/nullptr,
                            /*errmsg=*/nullptr);
  if (result != SQLITE_OK) return SqliteError(handle_, result, operation);
  return absl::OkStatus();
}

absl::Status SqliteDatabase::RunStatement(absl::string_view sql, std::string operation) {
  ASSIGN_OR_RETURN(SqliteStatement statement, Prepare(sql, std::move(operation)));
  return statement.Run();
}

absl::StatusOr<int64_t> SqliteDatabase::QueryInt64(absl::string_view sql, std::string operation) {
  ASSIGN_OR_RETURN(SqliteStatement statement, Prepare(sql, std::move(operation)));
  ASSIGN_OR_RETURN(bool has_row, statement.Step());
  if (!has_row) return absl::InternalError(absl::StrCat(statement.operation(), ": no row"));
  return statement.ColumnInt64(0);
}

absl::StatusOr<std::string> SqliteDatabase::QueryText(absl::string_view sql,
                                                      std::string operation) {
  ASSIGN_OR_RETURN(SqliteStatement statement, Prepare(sql, std::move(operation)));
  ASSIGN_OR_RETURN(bool has_row, statement.Step());
  if (!has_row) return absl::InternalError(absl::StrCat(statement.operation(), ": no row"));
  return statement.ColumnText(0);
}

int64_t SqliteDatabase::ChangedRows() const { return sqlite3_changes(handle_); }

bool SqliteDatabase::InTransaction() const { return sqlite3_get_autocommit(handle_) == 0; }

bool SqliteDatabase::TransactionWrites() const {
  return sqlite3_txn_state(handle_, "main") == SQLITE_TXN_WRITE;
}

absl::Status SqliteDatabase::KeepWalFilesOnClose() {
  int keep = 1;
  const int result = sqlite3_file_control(handle_, "main", SQLITE_FCNTL_PERSIST_WAL, &keep);
  if (result != SQLITE_OK) return SqliteError(handle_, result, "keeping the WAL files on close");
  return absl::OkStatus();
}

absl::Status SqliteDatabase::CheckpointWal(bool truncate) {
  if (truncate) sqlite3_busy_timeout(handle_, 0);
  const int result = sqlite3_wal_checkpoint_v2(
      handle_, "main", truncate ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_RESTART,
      /*pnLog=*/nullptr, /*pnCkpt=*/nullptr);
  const absl::Status checkpointed = result == SQLITE_OK
                                        ? absl::OkStatus()
                                        : SqliteError(handle_, result, "checkpointing the WAL");
  if (truncate) sqlite3_busy_timeout(handle_, kBusyTimeoutMs);
  return checkpointed;
}

// ---- SqliteTransaction ----

absl::StatusOr<SqliteTransaction> SqliteTransaction::Begin(SqliteDatabase& database,
                                                           absl::string_view operation) {
  RETURN_IF_ERROR(database.RunStatement("BEGIN IMMEDIATE",
                                        absl::StrCat("starting transaction for ", operation)));
  return SqliteTransaction(&database, operation);
}

SqliteTransaction::SqliteTransaction(SqliteDatabase* database, absl::string_view operation)
    : database_(database), operation_(operation) {}

SqliteTransaction::SqliteTransaction(SqliteTransaction&& other) noexcept
    : database_(std::exchange(other.database_, nullptr)), operation_(std::move(other.operation_)) {}

SqliteTransaction::~SqliteTransaction() {
  // A failed COMMIT can leave the transaction open, and some errors end it by themselves:
  // roll back exactly when one is still open. Errors are ignored (destructors never throw),
  // and SQLite rolls back an unfinished transaction on the next open anyway.
  if (database_ != nullptr && database_->InTransaction()) {
    sqlite3_exec(database_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}

absl::Status SqliteTransaction::Commit() {
  RETURN_IF_ERROR(
      database_->RunStatement("COMMIT", absl::StrCat("committing transaction for ", operation_)));
  database_ = nullptr;
  return absl::OkStatus();
}

}  // namespace gpuprof::daemon::store
