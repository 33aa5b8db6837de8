// `gpuprof completion bash|zsh`: a completion script made from the command table the CLI
// parses with (commands, subcommands, workloads and their flags, enum values), so that it
// offers exactly what the CLI accepts.
#ifndef GPUPROF_CLIENT_COMPLETION_SCRIPT_H_
#define GPUPROF_CLIENT_COMPLETION_SCRIPT_H_

#include <map>
#include <string>
#include <vector>

#include "client/command.h"

namespace gpuprof::client {

enum class Shell { kBash, kZsh };

// What completes after the words that chose a context ("", "submit", "submit attention",
// "sweep get", ...): the next words, the flags that take a value, and each such flag's values
// where they are a fixed list.
struct CompletionContext {
  std::vector<std::string> words;
  std::vector<std::string> value_flags;
  std::map<std::string, std::vector<std::string>> flag_values;
};

// Every context of the CLI, from `commands` (the table `gpuprof help` lists).
std::map<std::string, CompletionContext> CompletionContexts(const std::vector<Command>& commands);

std::string CompletionScript(Shell shell, const std::vector<Command>& commands);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_COMPLETION_SCRIPT_H_
