#include "tests/testing/daemon_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/local_account.h"

extern char** environ;

extern "C" void __asan_init() __attribute__((weak));
extern "C" void __tsan_init() __attribute__((weak));

namespace gpuprof::testing {
namespace {

pid_t Spawn(const std::vector<std::string>& argv, int out_fd, int err_fd,
            const std::vector<std::string>& environment = {},
            const std::function<void()>& child_setup = nullptr) {
  std::vector<std::string> args = argv;
  std::vector<char*> c_args;
  for (auto& arg : args) c_args.push_back(arg.data());
  c_args.push_back(nullptr);
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<std::string> env = environment;
  std::vector<char*> c_env;
  for (auto& entry : env) c_env.push_back(entry.data());
  c_env.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    if (child_setup) child_setup();
    if (env.empty()) {
      execv(c_args[0], c_args.data());
    } else {
      execve(c_args[0], c_args.data(), c_env.data());
    }
    _exit(127);
  }
  return pid;
}

void DrainInto(int fd, std::string& sink) {
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n <= 0) break;
    sink.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace

std::string RunfilePath(const std::string& workspace_relative) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr) return workspace_relative;
  return absl::StrCat(srcdir, "/", workspace == nullptr ? "gpuprof" : workspace, "/",
                      workspace_relative);
}

bool RunningUnderSanitizer() {
  // Weak references: resolved when a sanitizer's runtime is linked in (the TSan build hides
  // __SANITIZE_THREAD__ from the code, see .bazelrc), null otherwise.
  return &__asan_init != nullptr || &__tsan_init != nullptr;
}

int64_t ProcStatusKib(pid_t pid, absl::string_view field) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    int64_t kib = 0;
    if (absl::ConsumePrefix(&rest, field) && absl::ConsumePrefix(&rest, ":") &&
        absl::SimpleAtoi(absl::StripSuffix(absl::StripAsciiWhitespace(rest), " kB"), &kib)) {
      return kib;
    }
  }
  return -1;
}

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

std::string MakeTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string pattern = absl::StrCat(tmp == nullptr ? "/tmp" : tmp, "/", name, "-XXXXXX");
  char* made = mkdtemp(pattern.data());
  return made == nullptr ? "" : std::string(made);
}

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  return RunCommandWithSetup(argv, timeout, {}, nullptr);
}

CommandResult RunCommandWithSetup(const std::vector<std::string>& argv, absl::Duration timeout,
                                  const std::vector<std::string>& environment,
                                  const std::function<void()>& child_setup) {
  int out_pipe[2], err_pipe[2];
  CommandResult result;
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) return result;
  const pid_t pid = Spawn(argv, out_pipe[1], err_pipe[1], environment, child_setup);
  close(out_pipe[1]);
  close(err_pipe[1]);
  std::thread out_reader([&] { DrainInto(out_pipe[0], result.out); });
  std::thread err_reader([&] { DrainInto(err_pipe[0], result.err); });
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (true) {
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (absl::Now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.err += "\n[harness: killed after timeout]";
      break;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  out_reader.join();
  err_reader.join();
  close(out_pipe[0]);
  close(err_pipe[0]);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

DaemonProcess::DaemonProcess(std::string state_dir, std::vector<std::string> extra_flags)
    : state_dir_(std::move(state_dir)), extra_flags_(std::move(extra_flags)) {
  char pattern[] = "/tmp/gpuprof-test-XXXXXX";
  const char* made = mkdtemp(pattern);
  socket_dir_ = made == nullptr ? "/tmp" : made;
  // Other local accounts reach the socket in tests of a shared box (mkdtemp makes it 0700).
  if (made != nullptr) chmod(made, 0755);
}

DaemonProcess::~DaemonProcess() {
  int status = 0;
  if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
    // Nothing stopped it: a crash (or a sanitizer's report) the test's own checks may only see
    // as closed sockets. Its log says what happened.
    pid_ = -1;
    std::cerr << "gpuprofd exited by itself ("
              << (WIFSIGNALED(status) ? absl::StrCat("signal ", WTERMSIG(status))
                                      : absl::StrCat("exit code ", WEXITSTATUS(status)))
              << "); its log:\n"
              << Log() << std::endl;
  }
  if (pid_ > 0) KillHard();
  std::error_code ignored;
  std::filesystem::remove_all(socket_dir_, ignored);
}

void DaemonProcess::SpawnOnly() {
  std::vector<std::string> argv = {
      RunfilePath("daemon/gpuprofd"),
      "--state_dir=" + state_dir_,
      "--listen=" + target(),
      "--worker_binary=" + RunfilePath("worker/gpuprof_worker"),
      "--measure_copy_bandwidth=false",
  };
  // Tests run several daemons at once: no fixed metrics port unless a test asks for one.
  argv.push_back("--metrics_listen=");
  argv.insert(argv.end(), extra_flags_.begin(), extra_flags_.end());
  argv.insert(argv.begin(), launcher_.begin(), launcher_.end());
  const int log_fd =
      open((state_dir_ + "/gpuprofd.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_ = Spawn(argv, log_fd, log_fd);
  close(log_fd);
}

absl::Status DaemonProcess::Start() {
  SpawnOnly();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("gpuprofd exited at start-up:\n", Log()));
    }
    // The socket appears only once the daemon has probed its GPUs. A fresh channel per try:
    // a channel that failed to connect waits out a reconnect backoff before trying again.
    auto health = grpc::health::v1::Health::NewStub(
        grpc::CreateChannel(target(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
    if (health->Check(&context, request, &response).ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat("gpuprofd did not become healthy:\n", Log()));
}

void DaemonProcess::KillHard() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

int DaemonProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return status;
}

void DaemonProcess::Signal(int signal_number) const {
  if (pid_ > 0) kill(pid_, signal_number);
}

int DaemonProcess::WaitForExit(absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  const absl::Time deadline = absl::Now() + timeout;
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      KillHard();
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  pid_ = -1;
  return status;
}

void DaemonProcess::Hangup() {
  if (pid_ > 0) kill(pid_, SIGHUP);
}

CommandResult DaemonProcess::CliAsIs(const std::vector<std::string>& args,
                                     absl::Duration timeout) const {
  // A --target of the caller's replaces the daemon's unix socket: two would make a fleet.
  const bool own_target = std::any_of(args.begin(), args.end(), [](const std::string& arg) {
    return arg == "--target" || absl::StartsWith(arg, "--target=");
  });
  std::vector<std::string> argv = {RunfilePath("client/gpuprof")};
  if (!own_target) argv.push_back("--target=" + target());
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout);
}

std::unique_ptr<v1::Profiler::Stub> DaemonProcess::NewStub() const {
  grpc::ChannelArguments arguments;
  arguments.SetMaxSendMessageSize(64 << 20);
  return v1::Profiler::NewStub(
      grpc::CreateCustomChannel(target(), grpc::InsecureChannelCredentials(), arguments));
}

CommandResult DaemonProcess::Cli(const std::vector<std::string>& args, const std::string& user,
                                 absl::Duration timeout) const {
  std::vector<std::string> argv = {RunfilePath("client/gpuprof"), "--target=" + target(),
                                   "--user=" + user};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout);
}

CommandResult DaemonProcess::CliAs(const LocalAccount& account,
                                   const std::vector<std::string>& args,
                                   absl::Duration timeout) const {
  std::vector<std::string> argv = {SharedBinary("client/gpuprof"), "--target=" + target()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommandAs(account, argv, timeout);
}

std::string DaemonProcess::Log() const {
  std::ifstream log(state_dir_ + "/gpuprofd.log");
  std::stringstream contents;
  contents << log.rdbuf();
  return contents.str();
}

absl::StatusOr<std::vector<v1::ExperimentEvent>> ParseEventLines(const std::string& ndjson) {
  std::vector<v1::ExperimentEvent> events;
  for (absl::string_view line : absl::StrSplit(ndjson, '\n', absl::SkipWhitespace())) {
    v1::ExperimentEvent event;
    const auto status = google::protobuf::util::JsonStringToMessage(std::string(line), &event);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("not an event: ", line.substr(0, 200)));
    }
    events.push_back(std::move(event));
  }
  return events;
}

absl::StatusOr<v1::Experiment> ParseExperiment(const std::string& json) {
  v1::Experiment experiment;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &experiment);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("not an experiment: ", json.substr(0, 200)));
  }
  return experiment;
}

}  // namespace gpuprof::testing
