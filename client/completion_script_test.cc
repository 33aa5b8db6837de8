#include "client/completion_script.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<Command> Table() {
  return {{.name = "list",
           .summary = "list",
           .flags = [] {
             return std::vector<FlagSpec>{{.name = "state", .value_syntax = "queued|running"},
                                          {.name = "all", .is_switch = true}};
           }},
          {.name = "submit", .summary = "submit"},
          {.name = "sweep", .summary = "sweep"},
          {.name = "board", .summary = "board"},
          {.name = "help", .summary = "help"}};
}

TEST(CompletionScriptTest, ContextsComeFromTheCommandTable) {
  const auto contexts = CompletionContexts(Table());
  EXPECT_THAT(contexts.at("").words, Contains("submit"));
  EXPECT_THAT(contexts.at("").words, Contains("--target"));
  EXPECT_THAT(contexts.at("list").words, ElementsAre("--state", "--all"));
  EXPECT_THAT(contexts.at("list").value_flags, ElementsAre("--state"));
  EXPECT_THAT(contexts.at("list").flag_values.at("--state"), ElementsAre("queued", "running"));
  EXPECT_THAT(contexts.at("submit").words, Contains("attention"));
  // A workload's flags, with only the values the workload accepts.
  EXPECT_THAT(contexts.at("submit attention").words, Contains("--kv-len"));
  EXPECT_THAT(contexts.at("submit attention").words, Contains("--follow"));
  EXPECT_THAT(contexts.at("submit attention").flag_values.at("--dtype"),
              ElementsAre("fp16", "bf16"));
  EXPECT_THAT(contexts.at("sweep").words, Contains("get"));
  EXPECT_THAT(contexts.at("sweep get").flag_values.at("--format"),
              ElementsAre("table", "csv", "jsonl", "markdown"));
  EXPECT_THAT(contexts.at("sweep attention").words, Not(Contains("--follow-every")));
  EXPECT_THAT(contexts.at("help").words, Contains("sweep"));
  // Custom kernel flags where a workload takes a kernel, and only there.
  EXPECT_THAT(contexts.at("submit index").words, Contains("--kernel-file"));
  EXPECT_THAT(contexts.at("sweep store").words, Contains("--block-threads"));
  EXPECT_THAT(contexts.at("submit index").flag_values.at("--mode"),
              ElementsAre("test", "benchmark", "profile", "sanitize"));
  EXPECT_THAT(contexts.at("submit radix").words, Not(Contains("--kernel-file")));
  EXPECT_THAT(contexts.at("board").words, Contains("index"));
  EXPECT_THAT(contexts.at("board index").words, Contains("--best-per-kernel"));
  EXPECT_THAT(contexts.at("board index").words, Contains("--hidden"));
}

TEST(CompletionScriptTest, ScriptsRegisterThemselves) {
  const std::string bash = CompletionScript(Shell::kBash, Table());
  EXPECT_THAT(bash, HasSubstr("complete -F _gpuprof gpuprof\n"));
  EXPECT_THAT(bash, HasSubstr("\"submit attention --dtype\") echo 'fp16 bf16' ;;"));
  const std::string zsh = CompletionScript(Shell::kZsh, Table());
  EXPECT_THAT(zsh, HasSubstr("#compdef gpuprof"));
  EXPECT_THAT(zsh, HasSubstr("compdef _gpuprof gpuprof\n"));
}

// What bash offers after `words` (the last one being completed), with the generated script.
std::string BashCompletes(const std::string& script, const std::vector<std::string>& words) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/gpuprof_completion.bash");
  std::ofstream(path) << script;
  std::string array;
  for (const std::string& word : words) absl::StrAppend(&array, " '", word, "'");
  const std::string command =
      absl::StrCat("/bin/bash -c 'source \"$0\"; COMP_WORDS=(\"$@\"); ",
                   "COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _gpuprof; echo \"${COMPREPLY[*]}\"' ",
                   path, array);
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r"); pipe != nullptr) {
    char buffer[4096];
    while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
    pclose(pipe);
  }
  return output;
}

TEST(CompletionScriptTest, BashCompletesFromTheTable) {
  const std::string bash = CompletionScript(Shell::kBash, Table());
  EXPECT_EQ(BashCompletes(bash, {"gpuprof", "su"}), "submit\n");
  EXPECT_EQ(BashCompletes(bash, {"gpuprof", "--target", "unix:/x", "submit", "att"}),
            "attention\n");
  EXPECT_EQ(BashCompletes(bash, {"gpuprof", "submit", "attention", "--dtype", ""}), "fp16 bf16\n");
  EXPECT_EQ(BashCompletes(bash, {"gpuprof", "submit", "attention", "--kv-l"}),
            "--kv-len --kv-lens --kv-len-max\n");
  EXPECT_EQ(BashCompletes(bash, {"gpuprof", "list", "--state", "r"}), "running\n");
  EXPECT_EQ(BashCompletes(bash, {"gpuprof", "sweep", "get", "swp-1", "--format", "j"}), "jsonl\n");
  EXPECT_EQ(BashCompletes(bash, {"gpuprof", "submit", "index", "--sanitizer", "r"}), "racecheck\n");
}

}  // namespace
}  // namespace gpuprof::client
