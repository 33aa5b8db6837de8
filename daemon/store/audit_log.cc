#include "daemon/store/audit_log.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/store/sqlite_database.h"
#include "google/protobuf/util/time_util.h"
#include "gpuprof/v1/access.pb.h"

namespace gpuprof::daemon::store {
namespace {

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

}  // namespace

absl::Status CreateAuditTable(SqliteDatabase& database) {
  return database.Execute(kAuditSchema, "creating the audit table");
}

absl::Status InsertAudit(SqliteDatabase& database, const ::gpuprof::v1::AuditEntry& entry) {
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   database.Prepare("INSERT INTO audit (time_unix_ns, actor, on_behalf_of, "
                                    "action, experiment_id, detail, authenticated_by) VALUES "
                                    "(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                    "recording an audit entry"));
  RETURN_IF_ERROR(
      insert.BindInt64(1, google::protobuf::util::TimeUtil::TimestampToNanoseconds(entry.time())));
  RETURN_IF_ERROR(insert.BindText(2, entry.actor()));
  RETURN_IF_ERROR(insert.BindText(3, entry.on_behalf_of()));
  RETURN_IF_ERROR(insert.BindText(4, entry.action()));
  RETURN_IF_ERROR(insert.BindText(5, entry.experiment_id()));
  RETURN_IF_ERROR(insert.BindText(6, entry.detail()));
  RETURN_IF_ERROR(insert.BindText(7, entry.authenticated_by()));
  return insert.Run();
}

absl::StatusOr<std::vector<::gpuprof::v1::AuditEntry>> ListAudit(SqliteDatabase& database,
                                                                 const std::string& user,
                                                                 const std::string& experiment_id,
                                                                 int limit) {
  if (limit < 0) {
    return absl::InvalidArgumentError(absl::StrCat("limit: got ", limit, "; must be >= 0"));
  }
  if (limit == 0) limit = 100;
  limit = std::min(limit, 1000);
  ASSIGN_OR_RETURN(
      SqliteStatement select,
      database.Prepare("SELECT id, time_unix_ns, actor, on_behalf_of, action, experiment_id, "
                       "detail, authenticated_by FROM audit WHERE (?1 = '' OR actor = ?1 OR "
                       "on_behalf_of = ?1) AND (?2 = '' OR experiment_id = ?2) ORDER BY id "
                       "DESC LIMIT ?3",
                       "reading the audit trail"));
  RETURN_IF_ERROR(select.BindText(1, user));
  RETURN_IF_ERROR(select.BindText(2, experiment_id));
  RETURN_IF_ERROR(select.BindInt64(3, limit));
  std::vector<::gpuprof::v1::AuditEntry> entries;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    ::gpuprof::v1::AuditEntry& entry = entries.emplace_back();
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

}  // namespace gpuprof::daemon::store
