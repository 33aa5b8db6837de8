// One supervised worker process: fork/exec with a command pipe (fd 3 in the child), a report
// pipe (fd 4) and its stdout/stderr captured to keep a tail for error messages. The daemon
// never touches CUDA itself; everything GPU-side happens in these processes.
#ifndef GPUPROF_DAEMON_SCHEDULING_WORKER_PROCESS_H_
#define GPUPROF_DAEMON_SCHEDULING_WORKER_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/message_pipe.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof::daemon {

struct WorkerLaunch {
  std::string binary;
  std::vector<std::string> args;
  // Extra environment entries ("NAME=value"), e.g. CUDA_VISIBLE_DEVICES for the leased GPUs.
  std::vector<std::string> env;
  // The worker's niceness (setpriority), set in the child before exec; unset: the daemon's.
  // A daemon given a higher priority than the users' own work (deploy/systemd: Nice=-10)
  // starts its workers at 0, so that experiments' CPU work does not outrank the RPCs.
  std::optional<int> nice;
};

struct WorkerExit {
  std::string description;  // "exited with code 3", "killed by signal 11 (Segmentation fault)"
  bool clean = false;       // exit code 0
  std::string stderr_tail;
};

class WorkerProcess {
 public:
  using ReportCallback = std::function<void(const worker_protocol::WorkerReport&)>;
  using ExitCallback = std::function<void(const WorkerExit&)>;

  // Starts the process. Callbacks run on the worker's reader thread, reports in order, and
  // on_exit exactly once, after the last report, once the process has been reaped.
  static absl::StatusOr<std::unique_ptr<WorkerProcess>> Start(const WorkerLaunch& launch,
                                                              ReportCallback on_report,
                                                              ExitCallback on_exit);
  // Kills the process if it still runs and joins the reader threads. Must not be called from
  // one of this worker's own callbacks.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  absl::Status Send(const worker_protocol::WorkerCommand& command);
  // SIGKILL to the worker's process group (it may have children, e.g. a compiler).
  void Kill();
  pid_t pid() const { return pid_; }
  std::string StderrTail() const ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  WorkerProcess(pid_t pid, int command_fd, int report_fd, int output_fd);
  void ReadReports(ReportCallback on_report, ExitCallback on_exit);
  void ReadOutput();

  const pid_t pid_;
  MessageWriter commands_;
  int report_fd_;
  int output_fd_;
  mutable absl::Mutex mutex_;
  std::string output_tail_ ABSL_GUARDED_BY(mutex_);
  bool reaped_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread output_thread_;
  std::thread report_thread_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SCHEDULING_WORKER_PROCESS_H_
