// Runs the real gpuprofd and the real gpuprof CLI as child processes for end-to-end tests:
// real binaries, a real unix socket, a real SQLite file in a temporary state directory.
#ifndef GPUPROF_TESTS_TESTING_DAEMON_HARNESS_H_
#define GPUPROF_TESTS_TESTING_DAEMON_HARNESS_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/profiler.grpc.pb.h"

namespace gpuprof::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs a program to completion, capturing its output; kills it after `timeout`.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout = absl::Seconds(120));

// RunCommand with `environment` (the child's whole environment; empty: the test's own) and
// `child_setup` run in the child between fork and exec (async-signal-safe calls only).
CommandResult RunCommandWithSetup(const std::vector<std::string>& argv, absl::Duration timeout,
                                  const std::vector<std::string>& environment,
                                  const std::function<void()>& child_setup);

struct LocalAccount;  // tests/testing/local_account.h

// Path of a binary built by Bazel and listed in the test's data, e.g. "daemon/gpuprofd".
std::string RunfilePath(const std::string& workspace_relative);

// Whether this test runs with AddressSanitizer's or ThreadSanitizer's runtime linked in (the
// daemons it starts are built the same way): their allocators keep what a process frees, so a
// test of memory given back can only bound the peak there.
bool RunningUnderSanitizer();

// A field of /proc/PID/status in KiB ("VmRSS", the resident set now; "VmHWM", its peak); -1 when
// the process or the field is not there.
int64_t ProcStatusKib(pid_t pid, absl::string_view field);

// A loopback port free when asked (bound and closed).
int FreeLoopbackPort();

// A fresh directory under the test's temporary directory.
std::string MakeTempDir(const std::string& name);

class DaemonProcess {
 public:
  // The daemon keeps its database and socket in `state_dir`; reusing the directory across
  // restarts is how the restart tests find their data again.
  explicit DaemonProcess(std::string state_dir, std::vector<std::string> extra_flags = {});
  ~DaemonProcess();

  // More daemon flags, for the next Start (a later --listen replaces the harness's own).
  void AddFlags(const std::vector<std::string>& flags) {
    extra_flags_.insert(extra_flags_.end(), flags.begin(), flags.end());
  }
  // Runs gpuprofd through this command from the next Start on, e.g. {"/usr/sbin/ip", "netns",
  // "exec", "NAME"} for a daemon in a network namespace (the launcher must exec the daemon,
  // so that the process id is the daemon's).
  void SetLauncher(std::vector<std::string> launcher) { launcher_ = std::move(launcher); }
  // SIGHUP: the daemon reloads its policy.
  void Hangup();
  // Starts gpuprofd and waits until its health service answers SERVING.
  absl::Status Start();
  // SIGKILL, no chance to clean up: what a crash or OOM kill does.
  void KillHard();
  // SIGTERM and wait for a graceful exit; returns the exit status.
  int Stop();
  // Sends `signal_number` to the running daemon (SIGHUP, SIGSTOP, SIGCONT...).
  void Signal(int signal_number) const;
  // Starts gpuprofd without waiting for it; then WaitForExit() gives its exit status (for
  // flags it must refuse at start-up).
  void SpawnOnly();
  int WaitForExit(absl::Duration timeout = absl::Seconds(60));

  // The daemon's process id while it runs, else -1.
  pid_t pid() const { return pid_; }
  std::string target() const { return "unix:" + socket_dir_ + "/gpuprofd.sock"; }
  const std::string& state_dir() const { return state_dir_; }
  std::unique_ptr<v1::Profiler::Stub> NewStub() const;
  // The CLI against this daemon, as `user`.
  CommandResult Cli(const std::vector<std::string>& args, const std::string& user = "tester",
                    absl::Duration timeout = absl::Seconds(120)) const;
  // The CLI with exactly these arguments after --target (no --user); none when the arguments
  // give their own --target.
  CommandResult CliAsIs(const std::vector<std::string>& args,
                        absl::Duration timeout = absl::Seconds(120)) const;
  // The CLI run as another local account against the daemon's unix socket (no --user): how a
  // second user of a shared box reaches the daemon. The socket directory is open to every
  // account; the daemon decides who may connect.
  CommandResult CliAs(const LocalAccount& account, const std::vector<std::string>& args,
                      absl::Duration timeout = absl::Seconds(60)) const;
  // Daemon's stderr so far, for diagnostics.
  std::string Log() const;

 private:
  std::string state_dir_;
  // Unix socket paths are limited to 107 bytes; test temp dirs can be longer.
  std::string socket_dir_;
  std::vector<std::string> extra_flags_;
  std::vector<std::string> launcher_;
  pid_t pid_ = -1;
};

// Parses the CLI's --json output (one JSON object per line) into events.
absl::StatusOr<std::vector<v1::ExperimentEvent>> ParseEventLines(const std::string& ndjson);
absl::StatusOr<v1::Experiment> ParseExperiment(const std::string& json);

// Parses a listing's --json output (NDJSON: one message per line) into messages.
template <typename Message>
absl::StatusOr<std::vector<Message>> ParseJsonLines(const std::string& ndjson) {
  std::vector<Message> messages;
  for (absl::string_view line : absl::StrSplit(ndjson, '\n', absl::SkipWhitespace())) {
    Message message;
    if (!google::protobuf::util::JsonStringToMessage(std::string(line), &message).ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a ", Message::descriptor()->name(), ": ", line.substr(0, 200)));
    }
    messages.push_back(std::move(message));
  }
  return messages;
}

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_TESTING_DAEMON_HARNESS_H_
