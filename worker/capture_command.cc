#include "worker/capture_command.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gpuprof::worker {

namespace v1 = ::gpuprof::v1;

std::string PartialReportPath(const std::string& report_path) {
  const std::filesystem::path path(report_path);
  return (path.parent_path() /
          absl::StrCat(path.stem().string(), ".partial", path.extension().string()))
      .string();
}

std::vector<std::string> CaptureCommand(const v1::NsightCapture& capture,
                                        const std::string& tool_path,
                                        const std::string& output_file,
                                        const std::string& worker_binary,
                                        const std::string& assignment_file) {
  std::vector<std::string> command = {tool_path};
  if (capture.tool() == v1::NsightCapture::TOOL_NSYS) {
    command.insert(command.end(),
                   {"profile", "--trace=cuda,nvtx,osrt", "--sample=none", "--stats=false",
                    "--force-overwrite=true", "--output", output_file});
  } else {
    command.insert(
        command.end(),
        {"--set", capture.ncu_set().empty() ? std::string("basic") : capture.ncu_set(),
         "--kernel-name",
         capture.kernel_filter().empty() ? std::string(kDefaultNcuKernelFilter)
                                         : capture.kernel_filter(),
         "--launch-skip", absl::StrCat(capture.launch_skip()), "--launch-count",
         absl::StrCat(std::max(1, capture.launch_count())), "--force-overwrite", "--export",
         output_file});
  }
  command.push_back(worker_binary);
  command.push_back(absl::StrCat(kCaptureChildFlag, assignment_file));
  return command;
}

v1::ExperimentRequest RequestForCaptureChild(const v1::ExperimentRequest& request) {
  v1::ExperimentRequest child = request;
  child.clear_capture();
  child.mutable_tracing()->set_level(v1::TracingOptions::LEVEL_OFF);
  if (request.capture().tool() == v1::NsightCapture::TOOL_NCU && request.has_measurement()) {
    v1::MeasurementOptions& measurement = *child.mutable_measurement();
    const int profiled = request.capture().launch_skip() +
                         std::max(1, request.capture().launch_count());
    measurement.set_warmup_iterations(std::max(measurement.warmup_iterations(), profiled));
    measurement.set_min_iterations(1);
    measurement.set_max_iterations(1);
    measurement.mutable_min_time()->Clear();
    measurement.set_noise_target(0);
  }
  return child;
}

}  // namespace gpuprof::worker
