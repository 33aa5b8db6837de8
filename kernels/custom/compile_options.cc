#include "kernels/custom/compile_options.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace gpuprof::kernels {

bool IsCIdentifier(absl::string_view name) {
  if (name.empty() || !(absl::ascii_isalpha(name[0]) || name[0] == '_')) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

bool IsAllowedUserCompileOption(absl::string_view option) {
  if (option.size() > static_cast<size_t>(kMaxUserCompileOptionBytes)) return false;
  if (option == "-lineinfo" || option == "--use_fast_math") return true;
  absl::string_view rest = option;
  if (absl::ConsumePrefix(&rest, "-maxrregcount=")) {
    int registers = 0;
    return !rest.empty() && std::all_of(rest.begin(), rest.end(), absl::ascii_isdigit) &&
           absl::SimpleAtoi(rest, &registers) && registers >= 16 && registers <= 255;
  }
  if (absl::ConsumePrefix(&rest, "-D")) {
    const size_t equals = rest.find('=');
    const absl::string_view name = rest.substr(0, equals);
    const absl::string_view value =
        equals == absl::string_view::npos ? absl::string_view() : rest.substr(equals + 1);
    // No spaces, quotes or shell characters: a value is a number or a name.
    return IsCIdentifier(name) && std::all_of(value.begin(), value.end(), [](char c) {
             return absl::ascii_isalnum(c) || c == '_' || c == '.' || c == '+' || c == '-';
           });
  }
  return false;
}

absl::Status ValidateUserCompileOptions(const std::vector<std::string>& options) {
  if (options.size() > static_cast<size_t>(kMaxUserCompileOptions)) {
    return absl::InvalidArgumentError(absl::StrCat(options.size(), " compile options; at most ",
                                                   kMaxUserCompileOptions, " are allowed"));
  }
  for (const std::string& option : options) {
    if (IsAllowedUserCompileOption(option)) continue;
    const bool long_option = option.size() > static_cast<size_t>(kMaxUserCompileOptionBytes);
    return absl::InvalidArgumentError(absl::StrCat(
        "compile option \"", absl::CHexEscape(long_option ? option.substr(0, 40) : option),
        long_option ? absl::StrCat("...\" is longer than ", kMaxUserCompileOptionBytes, " bytes; ")
                    : "\" is not allowed; ",
        kAllowedUserCompileOptions));
  }
  return absl::OkStatus();
}

}  // namespace gpuprof::kernels
