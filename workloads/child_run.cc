#include "workloads/child_run.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpuprof::workloads {
namespace {

// The child's failure as it travels in FILE.error: the status code, a newline, the message.
std::string EncodeStatus(const absl::Status& status) {
  return absl::StrCat(static_cast<int>(status.code()), "\n", status.message());
}

absl::Status DecodeStatus(absl::string_view encoded) {
  const size_t newline = encoded.find('\n');
  int code = static_cast<int>(absl::StatusCode::kUnknown);
  if (newline == absl::string_view::npos || !absl::SimpleAtoi(encoded.substr(0, newline), &code) ||
      code <= 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(encoded);
  }
  return absl::Status(static_cast<absl::StatusCode>(code), encoded.substr(newline + 1));
}

}  // namespace

absl::StatusOr<ScratchDirectory> ScratchDirectory::Create(absl::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/", prefix, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", strerror(errno)));
  }
  return ScratchDirectory(std::move(pattern));
}

ScratchDirectory::ScratchDirectory(ScratchDirectory&& other) noexcept
    : path_(std::exchange(other.path_, "")) {}

ScratchDirectory::~ScratchDirectory() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string ScratchDirectory::File(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

std::optional<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file.good()) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

bool WriteWholeFile(const std::string& path, absl::string_view bytes) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.close();
  return file.good();
}

std::string TailOf(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  return absl::StrCat("...", text.substr(text.size() - max_bytes));
}

std::string DescribeWaitStatus(int status) {
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by signal ", WTERMSIG(status), " (",
                        strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

absl::StatusOr<pid_t> StartChild(const std::vector<std::string>& argv,
                                 const std::string& output_file) {
  if (argv.empty()) return absl::InvalidArgumentError("StartChild: no command");
  const int output = open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (output < 0) {
    return absl::InternalError(absl::StrCat("open ", output_file, ": ", strerror(errno)));
  }
  // Built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> storage = argv;
  std::vector<char*> pointers;
  for (std::string& arg : storage) pointers.push_back(arg.data());
  pointers.push_back(nullptr);
  const std::string exec_failed = absl::StrCat("gpuprof_worker: exec of ", argv[0], " failed\n");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(output);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);
    dup2(output, STDOUT_FILENO);
    dup2(output, STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    // The worker's pipes to the daemon (fds 3 and 4) and anything else stay behind.
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      for (int fd = 3; fd < 4096; ++fd) close(fd);
    }
    execv(pointers[0], pointers.data());
    (void)!write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    _exit(127);
  }
  close(output);
  return pid;
}

absl::StatusOr<int> WaitForChild(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(absl::StrCat("waitpid: ", strerror(errno)));
  }
  return status;
}

ChildOutcome ReadChildOutcome(const std::string& assignment_file) {
  ChildOutcome outcome;
  if (const std::optional<std::string> error = ReadWholeFile(assignment_file + ".error");
      error.has_value()) {
    outcome.error = DecodeStatus(*error);
  }
  if (const std::optional<std::string> bytes = ReadWholeFile(assignment_file + ".result");
      bytes.has_value()) {
    v1::ExperimentResult result;
    if (result.ParseFromString(*bytes)) {
      outcome.result = std::move(result);
    } else if (!outcome.error.has_value()) {
      outcome.error = absl::DataLossError(
          absl::StrCat(assignment_file, ".result: the child's result does not parse"));
    }
  }
  return outcome;
}

absl::StatusOr<v1::ExperimentResult> RunAssignmentInChild(
    const std::string& assignment_path, absl::string_view who,
    const std::function<void(worker_protocol::ExperimentAssignment&)>& adjust,
    const FindRunnerFunction& find_runner) {
  auto fail = [&](const absl::Status& status) {
    std::fprintf(stderr, "gpuprof_worker (%.*s): %s\n", static_cast<int>(who.size()), who.data(),
                 status.ToString().c_str());
    WriteWholeFile(assignment_path + ".error", EncodeStatus(status));
    return status;
  };
  const std::optional<std::string> bytes = ReadWholeFile(assignment_path);
  worker_protocol::ExperimentAssignment assignment;
  if (!bytes.has_value() || !assignment.ParseFromString(*bytes)) {
    return fail(
        absl::InvalidArgumentError(absl::StrCat(assignment_path, ": not a readable assignment")));
  }
  if (adjust) adjust(assignment);
  const RunWorkloadFunction run = find_runner(assignment.request());
  if (run == nullptr) {
    return fail(absl::UnimplementedError("no runner for this workload in the worker"));
  }
  const RunContext context{.assignment = assignment,
                           .progress = [](v1::Phase, int64_t, int64_t, const std::string&) {},
                           .tracing = nullptr};
  absl::StatusOr<v1::ExperimentResult> result = run(context);
  if (!result.ok()) return fail(result.status());
  if (!WriteWholeFile(assignment_path + ".result", result->SerializeAsString())) {
    return fail(absl::InternalError(absl::StrCat("writing ", assignment_path, ".result")));
  }
  return result;
}

}  // namespace gpuprof::workloads
