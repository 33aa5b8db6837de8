#include "daemon/store/experiment_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {
namespace experiment_store_internal {
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

// "sqlite: <operation>: <SQLite's message>". `db` may be null (no connection yet).
absl::Status SqliteError(sqlite3* db, int result_code, absl::string_view operation) {
  int extended_code = db != nullptr ? sqlite3_extended_errcode(db) : result_code;
  // The connection's message describes the last failed call, which is this one; without a
  // connection, fall back to the generic text for the code.
  const char* message = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(result_code);
  return absl::Status(StatusCodeForSqliteResult(extended_code),
                      absl::StrCat("sqlite: ", operation, ": ", message));
}

}  // namespace

// A prepared statement; finalized on destruction. Statements are prepared per call rather
// than cached: the fsync of every commit costs far more than preparing, and a statement that
// is destroyed at the end of the call can never be left active, holding a read snapshot.
class SqliteStatement {
 public:
  static absl::StatusOr<SqliteStatement> Prepare(sqlite3* db, absl::string_view sql,
                                                 std::string operation) {
    sqlite3_stmt* statement = nullptr;
    int result = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &statement,
                                    /*pzTail=*/nullptr);
    SqliteStatement wrapper(db, statement, std::move(operation));
    if (result != SQLITE_OK) return SqliteError(db, result, wrapper.operation_);
    return wrapper;
  }

  SqliteStatement(SqliteStatement&& other) noexcept
      : db_(other.db_),
        statement_(std::exchange(other.statement_, nullptr)),
        operation_(std::move(other.operation_)) {}
  SqliteStatement& operator=(SqliteStatement&& other) noexcept {
    if (this != &other) {
      sqlite3_finalize(statement_);
      db_ = other.db_;
      statement_ = std::exchange(other.statement_, nullptr);
      operation_ = std::move(other.operation_);
    }
    return *this;
  }
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;
  ~SqliteStatement() { sqlite3_finalize(statement_); }  // A no-op on null.

  // Parameters are 1-based, as in SQL's ?1, ?2, ...
  absl::Status BindInt64(int index, int64_t value) {
    return Check(sqlite3_bind_int64(statement_, index, value));
  }
  absl::Status BindText(int index, absl::string_view value) {
    return Check(sqlite3_bind_text64(statement_, index, value.data(), value.size(),
                                     SQLITE_TRANSIENT, SQLITE_UTF8));
  }
  absl::Status BindBlob(int index, absl::string_view value) {
    // A null data pointer would bind NULL rather than an empty blob.
    if (value.empty()) return Check(sqlite3_bind_zeroblob(statement_, index, 0));
    return Check(sqlite3_bind_blob64(statement_, index, value.data(), value.size(),
                                     SQLITE_TRANSIENT));
  }

  // Advances to the next row: true if there is one, false when the statement is done.
  absl::StatusOr<bool> Step() {
    int result = sqlite3_step(statement_);
    if (result == SQLITE_ROW) return true;
    if (result == SQLITE_DONE) return false;
    return SqliteError(db_, result, operation_);
  }

  // Runs a statement that returns no rows.
  absl::Status Run() {
    ASSIGN_OR_RETURN(bool has_row, Step());
    if (has_row) return absl::InternalError(absl::StrCat(operation_, ": unexpected row"));
    return absl::OkStatus();
  }

  // Column accessors read the current row; columns are 0-based.
  int64_t ColumnInt64(int column) const { return sqlite3_column_int64(statement_, column); }
  std::string ColumnText(int column) const {
    const unsigned char* text = sqlite3_column_text(statement_, column);
    if (text == nullptr) return "";
    return std::string(reinterpret_cast<const char*>(text),
                       sqlite3_column_bytes(statement_, column));
  }
  // Valid until the next Step.
  absl::string_view ColumnBlob(int column) const {
    const void* data = sqlite3_column_blob(statement_, column);
    if (data == nullptr) return {};  // NULL or an empty blob.
    return absl::string_view(static_cast<const char*>(data),
                            sqlite3_column_bytes(statement_, column));
  }

  const std::string& operation() const { return operation_; }

 private:
  SqliteStatement(sqlite3* db, sqlite3_stmt* statement, std::string operation)
      : db_(db), statement_(statement), operation_(std::move(operation)) {}

  absl::Status Check(int result) const {
    if (result == SQLITE_OK) return absl::OkStatus();
    return SqliteError(db_, result, operation_);
  }

  sqlite3* db_;               // Not owned.
  sqlite3_stmt* statement_;  // Owned; null when moved from.
  std::string operation_;    // What the statement is for, for error messages.
};

// An open connection; closed on destruction.
class SqliteDatabase {
 public:
  // Opens an existing database file without writing to it.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> OpenReadOnly(const std::string& path) {
    sqlite3* handle = nullptr;
    const int result = sqlite3_open_v2(path.c_str(), &handle, SQLITE_OPEN_READONLY,
                                       /*zVfs=*/nullptr);
    auto database = std::unique_ptr<SqliteDatabase>(new SqliteDatabase(handle));
    if (result != SQLITE_OK) return SqliteError(handle, result, absl::StrCat("opening ", path));
    sqlite3_extended_result_codes(handle, 1);
    sqlite3_busy_timeout(handle, kBusyTimeoutMs);
    return database;
  }

  // Opens (creating if needed) the database file, and its parent directories.
  static absl::StatusOr<std::unique_ptr<SqliteDatabase>> Open(const std::string& path) {
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) {
      std::error_code error;
      std::filesystem::create_directories(parent, error);
      if (error) {
        return absl::FailedPreconditionError(absl::StrCat(
            "creating directory ", parent.string(), " for the database: ", error.message()));
      }
    }
    sqlite3* handle = nullptr;
    // NOMUTEX: ExperimentStore's mutex already keeps the connection to one thread at a time.
    int result = sqlite3_open_v2(
        path.c_str(), &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
        /*zVfs=*/nullptr);
    // SQLite hands back a connection (holding the error message) even when opening fails.
    auto database = std::unique_ptr<SqliteDatabase>(new SqliteDatabase(handle));
    if (result != SQLITE_OK) {
      return SqliteError(handle, result, absl::StrCat("opening ", path));
    }
    sqlite3_extended_result_codes(handle, 1);
    sqlite3_busy_timeout(handle, kBusyTimeoutMs);
    return database;
  }

  SqliteDatabase(SqliteDatabase&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  SqliteDatabase& operator=(SqliteDatabase&& other) noexcept {
    if (this != &other) {
      sqlite3_close_v2(handle_);
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  SqliteDatabase(const SqliteDatabase&) = delete;
  SqliteDatabase& operator=(const SqliteDatabase&) = delete;
  // close_v2 (unlike close) cannot fail for statements still alive: it closes after them.
  ~SqliteDatabase() { sqlite3_close_v2(handle_); }

  sqlite3* handle() const { return handle_; }

  absl::StatusOr<SqliteStatement> Prepare(absl::string_view sql, std::string operation) {
    return SqliteStatement::Prepare(handle_, sql, std::move(operation));
  }

  // Runs `sql`, one or more statements that return no rows.
  absl::Status Execute(const std::string& sql, absl::string_view operation) {
    int result = sqlite3_exec(handle_, sql.c_str(), /*callback=*/nullptr, /*arg=*/nullptr,
                              /*errmsg=*/nullptr);
    if (result != SQLITE_OK) return SqliteError(handle_, result, operation);
    return absl::OkStatus();
  }

  // The first column of the single row `sql` returns.
  absl::StatusOr<int64_t> QueryInt64(absl::string_view sql, std::string operation) {
    ASSIGN_OR_RETURN(SqliteStatement statement, Prepare(sql, std::move(operation)));
    ASSIGN_OR_RETURN(bool has_row, statement.Step());
    if (!has_row) return absl::InternalError(absl::StrCat(statement.operation(), ": no row"));
    return statement.ColumnInt64(0);
  }
  absl::StatusOr<std::string> QueryText(absl::string_view sql, std::string operation) {
    ASSIGN_OR_RETURN(SqliteStatement statement, Prepare(sql, std::move(operation)));
    ASSIGN_OR_RETURN(bool has_row, statement.Step());
    if (!has_row) return absl::InternalError(absl::StrCat(statement.operation(), ": no row"));
    return statement.ColumnText(0);
  }

 private:
  explicit SqliteDatabase(sqlite3* handle) : handle_(handle) {}

  sqlite3* handle_;  // Owned; null when moved from.
};

namespace {

// A write transaction, rolled back on destruction unless committed.
class Transaction {
 public:
  // IMMEDIATE takes the write lock up front, so that a busy database makes the transaction
  // wait (busy_timeout) at its start instead of failing a read-to-write upgrade midway.
  static absl::StatusOr<Transaction> Begin(SqliteDatabase& database, absl::string_view operation) {
    RETURN_IF_ERROR(
        database.Execute("BEGIN IMMEDIATE", absl::StrCat("starting transaction for ", operation)));
    return Transaction(&database, operation);
  }

  Transaction(Transaction&& other) noexcept
      : database_(std::exchange(other.database_, nullptr)),
        operation_(std::move(other.operation_)) {}
  Transaction& operator=(Transaction&&) = delete;
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  ~Transaction() {
    // A failed COMMIT can leave the transaction open, and some errors end it by themselves:
    // roll back exactly when one is still open. Errors are ignored (destructors never throw),
    // and SQLite rolls back an unfinished transaction on the next open anyway.
    if (database_ != nullptr && sqlite3_get_autocommit(database_->handle()) == 0) {
      sqlite3_exec(database_->handle(), "ROLLBACK", nullptr, nullptr, nullptr);
    }
  }

  // With synchronous=FULL the WAL is synced before COMMIT returns: the write is durable.
  absl::Status Commit() {
    RETURN_IF_ERROR(
        database_->Execute("COMMIT", absl::StrCat("committing transaction for ", operation_)));
    database_ = nullptr;
    return absl::OkStatus();
  }

 private:
  Transaction(SqliteDatabase* database, absl::string_view operation)
      : database_(database), operation_(operation) {}

  SqliteDatabase* database_;  // Not owned; null once committed or moved from.
  std::string operation_;
};

// Added after schema version 1, idempotent, run at every open: older binaries ignore the table.
constexpr char kAuditSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  time_unix_ns INTEGER NOT NULL,
  actor TEXT NOT NULL,
  on_behalf_of TEXT NOT NULL,
  action TEXT NOT NULL,
  experiment_id TEXT NOT NULL,
  detail TEXT NOT NULL,
  authenticated_by TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS audit_by_actor ON audit (actor, id);
)sql";

// Added after schema version 1 like the audit table: GPUs drained by a hardware fault.
constexpr char kGpuHealthSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS drained_gpus (
  uuid TEXT PRIMARY KEY NOT NULL,
  gpu_index INTEGER NOT NULL,
  since_unix_ns INTEGER NOT NULL,
  xid INTEGER NOT NULL,
  reason TEXT NOT NULL
) WITHOUT ROWID;
)sql";

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS experiments (
  -- Submission order. AUTOINCREMENT: numbers, and so ids, are never reused.
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE NOT NULL,
  -- Copies of proto fields, kept in sync with it, for filtering.
  user TEXT NOT NULL,
  state INTEGER NOT NULL,
  workload INTEGER NOT NULL,
  created_unix_ns INTEGER NOT NULL,
  -- The gpuprof.v1.Experiment, serialized.
  proto BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS experiments_by_state ON experiments (state, seq);
CREATE INDEX IF NOT EXISTS experiments_by_user ON experiments (user, seq);
CREATE TABLE IF NOT EXISTS events (
  experiment_id TEXT NOT NULL REFERENCES experiments (id),
  seq INTEGER NOT NULL,
  -- The gpuprof.v1.ExperimentEvent, serialized.
  proto BLOB NOT NULL,
  PRIMARY KEY (experiment_id, seq)
) WITHOUT ROWID;
)sql";

// Added with sweeps: applied to every database at open (additive, idempotent).
constexpr char kSweepSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS sweeps (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE NOT NULL,
  user TEXT NOT NULL,
  state INTEGER NOT NULL,
  created_unix_ns INTEGER NOT NULL,
  -- The gpuprof.v1.Sweep, serialized, with its points.
  proto BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS sweeps_by_state ON sweeps (state, seq);
CREATE TABLE IF NOT EXISTS sweep_events (
  sweep_id TEXT NOT NULL REFERENCES sweeps (id),
  seq INTEGER NOT NULL,
  proto BLOB NOT NULL,
  PRIMARY KEY (sweep_id, seq)
) WITHOUT ROWID;
-- Which experiments run a sweep's points; written with the experiment, in its transaction.
CREATE TABLE IF NOT EXISTS sweep_points (
  sweep_id TEXT NOT NULL REFERENCES sweeps (id),
  point_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  experiment_id TEXT NOT NULL REFERENCES experiments (id),
  PRIMARY KEY (sweep_id, point_index, attempt)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS baselines (
  name TEXT PRIMARY KEY NOT NULL,
  -- The gpuprof.v1.Baseline, serialized.
  proto BLOB NOT NULL
) WITHOUT ROWID;
)sql";

constexpr char kNextSweepNumberSql[] = R"sql(
SELECT MAX(
  COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'sweeps'), 0),
  COALESCE((SELECT MAX(seq) FROM sweeps), 0)) + 1
)sql";

// The number the next experiment gets: AUTOINCREMENT's own rule (one past the largest ever
// used, as sqlite_sequence remembers it), computed up front because the id is derived from it.
constexpr char kNextExperimentNumberSql[] = R"sql(
SELECT MAX(
  COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'experiments'), 0),
  COALESCE((SELECT MAX(seq) FROM experiments), 0)) + 1
)sql";

constexpr char kPageTokenPrefix[] = "before-seq:";

std::string ExperimentId(int64_t number) { return absl::StrFormat("exp-%06d", number); }
std::string SweepId(int64_t number) { return absl::StrFormat("swp-%06d", number); }

int64_t UnixNanos(const google::protobuf::Timestamp& time) {
  return time.seconds() * 1'000'000'000 + time.nanos();
}

// The page token is the submission number of the page's last (oldest) experiment; the next
// page holds the ones submitted before it. Base64 keeps clients from relying on its form.
std::string EncodePageToken(int64_t last_seq) {
  return absl::WebSafeBase64Escape(absl::StrCat(kPageTokenPrefix, last_seq));
}

absl::StatusOr<int64_t> DecodePageToken(const std::string& page_token) {
  std::string decoded;
  int64_t last_seq = 0;
  absl::string_view number;
  if (absl::WebSafeBase64Unescape(page_token, &decoded)) number = decoded;
  if (!absl::ConsumePrefix(&number, kPageTokenPrefix) || !absl::SimpleAtoi(number, &last_seq) ||
      last_seq <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid page_token \"", page_token, "\": pass the next_page_token of a previous page"));
  }
  return last_seq;
}

absl::Status ParseStored(absl::string_view bytes, google::protobuf::Message& message,
                         absl::string_view what) {
  if (!message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat("stored ", what, " does not parse"));
  }
  return absl::OkStatus();
}

absl::Status InsertEvent(SqliteDatabase& database, const v1::ExperimentEvent& event) {
  ASSIGN_OR_RETURN(SqliteStatement statement,
                   database.Prepare("INSERT INTO events (experiment_id, seq, proto) "
                                    "VALUES (?1, ?2, ?3)",
                                    "inserting event"));
  RETURN_IF_ERROR(statement.BindText(1, event.experiment_id()));
  RETURN_IF_ERROR(statement.BindInt64(2, event.seq()));
  RETURN_IF_ERROR(statement.BindBlob(3, event.SerializeAsString()));
  absl::Status status = statement.Run();
  if (absl::IsAlreadyExists(status)) {
    return absl::AlreadyExistsError(absl::StrCat("experiment ", event.experiment_id(),
                                                 " already has an event with seq ", event.seq()));
  }
  return status;
}

absl::Status InsertAudit(SqliteDatabase& database, const v1::AuditEntry& entry) {
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   database.Prepare("INSERT INTO audit (time_unix_ns, actor, on_behalf_of, "
                                    "action, experiment_id, detail, authenticated_by) VALUES "
                                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                    "recording an audit entry"));
  RETURN_IF_ERROR(insert.BindInt64(1, UnixNanos(entry.time())));
  RETURN_IF_ERROR(insert.BindText(2, entry.actor()));
  RETURN_IF_ERROR(insert.BindText(3, entry.on_behalf_of()));
  RETURN_IF_ERROR(insert.BindText(4, entry.action()));
  RETURN_IF_ERROR(insert.BindText(5, entry.experiment_id()));
  RETURN_IF_ERROR(insert.BindText(6, entry.detail()));
  RETURN_IF_ERROR(insert.BindText(7, entry.authenticated_by()));
  return insert.Run();
}

// Baselines got owners after they were introduced: an older table gets the column, and its rows
// an empty owner (nobody's; only admins may change them). Idempotent, run at every open.
absl::Status AddBaselineOwnerColumn(SqliteDatabase& database) {
  ASSIGN_OR_RETURN(int64_t has_owner,
                   database.QueryInt64("SELECT count(*) FROM pragma_table_info('baselines') "
                                       "WHERE name = 'owner'",
                                       "checking the baselines table"));
  if (has_owner > 0) return absl::OkStatus();
  return database.Execute("ALTER TABLE baselines ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
                          "adding the baselines' owner column");
}

// Binds the experiment's filter columns and proto to parameters ?1 .. ?5.
absl::Status BindExperimentColumns(SqliteStatement& statement,
                                   const v1::Experiment& experiment) {
  RETURN_IF_ERROR(statement.BindText(1, experiment.user()));
  RETURN_IF_ERROR(statement.BindInt64(2, experiment.state()));
  RETURN_IF_ERROR(statement.BindInt64(3, experiment.workload()));
  RETURN_IF_ERROR(statement.BindInt64(4, UnixNanos(experiment.created())));
  return statement.BindBlob(5, experiment.SerializeAsString());
}

// Reads PRAGMA user_version, refusing a schema newer than this code knows.
absl::StatusOr<int64_t> CheckSchemaVersion(SqliteDatabase& database, const std::string& path) {
  ASSIGN_OR_RETURN(int64_t version,
                   database.QueryInt64("PRAGMA user_version", "reading schema version"));
  if (version > ExperimentStore::kSchemaVersion) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s has schema version %d, newer than version %d that this gpuprofd "
        "understands: run a newer gpuprofd, or point this one at another database",
        path, version, ExperimentStore::kSchemaVersion));
  }
  return version;
}

// Marks the file as gpuprof's (PRAGMA application_id, "GPPF"), so that another
// application's SQLite file given as --db is recognised and refused.
constexpr int64_t kApplicationId = 0x47505046;

// What to do about a database gpuprofd must not use; ends every refusal message.
constexpr char kRefusalAdvice[] =
    "gpuprofd does not start on it, so that no stored experiment is silently lost or "
    "overwritten. Run `gpuprofd --check-db --db PATH` for a full check; restore the file from a "
    "backup, or move it aside to start with an empty database";

// A failed read of the file's header or pages, restated for whoever reads the log.
absl::Status ExplainUnreadable(const absl::Status& status, const std::string& path) {
  if (!absl::IsDataLoss(status)) return status;
  return absl::DataLossError(absl::StrCat("database ", path,
                                          " is damaged or not an SQLite database (", status.message(),
                                          "). ", kRefusalAdvice));
}

// Refuses a file that is not gpuprof's: another application's id, or tables without our schema
// version. Reads only.
absl::Status CheckIdentity(SqliteDatabase& database, const std::string& path) {
  ASSIGN_OR_RETURN(int64_t application_id,
                   database.QueryInt64("PRAGMA application_id", "reading application id"));
  ASSIGN_OR_RETURN(int64_t version,
                   database.QueryInt64("PRAGMA user_version", "reading schema version"));
  ASSIGN_OR_RETURN(int64_t tables,
                   database.QueryInt64("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                       "AND name NOT LIKE 'sqlite_%'",
                                       "listing tables"));
  if (application_id != 0 && application_id != kApplicationId) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s belongs to another application (SQLite application_id 0x%08x, gpuprof's "
        "is 0x%08x). %s",
        path, application_id, kApplicationId, kRefusalAdvice));
  }
  if (version == 0 && tables > 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s holds %d tables but no gpuprof schema: it is another application's "
        "database. %s",
        path, tables, kRefusalAdvice));
  }
  if (version > 0) {
    for (const char* table : {"experiments", "events"}) {
      ASSIGN_OR_RETURN(int64_t found,
                       database.QueryInt64(absl::StrCat("SELECT count(*) FROM sqlite_master WHERE "
                                                        "type = 'table' AND name = '",
                                                        table, "'"),
                                           "checking the schema"));
      if (found == 0) {
        return absl::DataLossError(absl::StrFormat(
            "database %s has gpuprof schema version %d but no table '%s'. %s", path, version,
            table, kRefusalAdvice));
      }
    }
  }
  return absl::OkStatus();
}

// PRAGMA quick_check (pages and b-trees, O(size), no index contents) or integrity_check (also
// every index against its table). OK, or DataLoss quoting the first problems SQLite found.
absl::Status CheckPages(SqliteDatabase& database, const std::string& path, bool full) {
  ASSIGN_OR_RETURN(SqliteStatement check,
                   database.Prepare(full ? "PRAGMA integrity_check(20)" : "PRAGMA quick_check(20)",
                                    "checking the database's integrity"));
  std::vector<std::string> problems;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, check.Step());
    if (!has_row) break;
    std::string line = check.ColumnText(0);
    if (line != "ok") problems.push_back(std::move(line));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::DataLossError(absl::StrCat("database ", path, " is damaged: ",
                                          absl::StrJoin(problems, "; "), ". ", kRefusalAdvice));
}

}  // namespace
}  // namespace experiment_store_internal

using experiment_store_internal::BindExperimentColumns;
using experiment_store_internal::CheckIdentity;
using experiment_store_internal::CheckPages;
using experiment_store_internal::CheckSchemaVersion;
using experiment_store_internal::ExplainUnreadable;
using experiment_store_internal::kApplicationId;
using experiment_store_internal::DecodePageToken;
using experiment_store_internal::EncodePageToken;
using experiment_store_internal::ExperimentId;
using experiment_store_internal::AddBaselineOwnerColumn;
using experiment_store_internal::InsertAudit;
using experiment_store_internal::InsertEvent;
using experiment_store_internal::kNextExperimentNumberSql;
using experiment_store_internal::kNextSweepNumberSql;
using experiment_store_internal::kAuditSchema;
using experiment_store_internal::kGpuHealthSchema;
using experiment_store_internal::UnixNanos;
using experiment_store_internal::kSchema;
using experiment_store_internal::kSweepSchema;
using experiment_store_internal::SweepId;
using experiment_store_internal::ParseStored;
using experiment_store_internal::SqliteDatabase;
using experiment_store_internal::SqliteStatement;
using experiment_store_internal::Transaction;

absl::StatusOr<std::unique_ptr<ExperimentStore>> ExperimentStore::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> database, SqliteDatabase::Open(path));
  // Refuse a newer schema, another application's file or a damaged one before changing
  // anything in it.
  RETURN_IF_ERROR(ExplainUnreadable(CheckSchemaVersion(*database, path).status(), path));
  RETURN_IF_ERROR(ExplainUnreadable(CheckIdentity(*database, path), path));
  RETURN_IF_ERROR(ExplainUnreadable(CheckPages(*database, path, /*full=*/false), path));

  // The journal mode is stored in the file; it cannot change inside a transaction.
  ASSIGN_OR_RETURN(std::string journal_mode,
                   database->QueryText("PRAGMA journal_mode = WAL", "enabling WAL"));
  if (journal_mode != "wal") {
    return absl::FailedPreconditionError(absl::StrCat(
        "database ", path, " cannot use write-ahead logging (journal mode is ", journal_mode,
        "); put it on a local file system"));
  }
  // FULL syncs the WAL at every commit. NORMAL would survive a killed daemon too, but can lose
  // the last acknowledged commits on power loss.
  RETURN_IF_ERROR(database->Execute("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
                                    "configuring connection"));
  {
    ASSIGN_OR_RETURN(Transaction transaction, Transaction::Begin(*database, "creating schema"));
    // Checked again under the write lock: another process may have created or upgraded it.
    ASSIGN_OR_RETURN(int64_t version, CheckSchemaVersion(*database, path));
    if (version < kSchemaVersion) {
      RETURN_IF_ERROR(database->Execute(kSchema, "creating schema"));
      RETURN_IF_ERROR(database->Execute(absl::StrCat("PRAGMA user_version = ", kSchemaVersion),
                                        "setting schema version"));
    }
    RETURN_IF_ERROR(database->Execute(kSweepSchema, "creating the sweep tables"));
    RETURN_IF_ERROR(AddBaselineOwnerColumn(*database));
    // Databases created before the id was introduced get it on their next start.
    RETURN_IF_ERROR(database->Execute(absl::StrCat("PRAGMA application_id = ", kApplicationId),
                                      "setting application id"));
    RETURN_IF_ERROR(database->Execute(kAuditSchema, "creating the audit table"));
    RETURN_IF_ERROR(database->Execute(kGpuHealthSchema, "creating the GPU health table"));
    RETURN_IF_ERROR(transaction.Commit());
  }
  // Reads go through a second connection: in WAL mode they see the last commit without
  // waiting for the writer's transaction and fsync.
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> reader, SqliteDatabase::Open(path));
  RETURN_IF_ERROR(reader->Execute("PRAGMA query_only = ON", "configuring the read connection"));
  return std::unique_ptr<ExperimentStore>(
      new ExperimentStore(std::move(database), std::move(reader)));
}

absl::StatusOr<std::string> ExperimentStore::CheckDatabase(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("database ", path, " does not exist"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> database, SqliteDatabase::OpenReadOnly(path));
  auto check = [&]() -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(int64_t version, CheckSchemaVersion(*database, path));
    RETURN_IF_ERROR(CheckIdentity(*database, path));
    RETURN_IF_ERROR(CheckPages(*database, path, /*full=*/true));
    if (version == 0) {
      return absl::StrCat("database ", path, " is intact and holds no experiments yet");
    }
    // Every stored message must parse too: SQLite checks pages, not what is in the blobs.
    int64_t experiments = 0;
    int64_t events = 0;
    for (auto [table, count] : {std::pair{"experiments", &experiments}, {"events", &events}}) {
      ASSIGN_OR_RETURN(SqliteStatement select,
                       database->Prepare(absl::StrCat("SELECT proto FROM ", table),
                                         absl::StrCat("reading ", table)));
      v1::Experiment experiment;
      v1::ExperimentEvent event;
      google::protobuf::Message& message =
          std::string_view(table) == "events" ? static_cast<google::protobuf::Message&>(event)
                                              : experiment;
      while (true) {
        ASSIGN_OR_RETURN(bool has_row, select.Step());
        if (!has_row) break;
        ++*count;
        RETURN_IF_ERROR(ParseStored(select.ColumnBlob(0), message,
                                    absl::StrCat("row ", *count, " of table ", table)));
      }
    }
    // The sweep tables are added at start-up to databases older than sweeps; one that has not
    // been opened by such a daemon yet has none, which is fine.
    int64_t sweeps = 0;
    int64_t sweep_events = 0;
    int64_t baselines = 0;
    v1::Sweep sweep;
    v1::SweepEvent sweep_event;
    v1::Baseline baseline;
    for (auto [table, count, message] :
         {std::tuple<const char*, int64_t*, google::protobuf::Message*>{"sweeps", &sweeps, &sweep},
          {"sweep_events", &sweep_events, &sweep_event},
          {"baselines", &baselines, &baseline}}) {
      ASSIGN_OR_RETURN(int64_t present,
                       database->QueryInt64(absl::StrCat("SELECT count(*) FROM sqlite_master WHERE "
                                                         "type = 'table' AND name = '",
                                                         table, "'"),
                                            "checking the schema"));
      if (present == 0) continue;
      ASSIGN_OR_RETURN(SqliteStatement select,
                       database->Prepare(absl::StrCat("SELECT proto FROM ", table),
                                         absl::StrCat("reading ", table)));
      while (true) {
        ASSIGN_OR_RETURN(bool has_row, select.Step());
        if (!has_row) break;
        ++*count;
        RETURN_IF_ERROR(ParseStored(select.ColumnBlob(0), *message,
                                    absl::StrCat("row ", *count, " of table ", table)));
      }
    }
    return absl::StrFormat(
        "database %s is intact: schema version %d, %d experiments, %d events, %d sweeps, %d "
        "sweep events, %d baselines",
        path, version, experiments, events, sweeps, sweep_events, baselines);
  };
  absl::StatusOr<std::string> verdict = check();
  if (!verdict.ok()) return ExplainUnreadable(verdict.status(), path);
  return verdict;
}

ExperimentStore::ExperimentStore(std::unique_ptr<SqliteDatabase> database,
                                 std::unique_ptr<SqliteDatabase> reader)
    : database_(std::move(database)), reader_(std::move(reader)) {}

ExperimentStore::~ExperimentStore() = default;

struct ExperimentStore::PendingWrite {
  absl::string_view operation;
  const std::function<absl::Status()>* write;
  absl::Status result;
  bool done = false;
};

absl::Status ExperimentStore::CommitWrite(absl::string_view operation,
                                          const std::function<absl::Status()>& write) {
  PendingWrite pending{operation, &write};
  absl::MutexLock queue_lock(&queue_mutex_);
  queue_.push_back(&pending);
  while (!pending.done) {
    if (committing_) {
      // Another thread is committing; this write goes into the next batch.
      batch_committed_.Wait(&queue_mutex_);
      continue;
    }
    // Commit everything queued so far, this write included, as one transaction.
    committing_ = true;
    std::vector<PendingWrite*> batch;
    batch.swap(queue_);
    queue_mutex_.Unlock();
    CommitBatch(batch);
    queue_mutex_.Lock();
    for (PendingWrite* write_in_batch : batch) write_in_batch->done = true;
    committing_ = false;
    batch_committed_.SignalAll();
  }
  return pending.result;
}

void ExperimentStore::CommitBatch(const std::vector<PendingWrite*>& batch) {
  absl::MutexLock lock(&mutex_);
  const std::string operation =
      batch.size() == 1 ? std::string(batch[0]->operation)
                        : absl::StrCat(batch.size(), " writes (", batch[0]->operation, ", ...)");
  absl::StatusOr<Transaction> transaction = Transaction::Begin(*database_, operation);
  if (!transaction.ok()) {
    for (PendingWrite* pending : batch) pending->result = transaction.status();
    return;
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    PendingWrite& pending = *batch[i];
    pending.result = database_->Execute("SAVEPOINT write", "starting a write");
    if (pending.result.ok()) pending.result = (*pending.write)();
    if (sqlite3_get_autocommit(database_->handle()) != 0) {
      // Some errors (a full disk, I/O) make SQLite roll the whole transaction back: every
      // write of the batch is undone, the ones before this one included.
      const absl::Status undone =
          pending.result.ok() ? absl::InternalError("the transaction ended unexpectedly")
                              : pending.result;
      for (PendingWrite* other : batch) other->result = undone;
      return;
    }
    if (!pending.result.ok()) {
      (void)database_->Execute("ROLLBACK TO write", "undoing a failed write");
    }
    (void)database_->Execute("RELEASE write", "ending a write");
  }
  // With synchronous=FULL the commit is durable when it returns: only now are the writes
  // acknowledged.
  const absl::Status committed = transaction->Commit();
  if (!committed.ok()) {
    for (PendingWrite* pending : batch) {
      if (pending->result.ok()) pending->result = committed;
    }
  }
}

absl::StatusOr<std::string> ExperimentStore::Create(v1::Experiment experiment,
                                                    v1::ExperimentEvent first_event,
                                                    const v1::AuditEntry* audit) {
  if (audit == nullptr) {
    std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> one;
    one.emplace_back(std::move(experiment), std::move(first_event));
    ASSIGN_OR_RETURN(std::vector<std::string> ids, CreateMany(std::move(one)));
    return ids.front();
  }
  if (first_event.seq() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("creating an experiment: the first event needs a positive seq, not ",
                     first_event.seq()));
  }
  // The audit entry shares the experiment's savepoint: one commit, and never one without the
  // other.
  std::string id;
  const std::function<absl::Status()> write = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(id, CreateInTransaction(experiment, first_event));
    v1::AuditEntry entry = *audit;
    entry.set_experiment_id(id);
    return InsertAudit(*database_, entry);
  };
  RETURN_IF_ERROR(CommitWrite("creating an experiment", write));
  return id;
}

absl::StatusOr<std::vector<std::string>> ExperimentStore::CreateMany(
    std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> experiments) {
  for (const auto& [experiment, first_event] : experiments) {
    if (first_event.seq() <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("creating an experiment: the first event needs a positive seq, not ",
                       first_event.seq()));
    }
  }
  // All of them in one savepoint of a group commit: stored together or not at all, and
  // acknowledged only once the transaction carrying them has committed.
  std::vector<std::string> ids;
  const std::function<absl::Status()> write = [&]() -> absl::Status {
    ids.clear();
    for (auto& [experiment, first_event] : experiments) {
      ASSIGN_OR_RETURN(std::string id, CreateInTransaction(experiment, first_event));
      ids.push_back(std::move(id));
    }
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(CommitWrite(experiments.size() == 1
                                  ? "creating an experiment"
                                  : absl::StrCat("creating ", experiments.size(), " experiments"),
                              write));
  return ids;
}

absl::StatusOr<std::string> ExperimentStore::CreateInTransaction(
    v1::Experiment& experiment, v1::ExperimentEvent& first_event) {
  ASSIGN_OR_RETURN(int64_t number,
                   database_->QueryInt64(kNextExperimentNumberSql, "choosing an experiment id"));
  std::string id = ExperimentId(number);
  experiment.set_id(id);
  first_event.set_experiment_id(id);

  ASSIGN_OR_RETURN(SqliteStatement insert,
                   database_->Prepare("INSERT INTO experiments "
                                      "(user, state, workload, created_unix_ns, proto, seq, id) "
                                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                      absl::StrCat("inserting experiment ", id)));
  RETURN_IF_ERROR(BindExperimentColumns(insert, experiment));
  RETURN_IF_ERROR(insert.BindInt64(6, number));
  RETURN_IF_ERROR(insert.BindText(7, id));
  RETURN_IF_ERROR(insert.Run());
  RETURN_IF_ERROR(InsertEvent(*database_, first_event));
  if (!experiment.sweep_id().empty()) {
    ASSIGN_OR_RETURN(
        SqliteStatement link,
        database_->Prepare("INSERT INTO sweep_points (sweep_id, point_index, attempt, "
                           "experiment_id) VALUES (?1, ?2, (SELECT COUNT(*) + 1 FROM "
                           "sweep_points WHERE sweep_id = ?1 AND point_index = ?2), ?3)",
                           absl::StrCat("linking ", id, " to sweep ", experiment.sweep_id())));
    RETURN_IF_ERROR(link.BindText(1, experiment.sweep_id()));
    RETURN_IF_ERROR(link.BindInt64(2, experiment.sweep_point()));
    RETURN_IF_ERROR(link.BindText(3, id));
    RETURN_IF_ERROR(link.Run());
  }
  return id;
}

absl::Status ExperimentStore::Update(const v1::Experiment& experiment,
                                     const v1::ExperimentEvent& event,
                                     const v1::AuditEntry* audit) {
  return CommitWrite(absl::StrCat("updating ", experiment.id()), [&]() -> absl::Status {
    RETURN_IF_ERROR(UpdateInTransaction(experiment, event));
    return audit == nullptr ? absl::OkStatus() : InsertAudit(*database_, *audit);
  });
}

absl::Status ExperimentStore::UpdateMany(
    const std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>>& updates) {
  if (updates.empty()) return absl::OkStatus();
  return CommitWrite(absl::StrCat("updating ", updates.size(), " experiments"), [&]() {
    for (const auto& [experiment, event] : updates) {
      RETURN_IF_ERROR(UpdateInTransaction(experiment, event));
    }
    return absl::OkStatus();
  });
}

absl::Status ExperimentStore::UpdateInTransaction(const v1::Experiment& experiment,
                                                  const v1::ExperimentEvent& event) {
  const std::string& id = experiment.id();
  if (id.empty()) return absl::InvalidArgumentError("updating an experiment without an id");
  if (!event.experiment_id().empty() && event.experiment_id() != id) {
    return absl::InvalidArgumentError(absl::StrCat("updating experiment ", id,
                                                   " with an event of experiment ",
                                                   event.experiment_id()));
  }
  ASSIGN_OR_RETURN(SqliteStatement update,
                   database_->Prepare("UPDATE experiments SET user = ?1, state = ?2, "
                                      "workload = ?3, created_unix_ns = ?4, proto = ?5 "
                                      "WHERE id = ?6",
                                      absl::StrCat("updating experiment ", id)));
  RETURN_IF_ERROR(BindExperimentColumns(update, experiment));
  RETURN_IF_ERROR(update.BindText(6, id));
  RETURN_IF_ERROR(update.Run());
  if (sqlite3_changes(database_->handle()) == 0) {
    return absl::NotFoundError(absl::StrCat("experiment ", id, " not found"));
  }

  if (event.seq() <= 0) return absl::OkStatus();
  if (event.experiment_id().empty()) {
    v1::ExperimentEvent event_with_id = event;
    event_with_id.set_experiment_id(id);
    return InsertEvent(*database_, event_with_id);
  }
  return InsertEvent(*database_, event);
}

absl::StatusOr<v1::Experiment> ExperimentStore::Get(const std::string& id) {
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT proto FROM experiments WHERE id = ?1",
                                      absl::StrCat("reading experiment ", id)));
  RETURN_IF_ERROR(select.BindText(1, id));
  ASSIGN_OR_RETURN(bool found, select.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("experiment ", id, " not found"));
  v1::Experiment experiment;
  RETURN_IF_ERROR(ParseStored(select.ColumnBlob(0), experiment, absl::StrCat("experiment ", id)));
  return experiment;
}

absl::StatusOr<std::vector<v1::ExperimentEvent>> ExperimentStore::Events(const std::string& id,
                                                                         int64_t from_seq) {
  absl::MutexLock lock(&read_mutex_);
  {
    ASSIGN_OR_RETURN(SqliteStatement exists,
                     reader_->Prepare("SELECT 1 FROM experiments WHERE id = ?1",
                                        absl::StrCat("looking up experiment ", id)));
    RETURN_IF_ERROR(exists.BindText(1, id));
    ASSIGN_OR_RETURN(bool found, exists.Step());
    if (!found) return absl::NotFoundError(absl::StrCat("experiment ", id, " not found"));
  }
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT seq, proto FROM events "
                                      "WHERE experiment_id = ?1 AND seq >= ?2 ORDER BY seq",
                                      absl::StrCat("reading events of experiment ", id)));
  RETURN_IF_ERROR(select.BindText(1, id));
  RETURN_IF_ERROR(select.BindInt64(2, from_seq));
  std::vector<v1::ExperimentEvent> events;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    RETURN_IF_ERROR(ParseStored(select.ColumnBlob(1), events.emplace_back(),
                                absl::StrCat("event ", select.ColumnInt64(0), " of ", id)));
  }
  return events;
}

absl::StatusOr<ExperimentPage> ExperimentStore::List(const ExperimentFilter& filter,
                                                     int page_size,
                                                     const std::string& page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must not be negative, got ", page_size));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  if (page_size > kMaxPageSize) page_size = kMaxPageSize;
  int64_t before_seq = 0;  // 0: from the newest.
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(before_seq, DecodePageToken(page_token));
  }

  // Built from fixed fragments only; every value is a bound parameter.
  std::vector<std::string> conditions;
  if (!filter.user.empty()) conditions.push_back("user = ?");
  if (!filter.states.empty()) {
    std::vector<std::string> placeholders(filter.states.size(), "?");
    conditions.push_back(absl::StrCat("state IN (", absl::StrJoin(placeholders, ", "), ")"));
  }
  if (filter.workload != v1::WORKLOAD_UNSPECIFIED) conditions.push_back("workload = ?");
  if (before_seq > 0) conditions.push_back("seq < ?");
  std::string sql = "SELECT seq, proto FROM experiments";
  if (!conditions.empty()) absl::StrAppend(&sql, " WHERE ", absl::StrJoin(conditions, " AND "));
  // One row more than the page tells whether another page follows.
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT ?");

  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select, reader_->Prepare(sql, "listing experiments"));
  int parameter = 0;
  if (!filter.user.empty()) RETURN_IF_ERROR(select.BindText(++parameter, filter.user));
  for (v1::ExperimentState state : filter.states) {
    RETURN_IF_ERROR(select.BindInt64(++parameter, state));
  }
  if (filter.workload != v1::WORKLOAD_UNSPECIFIED) {
    RETURN_IF_ERROR(select.BindInt64(++parameter, filter.workload));
  }
  if (before_seq > 0) RETURN_IF_ERROR(select.BindInt64(++parameter, before_seq));
  RETURN_IF_ERROR(select.BindInt64(++parameter, page_size + 1));

  ExperimentPage page;
  int64_t last_seq = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    if (static_cast<int>(page.experiments.size()) == page_size) {
      page.next_page_token = EncodePageToken(last_seq);
      break;
    }
    last_seq = select.ColumnInt64(0);
    v1::Experiment& experiment = page.experiments.emplace_back();
    RETURN_IF_ERROR(ParseStored(select.ColumnBlob(1), experiment,
                                absl::StrCat("experiment number ", last_seq)));
    // Keep the figures a listing shows; the provenance (GPU inventory, request) is the bulk.
    experiment.mutable_result()->clear_provenance();
  }
  return page;
}

absl::StatusOr<std::vector<v1::Experiment>> ExperimentStore::ListByState(
    v1::ExperimentState state) {
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT seq, proto FROM experiments WHERE state = ?1 "
                                      "ORDER BY seq",
                                      absl::StrCat("listing experiments in state ",
                                                   v1::ExperimentState_Name(state))));
  RETURN_IF_ERROR(select.BindInt64(1, state));
  std::vector<v1::Experiment> experiments;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    RETURN_IF_ERROR(ParseStored(select.ColumnBlob(1), experiments.emplace_back(),
                                absl::StrCat("experiment number ", select.ColumnInt64(0))));
  }
  return experiments;
}

absl::StatusOr<std::string> ExperimentStore::CreateSweep(v1::Sweep sweep,
                                                         v1::SweepEvent first_event) {
  if (first_event.seq() <= 0) {
    return absl::InvalidArgumentError("creating a sweep: the first event needs a positive seq");
  }
  // Through the group commit: acknowledged only once its transaction has committed.
  std::string id;
  const std::function<absl::Status()> write = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(int64_t number,
                     database_->QueryInt64(kNextSweepNumberSql, "choosing a sweep id"));
    id = SweepId(number);
    sweep.set_id(id);
    first_event.set_sweep_id(id);
    if (first_event.has_created()) first_event.mutable_created()->set_id(id);
    ASSIGN_OR_RETURN(SqliteStatement insert,
                     database_->Prepare("INSERT INTO sweeps (seq, id, user, state, "
                                        "created_unix_ns, proto) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                                        absl::StrCat("inserting sweep ", id)));
    RETURN_IF_ERROR(insert.BindInt64(1, number));
    RETURN_IF_ERROR(insert.BindText(2, id));
    RETURN_IF_ERROR(insert.BindText(3, sweep.user()));
    RETURN_IF_ERROR(insert.BindInt64(4, sweep.state()));
    RETURN_IF_ERROR(insert.BindInt64(5, UnixNanos(sweep.created())));
    RETURN_IF_ERROR(insert.BindBlob(6, sweep.SerializeAsString()));
    RETURN_IF_ERROR(insert.Run());
    ASSIGN_OR_RETURN(SqliteStatement event,
                     database_->Prepare("INSERT INTO sweep_events (sweep_id, seq, proto) "
                                        "VALUES (?1, ?2, ?3)",
                                        "inserting sweep event"));
    RETURN_IF_ERROR(event.BindText(1, id));
    RETURN_IF_ERROR(event.BindInt64(2, first_event.seq()));
    RETURN_IF_ERROR(event.BindBlob(3, first_event.SerializeAsString()));
    return event.Run();
  };
  RETURN_IF_ERROR(CommitWrite("creating a sweep", write));
  return id;
}

absl::Status ExperimentStore::UpdateSweep(const v1::Sweep& sweep, const v1::SweepEvent& event) {
  return CommitWrite(absl::StrCat("updating ", sweep.id()), [&]() -> absl::Status {
    ASSIGN_OR_RETURN(SqliteStatement update,
                     database_->Prepare("UPDATE sweeps SET state = ?1, proto = ?2 WHERE id = ?3",
                                        absl::StrCat("updating sweep ", sweep.id())));
    RETURN_IF_ERROR(update.BindInt64(1, sweep.state()));
    RETURN_IF_ERROR(update.BindBlob(2, sweep.SerializeAsString()));
    RETURN_IF_ERROR(update.BindText(3, sweep.id()));
    RETURN_IF_ERROR(update.Run());
    if (sqlite3_changes(database_->handle()) == 0) {
      return absl::NotFoundError(absl::StrCat("sweep ", sweep.id(), " not found"));
    }
    if (event.seq() > 0) {
      ASSIGN_OR_RETURN(SqliteStatement insert,
                       database_->Prepare("INSERT INTO sweep_events (sweep_id, seq, proto) "
                                          "VALUES (?1, ?2, ?3)",
                                          "inserting sweep event"));
      RETURN_IF_ERROR(insert.BindText(1, sweep.id()));
      RETURN_IF_ERROR(insert.BindInt64(2, event.seq()));
      RETURN_IF_ERROR(insert.BindBlob(3, event.SerializeAsString()));
      RETURN_IF_ERROR(insert.Run());
    }
    return absl::OkStatus();
  });
}

absl::Status NotStoredError(const absl::Status& stored, absl::string_view what) {
  return absl::Status(
      stored.code(),
      absl::StrCat(what, ": ", stored.message(),
                   absl::IsResourceExhausted(stored)
                       ? ". The disk holding gpuprofd's database is full: free space there "
                         "and submit again (gpuprofd carries on by itself once it can write)"
                       : ""));
}

absl::StatusOr<v1::Sweep> ExperimentStore::GetSweep(const std::string& id) {
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT proto FROM sweeps WHERE id = ?1",
                                      absl::StrCat("reading sweep ", id)));
  RETURN_IF_ERROR(select.BindText(1, id));
  ASSIGN_OR_RETURN(bool found, select.Step());
  if (!found) return absl::NotFoundError(absl::StrCat("sweep ", id, " not found"));
  v1::Sweep sweep;
  RETURN_IF_ERROR(ParseStored(select.ColumnBlob(0), sweep, absl::StrCat("sweep ", id)));
  return sweep;
}

absl::StatusOr<std::vector<v1::SweepEvent>> ExperimentStore::SweepEvents(const std::string& id,
                                                                         int64_t from_seq) {
  absl::MutexLock lock(&read_mutex_);
  {
    ASSIGN_OR_RETURN(SqliteStatement exists,
                     reader_->Prepare("SELECT 1 FROM sweeps WHERE id = ?1",
                                        absl::StrCat("looking up sweep ", id)));
    RETURN_IF_ERROR(exists.BindText(1, id));
    ASSIGN_OR_RETURN(bool found, exists.Step());
    if (!found) return absl::NotFoundError(absl::StrCat("sweep ", id, " not found"));
  }
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT seq, proto FROM sweep_events "
                                      "WHERE sweep_id = ?1 AND seq >= ?2 ORDER BY seq",
                                      absl::StrCat("reading events of sweep ", id)));
  RETURN_IF_ERROR(select.BindText(1, id));
  RETURN_IF_ERROR(select.BindInt64(2, from_seq));
  std::vector<v1::SweepEvent> events;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    RETURN_IF_ERROR(ParseStored(select.ColumnBlob(1), events.emplace_back(),
                                absl::StrCat("event ", select.ColumnInt64(0), " of ", id)));
  }
  return events;
}

absl::StatusOr<SweepPage> ExperimentStore::ListSweeps(const std::string& user, int page_size,
                                                      const std::string& page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must not be negative, got ", page_size));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  if (page_size > kMaxPageSize) page_size = kMaxPageSize;
  int64_t before_seq = 0;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(before_seq, DecodePageToken(page_token));
  }
  std::vector<std::string> conditions;
  if (!user.empty()) conditions.push_back("user = ?");
  if (before_seq > 0) conditions.push_back("seq < ?");
  std::string sql = "SELECT seq, proto FROM sweeps";
  if (!conditions.empty()) absl::StrAppend(&sql, " WHERE ", absl::StrJoin(conditions, " AND "));
  absl::StrAppend(&sql, " ORDER BY seq DESC LIMIT ?");
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select, reader_->Prepare(sql, "listing sweeps"));
  int parameter = 0;
  if (!user.empty()) RETURN_IF_ERROR(select.BindText(++parameter, user));
  if (before_seq > 0) RETURN_IF_ERROR(select.BindInt64(++parameter, before_seq));
  RETURN_IF_ERROR(select.BindInt64(++parameter, page_size + 1));
  SweepPage page;
  int64_t last_seq = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    if (static_cast<int>(page.sweeps.size()) == page_size) {
      page.next_page_token = EncodePageToken(last_seq);
      break;
    }
    last_seq = select.ColumnInt64(0);
    v1::Sweep& sweep = page.sweeps.emplace_back();
    RETURN_IF_ERROR(
        ParseStored(select.ColumnBlob(1), sweep, absl::StrCat("sweep number ", last_seq)));
    sweep.clear_points();
  }
  return page;
}

absl::StatusOr<std::vector<v1::Sweep>> ExperimentStore::ListSweepsByState(v1::SweepState state) {
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT seq, proto FROM sweeps WHERE state = ?1 ORDER BY seq",
                                      "listing sweeps by state"));
  RETURN_IF_ERROR(select.BindInt64(1, state));
  std::vector<v1::Sweep> sweeps;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    RETURN_IF_ERROR(ParseStored(select.ColumnBlob(1), sweeps.emplace_back(),
                                absl::StrCat("sweep number ", select.ColumnInt64(0))));
  }
  return sweeps;
}

absl::StatusOr<std::map<int, std::vector<std::string>>> ExperimentStore::SweepPointExperiments(
    const std::string& sweep_id) {
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT point_index, experiment_id FROM sweep_points "
                                      "WHERE sweep_id = ?1 ORDER BY point_index, attempt",
                                      absl::StrCat("reading the points of ", sweep_id)));
  RETURN_IF_ERROR(select.BindText(1, sweep_id));
  std::map<int, std::vector<std::string>> experiments;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    experiments[static_cast<int>(select.ColumnInt64(0))].push_back(select.ColumnText(1));
  }
  return experiments;
}

absl::StatusOr<std::vector<v1::Experiment>> ExperimentStore::ListUserCreatedSince(
    const std::string& user, int64_t created_after_unix_ns) {
  absl::MutexLock lock(&mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select,
                   database_->Prepare("SELECT seq, proto FROM experiments WHERE user = ?1 AND "
                                      "created_unix_ns >= ?2 ORDER BY seq",
                                      absl::StrCat("listing recent experiments of ", user)));
  RETURN_IF_ERROR(select.BindText(1, user));
  RETURN_IF_ERROR(select.BindInt64(2, created_after_unix_ns));
  std::vector<v1::Experiment> experiments;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    RETURN_IF_ERROR(ParseStored(select.ColumnBlob(1), experiments.emplace_back(),
                                absl::StrCat("experiment number ", select.ColumnInt64(0))));
  }
  return experiments;
}

absl::Status ExperimentStore::ChangeBaseline(const std::string& name,
                                             const BaselineDecision& decide) {
  const std::string operation = absl::StrCat("changing baseline ", name);
  return CommitWrite(operation, [&]() -> absl::Status {
    // Read through the write connection, inside the write transaction: what `decide` sees is
    // what the write replaces.
    std::optional<v1::Baseline> stored;
    {
      ASSIGN_OR_RETURN(
          SqliteStatement select,
          database_->Prepare("SELECT proto, owner FROM baselines WHERE name = ?1", operation));
      RETURN_IF_ERROR(select.BindText(1, name));
      ASSIGN_OR_RETURN(bool has_row, select.Step());
      if (has_row) {
        RETURN_IF_ERROR(ParseStored(select.ColumnBlob(0), stored.emplace(), "baseline"));
        // The column is the owner of record: a baseline written by a gpuprofd older than
        // owners has none, whatever its proto says.
        stored->set_owner(select.ColumnText(1));
      }
    }
    ASSIGN_OR_RETURN(BaselineWrite write, decide(stored.has_value() ? &*stored : nullptr));
    if (write.baseline.has_value()) {
      if (write.baseline->name() != name) {
        return absl::InvalidArgumentError(absl::StrCat(
            operation, ": the decision wrote baseline \"", write.baseline->name(), "\""));
      }
      ASSIGN_OR_RETURN(SqliteStatement insert,
                       database_->Prepare("INSERT OR REPLACE INTO baselines (name, proto, owner) "
                                          "VALUES (?1, ?2, ?3)",
                                          operation));
      RETURN_IF_ERROR(insert.BindText(1, name));
      RETURN_IF_ERROR(insert.BindBlob(2, write.baseline->SerializeAsString()));
      RETURN_IF_ERROR(insert.BindText(3, write.baseline->owner()));
      RETURN_IF_ERROR(insert.Run());
    } else if (stored.has_value()) {
      ASSIGN_OR_RETURN(SqliteStatement remove,
                       database_->Prepare("DELETE FROM baselines WHERE name = ?1", operation));
      RETURN_IF_ERROR(remove.BindText(1, name));
      RETURN_IF_ERROR(remove.Run());
    }
    // The change and its audit entry are committed together or not at all.
    if (!write.audit.has_time()) {
      const int64_t now = absl::ToUnixNanos(absl::Now());
      write.audit.mutable_time()->set_seconds(now / 1'000'000'000);
      write.audit.mutable_time()->set_nanos(static_cast<int32_t>(now % 1'000'000'000));
    }
    return InsertAudit(*database_, write.audit);
  });
}

absl::StatusOr<std::vector<v1::Baseline>> ExperimentStore::ListBaselines(
    const std::string& name) {
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(
      SqliteStatement select,
      reader_->Prepare(name.empty() ? "SELECT proto, owner FROM baselines ORDER BY name"
                                    : "SELECT proto, owner FROM baselines WHERE name = ?1",
                       "listing baselines"));
  if (!name.empty()) RETURN_IF_ERROR(select.BindText(1, name));
  std::vector<v1::Baseline> baselines;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    v1::Baseline& baseline = baselines.emplace_back();
    RETURN_IF_ERROR(ParseStored(select.ColumnBlob(0), baseline, "baseline"));
    baseline.set_owner(select.ColumnText(1));
  }
  return baselines;
}

absl::Status ExperimentStore::AppendAudit(const v1::AuditEntry& entry) {
  // Through the group commit, like every other write: acknowledged once it is on disk.
  return CommitWrite("recording an audit entry",
                     [&]() -> absl::Status { return InsertAudit(*database_, entry); });
}

absl::StatusOr<std::vector<v1::AuditEntry>> ExperimentStore::ListAudit(
    const std::string& user, const std::string& experiment_id, int limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("limit: got ", limit, "; must be >= 0"));
  }
  if (limit == 0) limit = 100;
  limit = std::min(limit, 1000);
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(
      SqliteStatement select,
      reader_->Prepare("SELECT id, time_unix_ns, actor, on_behalf_of, action, experiment_id, "
                         "detail, authenticated_by FROM audit WHERE (?1 = '' OR actor = ?1 OR "
                         "on_behalf_of = ?1) AND (?2 = '' OR experiment_id = ?2) ORDER BY id "
                         "DESC LIMIT ?3",
                         "reading the audit trail"));
  RETURN_IF_ERROR(select.BindText(1, user));
  RETURN_IF_ERROR(select.BindText(2, experiment_id));
  RETURN_IF_ERROR(select.BindInt64(3, limit));
  std::vector<v1::AuditEntry> entries;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    v1::AuditEntry& entry = entries.emplace_back();
    entry.set_id(select.ColumnInt64(0));
    const int64_t nanos = select.ColumnInt64(1);
    entry.mutable_time()->set_seconds(nanos / 1'000'000'000);
    entry.mutable_time()->set_nanos(static_cast<int32_t>(nanos % 1'000'000'000));
    entry.set_actor(select.ColumnText(2));
    entry.set_on_behalf_of(select.ColumnText(3));
    entry.set_action(select.ColumnText(4));
    entry.set_experiment_id(select.ColumnText(5));
    entry.set_detail(select.ColumnText(6));
    entry.set_authenticated_by(select.ColumnText(7));
  }
  return entries;
}

absl::Status ExperimentStore::SaveDrainedGpu(const DrainedGpu& gpu) {
  return CommitWrite("recording a drained GPU", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(SqliteStatement insert,
                     database_->Prepare("INSERT OR REPLACE INTO drained_gpus (uuid, gpu_index, "
                                        "since_unix_ns, xid, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
                                        "recording a drained GPU"));
    RETURN_IF_ERROR(insert.BindText(1, gpu.uuid));
    RETURN_IF_ERROR(insert.BindInt64(2, gpu.gpu_index));
    RETURN_IF_ERROR(insert.BindInt64(3, gpu.since_unix_ns));
    RETURN_IF_ERROR(insert.BindInt64(4, gpu.xid));
    RETURN_IF_ERROR(insert.BindText(5, gpu.reason));
    return insert.Run();
  });
}

absl::Status ExperimentStore::DeleteDrainedGpu(const std::string& uuid) {
  ASSIGN_OR_RETURN(std::vector<DrainedGpu> drained, ListDrainedGpus());
  if (std::none_of(drained.begin(), drained.end(),
                   [&](const DrainedGpu& gpu) { return gpu.uuid == uuid; })) {
    return absl::NotFoundError(absl::StrCat("GPU ", uuid, " is not drained"));
  }
  return CommitWrite("clearing a drained GPU", [&]() -> absl::Status {
    ASSIGN_OR_RETURN(SqliteStatement remove,
                     database_->Prepare("DELETE FROM drained_gpus WHERE uuid = ?1",
                                        "clearing a drained GPU"));
    RETURN_IF_ERROR(remove.BindText(1, uuid));
    return remove.Run();
  });
}

absl::StatusOr<std::vector<ExperimentStore::DrainedGpu>> ExperimentStore::ListDrainedGpus() {
  absl::MutexLock lock(&read_mutex_);
  ASSIGN_OR_RETURN(SqliteStatement select,
                   reader_->Prepare("SELECT uuid, gpu_index, since_unix_ns, xid, reason FROM "
                                    "drained_gpus ORDER BY gpu_index",
                                    "reading drained GPUs"));
  std::vector<DrainedGpu> drained;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    DrainedGpu& gpu = drained.emplace_back();
    gpu.uuid = select.ColumnText(0);
    gpu.gpu_index = static_cast<int>(select.ColumnInt64(1));
    gpu.since_unix_ns = select.ColumnInt64(2);
    gpu.xid = static_cast<int>(select.ColumnInt64(3));
    gpu.reason = select.ColumnText(4);
  }
  return drained;
}

absl::StatusOr<int64_t> ExperimentStore::SizeBytes() {
  absl::MutexLock lock(&read_mutex_);
  return reader_->QueryInt64(
      "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
      "measuring the database");
}

}  // namespace gpuprof::daemon
