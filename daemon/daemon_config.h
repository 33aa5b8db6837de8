// Where gpuprofd keeps its state and listens, with defaults that suit both a system service
// (root: /var/lib/gpuprof) and a developer running it by hand (~/.local/state/gpuprof).
#ifndef GPUPROF_DAEMON_DAEMON_CONFIG_H_
#define GPUPROF_DAEMON_DAEMON_CONFIG_H_

#include <string>
#include <vector>

namespace gpuprof::daemon {

inline constexpr char kDefaultTcpAddress[] = "127.0.0.1:7070";

// /var/lib/gpuprof for root, else $XDG_STATE_HOME/gpuprof or ~/.local/state/gpuprof.
std::string DefaultStateDir();
// "<state_dir>/gpuprof.db"
std::string DefaultDatabasePath(const std::string& state_dir);
// The loopback TCP address and a unix socket in the state directory.
std::vector<std::string> DefaultListenAddresses(const std::string& state_dir);
// gpuprof_worker beside the running gpuprofd binary, or in its worker/ subdirectory (the
// Bazel output layout).
std::string DefaultWorkerBinary();
// Whether a TCP listen address ("127.0.0.1:7070", "localhost:7070", "[::1]:7070") binds only
// the loopback interface.
bool IsLoopbackListenAddress(const std::string& address);
// Splits "a,b , c" into addresses; empty entries dropped.
std::vector<std::string> SplitAddresses(const std::string& list);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_DAEMON_CONFIG_H_
