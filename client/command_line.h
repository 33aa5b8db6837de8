// Generic command-line parsing for the gpuprof CLI: argv words -> flags and positionals,
// against a table of the flags a command accepts. Knows nothing about the API; values are
// read in common/field_text's syntax.
#ifndef GPUPROF_CLIENT_COMMAND_LINE_H_
#define GPUPROF_CLIENT_COMMAND_LINE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace gpuprof::client {

struct FlagSpec {
  // Canonical name without the leading "--", words joined by '-': "num-tokens". The same name
  // with '_' ("--num_tokens") is accepted too.
  std::string name;
  // Other names for the same flag ("tokens" for "num-tokens").
  std::vector<std::string> aliases;
  // A switch takes no separate value: "--follow" means true, "--follow=false" false.
  bool is_switch = false;
  // Whether the flag may be given more than once (each value is kept).
  bool repeatable = false;
  // How the value is written, for help and errors: "INT", "ADDR", "fp32|fp16". A switch with
  // one ("BOOL") is shown as "--name[=BOOL]".
  std::string value_syntax;
  std::string help;
};

struct FlagValue {
  std::string name;        // the spec's canonical name
  std::string typed_name;  // as the user wrote it, without "--" (errors quote this)
  std::string value;       // switches hold "true" or "false"
};

struct ParsedArgs {
  std::vector<std::string> positionals;
  std::vector<FlagValue> flags;  // in command-line order

  bool Has(absl::string_view name) const;
  // The last value given for `name`, if any.
  std::optional<std::string> Get(absl::string_view name) const;
  std::vector<std::string> GetAll(absl::string_view name) const;
  // A switch's value; false when not given.
  bool Switch(absl::string_view name) const;
};

struct ParseOptions {
  // A switch may be given a comma-separated list of booleans ("--causal=true,false": a sweep's
  // axis); each is checked and written back as "true" or "false".
  bool switch_value_lists = false;
};

// Parses `args` (without the program and command names). Accepts "--name value",
// "--name=value", switches, and "--" (everything after it is positional). Errors
// (InvalidArgument) name the flag: unknown flags (with a suggestion), a missing value, a
// non-repeatable flag given twice, a switch given a non-boolean value.
absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs,
                                     const ParseOptions& options = {});

// A count flag's value (--limit N): nullopt when `name` is absent, else a whole count from 0 to
// 2^31 - 1 in ParseSizedInteger's syntax (so "2k" is 2000). The error names the flag.
absl::StatusOr<std::optional<int32_t>> ParseCountFlag(const ParsedArgs& args,
                                                      absl::string_view name);

// The name in `names` a typo most likely meant (edit distance at most 2, or a name that
// starts with `typed`); empty when none is close.
std::string ClosestName(absl::string_view typed, const std::vector<std::string>& names);

// Flag names are matched with '_' read as '-': "num_tokens" -> "num-tokens".
std::string NormalizeFlagName(absl::string_view name);

// One aligned line per flag: "  --num-tokens INT  help (alias --tokens)".
std::string FormatFlagHelp(const std::vector<FlagSpec>& specs);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_COMMAND_LINE_H_
