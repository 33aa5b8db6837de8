#include "cupti/kernel_metrics.h"

#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/cuda_status.h"
#include "common/cupti_status.h"
#include "common/status_macros.h"
#include "cupti/current_context.h"
#include "cupti/metric_names.h"

namespace gpuprof::cupti {
namespace {

// A profiler host object (metric configuration and evaluation) for one chip, freed on scope
// exit.
class ProfilerHost {
 public:
  static absl::StatusOr<std::unique_ptr<ProfilerHost>> Create(
      const std::string& chip, const std::vector<uint8_t>& counter_availability) {
    CUpti_Profiler_Host_Initialize_Params params = {
        CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    params.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    params.pChipName = chip.c_str();
    params.pCounterAvailabilityImage = counter_availability.data();
    CUPTI_RETURN_IF_ERROR(cuptiProfilerHostInitialize(&params));
    return std::unique_ptr<ProfilerHost>(new ProfilerHost(params.pHostObject));
  }
  ~ProfilerHost() {
    CUpti_Profiler_Host_Deinitialize_Params params = {
        CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
    params.pHostObject = host_;
    CUPTI_LOG_IF_ERROR(cuptiProfilerHostDeinitialize(&params));
  }
  ProfilerHost(const ProfilerHost&) = delete;
  ProfilerHost& operator=(const ProfilerHost&) = delete;

  absl::Status AddMetrics(std::vector<const char*>& names) {
    CUpti_Profiler_Host_ConfigAddMetrics_Params params = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    params.pHostObject = host_;
    params.ppMetricNames = names.data();
    params.numMetrics = names.size();
    return CuptiStatus(cuptiProfilerHostConfigAddMetrics(&params), "cuptiProfilerHostConfigAddMetrics");
  }

  absl::StatusOr<std::vector<uint8_t>> ConfigImage() {
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = host_;
    CUPTI_RETURN_IF_ERROR(cuptiProfilerHostGetConfigImageSize(&size));
    std::vector<uint8_t> image(size.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params get = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    get.pHostObject = host_;
    get.configImageSize = image.size();
    get.pConfigImage = image.data();
    CUPTI_RETURN_IF_ERROR(cuptiProfilerHostGetConfigImage(&get));
    return image;
  }

  CUpti_Profiler_Host_Object* get() const { return host_; }

 private:
  explicit ProfilerHost(CUpti_Profiler_Host_Object* host) : host_(host) {}
  CUpti_Profiler_Host_Object* host_;
};

absl::StatusOr<std::string> ChipName(int device) {
  CUpti_Device_GetChipName_Params params = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  params.deviceIndex = static_cast<size_t>(device);
  CUPTI_RETURN_IF_ERROR(cuptiDeviceGetChipName(&params));
  return std::string(params.pChipName);
}

absl::StatusOr<std::vector<uint8_t>> CounterAvailability(CUcontext context) {
  CUpti_Profiler_GetCounterAvailability_Params params = {
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  params.ctx = context;
  CUPTI_RETURN_IF_ERROR(cuptiProfilerGetCounterAvailability(&params));
  std::vector<uint8_t> image(params.counterAvailabilityImageSize);
  params.pCounterAvailabilityImage = image.data();
  CUPTI_RETURN_IF_ERROR(cuptiProfilerGetCounterAvailability(&params));
  return image;
}

// Says why profiling is impossible on this device, when CUPTI knows (vGPU, MIG, confidential
// computing, ...), before anything is enabled.
absl::Status CheckDeviceSupported(int device) {
  CUpti_Profiler_DeviceSupported_Params params = {CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
  params.cuDevice = device;
  params.api = CUPTI_PROFILER_RANGE_PROFILING;
  CUPTI_RETURN_IF_ERROR(cuptiProfilerDeviceSupported(&params));
  if (params.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return absl::OkStatus();
  std::vector<std::string> reasons;
  auto check = [&](CUpti_Profiler_Support_Level level, absl::string_view what) {
    if (level != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) reasons.push_back(std::string(what));
  };
  check(params.architecture, "GPU architecture");
  check(params.sli, "SLI");
  check(params.vGpu, "vGPU (profiling disabled or unsupported)");
  check(params.confidentialCompute, "confidential computing");
  check(params.cmp, "crypto-mining GPU");
  check(params.wsl, "WSL");
  return absl::UnimplementedError(absl::StrCat("the range profiler does not support this device: ",
                                               absl::StrJoin(reasons, ", ")));
}

}  // namespace

std::vector<std::string> KernelMetricNames(const std::vector<std::string>& extra_metrics) {
  std::vector<std::string> names(kDefaultKernelMetrics.begin(), kDefaultKernelMetrics.end());
  for (const std::string& extra : extra_metrics) {
    if (!extra.empty() && std::find(names.begin(), names.end(), extra) == names.end()) {
      names.push_back(extra);
    }
  }
  return names;
}

absl::StatusOr<KernelMetricsReport> CollectKernelMetrics(
    const KernelMetricsOptions& options, const std::function<absl::Status()>& launch) {
  if (options.metric_names.empty()) return absl::InvalidArgumentError("no metrics asked for");
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  ASSIGN_OR_RETURN(CUcontext context, CurrentCudaContext());
  RETURN_IF_ERROR(CheckDeviceSupported(device));

  CUpti_Profiler_Initialize_Params initialize = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  CUPTI_RETURN_IF_ERROR(cuptiProfilerInitialize(&initialize));
  absl::Cleanup deinitialize = [] {
    CUpti_Profiler_DeInitialize_Params params = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
    CUPTI_LOG_IF_ERROR(cuptiProfilerDeInitialize(&params));
  };
  ASSIGN_OR_RETURN(const std::string chip, ChipName(device));
  // Without counter permission this is where the driver says no.
  ASSIGN_OR_RETURN(const std::vector<uint8_t> availability, CounterAvailability(context));

  // Keep the metrics this chip supports: each probed alone, so one bad name does not lose the
  // rest.
  KernelMetricsReport report;
  std::vector<std::string> supported;
  for (const std::string& name : options.metric_names) {
    ASSIGN_OR_RETURN(std::unique_ptr<ProfilerHost> probe, ProfilerHost::Create(chip, availability));
    std::vector<const char*> one = {name.c_str()};
    if (const absl::Status added = probe->AddMetrics(one); added.ok()) {
      supported.push_back(name);
    } else {
      report.unsupported_metrics.push_back(
          absl::StrCat(name, ": not supported on ", chip, " (", added.message(), ")"));
    }
  }
  if (supported.empty()) {
    return absl::UnimplementedError(absl::StrCat("none of the metrics is supported on ", chip, ": ",
                                                 absl::StrJoin(report.unsupported_metrics, "; ")));
  }
  std::vector<const char*> metric_names;
  for (const std::string& name : supported) metric_names.push_back(name.c_str());
  ASSIGN_OR_RETURN(std::unique_ptr<ProfilerHost> host, ProfilerHost::Create(chip, availability));
  RETURN_IF_ERROR(host->AddMetrics(metric_names));
  ASSIGN_OR_RETURN(std::vector<uint8_t> config, host->ConfigImage());
  CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
  passes.configImageSize = config.size();
  passes.pConfigImage = config.data();
  CUPTI_RETURN_IF_ERROR(cuptiProfilerHostGetNumOfPasses(&passes));
  report.passes = passes.numOfPasses;

  CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  enable.ctx = context;
  CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerEnable(&enable));
  CUpti_RangeProfiler_Object* profiler = enable.pRangeProfilerObject;
  absl::Cleanup disable = [profiler] {
    CUpti_RangeProfiler_Disable_Params params = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
    params.pRangeProfilerObject = profiler;
    CUPTI_LOG_IF_ERROR(cuptiRangeProfilerDisable(&params));
  };

  const size_t max_ranges = std::max<size_t>(options.max_kernels, 1);
  CUpti_RangeProfiler_GetCounterDataSize_Params data_size = {
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  data_size.pRangeProfilerObject = profiler;
  data_size.pMetricNames = metric_names.data();
  data_size.numMetrics = metric_names.size();
  data_size.maxNumOfRanges = max_ranges;
  data_size.maxNumRangeTreeNodes = static_cast<uint32_t>(max_ranges);
  CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerGetCounterDataSize(&data_size));
  std::vector<uint8_t> counter_data(data_size.counterDataSize);
  CUpti_RangeProfiler_CounterDataImage_Initialize_Params init_data = {
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
  init_data.pRangeProfilerObject = profiler;
  init_data.counterDataSize = counter_data.size();
  init_data.pCounterData = counter_data.data();
  CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerCounterDataImageInitialize(&init_data));

  CUpti_RangeProfiler_SetConfig_Params set_config = {
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
  set_config.pRangeProfilerObject = profiler;
  set_config.configSize = config.size();
  set_config.pConfig = config.data();
  set_config.counterDataImageSize = counter_data.size();
  set_config.pCounterDataImage = counter_data.data();
  // One range per kernel, each kernel replayed by CUPTI until all passes are read.
  set_config.range = CUPTI_AutoRange;
  set_config.replayMode = CUPTI_KernelReplay;
  set_config.maxRangesPerPass = max_ranges;
  set_config.numNestingLevels = 1;
  set_config.minNestingLevel = 1;
  set_config.passIndex = 0;
  set_config.targetNestingLevel = 1;
  CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerSetConfig(&set_config));

  CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
  start.pRangeProfilerObject = profiler;
  CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerStart(&start));
  const absl::Status launched = launch();
  const absl::Status synced = CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize()");
  CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
  stop.pRangeProfilerObject = profiler;
  const absl::Status stopped = CuptiStatus(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop");
  RETURN_IF_ERROR(launched);
  RETURN_IF_ERROR(synced);
  RETURN_IF_ERROR(stopped);

  CUpti_RangeProfiler_DecodeData_Params decode = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
  decode.pRangeProfilerObject = profiler;
  CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerDecodeData(&decode));
  report.dropped_ranges = decode.numOfRangeDropped;

  CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
  info.pCounterDataImage = counter_data.data();
  info.counterDataImageSize = counter_data.size();
  CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerGetCounterDataInfo(&info));
  std::vector<double> values(metric_names.size());
  for (size_t range = 0; range < info.numTotalRanges; ++range) {
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params range_info = {
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
    range_info.pCounterDataImage = counter_data.data();
    range_info.counterDataImageSize = counter_data.size();
    range_info.rangeIndex = range;
    range_info.rangeDelimiter = "/";
    CUPTI_RETURN_IF_ERROR(cuptiRangeProfilerCounterDataGetRangeInfo(&range_info));
    CUpti_Profiler_Host_EvaluateToGpuValues_Params evaluate = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    evaluate.pHostObject = host->get();
    evaluate.pCounterDataImage = counter_data.data();
    evaluate.counterDataImageSize = counter_data.size();
    evaluate.rangeIndex = range;
    evaluate.ppMetricNames = metric_names.data();
    evaluate.numMetrics = metric_names.size();
    evaluate.pMetricValues = values.data();
    CUPTI_RETURN_IF_ERROR(cuptiProfilerHostEvaluateToGpuValues(&evaluate));
    ProfiledKernel& kernel = report.kernels.emplace_back();
    kernel.range_name = range_info.rangeName != nullptr ? range_info.rangeName : "";
    for (size_t m = 0; m < supported.size(); ++m) kernel.values[supported[m]] = values[m];
  }
  report.replay_description =
      absl::StrCat("kernel replay: each kernel ran ", report.passes, " time",
                   report.passes == 1 ? "" : "s", " (", report.passes, " pass",
                   report.passes == 1 ? "" : "es", ") to read ", supported.size(), " metrics on ",
                   chip, "; memory saved and restored between passes");
  return report;
}

std::string NotCollectedLine(absl::string_view what, const absl::Status& status) {
  std::string line = absl::StrCat(what, ": not collected: ", status.message());
  switch (status.code()) {
    case absl::StatusCode::kPermissionDenied:
      absl::StrAppend(&line, " (reading GPU counters needs root or the driver option "
                             "NVreg_RestrictProfilingToAdminUsers=0)");
      break;
    case absl::StatusCode::kUnimplemented:
      absl::StrAppend(&line, " (not supported on this GPU or configuration)");
      break;
    case absl::StatusCode::kUnavailable:
      absl::StrAppend(&line, " (another profiler, e.g. ncu or a second CUPTI client, holds the "
                             "counters)");
      break;
    default:
      break;
  }
  return line;
}

}  // namespace gpuprof::cupti
