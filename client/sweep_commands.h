// `gpuprof sweep ...`, `gpuprof compare A B` and `gpuprof baseline ...`: run from RunGpuprof
// (commands.cc) with the environment and the options given before the command.
#ifndef GPUPROF_CLIENT_SWEEP_COMMANDS_H_
#define GPUPROF_CLIENT_SWEEP_COMMANDS_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/command_line.h"
#include "client/commands.h"
#include "client/sweep_render.h"
#include "gpuprof/v1/sweep.pb.h"
#include "sweep/compare.h"

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

// `gpuprof sweep <workload> flags...` as a request: flags given several values become axes.
struct SweepSubmission {
  v1::SweepRequest request;
  // The command's flags (--follow, --json, ...).
  ParsedArgs args;
  SweepFormat format = SweepFormat::kTable;
};
// nullopt when the command is already done (help printed, or a usage error reported), with
// its exit code in `exit_code`. `explicit_user` is --user, set as the request's user.
std::optional<SweepSubmission> ParseSweepSubmission(const std::vector<std::string>& args,
                                                    const ClientEnvironment& env,
                                                    const std::optional<std::string>& explicit_user,
                                                    int& exit_code);

// One side of `compare` from one daemon: an experiment (exp-...), a sweep (swp-...) or a
// baseline (NAME or baseline:NAME), with the provenance of one finished point.
grpc::Status ResolveCompareSide(v1::Profiler::StubInterface& profiler, absl::Duration deadline,
                                const std::string& name, sweep::CompareSide& side);

// Fills a side of the comparison from its name; returns kExitOk, or the exit code after
// reporting why it could not.
using CompareResolver = std::function<int(const std::string& name, sweep::CompareSide& side)>;
// `compare A B` with its flags already parsed (two positionals): resolves both sides, prints
// the comparison in the chosen format and returns the exit code (5 on a regression).
int CompareAndPrint(const ClientEnvironment& env, const ParsedArgs& args,
                    const CompareResolver& resolve);
// compare's flags, for a fleet's own parsing.
std::vector<FlagSpec> CompareCommandFlags();

int RunSweepCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                    const CommandDefaults& defaults);
int RunCompareCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                      const CommandDefaults& defaults);
int RunBaselineCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                       const CommandDefaults& defaults);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_COMMANDS_H_
