// A row of gpuprof's command table (client/commands.cc) and the flags every command shares.
// Each command group (experiment_commands, gpu_commands, access_commands, sweep_commands,
// compare_commands, ...) exports its rows; the table puts them in the order `gpuprof help`
// lists them.
#ifndef GPUPROF_CLIENT_COMMAND_H_
#define GPUPROF_CLIENT_COMMAND_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "client/command_line.h"
#include "client/invocation.h"
#include "client/node_fanout.h"
#include "client/session.h"

namespace gpuprof::client {

struct Command {
  absl::string_view name;
  absl::string_view usage;    // after "gpuprof "
  absl::string_view summary;  // one line in `gpuprof help`
  absl::string_view details;  // a paragraph in `gpuprof <name> --help`

  // A command whose flags and positionals the table parses, run on one daemon's session.
  std::vector<std::string> positionals;
  std::vector<FlagSpec> (*flags)() = nullptr;
  int (*run)(Session& session, const ParsedArgs& args) = nullptr;
  // The same across several nodes (its flags parsed); null: the command works on one node.
  int (*run_on_fleet)(Fleet& fleet, const Command& command, ParsedArgs args) = nullptr;

  // A command that reads its own arguments (a workload's flags, subcommands); null for the
  // parsed commands above. It runs on one daemon, or one node of a fleet (--node NAME).
  int (*run_args)(const Invocation& invocation, const std::vector<std::string>& args) = nullptr;
  // Its run across several nodes (sweep, compare: also with --fleet after the command).
  int (*run_args_on_fleet)(Fleet& fleet, const std::vector<std::string>& args) = nullptr;
  // Its help for `gpuprof help NAME [args]`.
  int (*help)(const ClientEnvironment& env, const std::vector<std::string>& args) = nullptr;
  // Runs without a daemon: nothing about the connection or the fleet may stop it.
  bool local = false;
  // "-o" means --output.
  bool short_o_is_output = false;
};

// "usage: gpuprof USAGE\n\nDETAILS\n\nflags:\n..." of a parsed command.
std::string CommandHelp(const Command& command);

// --target ADDR, after the command.
FlagSpec TargetFlag();
FlagSpec HelpFlag();
FlagSpec JsonFlag(absl::string_view help);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_COMMAND_H_
