#include "cupti/pc_sampling.h"

#include <cupti_activity.h>
#include <cupti_pcsampling.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/cupti_status.h"
#include "common/status_macros.h"
#include "cupti/current_context.h"

namespace gpuprof::cupti {
namespace {

constexpr absl::string_view kStallPrefix = "smsp__pcsamp_warps_issue_stalled_";
constexpr absl::string_view kNotIssuedSuffix = "_not_issued";
// GetData is called until CUPTI has nothing left; this bounds a misbehaving loop.
constexpr int kMaxReads = 10000;

struct SampleTotals {
  uint64_t total = 0;
  uint64_t dropped = 0;
  uint64_t outside_user_kernels = 0;
  bool hardware_buffer_full = false;
};

// True when CUPTI took samples but could place none of them in a module it knows.
bool AllOutsideKnownModules(const SampleTotals& totals) {
  return totals.outside_user_kernels > 0 &&
         totals.outside_user_kernels + totals.dropped >= totals.total;
}

// A CUpti_PCSamplingData with room for `pcs` PCs of `reasons` stall reasons each.
class SamplingBuffer {
 public:
  SamplingBuffer(size_t pcs, size_t reasons)
      : pc_data_(pcs), stall_reasons_(pcs * std::max<size_t>(reasons, 1)) {
    data_.size = sizeof(CUpti_PCSamplingData);
    data_.collectNumPcs = pcs;
    data_.pPcData = pc_data_.data();
    for (size_t i = 0; i < pcs; ++i) {
      pc_data_[i].size = sizeof(CUpti_PCSamplingPCData);
      pc_data_[i].stallReason = &stall_reasons_[i * std::max<size_t>(reasons, 1)];
    }
  }
  SamplingBuffer(const SamplingBuffer&) = delete;
  SamplingBuffer& operator=(const SamplingBuffer&) = delete;

  CUpti_PCSamplingData* get() { return &data_; }

  // Adds the buffer's samples to `counts` (function -> reason index -> samples) and to
  // `totals`. The function names are copied, not freed: CUPTI 13 hands out the same string
  // for a function again in later sampling sessions, so freeing it was a double free on the
  // second session in a process (a reused worker).
  void Drain(std::map<std::string, std::map<uint32_t, uint64_t>>& counts,
             std::map<std::string, std::map<uint64_t, std::map<uint32_t, uint64_t>>>& by_pc,
             SampleTotals& totals) {
    totals.total += data_.totalSamples;
    totals.dropped += data_.droppedSamples;
    totals.outside_user_kernels += data_.nonUsrKernelsTotalSamples;
    totals.hardware_buffer_full |= data_.hardwareBufferFull != 0;
    data_.totalSamples = data_.droppedSamples = data_.nonUsrKernelsTotalSamples = 0;
    for (size_t i = 0; i < data_.totalNumPcs && i < pc_data_.size(); ++i) {
      CUpti_PCSamplingPCData& pc = pc_data_[i];
      const std::string function = pc.functionName != nullptr ? pc.functionName : "<unknown>";
      pc.functionName = nullptr;
      auto& at_pc = by_pc[function][pc.pcOffset];
      for (size_t r = 0; r < pc.stallReasonCount; ++r) {
        counts[function][pc.stallReason[r].pcSamplingStallReasonIndex] +=
            pc.stallReason[r].samples;
        at_pc[pc.stallReason[r].pcSamplingStallReasonIndex] += pc.stallReason[r].samples;
      }
    }
    data_.totalNumPcs = 0;
  }

 private:
  CUpti_PCSamplingData data_ = {};
  std::vector<CUpti_PCSamplingPCData> pc_data_;
  std::vector<CUpti_PCSamplingStallReason> stall_reasons_;
};

absl::Status SetAttributes(CUcontext context,
                           std::vector<CUpti_PCSamplingConfigurationInfo>& attributes) {
  CUpti_PCSamplingConfigurationInfoParams params = {};
  params.size = CUpti_PCSamplingConfigurationInfoParamsSize;
  params.ctx = context;
  params.numAttributes = attributes.size();
  params.pPCSamplingConfigurationInfo = attributes.data();
  return CuptiStatus(cuptiPCSamplingSetConfigurationAttribute(&params),
                     "cuptiPCSamplingSetConfigurationAttribute");
}

}  // namespace

std::string UnattributedSamplesMessage(uint64_t total, uint64_t dropped,
                                       uint64_t outside_user_kernels, bool hardware_buffer_full) {
  std::string message =
      absl::StrCat("PC sampling attributed no samples to a kernel (", total, " samples in all, ",
                   dropped, " dropped, ", outside_user_kernels, " outside user kernels",
                   hardware_buffer_full ? ", hardware buffer full" : "", ")");
  if (AllOutsideKnownModules(
          {.total = total, .dropped = dropped, .outside_user_kernels = outside_user_kernels})) {
    absl::StrAppend(&message,
                    ": CUPTI knew none of the sampled kernels' modules, even after re-attaching");
  }
  return message;
}

std::string ShortStallReasonName(absl::string_view cupti_name) {
  absl::string_view name = cupti_name;
  if (absl::StartsWith(name, kStallPrefix)) name.remove_prefix(kStallPrefix.size());
  return std::string(name);
}

bool IsNotIssuedVariant(absl::string_view cupti_name) {
  return absl::EndsWith(cupti_name, kNotIssuedSuffix);
}

StallBreakdown SummarizeStalls(std::string function_name,
                               const absl::flat_hash_map<std::string, uint64_t>& samples_by_reason) {
  StallBreakdown breakdown;
  breakdown.function_name = std::move(function_name);
  for (const auto& [reason, samples] : samples_by_reason) {
    if (!IsNotIssuedVariant(reason)) breakdown.samples += samples;
  }
  if (breakdown.samples == 0) return breakdown;
  for (const auto& [reason, samples] : samples_by_reason) {
    if (IsNotIssuedVariant(reason) || samples == 0) continue;
    breakdown.percent_by_reason.push_back(
        {ShortStallReasonName(reason), 100.0 * samples / breakdown.samples});
  }
  std::sort(breakdown.percent_by_reason.begin(), breakdown.percent_by_reason.end(),
            [](const auto& a, const auto& b) {
              return a.second > b.second || (a.second == b.second && a.first < b.first);
            });
  return breakdown;
}

std::vector<StallBreakdown::PcSamples> SummarizePcStalls(
    const std::map<uint64_t, absl::flat_hash_map<std::string, uint64_t>>& samples_by_pc) {
  std::vector<StallBreakdown::PcSamples> summary;
  for (const auto& [pc_offset, by_reason] : samples_by_pc) {
    StallBreakdown::PcSamples pc{.pc_offset = pc_offset};
    uint64_t top = 0;
    std::string top_name;
    for (const auto& [reason, samples] : by_reason) {
      if (IsNotIssuedVariant(reason)) continue;
      pc.samples += samples;
      if (samples > top || (samples == top && samples > 0 && reason < top_name)) {
        top = samples;
        top_name = reason;
      }
    }
    if (pc.samples == 0) continue;
    pc.top_reason = ShortStallReasonName(top_name);
    summary.push_back(std::move(pc));
  }
  return summary;
}

namespace {

struct SamplingSession {
  std::map<std::string, std::map<uint32_t, uint64_t>> counts;  // function -> reason -> samples
  // function -> PC offset -> reason -> samples
  std::map<std::string, std::map<uint64_t, std::map<uint32_t, uint64_t>>> by_pc;
  absl::flat_hash_map<uint32_t, std::string> reason_by_index;
  SampleTotals totals;
};

// Enables sampling on `context`, runs `launch` between start and stop, reads every sample and
// disables sampling again.
absl::StatusOr<SamplingSession> SampleOnce(CUcontext context, const PcSamplingOptions& options,
                                           const std::function<absl::Status()>& launch) {
  // Sampling is enabled first: CUPTI answers the stall-reason queries only then.
  CUpti_PCSamplingEnableParams enable = {};
  enable.size = CUpti_PCSamplingEnableParamsSize;
  enable.ctx = context;
  CUPTI_RETURN_IF_ERROR(cuptiPCSamplingEnable(&enable));
  bool enabled = true;
  auto disable_sampling = [&]() -> absl::Status {
    if (!enabled) return absl::OkStatus();
    enabled = false;
    CUpti_PCSamplingDisableParams disable = {};
    disable.size = CUpti_PCSamplingDisableParamsSize;
    disable.ctx = context;
    return CuptiStatus(cuptiPCSamplingDisable(&disable), "cuptiPCSamplingDisable");
  };
  absl::Cleanup disable_on_error = [&] {
    if (const absl::Status status = disable_sampling(); !status.ok()) LogStatusToStderr(status);
  };

  // The reasons this GPU reports, by index.
  size_t reason_count = 0;
  CUpti_PCSamplingGetNumStallReasonsParams count_params = {};
  count_params.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
  count_params.ctx = context;
  count_params.numStallReasons = &reason_count;
  CUPTI_RETURN_IF_ERROR(cuptiPCSamplingGetNumStallReasons(&count_params));
  std::vector<uint32_t> reason_indices(reason_count);
  std::vector<std::vector<char>> reason_text(reason_count,
                                             std::vector<char>(CUPTI_STALL_REASON_STRING_SIZE));
  std::vector<char*> reason_names(reason_count);
  for (size_t i = 0; i < reason_count; ++i) reason_names[i] = reason_text[i].data();
  CUpti_PCSamplingGetStallReasonsParams reasons_params = {};
  reasons_params.size = CUpti_PCSamplingGetStallReasonsParamsSize;
  reasons_params.ctx = context;
  reasons_params.numStallReasons = reason_count;
  reasons_params.stallReasonIndex = reason_indices.data();
  reasons_params.stallReasons = reason_names.data();
  CUPTI_RETURN_IF_ERROR(cuptiPCSamplingGetStallReasons(&reasons_params));
  SamplingSession session;
  for (size_t i = 0; i < reason_count; ++i) {
    session.reason_by_index[reason_indices[i]] = reason_names[i];
  }

  // What CUPTI fills at disable time, and what GetData fills on each read.
  SamplingBuffer final_buffer(options.pcs_per_read, reason_count);
  SamplingBuffer read_buffer(options.pcs_per_read, reason_count);
  std::vector<CUpti_PCSamplingConfigurationInfo> attributes(6);
  attributes[0].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_PERIOD;
  attributes[0].attributeData.samplingPeriodData.samplingPeriod =
      std::clamp<uint32_t>(options.sampling_period_log2, 5, 31);
  attributes[1].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_STALL_REASON;
  attributes[1].attributeData.stallReasonData.stallReasonCount = reason_count;
  attributes[1].attributeData.stallReasonData.pStallReasonIndex = reason_indices.data();
  attributes[2].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_COLLECTION_MODE;
  attributes[2].attributeData.collectionModeData.collectionMode =
      CUPTI_PC_SAMPLING_COLLECTION_MODE_KERNEL_SERIALIZED;
  attributes[3].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_ENABLE_START_STOP_CONTROL;
  attributes[3].attributeData.enableStartStopControlData.enableStartStopControl = 1;
  attributes[4].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_OUTPUT_DATA_FORMAT;
  attributes[4].attributeData.outputDataFormatData.outputDataFormat =
      CUPTI_PC_SAMPLING_OUTPUT_DATA_FORMAT_PARSED;
  attributes[5].attributeType = CUPTI_PC_SAMPLING_CONFIGURATION_ATTR_TYPE_SAMPLING_DATA_BUFFER;
  attributes[5].attributeData.samplingDataBufferData.samplingDataBuffer = final_buffer.get();
  RETURN_IF_ERROR(SetAttributes(context, attributes));

  CUpti_PCSamplingStartParams start = {};
  start.size = CUpti_PCSamplingStartParamsSize;
  start.ctx = context;
  CUPTI_RETURN_IF_ERROR(cuptiPCSamplingStart(&start));
  const absl::Status launched = launch();
  const absl::Status synced = CudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize()");
  CUpti_PCSamplingStopParams stop = {};
  stop.size = CUpti_PCSamplingStopParamsSize;
  stop.ctx = context;
  const absl::Status stopped = CuptiStatus(cuptiPCSamplingStop(&stop), "cuptiPCSamplingStop");
  RETURN_IF_ERROR(launched);
  RETURN_IF_ERROR(synced);
  RETURN_IF_ERROR(stopped);

  for (int read = 0; read < kMaxReads; ++read) {
    CUpti_PCSamplingGetDataParams get = {};
    get.size = CUpti_PCSamplingGetDataParamsSize;
    get.ctx = context;
    get.pcSamplingData = read_buffer.get();
    CUPTI_RETURN_IF_ERROR(cuptiPCSamplingGetData(&get));
    const bool more = read_buffer.get()->remainingNumPcs > 0;
    const bool got = read_buffer.get()->totalNumPcs > 0;
    read_buffer.Drain(session.counts, session.by_pc, session.totals);
    if (!more && !got) break;
  }
  RETURN_IF_ERROR(disable_sampling());
  final_buffer.Drain(session.counts, session.by_pc, session.totals);
  return session;
}

}  // namespace

absl::StatusOr<std::vector<StallBreakdown>> CollectStallBreakdown(
    const PcSamplingOptions& options, const std::function<absl::Status()>& launch) {
  ASSIGN_OR_RETURN(CUcontext context, CurrentCudaContext());
  ASSIGN_OR_RETURN(SamplingSession session, SampleOnce(context, options, launch));
  if (session.counts.empty() && AllOutsideKnownModules(session.totals)) {
    // CUPTI forgets the modules it has seen load when its last client detaches (the range
    // profiler's deinitialisation, an unsubscribe) while no activity tracing is on, and does
    // not learn them again; a freshly attached CUPTI does learn the loaded ones. So detach it
    // fully and sample once more. While an ActivityTracer runs (the worker's FULL level) CUPTI
    // kept its module table in every run seen, so a live tracer is not cut off here; should
    // this path ever run under one, its collection ends (its Stop reports the error).
    CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
    CUPTI_RETURN_IF_ERROR(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    CUPTI_RETURN_IF_ERROR(cuptiFinalize());
    ASSIGN_OR_RETURN(session, SampleOnce(context, options, launch));
  }

  std::vector<StallBreakdown> breakdowns;
  for (const auto& [function, by_index] : session.counts) {
    absl::flat_hash_map<std::string, uint64_t> by_name;
    for (const auto& [index, samples] : by_index) {
      const auto name = session.reason_by_index.find(index);
      by_name[name != session.reason_by_index.end() ? name->second
                                                    : absl::StrCat("reason_", index)] += samples;
    }
    StallBreakdown breakdown = SummarizeStalls(function, by_name);
    std::map<uint64_t, absl::flat_hash_map<std::string, uint64_t>> by_pc;
    for (const auto& [pc_offset, reasons] : session.by_pc[function]) {
      for (const auto& [index, samples] : reasons) {
        const auto name = session.reason_by_index.find(index);
        by_pc[pc_offset][name != session.reason_by_index.end() ? name->second
                                                              : absl::StrCat("reason_", index)] +=
            samples;
      }
    }
    breakdown.by_pc = SummarizePcStalls(by_pc);
    if (breakdown.samples > 0) breakdowns.push_back(std::move(breakdown));
  }
  std::sort(breakdowns.begin(), breakdowns.end(),
            [](const StallBreakdown& a, const StallBreakdown& b) { return a.samples > b.samples; });
  if (breakdowns.empty()) {
    const SampleTotals& totals = session.totals;
    return absl::NotFoundError(UnattributedSamplesMessage(
        totals.total, totals.dropped, totals.outside_user_kernels, totals.hardware_buffer_full));
  }
  return breakdowns;
}

}  // namespace gpuprof::cupti
