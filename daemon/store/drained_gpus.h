// GPUs drained by a hardware fault, by UUID (indices can change when GPUs are added), kept
// until an admin clears them, across restarts.
#ifndef GPUPROF_DAEMON_STORE_DRAINED_GPUS_H_
#define GPUPROF_DAEMON_STORE_DRAINED_GPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {

struct DrainedGpu {
  std::string uuid;
  int gpu_index = 0;  // when it was drained
  int64_t since_unix_ns = 0;
  int xid = 0;
  std::string reason;
};

// Creates the table if missing (idempotent, run at every open; added after schema version 1).
absl::Status CreateDrainedGpusTable(SqliteDatabase& database);

// Inserts or replaces the GPU's record.
absl::Status SaveDrainedGpu(SqliteDatabase& database, const DrainedGpu& gpu);
// Deletes the GPU's record; NotFound when the GPU is not drained.
absl::Status DeleteDrainedGpu(SqliteDatabase& database, const std::string& uuid);
// By GPU index.
absl::StatusOr<std::vector<DrainedGpu>> ListDrainedGpus(SqliteDatabase& database);

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_DRAINED_GPUS_H_
