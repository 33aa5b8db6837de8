#include "client/completion_script.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/experiment_commands.h"
#include "client/kernel_commands.h"
#include "client/request_builder.h"
#include "client/sweep_commands.h"
#include "client/workload_flag_help.h"

namespace gpuprof::client {
namespace {

// The flags the CLI reads before the command (commands.cc's RunGpuprof).
std::vector<FlagSpec> GlobalFlags() {
  std::vector<FlagSpec> flags;
  for (const char* name : {"target", "node", "node-timeout", "user", "tls-ca", "tls-cert",
                           "tls-key", "token", "format"}) {
    flags.push_back({.name = name, .value_syntax = "VALUE"});
  }
  for (const char* name : {"fleet", "json", "no-headers", "quiet", "help", "version"}) {
    flags.push_back({.name = name, .is_switch = true});
  }
  return flags;
}

void AddFlags(const std::vector<FlagSpec>& flags, CompletionContext& context) {
  for (const FlagSpec& flag : flags) {
    std::vector<std::string> names = {flag.name};
    names.insert(names.end(), flag.aliases.begin(), flag.aliases.end());
    for (const std::string& name : names) {
      const std::string dashed = absl::StrCat("--", name);
      context.words.push_back(dashed);
      if (flag.is_switch) continue;
      context.value_flags.push_back(dashed);
      // "fp16|bf16": a fixed list; "INT", "table|csv|jsonl|markdown" and the like.
      if (absl::StrContains(flag.value_syntax, '|')) {
        std::vector<std::string> values = absl::StrSplit(flag.value_syntax, '|');
        bool fixed = true;
        for (const std::string& value : values) {
          fixed = fixed && !value.empty() && value.find_first_of(" []") == std::string::npos;
        }
        if (fixed) context.flag_values[dashed] = values;
      }
    }
  }
}

// A shell word list in single quotes: our names hold no quote.
std::string Quoted(const std::vector<std::string>& words) {
  return absl::StrCat("'", absl::StrJoin(words, " "), "'");
}

// The three lookups both shells share: _gpuprof_words KEY, _gpuprof_value_flags KEY,
// _gpuprof_values KEY FLAG.
std::string Lookups(const std::map<std::string, CompletionContext>& contexts) {
  std::string words = "_gpuprof_words() {\n  case \"$1\" in\n";
  std::string value_flags = "_gpuprof_value_flags() {\n  case \"$1\" in\n";
  std::string values = "_gpuprof_values() {\n  case \"$1 $2\" in\n";
  for (const auto& [key, context] : contexts) {
    absl::StrAppend(&words, "    \"", key, "\") echo ", Quoted(context.words), " ;;\n");
    if (!context.value_flags.empty()) {
      absl::StrAppend(&value_flags, "    \"", key, "\") echo ", Quoted(context.value_flags),
                      " ;;\n");
    }
    for (const auto& [flag, choices] : context.flag_values) {
      absl::StrAppend(&values, "    \"", key, " ", flag, "\") echo ", Quoted(choices), " ;;\n");
    }
  }
  for (std::string* function : {&words, &value_flags, &values}) {
    absl::StrAppend(function, "  esac\n}\n");
  }
  return absl::StrCat(words, value_flags, values,
                      // The context of the words typed so far: the first two that are not
                      // flags or flag values, as far as a context exists for them.
                      "_gpuprof_context() {\n"
                      "  local key=\"\" w skip=0 candidate\n"
                      "  for w in \"$@\"; do\n"
                      "    if [ \"$skip\" = 1 ]; then skip=0; continue; fi\n"
                      "    case \"$w\" in\n"
                      "      --*=*) ;;\n"
                      "      -*) case \" $(_gpuprof_value_flags \"$key\") \" in\n"
                      "            *\" $w \"*) skip=1 ;;\n"
                      "          esac ;;\n"
                      "      *) if [ -z \"$key\" ]; then candidate=\"$w\"; else candidate=\"$key $w\"; fi\n"
                      "         if [ -n \"$(_gpuprof_words \"$candidate\")\" ]; then key=\"$candidate\"; fi ;;\n"
                      "    esac\n"
                      "  done\n"
                      "  echo \"$key\"\n"
                      "}\n");
}

}  // namespace

std::map<std::string, CompletionContext> CompletionContexts(const std::vector<Command>& commands) {
  std::map<std::string, CompletionContext> contexts;
  CompletionContext& top = contexts[""];
  for (const Command& command : commands) top.words.emplace_back(command.name);
  AddFlags(GlobalFlags(), top);

  const std::vector<std::string> workloads = WorkloadNames();
  for (const Command& command : commands) {
    const std::string name(command.name);
    CompletionContext& context = contexts[name];
    if (command.flags != nullptr) AddFlags(command.flags(), context);
    if (name == "help") {
      for (const Command& other : commands) context.words.emplace_back(other.name);
    } else if (name == "completion") {
      context.words = {"bash", "zsh"};
    } else if (name == "board") {
      context.words.insert(context.words.end(), workloads.begin(), workloads.end());
      for (const std::string& workload : workloads) {
        absl::StatusOr<ExperimentRequestBuilder> builder =
            ExperimentRequestBuilder::ForWorkload(workload);
        if (!builder.ok()) continue;
        CompletionContext& flags = contexts[absl::StrCat(name, " ", workload)];
        AddFlags(DescribedWorkloadFlags(*builder), flags);
        AddFlags(BoardFlags(), flags);
      }
    } else if (name == "submit" || name == "sweep") {
      context.words.insert(context.words.end(), workloads.begin(), workloads.end());
      for (const std::string& workload : workloads) {
        absl::StatusOr<ExperimentRequestBuilder> builder =
            ExperimentRequestBuilder::ForWorkload(workload);
        if (!builder.ok()) continue;
        CompletionContext& flags = contexts[absl::StrCat(name, " ", workload)];
        AddFlags(DescribedWorkloadFlags(*builder), flags);
        AddFlags(builder->custom_kernel_flags(), flags);
        AddFlags(builder->common_flags(), flags);
        AddFlags(name == "submit" ? SubmitOutputFlags() : SweepSubmitFlagSpecs(), flags);
      }
      if (name == "sweep") {
        for (const auto& [subcommand, flags] : SweepSubcommandFlags()) {
          context.words.push_back(subcommand);
          AddFlags(flags, contexts[absl::StrCat("sweep ", subcommand)]);
        }
      }
    }
    if (context.words.empty()) context.words.push_back("--help");
  }
  return contexts;
}

std::string CompletionScript(Shell shell, const std::vector<Command>& commands) {
  const std::string lookups = Lookups(CompletionContexts(commands));
  if (shell == Shell::kBash) {
    return absl::StrCat(
        "# bash completion for gpuprof, made by `gpuprof completion bash` from its command "
        "table.\n",
        lookups,
        "_gpuprof() {\n"
        "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
        "  local key\n"
        "  key=\"$(_gpuprof_context \"${COMP_WORDS[@]:1:COMP_CWORD-1}\")\"\n"
        "  case \" $(_gpuprof_value_flags \"$key\") \" in\n"
        "    *\" $prev \"*)\n"
        "      COMPREPLY=($(compgen -W \"$(_gpuprof_values \"$key\" \"$prev\")\" -- \"$cur\"))\n"
        "      return ;;\n"
        "  esac\n"
        "  COMPREPLY=($(compgen -W \"$(_gpuprof_words \"$key\")\" -- \"$cur\"))\n"
        "}\n"
        "complete -F _gpuprof gpuprof\n");
  }
  return absl::StrCat(
      "#compdef gpuprof\n"
      "# zsh completion for gpuprof, made by `gpuprof completion zsh` from its command table.\n",
      lookups,
      "_gpuprof() {\n"
      "  local key prev=\"${words[CURRENT-1]}\"\n"
      "  key=\"$(_gpuprof_context \"${(@)words[2,CURRENT-1]}\")\"\n"
      "  case \" $(_gpuprof_value_flags \"$key\") \" in\n"
      "    *\" $prev \"*)\n"
      "      compadd -- ${=$(_gpuprof_values \"$key\" \"$prev\")}\n"
      "      return ;;\n"
      "  esac\n"
      "  compadd -- ${=$(_gpuprof_words \"$key\")}\n"
      "}\n"
      "compdef _gpuprof gpuprof\n");
}

}  // namespace gpuprof::client
