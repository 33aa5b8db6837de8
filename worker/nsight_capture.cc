#include "worker/nsight_capture.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace gpuprof::worker {
namespace {

// The tool's output kept for an error message.
constexpr size_t kOutputTailBytes = 4 << 10;

// A scratch directory removed with everything in it when this goes out of scope.
class ScratchDirectory {
 public:
  static absl::StatusOr<ScratchDirectory> Create() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/gpuprof-capture-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp ", pattern, ": ", strerror(errno)));
    }
    return ScratchDirectory(pattern);
  }
  ScratchDirectory(ScratchDirectory&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ~ScratchDirectory() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  std::string File(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  explicit ScratchDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

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

std::string Tail(absl::string_view text, size_t max_bytes) {
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

// Starts `argv` with stdout and stderr into `output_file`. The child dies with this thread
// (PR_SET_PDEATHSIG) and stays in the worker's process group, which the daemon kills at the
// experiment's timeout.
absl::StatusOr<pid_t> StartChild(const std::vector<std::string>& argv_strings,
                                 const std::string& output_file) {
  const int output = open(output_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (output < 0) {
    return absl::InternalError(absl::StrCat("open ", output_file, ": ", strerror(errno)));
  }
  std::vector<std::string> storage = argv_strings;
  std::vector<char*> argv;
  for (std::string& arg : storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
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
    // The worker's pipes to the daemon (fds 3 and 4) stay behind.
    if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
      for (int fd = 3; fd < 4096; ++fd) close(fd);
    }
    execv(argv[0], argv.data());
    const char message[] = "gpuprof_worker: exec of the capture tool failed\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
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

std::string Sha256Hex(absl::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) absl::StrAppendFormat(&hex, "%02x", digest[i]);
  return hex;
}

std::string ToolName(v1::NsightCapture::Tool tool) {
  return tool == v1::NsightCapture::TOOL_NSYS ? "nsys" : "ncu";
}

}  // namespace

absl::StatusOr<v1::CaptureReport> RunCapture(
    const worker_protocol::ExperimentAssignment& assignment,
    const std::function<void(int64_t done, const std::string& message)>& progress) {
  const worker_protocol::CaptureSetup& setup = assignment.capture();
  const v1::NsightCapture& capture = assignment.request().capture();
  const std::string tool = ToolName(capture.tool());
  if (setup.tool_path().empty() || setup.report_path().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the daemon sent no ", tool, " or no report path for the capture"));
  }
  std::error_code error;
  const std::filesystem::path worker_binary =
      std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("the worker's own binary (/proc/self/exe): ", error.message()));
  }
  ASSIGN_OR_RETURN(const ScratchDirectory scratch, ScratchDirectory::Create());
  const std::string assignment_file = scratch.File("assignment.pb");
  worker_protocol::ExperimentAssignment child = assignment;
  *child.mutable_request() = RequestForCaptureChild(assignment.request());
  child.clear_capture();
  if (!WriteWholeFile(assignment_file, child.SerializeAsString())) {
    return absl::InternalError(absl::StrCat("writing ", assignment_file));
  }
  const std::string partial = PartialReportPath(setup.report_path());
  std::filesystem::remove(partial, error);
  const std::vector<std::string> command =
      CaptureCommand(capture, setup.tool_path(), partial, worker_binary.string(), assignment_file);
  progress(0, absl::StrCat("running the experiment again under ", tool, " (",
                           setup.tool_version().empty() ? setup.tool_path() : setup.tool_version(),
                           ")"));
  ASSIGN_OR_RETURN(const pid_t pid, StartChild(command, scratch.File("tool.out")));
  ASSIGN_OR_RETURN(const int wait_status, WaitForChild(pid));
  const std::string output =
      Tail(ReadWholeFile(scratch.File("tool.out")).value_or(""), kOutputTailBytes);
  const std::optional<std::string> child_error = ReadWholeFile(assignment_file + ".error");
  auto fail = [&](absl::Status status) {
    std::filesystem::remove(partial, error);
    return status;
  };
  if (child_error.has_value()) {
    const absl::Status failed = DecodeStatus(*child_error);
    return fail(absl::Status(failed.code(), absl::StrCat("the run under ", tool, " failed: ",
                                                         failed.message())));
  }
  if (!ReadWholeFile(assignment_file + ".result").has_value()) {
    return fail(absl::InternalError(absl::StrCat(tool, " (or the run under it) ",
                                                 DescribeWaitStatus(wait_status),
                                                 " before the run ended: ", output)));
  }
  const std::optional<std::string> report = ReadWholeFile(partial);
  if (!report.has_value() || report->empty()) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        tool, " wrote no report (it ", DescribeWaitStatus(wait_status), "): ", output)));
  }
  if (setup.max_report_bytes() > 0 &&
      static_cast<int64_t>(report->size()) > setup.max_report_bytes()) {
    return fail(absl::ResourceExhaustedError(absl::StrCat(
        tool, "'s report was ", report->size(), " bytes, over the daemon's limit of ",
        setup.max_report_bytes(),
        " (gpuprofd --max_capture_report_bytes); deleted. Profile fewer launches or a "
        "smaller set")));
  }
  std::filesystem::rename(partial, setup.report_path(), error);
  if (error) {
    return fail(absl::InternalError(absl::StrCat("moving ", partial, " to ", setup.report_path(),
                                                 ": ", error.message())));
  }
  v1::CaptureReport described;
  described.set_tool(capture.tool());
  described.set_file_name(std::filesystem::path(setup.report_path()).filename().string());
  described.set_size_bytes(static_cast<int64_t>(report->size()));
  described.set_sha256(Sha256Hex(*report));
  described.set_tool_version(setup.tool_version());
  described.set_command(absl::StrJoin(command, " "));
  progress(1, absl::StrCat(tool, " report kept: ", described.file_name(), ", ",
                           described.size_bytes(), " bytes"));
  return described;
}

int RunCaptureChild(const std::string& assignment_path, const FindRunnerForCapture& find_runner) {
  auto fail = [&](const absl::Status& status) {
    std::fprintf(stderr, "gpuprof_worker (capture): %s\n", status.ToString().c_str());
    WriteWholeFile(assignment_path + ".error", EncodeStatus(status));
    return 2;
  };
  const std::optional<std::string> bytes = ReadWholeFile(assignment_path);
  worker_protocol::ExperimentAssignment assignment;
  if (!bytes.has_value() || !assignment.ParseFromString(*bytes)) {
    return fail(
        absl::InvalidArgumentError(absl::StrCat(assignment_path, ": not a readable assignment")));
  }
  const workloads::RunWorkloadFunction run = find_runner(assignment.request());
  if (run == nullptr) {
    return fail(absl::UnimplementedError("no runner for this workload in the worker"));
  }
  const workloads::RunContext context{
      .assignment = assignment,
      .progress = [](v1::Phase, int64_t, int64_t, const std::string&) {},
      .tracing = nullptr};
  const absl::StatusOr<v1::ExperimentResult> result = run(context);
  if (!result.ok()) return fail(result.status());
  if (!WriteWholeFile(assignment_path + ".result", result->SerializeAsString())) {
    return fail(absl::InternalError(absl::StrCat("writing ", assignment_path, ".result")));
  }
  return 0;
}

}  // namespace gpuprof::worker
