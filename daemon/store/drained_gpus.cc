#include "daemon/store/drained_gpus.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {
namespace {

constexpr char kGpuHealthSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS drained_gpus (
  uuid TEXT PRIMARY KEY NOT NULL,
  gpu_index INTEGER NOT NULL,
  since_unix_ns INTEGER NOT NULL,
  xid INTEGER NOT NULL,
  reason TEXT NOT NULL
) WITHOUT ROWID;
)sql";

}  // namespace

absl::Status CreateDrainedGpusTable(SqliteDatabase& database) {
  return database.Execute(kGpuHealthSchema, "creating the GPU health table");
}

absl::Status SaveDrainedGpu(SqliteDatabase& database, const DrainedGpu& gpu) {
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   database.Prepare("INSERT OR REPLACE INTO drained_gpus (uuid, gpu_index, "
                                    "since_unix_ns, xid, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
                                    "recording a drained GPU"));
  RETURN_IF_ERROR(insert.BindText(1, gpu.uuid));
  RETURN_IF_ERROR(insert.BindInt64(2, gpu.gpu_index));
  RETURN_IF_ERROR(insert.BindInt64(3, gpu.since_unix_ns));
  RETURN_IF_ERROR(insert.BindInt64(4, gpu.xid));
  RETURN_IF_ERROR(insert.BindText(5, gpu.reason));
  return insert.Run();
}

absl::Status DeleteDrainedGpu(SqliteDatabase& database, const std::string& uuid) {
  ASSIGN_OR_RETURN(
      SqliteStatement remove,
      database.Prepare("DELETE FROM drained_gpus WHERE uuid = ?1", "clearing a drained GPU"));
  RETURN_IF_ERROR(remove.BindText(1, uuid));
  RETURN_IF_ERROR(remove.Run());
  if (database.ChangedRows() == 0) {
    return absl::NotFoundError(absl::StrCat("GPU ", uuid, " is not drained"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<DrainedGpu>> ListDrainedGpus(SqliteDatabase& database) {
  ASSIGN_OR_RETURN(SqliteStatement select,
                   database.Prepare("SELECT uuid, gpu_index, since_unix_ns, xid, reason FROM "
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

}  // namespace gpuprof::daemon::store
