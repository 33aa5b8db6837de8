// The checks that keep gpuprofd off a database it must not use: one written by a newer schema,
// another application's SQLite file, or a damaged one. They only read.
#ifndef GPUPROF_DAEMON_STORE_DATABASE_CHECKS_H_
#define GPUPROF_DAEMON_STORE_DATABASE_CHECKS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {

// Marks the file as gpuprof's (PRAGMA application_id, "GPPF"), so that another application's
// SQLite file given as --db is recognised and refused.
inline constexpr int64_t kApplicationId = 0x47505046;

// Reads PRAGMA user_version; FailedPrecondition when it is newer than `newest_known`.
absl::StatusOr<int64_t> CheckSchemaVersion(SqliteDatabase& database, const std::string& path,
                                           int64_t newest_known);

// Refuses a file that is not gpuprof's: another application's id, tables without our schema
// version, or our schema version without the tables every version has.
absl::Status CheckIdentity(SqliteDatabase& database, const std::string& path);

// PRAGMA quick_check (pages and b-trees, O(size), no index contents) or, when `full`,
// integrity_check (also every index against its table). OK, or DataLoss quoting the first
// problems SQLite found.
absl::Status CheckPages(SqliteDatabase& database, const std::string& path, bool full);

// A failed read of the file's header or pages (DataLoss), restated for whoever reads the log:
// the file, and what to do. Other errors are returned as they are.
absl::Status ExplainUnreadable(const absl::Status& status, const std::string& path);

// Whether the database has the table (tables added later may be missing from older files).
absl::StatusOr<bool> HasTable(SqliteDatabase& database, const std::string& table);

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_DATABASE_CHECKS_H_
