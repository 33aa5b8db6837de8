#include "client/command_line.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<FlagSpec> TestSpecs() {
  return {
      {.name = "num-tokens", .aliases = {"tokens"}, .value_syntax = "INT", .help = "tokens"},
      {.name = "follow", .is_switch = true, .value_syntax = "BOOL", .help = "stream events"},
      {.name = "json", .is_switch = true},
      {.name = "label", .repeatable = true, .value_syntax = "K=V"},
      {.name = "priority", .value_syntax = "INT"},
  };
}

TEST(ParseArgsTest, SeparatesFlagsAndPositionals) {
  auto parsed = ParseArgs({"index", "--num-tokens", "4096", "--follow", "extra"}, TestSpecs());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->positionals, ElementsAre("index", "extra"));
  EXPECT_EQ(parsed->Get("num-tokens"), "4096");
  EXPECT_TRUE(parsed->Switch("follow"));
  EXPECT_FALSE(parsed->Has("priority"));
  EXPECT_EQ(parsed->Get("priority"), std::nullopt);
}

TEST(ParseArgsTest, AcceptsEqualsUnderscoresAndAliases) {
  auto parsed = ParseArgs({"--num_tokens=7"}, TestSpecs());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("num-tokens"), "7");
  EXPECT_EQ(parsed->flags[0].typed_name, "num_tokens");

  parsed = ParseArgs({"--tokens", "8"}, TestSpecs());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("num-tokens"), "8");
  EXPECT_EQ(parsed->flags[0].typed_name, "tokens");
}

TEST(ParseArgsTest, SwitchValues) {
  auto parsed = ParseArgs({"--follow=false"}, TestSpecs());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->Has("follow"));
  EXPECT_FALSE(parsed->Switch("follow"));
  EXPECT_EQ(parsed->Get("follow"), "false");

  parsed = ParseArgs({"--follow=YES"}, TestSpecs());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->Get("follow"), "true");

  parsed = ParseArgs({"--follow=maybe"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--follow: \"maybe\" is not a boolean (true or false)");
}

TEST(ParseArgsTest, SwitchValueListsOnlyWhereAsked) {
  // A sweep's boolean axis: each value checked and normalised.
  auto parsed = ParseArgs({"--follow=YES, no"}, TestSpecs(), {.switch_value_lists = true});
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("follow"), "true,false");
  parsed = ParseArgs({"--follow=true,maybe"}, TestSpecs(), {.switch_value_lists = true});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--follow: \"maybe\" is not a boolean (true or false)");
  // Elsewhere a list is no boolean.
  parsed = ParseArgs({"--follow=true,false"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--follow: \"true,false\" is not a boolean (true or false)");
}

TEST(ParseArgsTest, SwitchDoesNotConsumeTheNextWord) {
  auto parsed = ParseArgs({"--follow", "exp-000001"}, TestSpecs());
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(parsed->positionals, ElementsAre("exp-000001"));
}

TEST(ParseArgsTest, RepeatableFlagKeepsEveryValue) {
  auto parsed = ParseArgs({"--label", "a=1", "--label=b=2"}, TestSpecs());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_THAT(parsed->GetAll("label"), ElementsAre("a=1", "b=2"));
}

TEST(ParseArgsTest, NegativeNumbersAreValues) {
  auto parsed = ParseArgs({"--priority", "-1", "-5"}, TestSpecs());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->Get("priority"), "-1");
  EXPECT_THAT(parsed->positionals, ElementsAre("-5"));
}

TEST(ParseArgsTest, DoubleDashEndsFlags) {
  auto parsed = ParseArgs({"--", "--follow"}, TestSpecs());
  ASSERT_TRUE(parsed.ok());
  EXPECT_THAT(parsed->positionals, ElementsAre("--follow"));
  EXPECT_FALSE(parsed->Has("follow"));
}

TEST(ParseArgsTest, UnknownFlagSuggestsTheClosestName) {
  auto parsed = ParseArgs({"--tokns", "1"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message(), "unknown flag --tokns (did you mean --tokens?)");

  parsed = ParseArgs({"--zzzzzzzz"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "unknown flag --zzzzzzzz");
}

TEST(ParseArgsTest, SingleDashWordIsAnError) {
  auto parsed = ParseArgs({"-follow"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("flags start with --"));
}

TEST(ParseArgsTest, MissingValueIsAnError) {
  auto parsed = ParseArgs({"--num-tokens"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--num-tokens needs a value (INT)");

  parsed = ParseArgs({"--num-tokens", "--follow"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--num-tokens needs a value (INT)");
}

TEST(ParseArgsTest, EmptyValueAfterEqualsIsKept) {
  auto parsed = ParseArgs({"--priority="}, TestSpecs());
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->Get("priority"), "");
}

TEST(ParseArgsTest, NonRepeatableFlagTwiceIsAnError) {
  auto parsed = ParseArgs({"--priority", "1", "--priority", "2"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--priority given twice");

  parsed = ParseArgs({"--tokens", "1", "--num-tokens", "2"}, TestSpecs());
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "--num-tokens and --tokens set the same thing");
}

TEST(ParseCountFlagTest, AbsentValidAndOutOfRange) {
  const std::vector<FlagSpec> specs = {{.name = "limit", .value_syntax = "N", .help = ""}};
  auto parse = [&](std::vector<std::string> argv) {
    absl::StatusOr<ParsedArgs> args = ParseArgs(argv, specs);
    EXPECT_TRUE(args.ok()) << args.status();
    return ParseCountFlag(*args, "limit");
  };
  EXPECT_EQ(parse({}).value(), std::nullopt);
  EXPECT_EQ(parse({"--limit", "0"}).value(), 0);
  EXPECT_EQ(parse({"--limit", "2k"}).value(), 2000);
  EXPECT_EQ(parse({"--limit", "2147483647"}).value(), 2147483647);
  for (const char* bad : {"-1", "2147483648", "ten", "1.5"}) {
    const absl::StatusOr<std::optional<int32_t>> value = parse({"--limit", bad});
    ASSERT_FALSE(value.ok()) << bad;
    EXPECT_EQ(value.status().message(),
              absl::StrCat("--limit: \"", bad, "\" is not a count from 0 to 2147483647"));
  }
}

TEST(FormatFlagHelpTest, LongUsagesPutTheirHelpOnTheNextLine) {
  const std::vector<FlagSpec> specs = {
      {.name = "state", .value_syntax = "queued|running|finished|failed|cancelled", .help = "x"},
      {.name = "limit", .value_syntax = "N", .help = "page size"},
  };
  EXPECT_EQ(FormatFlagHelp(specs),
            "  --state queued|running|finished|failed|cancelled\n"
            "             x\n"
            "  --limit N  page size\n");
}

TEST(FormatFlagHelpTest, ListsSyntaxAliasesAndRepeatable) {
  EXPECT_EQ(FormatFlagHelp(TestSpecs()),
            "  --num-tokens INT  tokens (alias --tokens)\n"
            "  --follow[=BOOL]   stream events\n"
            "  --json\n"
            "  --label K=V       (repeatable)\n"
            "  --priority INT\n");
}

}  // namespace
}  // namespace gpuprof::client
