#include "kernels/attention/decode_tuning.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "gpuprof/v1/gpus.pb.h"
#include "measure/l2_flush.h"
#include "measure/stream_blocker.h"

namespace gpuprof::attention {
namespace {

// The flush's read pass on the current device, or nullopt when its memory is not free (the
// problem may hold most of the GPU): the trials then run with a warm L2.
std::optional<measure::DeviceReadPass> MakeFlush() {
  int device = 0;
  int l2 = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  gpuprof::v1::GpuInfo gpu;
  gpu.set_l2_cache_bytes(l2);
  absl::StatusOr<measure::DeviceReadPass> pass =
      measure::DeviceReadPass::Create(measure::L2FlushBytes(gpu));
  if (!pass.ok()) {
    cudaGetLastError();  // the failed allocation's error is not the caller's
    return std::nullopt;
  }
  return std::move(*pass);
}

}  // namespace

DecodeOptions DecodeTuning::Apply(DecodeOptions options) const {
  options.kernel = fastest.kernel;
  options.num_splits = fastest.num_splits;
  return options;
}

std::string DecodeTuning::ToString() const {
  std::string text;
  int planned_of_fastest = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    if (i == 0 || candidates[i - 1].kernel != c.kernel) {
      absl::StrAppend(&text, i == 0 ? "" : "; ", std::string(DecodeKernelChoiceName(c.kernel)));
    }
    absl::StrAppend(&text, absl::StrFormat(" %d%s:%.1f", c.num_splits, c.planned ? "*" : "",
                                           c.median_us));
    if (c.planned && c.kernel == fastest.kernel) planned_of_fastest = c.num_splits;
  }
  absl::StrAppend(&text, ": ", std::string(DecodeKernelChoiceName(fastest.kernel)), " x",
                  fastest.num_splits,
                  " (planned x", planned_of_fastest, ")");
  if (!l2_flushed) absl::StrAppend(&text, ", L2 warm");
  return text;
}

absl::StatusOr<DecodeTuning> TuneDecodeKernel(const AttentionProblem& problem,
                                              const DecodeOptions& options, cudaStream_t stream,
                                              int launches) {
  if (launches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("launches (", launches, ") must be >= 1"));
  }
  std::vector<CudaEvent> events;
  for (int i = 0; i < 2 * launches; ++i) {
    ASSIGN_OR_RETURN(CudaEvent event, CudaEvent::Create());
    events.push_back(std::move(event));
  }
  ASSIGN_OR_RETURN(measure::StreamBlocker blocker, measure::StreamBlocker::Create());
  const std::optional<measure::DeviceReadPass> flush = MakeFlush();

  // One candidate's trials: queued whole behind the blocker, then released.
  auto time = [&](const DecodeOptions& candidate) -> absl::StatusOr<double> {
    RETURN_IF_ERROR(LaunchDecode(problem, candidate, stream).status());  // untimed
    RETURN_IF_ERROR(blocker.Block(stream));
    absl::Status queued = absl::OkStatus();
    for (int i = 0; i < launches && queued.ok(); ++i) {
      if (flush.has_value()) queued = flush->Enqueue(stream);
      if (queued.ok()) queued = events[2 * i].Record(stream);
      if (queued.ok()) queued = LaunchDecode(problem, candidate, stream).status();
      if (queued.ok()) queued = events[2 * i + 1].Record(stream);
    }
    blocker.Release();
    RETURN_IF_ERROR(queued);
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::vector<double> us;
    for (int i = 0; i < launches; ++i) {
      ASSIGN_OR_RETURN(const float ms, ElapsedMilliseconds(events[2 * i], events[2 * i + 1]));
      us.push_back(ms * 1e3);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  };

  DecodeTuning tuning;
  tuning.l2_flushed = flush.has_value();
  for (DecodeKernelChoice kernel : {DecodeKernelChoice::kPlain, DecodeKernelChoice::kPrefetch,
                                    DecodeKernelChoice::kTensorCores}) {
    DecodeOptions forced = options;
    forced.kernel = kernel;
    // The plan's split count for this kernel. A kernel refused for the shape (the tensor-core
    // one outside its head sizes and rows) is no candidate; any other failure is the caller's.
    const absl::StatusOr<DecodeLaunchInfo> planned = LaunchDecode(problem, forced, stream);
    if (!planned.ok()) {
      if (kernel == DecodeKernelChoice::kTensorCores &&
          planned.status().code() == absl::StatusCode::kInvalidArgument) {
        continue;
      }
      return planned.status();
    }
    const int planned_splits = planned->plan.num_splits;
    for (int splits : DecodeSplitCandidates(planned_splits, problem.lengths.max_kv_len(),
                                            options.num_splits)) {
      if (DecodeWorkspaceBytes(problem.shape, problem.lengths, splits) > options.workspace_bytes) {
        continue;  // more partial outputs than the workspace holds
      }
      DecodeOptions candidate = forced;
      candidate.num_splits = splits;
      ASSIGN_OR_RETURN(const double median_us, time(candidate));
      tuning.candidates.push_back({.kernel = kernel,
                                   .num_splits = splits,
                                   .planned = splits == planned_splits,
                                   .median_us = median_us});
    }
  }
  if (tuning.candidates.empty()) {
    return absl::InternalError("no decode kernel took the problem");
  }
  tuning.fastest =
      *std::min_element(tuning.candidates.begin(), tuning.candidates.end(),
                        [](const auto& a, const auto& b) { return a.median_us < b.median_us; });
  return tuning;
}

}  // namespace gpuprof::attention
