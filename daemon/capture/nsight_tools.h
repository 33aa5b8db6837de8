// The Nsight tools a capture runs under (ExperimentRequest.capture): where gpuprofd found ncu
// and nsys at start-up, their versions, and where the reports they leave are kept. The daemon
// never runs them itself: it hands the tool's path to the worker, which runs the experiment
// once more under it (worker/nsight_capture.h).
#ifndef GPUPROF_DAEMON_CAPTURE_NSIGHT_TOOLS_H_
#define GPUPROF_DAEMON_CAPTURE_NSIGHT_TOOLS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {

// gpuprofd --max_capture_report_bytes's default: a full ncu set of a few kernels is a few MB,
// an nsys timeline of a long run some tens.
inline constexpr int64_t kDefaultMaxCaptureReportBytes = int64_t{512} << 20;

// One tool as the daemon found it.
struct NsightTool {
  // Empty: not found.
  std::string path;
  // What `TOOL --version` printed (its last non-empty line).
  std::string version;
  // Where it was looked for, in order (for the refusal's message).
  std::vector<std::string> looked_in;
  // The gpuprofd flag that names it ("--ncu_path").
  std::string flag;
  // ncu: its section sets (`ncu --list-sets`), which capture.ncu_set must name. Empty: not
  // known (nsys, or a list that could not be read), and the set is not checked against it.
  std::vector<std::string> sets;
};

struct CaptureTools {
  NsightTool ncu;
  NsightTool nsys;
  // <state_dir>/reports: one file per captured experiment.
  std::string reports_dir;
  int64_t max_report_bytes = kDefaultMaxCaptureReportBytes;
};

// "ncu", "nsys".
std::string NsightToolName(v1::NsightCapture::Tool tool);
// ".ncu-rep", ".nsys-rep": the extension each tool's readers expect.
std::string CaptureReportExtension(v1::NsightCapture::Tool tool);
// <reports_dir>/<experiment_id><extension>.
std::string CaptureReportPath(const std::string& reports_dir, const std::string& experiment_id,
                              v1::NsightCapture::Tool tool);
const NsightTool& ToolOf(const CaptureTools& tools, v1::NsightCapture::Tool tool);

// Where a tool is looked for when its flag is not set, in order: each directory of `path_env`
// ($PATH), /usr/local/cuda/bin, then the versioned install directories `installed` lists
// (/opt/nvidia/nsight-compute/<version>/ncu, /opt/nvidia/nsight-systems/<version>/bin/nsys),
// newest first. No duplicates.
std::vector<std::string> NsightToolCandidates(v1::NsightCapture::Tool tool, const char* path_env,
                                              std::vector<std::string> installed);

// The tool: `flag_value` when set (it must be executable, else not found), else the first
// executable candidate, with its version read by running `TOOL --version` (`version_of`;
// RunVersionCommand outside tests). The looked_in list is kept either way.
NsightTool FindNsightTool(v1::NsightCapture::Tool tool, const std::string& flag_value,
                          const std::vector<std::string>& candidates,
                          const std::function<bool(const std::string&)>& is_executable,
                          const std::function<std::string(const std::string&)>& version_of);

// FindNsightTool over this host: $PATH, /usr/local/cuda/bin and /opt/nvidia's installs.
NsightTool DiscoverNsightTool(v1::NsightCapture::Tool tool, const std::string& flag_value);

// The last non-empty line `binary --version` writes (stdout and stderr); empty if it could not
// be run.
std::string RunVersionCommand(const std::string& binary);

// What `binary argument` writes to stdout and stderr (its first 64 KiB); empty if it could not
// be run.
std::string RunToolCommand(const std::string& binary, const std::string& argument);

// The identifiers in `ncu --list-sets` output: the first word of each table row (rows whose
// section list wraps continue on lines that start with spaces), without the header and rules.
std::vector<std::string> ParseNcuSetList(absl::string_view list_sets_output);

// OK when capture.ncu_set is one of `ncu`'s sets (or they are not known); INVALID_ARGUMENT
// naming them otherwise.
absl::Status CheckNcuSet(const NsightTool& ncu, const std::string& ncu_set);

// OK when the daemon found the tool; FAILED_PRECONDITION otherwise: "nsys is not installed on
// this node (looked in ...); install NVIDIA Nsight Systems or start gpuprofd with
// --nsys_path=FILE".
absl::Status CheckCaptureToolAvailable(const CaptureTools& tools, v1::NsightCapture::Tool tool);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_CAPTURE_NSIGHT_TOOLS_H_
