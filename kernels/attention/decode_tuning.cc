#include "kernels/attention/decode_tuning.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/statistics.h"
#include "common/status_macros.h"
#include "measure/flushed_timer.h"

namespace gpuprof::attention {
namespace {

// Below four splits halving ones are even ones (2) or none (1).
constexpr int kMinHalvingSplits = 4;

}  // namespace

DecodeOptions DecodeTuning::Apply(DecodeOptions options) const {
  options.kernel = fastest.kernel;
  options.num_splits = fastest.num_splits;
  options.halving_splits = fastest.halving_splits;
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
    absl::StrAppend(&text, absl::StrFormat(" %d%s%s:%.1f", c.num_splits, c.planned ? "*" : "",
                                           c.halving_splits ? "h" : "", c.median_us));
    if (c.planned && c.kernel == fastest.kernel) planned_of_fastest = c.num_splits;
  }
  absl::StrAppend(&text, ": ", std::string(DecodeKernelChoiceName(fastest.kernel)), " x",
                  fastest.num_splits, fastest.halving_splits ? " halving" : "", " (planned x",
                  planned_of_fastest, ")");
  if (!l2_flushed) absl::StrAppend(&text, ", L2 warm");
  return text;
}

absl::StatusOr<DecodeTuning> TuneDecodeKernel(const AttentionProblem& problem,
                                              const DecodeOptions& options, cudaStream_t stream,
                                              int launches) {
  if (launches < 1) {
    return absl::InvalidArgumentError(absl::StrCat("launches (", launches, ") must be >= 1"));
  }
  // Without the flush's memory (the problem may hold most of the GPU) the trials run with a
  // warm L2, and the result says so.
  ASSIGN_OR_RETURN(
      measure::FlushedTimer timer,
      measure::FlushedTimer::Create({.require_flush = false, .max_samples = launches}));
  auto time = [&](const DecodeOptions& candidate) -> absl::StatusOr<double> {
    ASSIGN_OR_RETURN(const SampleSummary times,
                     timer.Time(
                         stream, [&] { return LaunchDecode(problem, candidate, stream).status(); },
                         /*warmup=*/1, launches));
    return times.median;
  };

  DecodeTuning tuning;
  tuning.l2_flushed = timer.l2_flushed();
  for (DecodeKernelChoice kernel :
       {DecodeKernelChoice::kPlain, DecodeKernelChoice::kPrefetch, DecodeKernelChoice::kTensorCores,
        DecodeKernelChoice::kTensorCoresLongTiles, DecodeKernelChoice::kTensorCoresTma,
        DecodeKernelChoice::kTensorCoresLongTilesTma}) {
    DecodeOptions forced = options;
    forced.kernel = kernel;
    forced.halving_splits = false;
    // The plan's split count for this kernel. A kernel refused for the shape (the tensor-core
    // ones outside their head sizes and rows) is no candidate; any other failure is the caller's.
    const absl::StatusOr<DecodeLaunchInfo> planned = LaunchDecode(problem, forced, stream);
    if (!planned.ok()) {
      if (IsTensorCoreDecode(kernel) &&
          planned.status().code() == absl::StatusCode::kInvalidArgument) {
        continue;
      }
      return planned.status();
    }
    const int planned_splits = planned->plan.num_splits;
    // Halving splits where the plan's blocks already fill the GPU: there even splits only add
    // blocks that all end together.
    const bool try_halving = IsTensorCoreDecode(kernel) && planned_splits <= 2;
    for (int splits :
         DecodeSplitCandidates(planned_splits, problem.lengths.max_kv_len(), options.num_splits)) {
      if (DecodeWorkspaceBytes(problem.shape, problem.lengths, splits) > options.workspace_bytes) {
        continue;  // more partial outputs than the workspace holds
      }
      for (bool halving : {false, true}) {
        if (halving && !(try_halving && splits >= kMinHalvingSplits)) continue;
        DecodeOptions candidate = forced;
        candidate.num_splits = splits;
        candidate.halving_splits = halving;
        ASSIGN_OR_RETURN(const double median_us, time(candidate));
        tuning.candidates.push_back({.kernel = kernel,
                                     .num_splits = splits,
                                     .halving_splits = halving,
                                     .planned = splits == planned_splits && !halving,
                                     .median_us = median_us});
      }
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
