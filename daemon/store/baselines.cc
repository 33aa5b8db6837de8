#include "daemon/store/baselines.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "daemon/store/audit_log.h"
#include "daemon/store/sqlite_database.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon::store {
namespace {

// Added with sweeps; the owner column came later (AddOwnerColumn).
constexpr char kBaselinesSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS baselines (
  name TEXT PRIMARY KEY NOT NULL,
  -- The gpuprof.v1.Baseline, serialized.
  proto BLOB NOT NULL
) WITHOUT ROWID;
)sql";

absl::Status AddOwnerColumn(SqliteDatabase& database) {
  ASSIGN_OR_RETURN(int64_t has_owner,
                   database.QueryInt64("SELECT count(*) FROM pragma_table_info('baselines') "
                                       "WHERE name = 'owner'",
                                       "checking the baselines table"));
  if (has_owner > 0) return absl::OkStatus();
  return database.Execute("ALTER TABLE baselines ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
                          "adding the baselines' owner column");
}

// The owner column is the owner of record: a baseline written by a gpuprofd older than owners
// has none, whatever its proto says.
absl::Status ReadBaseline(const SqliteStatement& row, v1::Baseline& baseline) {
  RETURN_IF_ERROR(row.ColumnMessage(0, baseline, "baseline"));
  baseline.set_owner(row.ColumnText(1));
  return absl::OkStatus();
}

}  // namespace

absl::Status CreateBaselinesTable(SqliteDatabase& database) {
  RETURN_IF_ERROR(database.Execute(kBaselinesSchema, "creating the baselines table"));
  return AddOwnerColumn(database);
}

absl::Status ChangeBaseline(SqliteDatabase& database, const std::string& name,
                            const BaselineDecision& decide) {
  const std::string operation = absl::StrCat("changing baseline ", name);
  // Read through the write connection, inside the write transaction: what `decide` sees is
  // what the write replaces.
  std::optional<v1::Baseline> stored;
  {
    ASSIGN_OR_RETURN(
        SqliteStatement select,
        database.Prepare("SELECT proto, owner FROM baselines WHERE name = ?1", operation));
    RETURN_IF_ERROR(select.BindText(1, name));
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (has_row) RETURN_IF_ERROR(ReadBaseline(select, stored.emplace()));
  }
  ASSIGN_OR_RETURN(BaselineWrite write, decide(stored.has_value() ? &*stored : nullptr));
  if (write.baseline.has_value()) {
    if (write.baseline->name() != name) {
      return absl::InvalidArgumentError(absl::StrCat(operation, ": the decision wrote baseline \"",
                                                     write.baseline->name(), "\""));
    }
    ASSIGN_OR_RETURN(SqliteStatement insert,
                     database.Prepare("INSERT OR REPLACE INTO baselines (name, proto, owner) "
                                      "VALUES (?1, ?2, ?3)",
                                      operation));
    RETURN_IF_ERROR(insert.BindText(1, name));
    RETURN_IF_ERROR(insert.BindBlob(2, write.baseline->SerializeAsString()));
    RETURN_IF_ERROR(insert.BindText(3, write.baseline->owner()));
    RETURN_IF_ERROR(insert.Run());
  } else if (stored.has_value()) {
    ASSIGN_OR_RETURN(SqliteStatement remove,
                     database.Prepare("DELETE FROM baselines WHERE name = ?1", operation));
    RETURN_IF_ERROR(remove.BindText(1, name));
    RETURN_IF_ERROR(remove.Run());
  }
  // The change and its audit entry are committed together or not at all.
  if (!write.audit.has_time()) {
    const int64_t now = absl::ToUnixNanos(absl::Now());
    write.audit.mutable_time()->set_seconds(now / 1'000'000'000);
    write.audit.mutable_time()->set_nanos(static_cast<int32_t>(now % 1'000'000'000));
  }
  return InsertAudit(database, write.audit);
}

absl::StatusOr<std::vector<v1::Baseline>> ListBaselines(SqliteDatabase& database,
                                                        const std::string& name) {
  ASSIGN_OR_RETURN(
      SqliteStatement select,
      database.Prepare(name.empty() ? "SELECT proto, owner FROM baselines ORDER BY name"
                                    : "SELECT proto, owner FROM baselines WHERE name = ?1",
                       "listing baselines"));
  if (!name.empty()) RETURN_IF_ERROR(select.BindText(1, name));
  std::vector<v1::Baseline> baselines;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) break;
    RETURN_IF_ERROR(ReadBaseline(select, baselines.emplace_back()));
  }
  return baselines;
}

}  // namespace gpuprof::daemon::store
