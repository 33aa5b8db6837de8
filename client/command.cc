#include "client/command.h"

#include "absl/strings/str_cat.h"

namespace gpuprof::client {

std::string CommandHelp(const Command& command) {
  return absl::StrCat("usage: gpuprof ", command.usage, "\n\n", command.details, "\n\nflags:\n",
                      FormatFlagHelp(command.flags()));
}

FlagSpec TargetFlag() {
  return {.name = "target",
          .value_syntax = "ADDR",
          .help = absl::StrCat("gpuprofd: host:port or unix:/path (default: $GPUPROF_TARGET, ",
                               "else ", kDefaultTarget, ")")};
}

FlagSpec HelpFlag() { return {.name = "help", .is_switch = true, .help = "show this help"}; }

FlagSpec JsonFlag(absl::string_view help) {
  return {.name = "json", .is_switch = true, .help = std::string(help)};
}

}  // namespace gpuprof::client
