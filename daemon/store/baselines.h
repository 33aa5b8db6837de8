// Named runs to compare against (gpuprof baseline save NAME ID), with the owner who may
// replace or delete them. A change is decided and written in one transaction with its audit
// entry, so an ownership check cannot be raced.
#ifndef GPUPROF_DAEMON_STORE_BASELINES_H_
#define GPUPROF_DAEMON_STORE_BASELINES_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/sqlite_database.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon::store {

// What a baseline change writes: `baseline` stored under its name (owner included), or the
// baseline deleted when it is empty; `audit` in the same transaction.
struct BaselineWrite {
  std::optional<::gpuprof::v1::Baseline> baseline;
  ::gpuprof::v1::AuditEntry audit;
};
// Decides a change on the baseline stored under the name (nullptr if there is none).
using BaselineDecision =
    std::function<absl::StatusOr<BaselineWrite>(const ::gpuprof::v1::Baseline* stored)>;

// Creates the table if missing and gives a table from before owners its owner column, whose
// rows then belong to nobody (admins only). Idempotent, run at every open.
absl::Status CreateBaselinesTable(SqliteDatabase& database);

// Inside a write transaction on `database`: reads the baseline `name`, lets `decide` say what
// to write and writes it with the audit entry (stamped now if it has no time). An error of
// `decide` is returned with nothing written. A written baseline must keep the name.
absl::Status ChangeBaseline(SqliteDatabase& database, const std::string& name,
                            const BaselineDecision& decide);

// Every baseline, by name; only `name` when it is not empty. Baselines saved before owners
// were recorded have an empty owner.
absl::StatusOr<std::vector<::gpuprof::v1::Baseline>> ListBaselines(SqliteDatabase& database,
                                                                   const std::string& name);

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_BASELINES_H_
