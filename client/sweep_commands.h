// `gpuprof sweep ...`, `gpuprof compare A B` and `gpuprof baseline ...`: run from RunGpuprof
// (commands.cc) with the environment and the options given before the command.
#ifndef GPUPROF_CLIENT_SWEEP_COMMANDS_H_
#define GPUPROF_CLIENT_SWEEP_COMMANDS_H_

#include <optional>
#include <string>
#include <vector>

#include "client/commands.h"

namespace gpuprof::client {

// What the options before the command said (--target, --user); unset when not given.
struct CommandDefaults {
  // Resolved as for the other commands (flags, environment, config file); a command's own
  // --target replaces the target.
  ConnectionOptions connection;
  // The fleet node the global options narrowed to, if any (for its own TLS material).
  std::optional<DaemonNode> node;
  // --user: the daemon honours it for admins only.
  std::optional<std::string> user;
};

// Exit code of `compare --fail-on-regression PCT` when B is worse than A beyond PCT.
inline constexpr int kExitRegression = 5;

int RunSweepCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                    const CommandDefaults& defaults);
int RunCompareCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                      const CommandDefaults& defaults);
int RunBaselineCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                       const CommandDefaults& defaults);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_COMMANDS_H_
