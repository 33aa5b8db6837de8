#include "daemon/store/database_checks.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {
namespace {

// What to do about a database gpuprofd must not use; ends every refusal message.
constexpr char kRefusalAdvice[] =
    "gpuprofd does not start on it, so that no stored experiment is silently lost or "
    "overwritten. Run `gpuprofd --check-db --db PATH` for a full check; restore the file from a "
    "backup, or move it aside to start with an empty database";

}  // namespace

absl::StatusOr<int64_t> CheckSchemaVersion(SqliteDatabase& database, const std::string& path,
                                           int64_t newest_known) {
  ASSIGN_OR_RETURN(int64_t version,
                   database.QueryInt64("PRAGMA user_version", "reading schema version"));
  if (version > newest_known) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "database %s has schema version %d, newer than version %d that this gpuprofd "
        "understands: run a newer gpuprofd, or point this one at another database",
        path, version, newest_known));
  }
  return version;
}

absl::StatusOr<bool> HasTable(SqliteDatabase& database, const std::string& table) {
  ASSIGN_OR_RETURN(SqliteStatement select,
                   database.Prepare("SELECT count(*) FROM sqlite_master WHERE type = 'table' "
                                    "AND name = ?1",
                                    "checking the schema"));
  RETURN_IF_ERROR(select.BindText(1, table));
  ASSIGN_OR_RETURN(bool has_row, select.Step());
  return has_row && select.ColumnInt64(0) > 0;
}

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
      ASSIGN_OR_RETURN(bool found, HasTable(database, table));
      if (!found) {
        return absl::DataLossError(
            absl::StrFormat("database %s has gpuprof schema version %d but no table '%s'. %s", path,
                            version, table, kRefusalAdvice));
      }
    }
  }
  return absl::OkStatus();
}

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
  return absl::DataLossError(absl::StrCat(
      "database ", path, " is damaged: ", absl::StrJoin(problems, "; "), ". ", kRefusalAdvice));
}

absl::Status ExplainUnreadable(const absl::Status& status, const std::string& path) {
  if (!absl::IsDataLoss(status)) return status;
  return absl::DataLossError(absl::StrCat("database ", path,
                                          " is damaged or not an SQLite database (",
                                          status.message(), "). ", kRefusalAdvice));
}

}  // namespace gpuprof::daemon::store
