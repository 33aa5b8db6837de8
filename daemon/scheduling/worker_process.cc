#include "daemon/scheduling/worker_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

extern char** environ;

namespace gpuprof::daemon {
namespace {

// Enough of the end of a worker's output to show why it died.
constexpr size_t kOutputTailBytes = 8192;

// The worker reads commands from this descriptor and writes reports to the next one.
constexpr int kChildCommandFd = 3;
constexpr int kChildReportFd = 4;

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal_number = WTERMSIG(status);
    return absl::StrCat("killed by signal ", signal_number, " (", strsignal(signal_number), ")");
  }
  return absl::StrCat("ended with wait status ", status);
}

// Gives the child `fd` as `target`, open across exec. dup2 onto itself does nothing, and the
// pipe's O_CLOEXEC would close it at exec: that happens when the parent had `target` free (a
// process with no other descriptors open yet). Async-signal-safe, for the vfork child.
void MoveDescriptor(int fd, int target) {
  if (fd == target) {
    fcntl(fd, F_SETFD, 0);
  } else {
    dup2(fd, target);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<WorkerProcess>> WorkerProcess::Start(const WorkerLaunch& launch,
                                                                    ReportCallback on_report,
                                                                    ExitCallback on_exit) {
  if (access(launch.binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker binary ", launch.binary, " is not executable: ", strerror(errno)));
  }
  int command_pipe[2], report_pipe[2], output_pipe[2];
  if (pipe2(command_pipe, O_CLOEXEC) != 0 || pipe2(report_pipe, O_CLOEXEC) != 0 ||
      pipe2(output_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  // Everything the child needs is built before fork: after it, only async-signal-safe calls.
  std::vector<std::string> argv_storage = {launch.binary};
  argv_storage.insert(argv_storage.end(), launch.args.begin(), launch.args.end());
  std::vector<char*> argv;
  for (auto& arg : argv_storage) argv.push_back(arg.data());
  argv.push_back(nullptr);
  // The launch's variables replace the daemon's own of the same name (getenv takes the first).
  std::vector<std::string> env_storage(launch.env.begin(), launch.env.end());
  auto overridden = [&launch](const char* entry) {
    const char* equals = std::strchr(entry, '=');
    const size_t name_length = equals == nullptr ? std::strlen(entry) : equals - entry + 1;
    return std::any_of(launch.env.begin(), launch.env.end(), [&](const std::string& variable) {
      return variable.compare(0, name_length, entry, name_length) == 0;
    });
  };
  for (char** entry = environ; *entry != nullptr; ++entry) {
    if (!overridden(*entry)) env_storage.emplace_back(*entry);
  }
  std::vector<char*> envp;
  for (auto& entry : env_storage) envp.push_back(entry.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();
  const bool set_nice = launch.nice.has_value();
  const int nice_value = launch.nice.value_or(0);

  // vfork, not fork: the child shares the daemon's memory until execve instead of copying its
  // page tables, so neither pays for the copy nor for the copy-on-write faults that follow in
  // every daemon thread (a tenth of the daemon's CPU under the load test with fork). The
  // child below only makes system calls and touches nothing but its own locals.
  const pid_t pid = vfork();
  if (pid < 0) return absl::InternalError(absl::StrCat("vfork: ", strerror(errno)));
  if (pid == 0) {
    // A worker must not outlive the daemon that supervises it. The signal comes when the
    // forking *thread* exits, so callers fork from a thread that lives as long as the daemon.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(125);
    setpgid(0, 0);
    signal(SIGPIPE, SIG_DFL);
    // Failing (a value below the daemon's own without CAP_SYS_NICE) keeps the daemon's.
    if (set_nice) (void)setpriority(PRIO_PROCESS, 0, nice_value);
    // dup2 clears O_CLOEXEC on the new descriptors; everything else closes at exec.
    MoveDescriptor(command_pipe[0], kChildCommandFd);
    MoveDescriptor(report_pipe[1], kChildReportFd);
    dup2(output_pipe[1], STDOUT_FILENO);
    dup2(output_pipe[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execve(argv[0], argv.data(), envp.data());
    const char message[] = "gpuprof: exec of the worker binary failed\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
    _exit(127);
  }
  close(command_pipe[0]);
  close(report_pipe[1]);
  close(output_pipe[1]);
  std::unique_ptr<WorkerProcess> worker(
      new WorkerProcess(pid, command_pipe[1], report_pipe[0], output_pipe[0]));
  worker->output_thread_ = std::thread([w = worker.get()] { w->ReadOutput(); });
  worker->report_thread_ = std::thread(
      [w = worker.get(), on_report = std::move(on_report), on_exit = std::move(on_exit)]() mutable {
        w->ReadReports(std::move(on_report), std::move(on_exit));
      });
  return worker;
}

WorkerProcess::WorkerProcess(pid_t pid, int command_fd, int report_fd, int output_fd)
    : pid_(pid), commands_(command_fd), report_fd_(report_fd), output_fd_(output_fd) {}

WorkerProcess::~WorkerProcess() {
  commands_.Close();
  Kill();
  // The report thread joins the output thread before it ends.
  if (report_thread_.joinable()) report_thread_.join();
}

absl::Status WorkerProcess::Send(const worker_protocol::WorkerCommand& command) {
  return commands_.Write(command);
}

void WorkerProcess::Kill() {
  absl::MutexLock lock(&mutex_);
  // After reaping, the pid may belong to someone else.
  if (reaped_) return;
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
}

std::string WorkerProcess::StderrTail() const {
  absl::MutexLock lock(&mutex_);
  return output_tail_;
}

void WorkerProcess::ReadOutput() {
  char buffer[4096];
  while (true) {
    const ssize_t n = read(output_fd_, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    absl::MutexLock lock(&mutex_);
    output_tail_.append(buffer, static_cast<size_t>(n));
    if (output_tail_.size() > kOutputTailBytes) {
      output_tail_.erase(0, output_tail_.size() - kOutputTailBytes);
    }
  }
  close(output_fd_);
}

void WorkerProcess::ReadReports(ReportCallback on_report, ExitCallback on_exit) {
  std::string protocol_error;
  {
    MessageReader reader(report_fd_);
    while (true) {
      worker_protocol::WorkerReport report;
      const absl::Status read = reader.Read(&report);
      if (absl::IsOutOfRange(read)) break;  // the worker closed the pipe
      if (!read.ok()) {
        // A torn, oversized or unparsable report: the worker cannot be trusted to go on, and
        // it may not exit by itself. Kill it rather than wait.
        protocol_error = std::string(read.message());
        Kill();
        break;
      }
      on_report(report);
    }
  }
  // The report pipe closed: the worker exited (or closed it, then exits). Reap it, then wait
  // for its last output so the tail is complete.
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  {
    absl::MutexLock lock(&mutex_);
    reaped_ = true;
  }
  if (output_thread_.joinable()) output_thread_.join();
  WorkerExit exit;
  exit.description = protocol_error.empty() ? DescribeWaitStatus(status)
                                            : absl::StrCat("sent a malformed report (",
                                                           protocol_error, ") and was killed");
  exit.clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  exit.stderr_tail = StderrTail();
  on_exit(exit);
}

}  // namespace gpuprof::daemon
