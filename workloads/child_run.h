// Running an experiment's assignment again in a child worker under a tool (compute-sanitizer,
// ncu, nsys): the parent writes the assignment into a scratch directory and starts the tool with
// `gpuprof_worker --<mode>-child=FILE` as its command; the child runs the workload and leaves
// FILE.result (the ExperimentResult) or FILE.error (the failure's status) beside it.
#ifndef GPUPROF_WORKLOADS_CHILD_RUN_H_
#define GPUPROF_WORKLOADS_CHILD_RUN_H_

#include <sys/types.h>

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"
#include "workloads/run_context.h"

namespace gpuprof::workloads {

// A directory under $TMPDIR (or /tmp) removed with everything in it when this goes out of
// scope.
class ScratchDirectory {
 public:
  // `prefix` names the directory: "gpuprof-capture" makes /tmp/gpuprof-capture-XXXXXX.
  static absl::StatusOr<ScratchDirectory> Create(absl::string_view prefix);
  ScratchDirectory(ScratchDirectory&& other) noexcept;
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(ScratchDirectory&&) = delete;
  ~ScratchDirectory();

  const std::string& path() const { return path_; }
  std::string File(absl::string_view name) const;

 private:
  explicit ScratchDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

std::optional<std::string> ReadWholeFile(const std::string& path);
bool WriteWholeFile(const std::string& path, absl::string_view bytes);

// The last `max_bytes` of `text`, with "..." in front when something was cut.
std::string TailOf(absl::string_view text, size_t max_bytes);

// "exited with status 3", "was killed by signal 9 (Killed)": a waitpid status in words.
std::string DescribeWaitStatus(int status);

// Starts `argv` (argv[0] a path) with stdout and stderr into `output_file` and stdin from
// /dev/null, every other descriptor closed. The child dies with the calling thread
// (PR_SET_PDEATHSIG) and stays in the caller's process group, which the daemon kills at the
// experiment's timeout. An exec that fails exits 127 with a line in the output file.
absl::StatusOr<pid_t> StartChild(const std::vector<std::string>& argv,
                                 const std::string& output_file);

// The child's waitpid status, retried over EINTR.
absl::StatusOr<int> WaitForChild(pid_t pid);

// What the child left beside its assignment file: the result, or the failure it wrote.
struct ChildOutcome {
  std::optional<v1::ExperimentResult> result;
  std::optional<absl::Status> error;
};
ChildOutcome ReadChildOutcome(const std::string& assignment_file);

// The child's side: reads the assignment at `assignment_path`, lets `adjust` change it (may be
// empty), runs it with the runner `find_runner` gives, and writes FILE.result or FILE.error.
// `who` names the child in its stderr lines ("capture"). Returns the result, or the error it
// wrote.
using FindRunnerFunction = std::function<RunWorkloadFunction(const v1::ExperimentRequest&)>;
absl::StatusOr<v1::ExperimentResult> RunAssignmentInChild(
    const std::string& assignment_path, absl::string_view who,
    const std::function<void(worker_protocol::ExperimentAssignment&)>& adjust,
    const FindRunnerFunction& find_runner);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_CHILD_RUN_H_
