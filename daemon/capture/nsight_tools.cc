#include "daemon/capture/nsight_tools.h"

#include <fcntl.h>
#include <glob.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace gpuprof::daemon {
namespace {

// What a tool's --version or --list-sets may print before we stop reading.
constexpr size_t kMaxToolOutputBytes = 64 << 10;

std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> found;
  glob_t matches{};
  if (glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) found.emplace_back(matches.gl_pathv[i]);
  }
  globfree(&matches);
  return found;
}

}  // namespace

std::string NsightToolName(v1::NsightCapture::Tool tool) {
  return tool == v1::NsightCapture::TOOL_NSYS ? "nsys" : "ncu";
}

std::string CaptureReportExtension(v1::NsightCapture::Tool tool) {
  return tool == v1::NsightCapture::TOOL_NSYS ? ".nsys-rep" : ".ncu-rep";
}

std::string CaptureReportPath(const std::string& reports_dir, const std::string& experiment_id,
                              v1::NsightCapture::Tool tool) {
  return absl::StrCat(reports_dir, "/", experiment_id, CaptureReportExtension(tool));
}

const NsightTool& ToolOf(const CaptureTools& tools, v1::NsightCapture::Tool tool) {
  return tool == v1::NsightCapture::TOOL_NSYS ? tools.nsys : tools.ncu;
}

std::vector<std::string> NsightToolCandidates(v1::NsightCapture::Tool tool, const char* path_env,
                                              std::vector<std::string> installed) {
  const std::string name = NsightToolName(tool);
  std::vector<std::string> candidates;
  auto add = [&](std::string file) {
    if (std::find(candidates.begin(), candidates.end(), file) == candidates.end()) {
      candidates.push_back(std::move(file));
    }
  };
  if (path_env != nullptr) {
    for (absl::string_view directory : absl::StrSplit(path_env, ':', absl::SkipEmpty())) {
      add(absl::StrCat(absl::StripSuffix(directory, "/"), "/", name));
    }
  }
  add(absl::StrCat("/usr/local/cuda/bin/", name));
  // Version directories sort by name; the newest is the greatest.
  std::sort(installed.begin(), installed.end(), std::greater<>());
  for (std::string& file : installed) add(std::move(file));
  return candidates;
}

NsightTool FindNsightTool(v1::NsightCapture::Tool tool, const std::string& flag_value,
                          const std::vector<std::string>& candidates,
                          const std::function<bool(const std::string&)>& is_executable,
                          const std::function<std::string(const std::string&)>& version_of) {
  NsightTool found;
  found.flag = absl::StrCat("--", NsightToolName(tool), "_path");
  found.looked_in = flag_value.empty() ? candidates : std::vector<std::string>{flag_value};
  for (const std::string& candidate : found.looked_in) {
    if (!is_executable(candidate)) continue;
    found.path = candidate;
    found.version = version_of(candidate);
    break;
  }
  return found;
}

NsightTool DiscoverNsightTool(v1::NsightCapture::Tool tool, const std::string& flag_value) {
  std::vector<std::string> installed;
  if (tool == v1::NsightCapture::TOOL_NSYS) {
    installed = Glob("/opt/nvidia/nsight-systems/*/bin/nsys");
    // Nsight Compute ships an nsys of its own (its report importer needs libdw.so.1); a
    // machine with only Nsight Compute can take nsys captures with it. Sorted with the others,
    // Nsight Systems' own installs come first ("nsight-systems" > "nsight-compute").
    for (std::string& file : Glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys")) {
      installed.push_back(std::move(file));
    }
  } else {
    installed = Glob("/opt/nvidia/nsight-compute/*/ncu");
  }
  NsightTool found = FindNsightTool(
      tool, flag_value, NsightToolCandidates(tool, std::getenv("PATH"), installed),
      [](const std::string& file) { return access(file.c_str(), X_OK) == 0; },
      RunVersionCommand);
  // ncu takes a set name it does not know without a word and profiles nothing (a 45 KB report
  // of launch statistics only, on ncu 2025.3.1): admission checks the name against this list.
  if (tool == v1::NsightCapture::TOOL_NCU && !found.path.empty()) {
    found.sets = ParseNcuSetList(RunToolCommand(found.path, "--list-sets"));
  }
  return found;
}

std::string RunVersionCommand(const std::string& binary) {
  std::string last;
  for (absl::string_view line : absl::StrSplit(RunToolCommand(binary, "--version"), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) last = std::string(line);
  }
  return last;
}

std::vector<std::string> ParseNcuSetList(absl::string_view list_sets_output) {
  // Rows count only under the table's header: anything else (an error, another tool's
  // output) leaves the sets unknown rather than wrong.
  std::vector<std::string> sets;
  bool in_table = false;
  for (absl::string_view line : absl::StrSplit(list_sets_output, '\n')) {
    if (line.empty() || absl::ascii_isspace(static_cast<unsigned char>(line[0])) ||
        line[0] == '-') {
      continue;
    }
    const absl::string_view word = line.substr(0, line.find_first_of(" \t\r"));
    if (word == "Identifier") {
      in_table = true;
    } else if (in_table) {
      sets.emplace_back(word);
    }
  }
  return sets;
}

absl::Status CheckNcuSet(const NsightTool& ncu, const std::string& ncu_set) {
  if (ncu.sets.empty() || std::find(ncu.sets.begin(), ncu.sets.end(), ncu_set) != ncu.sets.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "capture.ncu_set: got \"", ncu_set, "\"; this node's ncu",
      ncu.version.empty() ? "" : absl::StrCat(" (", ncu.version, ")"), " has ",
      absl::StrJoin(ncu.sets, ", "), " (`ncu --list-sets`)"));
}

std::string RunToolCommand(const std::string& binary, const std::string& argument) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return "";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::string argv0 = binary;
  std::string argv1 = argument;
  char* argv[] = {argv0.data(), argv1.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  std::string output;
  if (spawned == 0) {
    char buffer[4096];
    ssize_t got = 0;
    while ((got = read(pipe_fds[0], buffer, sizeof(buffer))) > 0 ||
           (got < 0 && errno == EINTR)) {
      if (got > 0 && output.size() < kMaxToolOutputBytes) output.append(buffer, got);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  close(pipe_fds[0]);
  return output;
}

absl::Status CheckCaptureToolAvailable(const CaptureTools& tools, v1::NsightCapture::Tool tool) {
  const NsightTool& found = ToolOf(tools, tool);
  if (!found.path.empty()) return absl::OkStatus();
  const std::string name = NsightToolName(tool);
  return absl::FailedPreconditionError(absl::StrCat(
      "capture.tool: ", name, " is not installed on this node (looked in ",
      found.looked_in.empty() ? "nothing" : absl::StrJoin(found.looked_in, ", "),
      "); install NVIDIA Nsight ", tool == v1::NsightCapture::TOOL_NSYS ? "Systems" : "Compute",
      " or start gpuprofd with ", found.flag.empty() ? absl::StrCat("--", name, "_path") : found.flag,
      "=FILE"));
}

}  // namespace gpuprof::daemon
