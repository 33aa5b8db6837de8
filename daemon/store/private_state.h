// The daemon's files are private: the state directory holds the database (every user's
// experiments, the admin-only audit trail, baselines), so no other local account may list,
// read or change it. At start-up the daemon makes it so (and says what it changed) or refuses
// to start; its umask (077) keeps what it creates afterwards private too.
#ifndef GPUPROF_DAEMON_STORE_PRIVATE_STATE_H_
#define GPUPROF_DAEMON_STORE_PRIVATE_STATE_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpuprof::daemon {

// Creates `directory` (mode 0700) if missing, else tightens a wider mode to 0700. Refuses a
// directory (or a symbolic link in its place) that belongs to another uid than the daemon's:
// whoever owns it could swap the database. Returns what was changed, one line each.
absl::StatusOr<std::vector<std::string>> SecureStateDirectory(const std::string& directory);

// Tightens the database and its SQLite companions (-wal, -shm, -journal) to 0600 where they
// exist with a wider mode; refuses files of another owner. Returns what was changed.
absl::StatusOr<std::vector<std::string>> SecureDatabaseFiles(const std::string& database);

// Creates the directory holding a unix socket if missing (0755: every account must reach the
// socket, whose own mode says who may connect). Returns what was made.
absl::StatusOr<std::vector<std::string>> PrepareSocketDirectory(const std::string& socket_path);

// The group named `name` (for the unix socket's 0660 mode), with an error naming the flag.
absl::StatusOr<gid_t> GroupByName(const std::string& name);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_STORE_PRIVATE_STATE_H_
