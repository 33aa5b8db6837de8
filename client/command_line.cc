#include "client/command_line.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/table.h"
#include "common/field_text.h"

namespace gpuprof::client {
namespace {

// Edit distance, to suggest the flag a typo meant.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> previous(b.size() + 1), current(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

std::string UnknownFlagMessage(absl::string_view typed, const std::vector<FlagSpec>& specs) {
  const std::string normalized = NormalizeFlagName(typed);
  std::string best;
  size_t best_distance = 3;  // suggest only close matches
  for (const FlagSpec& spec : specs) {
    std::vector<std::string> names = spec.aliases;
    names.push_back(spec.name);
    for (const std::string& name : names) {
      const size_t distance = EditDistance(normalized, name);
      if (distance < best_distance || (absl::StartsWith(name, normalized) && best.empty())) {
        best_distance = std::min(distance, best_distance);
        best = name;
      }
    }
  }
  std::string message = absl::StrCat("unknown flag --", typed);
  if (!best.empty()) absl::StrAppend(&message, " (did you mean --", best, "?)");
  return message;
}

bool LooksLikeFlag(absl::string_view word) {
  return word.size() > 2 && absl::StartsWith(word, "--");
}

}  // namespace

std::string ClosestName(absl::string_view typed, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 3;  // suggest only close matches
  for (const std::string& name : names) {
    const size_t distance = EditDistance(typed, name);
    if (distance < best_distance ||
        (!typed.empty() && absl::StartsWith(name, typed) && best.empty())) {
      best_distance = std::min(distance, best_distance);
      best = name;
    }
  }
  return best;
}

std::string NormalizeFlagName(absl::string_view name) {
  return absl::StrReplaceAll(name, {{"_", "-"}});
}

absl::StatusOr<std::optional<int32_t>> ParseCountFlag(const ParsedArgs& args,
                                                      absl::string_view name) {
  const std::optional<std::string> text = args.Get(name);
  if (!text.has_value()) return std::optional<int32_t>();
  const absl::StatusOr<int64_t> value = ParseSizedInteger(*text, SizeUnits::kCount);
  if (!value.ok() || *value < 0 || *value > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": \"", *text,
                                                   "\" is not a count from 0 to ",
                                                   std::numeric_limits<int32_t>::max()));
  }
  return std::optional<int32_t>(static_cast<int32_t>(*value));
}

bool ParsedArgs::Has(absl::string_view name) const {
  return std::any_of(flags.begin(), flags.end(),
                     [name](const FlagValue& flag) { return flag.name == name; });
}

std::optional<std::string> ParsedArgs::Get(absl::string_view name) const {
  for (auto it = flags.rbegin(); it != flags.rend(); ++it) {
    if (it->name == name) return it->value;
  }
  return std::nullopt;
}

std::vector<std::string> ParsedArgs::GetAll(absl::string_view name) const {
  std::vector<std::string> values;
  for (const FlagValue& flag : flags) {
    if (flag.name == name) values.push_back(flag.value);
  }
  return values;
}

bool ParsedArgs::Switch(absl::string_view name) const { return Get(name) == "true"; }

absl::StatusOr<ParsedArgs> ParseArgs(const std::vector<std::string>& args,
                                     const std::vector<FlagSpec>& specs,
                                     const ParseOptions& options) {
  absl::flat_hash_map<std::string, const FlagSpec*> by_name;
  for (const FlagSpec& spec : specs) {
    by_name[spec.name] = &spec;
    for (const std::string& alias : spec.aliases) by_name[NormalizeFlagName(alias)] = &spec;
  }

  ParsedArgs parsed;
  absl::flat_hash_map<std::string, std::string> first_typed_name;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      parsed.positionals.insert(parsed.positionals.end(), args.begin() + i + 1, args.end());
      break;
    }
    if (!LooksLikeFlag(word)) {
      // A single dash is a typo for a flag ("-follow"), unless it is a negative number.
      if (word.size() > 1 && word[0] == '-' && !absl::ascii_isdigit(word[1])) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown flag ", word, " (flags start with --)"));
      }
      parsed.positionals.push_back(word);
      continue;
    }
    absl::string_view body = absl::string_view(word).substr(2);
    std::optional<std::string> value;
    if (const size_t equals = body.find('='); equals != absl::string_view::npos) {
      value = std::string(body.substr(equals + 1));
      body = body.substr(0, equals);
    }
    const auto it = by_name.find(NormalizeFlagName(body));
    if (it == by_name.end()) {
      return absl::InvalidArgumentError(UnknownFlagMessage(body, specs));
    }
    const FlagSpec& spec = *it->second;
    if (spec.is_switch) {
      if (!value.has_value()) {
        value = "true";
      } else {
        std::vector<std::string> normalised;
        const std::vector<std::string> parts = options.switch_value_lists
                                                   ? absl::StrSplit(*value, ',')
                                                   : std::vector<std::string>{*value};
        for (const std::string& part : parts) {
          absl::StatusOr<bool> parsed_bool = ParseBool(absl::StripAsciiWhitespace(part));
          if (!parsed_bool.ok()) {
            return absl::InvalidArgumentError(
                absl::StrCat("--", body, ": ", parsed_bool.status().message()));
          }
          normalised.push_back(*parsed_bool ? "true" : "false");
        }
        value = absl::StrJoin(normalised, ",");
      }
    } else if (!value.has_value()) {
      if (i + 1 >= args.size() || LooksLikeFlag(args[i + 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", body, " needs a value", spec.value_syntax.empty() ? "" : " (",
                         spec.value_syntax, spec.value_syntax.empty() ? "" : ")"));
      }
      value = args[++i];
    }
    if (!spec.repeatable) {
      const auto [previous, inserted] = first_typed_name.emplace(spec.name, std::string(body));
      if (!inserted) {
        return absl::InvalidArgumentError(
            previous->second == body
                ? absl::StrCat("--", body, " given twice")
                : absl::StrCat("--", body, " and --", previous->second, " set the same thing"));
      }
    }
    parsed.flags.push_back({spec.name, std::string(body), *std::move(value)});
  }
  return parsed;
}

std::string FormatFlagHelp(const std::vector<FlagSpec>& specs) {
  // Usages longer than this (long enum choices) get their help on the next line, so that one
  // long flag does not push every help text far right.
  constexpr size_t kMaxUsageColumn = 32;
  std::vector<std::pair<std::string, std::string>> rows;
  size_t usage_width = 0;
  for (const FlagSpec& spec : specs) {
    std::string usage = absl::StrCat("--", spec.name);
    if (spec.is_switch) {
      // Only switches set from a bool field advertise "=false"; --json=false reads oddly.
      if (!spec.value_syntax.empty()) absl::StrAppend(&usage, "[=", spec.value_syntax, "]");
    } else if (!spec.value_syntax.empty()) {
      absl::StrAppend(&usage, " ", spec.value_syntax);
    }
    std::string help = spec.help;
    std::vector<std::string> notes;
    if (!spec.aliases.empty()) {
      std::vector<std::string> dashed;
      for (const std::string& alias : spec.aliases) dashed.push_back("--" + alias);
      notes.push_back(absl::StrCat("alias ", absl::StrJoin(dashed, ", ")));
    }
    if (spec.repeatable) notes.push_back("repeatable");
    if (!notes.empty()) {
      absl::StrAppend(&help, help.empty() ? "" : " ", "(", absl::StrJoin(notes, "; "), ")");
    }
    if (DisplayWidth(usage) <= kMaxUsageColumn) {
      usage_width = std::max(usage_width, DisplayWidth(usage));
    }
    rows.emplace_back(std::move(usage), std::move(help));
  }
  std::string out;
  const std::string help_indent(2 + usage_width + 2, ' ');
  for (const auto& [usage, help] : rows) {
    absl::StrAppend(&out, "  ", usage);
    if (!help.empty()) {
      const size_t width = DisplayWidth(usage);
      if (width > usage_width) {
        absl::StrAppend(&out, "\n", help_indent);
      } else {
        out.append(usage_width - width + 2, ' ');
      }
      absl::StrAppend(&out, help);
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace gpuprof::client
