#include "client/custom_kernel.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/kernel_render.h"
#include "common/terminal_text.h"
#include "kernels/custom/compile_options.h"

namespace gpuprof::client {
namespace {

bool IsIdentifierStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsIdentifierChar(char c) { return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The source as tokens: identifiers, string and character literals (quotes kept), and single
// punctuation characters. Comments and preprocessor lines are dropped.
std::vector<std::string> Tokens(absl::string_view source) {
  std::vector<std::string> tokens;
  bool line_start = true;
  size_t i = 0;
  while (i < source.size()) {
    const char c = source[i];
    if (c == '\n') {
      line_start = true;
      ++i;
      continue;
    }
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) {
      ++i;
      continue;
    }
    if (c == '#' && line_start) {
      // A directive runs to the end of the line, continued by a backslash.
      while (i < source.size() && source[i] != '\n') {
        if (source[i] == '\\' && i + 1 < source.size()) ++i;
        ++i;
      }
      continue;
    }
    line_start = false;
    if (source.substr(i, 2) == "//") {
      while (i < source.size() && source[i] != '\n') ++i;
      continue;
    }
    if (source.substr(i, 2) == "/*") {
      const size_t end = source.find("*/", i + 2);
      i = end == absl::string_view::npos ? source.size() : end + 2;
      continue;
    }
    if (c == '"' || c == '\'') {
      size_t end = i + 1;
      while (end < source.size() && source[end] != c && source[end] != '\n') {
        if (source[end] == '\\') ++end;
        ++end;
      }
      tokens.emplace_back(source.substr(i, std::min(end + 1, source.size()) - i));
      i = end + 1;
      continue;
    }
    if (IsIdentifierStart(c)) {
      size_t end = i;
      while (end < source.size() && IsIdentifierChar(source[end])) ++end;
      tokens.emplace_back(source.substr(i, end - i));
      i = end;
      continue;
    }
    tokens.emplace_back(1, c);
    ++i;
  }
  return tokens;
}

// From tokens[at] on, a declaration up to its parameter list: the function's name when it is
// __global__, else empty. `at` ends past the name's '(' (or where the declaration ended).
std::string GlobalFunctionName(const std::vector<std::string>& tokens, size_t& at) {
  bool global = false;
  std::string last_identifier;
  while (at < tokens.size()) {
    const std::string& token = tokens[at];
    if (token == ";" || token == "{" || token == "}") return "";
    if (token == "(") {
      ++at;
      return global ? last_identifier : "";
    }
    if (token == "__launch_bounds__" || token == "__attribute__" || token == "__declspec") {
      // Skip its parenthesised arguments.
      ++at;
      int depth = 0;
      while (at < tokens.size()) {
        if (tokens[at] == "(") ++depth;
        if (tokens[at] == ")" && --depth <= 0) break;
        ++at;
      }
      ++at;
      continue;
    }
    if (token == "__global__") global = true;
    if (IsIdentifierStart(token[0])) last_identifier = token;
    ++at;
  }
  return "";
}

// Skips a balanced group that opens at tokens[at] ('(' or '{'); `at` ends past its close.
void SkipGroup(const std::vector<std::string>& tokens, size_t& at) {
  const std::string open = tokens[at];
  const std::string close = open == "(" ? ")" : "}";
  int depth = 0;
  while (at < tokens.size()) {
    if (tokens[at] == open) ++depth;
    if (tokens[at] == close && --depth == 0) {
      ++at;
      return;
    }
    ++at;
  }
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool IsKernelFlagWord(absl::string_view word, absl::string_view name) {
  if (!absl::StartsWith(word, "--")) return false;
  absl::string_view body = word.substr(2);
  body = body.substr(0, body.find('='));
  return NormalizeFlagName(body) == name;
}

}  // namespace

absl::StatusOr<std::string> ReadKernelFile(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--kernel-file ", path, ": ",
                                                   std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kernel-file ", path, ": not a regular file"));
  }
  if (info.st_size > kMaxKernelFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kernel-file ", path, ": ", info.st_size, " bytes, over the ", kMaxKernelFileBytes / 1024,
        " KiB a kernel source may have"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("--kernel-file ", path, ": ",
                                                   std::strerror(errno)));
  }
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("--kernel-file ", path, ": read failed"));
  }
  // The file may have grown since stat.
  if (static_cast<int64_t>(source.size()) > kMaxKernelFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--kernel-file ", path, ": over the ", kMaxKernelFileBytes / 1024,
        " KiB a kernel source may have"));
  }
  if (source.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--kernel-file ", path, ": the file is empty"));
  }
  return source;
}

std::vector<std::string> ExternCGlobalFunctions(absl::string_view source) {
  const std::vector<std::string> tokens = Tokens(source);
  std::vector<std::string> names;
  size_t at = 0;
  while (at < tokens.size()) {
    if (tokens[at] != "extern" || at + 1 >= tokens.size() || tokens[at + 1] != "\"C\"") {
      ++at;
      continue;
    }
    at += 2;
    if (at < tokens.size() && tokens[at] == "{") {
      // extern "C" { ... }: every __global__ declaration inside.
      ++at;
      int depth = 1;
      while (at < tokens.size() && depth > 0) {
        if (tokens[at] == "}") {
          --depth;
          ++at;
          continue;
        }
        const size_t start = at;
        std::string name = GlobalFunctionName(tokens, at);
        if (!name.empty()) {
          names.push_back(std::move(name));
          // Past the parameter list and the body.
          --at;
          SkipGroup(tokens, at);
          if (at < tokens.size() && tokens[at] == "{") SkipGroup(tokens, at);
        } else if (at == start) {
          ++at;
        } else if (at < tokens.size() && tokens[at] == "{") {
          SkipGroup(tokens, at);
        }
      }
      continue;
    }
    std::string name = GlobalFunctionName(tokens, at);
    if (!name.empty()) names.push_back(std::move(name));
  }
  return names;
}

absl::StatusOr<std::string> ChooseKernelName(absl::string_view source,
                                             absl::string_view file_name,
                                             const std::optional<std::string>& given) {
  const std::vector<std::string> found = ExternCGlobalFunctions(source);
  if (given.has_value()) {
    if (!found.empty() && std::find(found.begin(), found.end(), *given) == found.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kernel-name ", *given, ": ", file_name, " has no extern \"C\" __global__ function of "
          "that name (it has ", absl::StrJoin(found, ", "), ")"));
    }
    return *given;
  }
  if (found.size() == 1) return found[0];
  if (found.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, " declares no extern \"C\" __global__ function: declare the kernel "
        "extern \"C\" __global__ (docs/custom-kernels.md), or name it with --kernel-name"));
  }
  return absl::InvalidArgumentError(absl::StrCat(file_name, " declares ", found.size(),
                                                 " extern \"C\" __global__ functions (",
                                                 absl::StrJoin(found, ", "),
                                                 "): choose one with --kernel-name"));
}

absl::StatusOr<v1::CustomKernel> KernelFromFile(const std::string& path,
                                                const std::optional<std::string>& kernel_name) {
  absl::StatusOr<std::string> source = ReadKernelFile(path);
  if (!source.ok()) return source.status();
  v1::CustomKernel kernel;
  kernel.set_file_name(BaseName(path));
  absl::StatusOr<std::string> name = ChooseKernelName(*source, kernel.file_name(), kernel_name);
  if (!name.ok()) return name.status();
  kernel.set_kernel_name(*name);
  kernel.set_source(*std::move(source));
  return kernel;
}

absl::Status RefuseCustomKernelFlags(const ExperimentRequestBuilder& builder,
                                     const std::vector<std::string>& words) {
  if (TakesCustomKernel(builder.workload())) return absl::OkStatus();
  for (const std::string& word : words) {
    if (word == "--") break;
    for (const std::string& name : CustomKernelFlagNames()) {
      if (!IsKernelFlagWord(word, name)) continue;
      // A spec field of the same name is the workload's own flag.
      if (builder.FieldForFlag(name) != nullptr) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": ", builder.workload(),
                       " takes no custom kernel; custom kernels run for index, store and "
                       "attention (decode): docs/custom-kernels.md"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckCustomKernelFlags(const ExperimentRequestBuilder& builder,
                                    const ParsedArgs& args, const v1::ExperimentRequest& request,
                                    const std::vector<std::string>& kernel_files) {
  std::string first_kernel_flag;
  for (const FlagValue& flag : args.flags) {
    for (const FlagSpec& spec : builder.custom_kernel_flags()) {
      if (flag.name == spec.name && first_kernel_flag.empty()) first_kernel_flag = flag.typed_name;
    }
  }
  if (first_kernel_flag.empty()) return absl::OkStatus();
  if (kernel_files.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", first_kernel_flag, " is about a kernel of your own: give its source with "
        "--kernel-file PATH"));
  }
  const v1::CustomKernel& kernel = request.custom_kernel();
  // The compile's own rule set (admission applies it too): a bad option costs no queue wait.
  if (const absl::Status options = kernels::ValidateUserCompileOptions(
          {kernel.compile_options().begin(), kernel.compile_options().end()});
      !options.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--kernel-option: ", options.message()));
  }
  if (!kernel.sanitizer_tool().empty() && kernel.mode() != v1::CustomKernel::MODE_SANITIZE) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sanitizer ", kernel.sanitizer_tool(), " needs --mode sanitize"));
  }
  if (request.has_attention() && request.attention().phase() == v1::ATTENTION_PHASE_PREFILL) {
    return absl::InvalidArgumentError(
        "--kernel-file: attention takes a custom kernel in its decode phase only "
        "(--phase decode)");
  }
  return absl::OkStatus();
}

absl::Status ApplyKernelFile(const ExperimentRequestBuilder& builder, const ParsedArgs& args,
                             v1::ExperimentRequest& request) {
  const std::vector<std::string> files = args.GetAll(kKernelFileFlag);
  if (files.size() > 1 ||
      (files.size() == 1 && absl::StrContains(files[0], ','))) {
    return absl::InvalidArgumentError(
        "--kernel-file: submit runs one kernel; compare several with gpuprof sweep "
        "--kernel-file a.cu,b.cu");
  }
  if (const absl::Status flags = CheckCustomKernelFlags(builder, args, request, files);
      !flags.ok() || files.empty()) {
    return flags;
  }
  absl::StatusOr<v1::CustomKernel> kernel =
      KernelFromFile(files[0], request.custom_kernel().kernel_name().empty()
                                   ? std::nullopt
                                   : std::optional(request.custom_kernel().kernel_name()));
  if (!kernel.ok()) return kernel.status();
  request.mutable_custom_kernel()->MergeFrom(*kernel);
  return absl::OkStatus();
}

absl::StatusOr<v1::SweepAxis> KernelSweepAxis(const std::vector<std::string>& entries,
                                              const std::optional<std::string>& kernel_name) {
  if (entries.size() < 2) {
    return absl::InvalidArgumentError(
        "--kernel-file: a kernel axis needs two or more entries, e.g. a.cu,b.cu or ours,a.cu");
  }
  v1::SweepAxis axis;
  axis.set_field(std::string(kKernelAxisName));
  std::set<std::string> labels;
  for (const std::string& entry : entries) {
    v1::CustomKernel kernel;
    std::string label(kOurKernelWord);
    if (entry != kOurKernelWord) {
      absl::StatusOr<v1::CustomKernel> read = KernelFromFile(entry, kernel_name);
      if (!read.ok()) return read.status();
      kernel = *std::move(read);
      label = kernel.file_name();
    }
    if (!labels.insert(label).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kernel-file: ", label, " is in the list twice (points are named by the file's base "
          "name: rename one)"));
    }
    axis.add_values(label);
    *axis.add_kernels() = std::move(kernel);
  }
  return axis;
}

bool KernelDidNotCompile(v1::ExperimentState state, absl::string_view reason,
                         const v1::ExperimentResult& result) {
  if (state != v1::FAILED) return false;
  if (absl::StartsWithIgnoreCase(reason, "compile") || HasCompilerError(reason)) return true;
  const v1::CustomKernelResult& kernel = result.custom_kernel();
  return !kernel.compile_log().empty() && kernel.registers_per_thread() == 0;
}

std::string CompilerMessages(absl::string_view reason, const v1::ExperimentResult& result) {
  const absl::string_view log =
      result.custom_kernel().compile_log().empty() ? reason : result.custom_kernel().compile_log();
  std::string out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    absl::StrAppend(&out, EscapeForTerminal(absl::StripSuffix(line, "\r")), "\n");
  }
  // One line break at the end, whatever the log ended with.
  while (absl::EndsWith(out, "\n\n")) out.pop_back();
  return out;
}

}  // namespace gpuprof::client
