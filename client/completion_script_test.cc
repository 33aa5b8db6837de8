#include "client/completion_script.h"

#include <string>
#include <vector>

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
}

TEST(CompletionScriptTest, ScriptsRegisterThemselves) {
  const std::string bash = CompletionScript(Shell::kBash, Table());
  EXPECT_THAT(bash, HasSubstr("complete -F _gpuprof gpuprof\n"));
  EXPECT_THAT(bash, HasSubstr("\"submit attention --dtype\") echo 'fp16 bf16' ;;"));
  const std::string zsh = CompletionScript(Shell::kZsh, Table());
  EXPECT_THAT(zsh, HasSubstr("#compdef gpuprof"));
  EXPECT_THAT(zsh, HasSubstr("compdef _gpuprof gpuprof\n"));
}

}  // namespace
}  // namespace gpuprof::client
