// The audit trail's table: who submitted, cancelled, preempted, was refused, changed the
// policy. Entries are written inside the transaction of the change they record.
#ifndef GPUPROF_DAEMON_STORE_AUDIT_LOG_H_
#define GPUPROF_DAEMON_STORE_AUDIT_LOG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/sqlite_database.h"
#include "gpuprof/v1/access.pb.h"

namespace gpuprof::daemon::store {

// Creates the table if missing (idempotent, run at every open; added after schema version 1,
// so older binaries ignore it).
absl::Status CreateAuditTable(SqliteDatabase& database);

absl::Status InsertAudit(SqliteDatabase& database, const ::gpuprof::v1::AuditEntry& entry);

// Newest first; `user` matches the actor or the user acted for; empty filters match all.
// limit 0 means 100, at most 1000, negative is InvalidArgument.
absl::StatusOr<std::vector<::gpuprof::v1::AuditEntry>> ListAudit(SqliteDatabase& database,
                                                                 const std::string& user,
                                                                 const std::string& experiment_id,
                                                                 int limit);

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_AUDIT_LOG_H_
