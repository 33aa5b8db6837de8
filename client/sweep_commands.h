// `gpuprof sweep ...` on one daemon: submit a parameter grid (a flag given several values is
// an axis), follow it, and get, list, cancel, watch or plot a sweep.
#ifndef GPUPROF_CLIENT_SWEEP_COMMANDS_H_
#define GPUPROF_CLIENT_SWEEP_COMMANDS_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "client/command_line.h"
#include "client/invocation.h"
#include "client/session.h"
#include "client/sweep_render.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::client {

// --target as sweep, compare and baseline describe it.
FlagSpec SweepTargetFlag();
// --format table|csv|jsonl|markdown.
FlagSpec FormatFlag();

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

// The session a subcommand runs in, given its parsed flags (its own --target, say).
using SessionMaker = std::function<absl::StatusOr<Session>(const ParsedArgs& args)>;

// `gpuprof sweep args...` on the daemon `make_session` reaches; `user` is --user.
int RunSweepCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                    const SessionMaker& make_session, const std::optional<std::string>& user);
// The same on the daemon the global options name.
int RunSweepCommand(const Invocation& invocation, const std::vector<std::string>& args);
// `gpuprof help sweep [SUBCOMMAND | WORKLOAD]`.
int SweepHelpCommand(const ClientEnvironment& env, const std::vector<std::string>& args);

// The subcommands (get, list, ...) with their flags, for completion.
std::vector<std::pair<std::string, std::vector<FlagSpec>>> SweepSubcommandFlags();
// The flags of `sweep <workload>` besides the workload's own.
std::vector<FlagSpec> SweepSubmitFlagSpecs();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_COMMANDS_H_
