#include "kernels/attention/decode_tuning.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"

namespace gpuprof::attention {

std::string DecodeTuning::ToString() const {
  std::string text = absl::StrJoin(candidates, ", ", [](std::string* out, const Candidate& c) {
    absl::StrAppend(out, std::string(DecodeKernelChoiceName(c.kernel)),
                    absl::StrFormat(" %.1f us", c.median_us));
  });
  return absl::StrCat(text, ": ", std::string(DecodeKernelChoiceName(fastest)));
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
  DecodeTuning tuning;
  for (DecodeKernelChoice kernel : {DecodeKernelChoice::kPlain, DecodeKernelChoice::kPrefetch,
                                    DecodeKernelChoice::kTensorCores}) {
    DecodeOptions forced = options;
    forced.kernel = kernel;
    // The untimed launch. A kernel refused for the shape (the tensor-core one outside its head
    // sizes and rows) is no candidate; any other failure is the caller's.
    const absl::Status first = LaunchDecode(problem, forced, stream).status();
    if (!first.ok()) {
      if (kernel == DecodeKernelChoice::kTensorCores &&
          first.code() == absl::StatusCode::kInvalidArgument) {
        continue;
      }
      return first;
    }
    for (int i = 0; i < launches; ++i) {
      RETURN_IF_ERROR(events[2 * i].Record(stream));
      RETURN_IF_ERROR(LaunchDecode(problem, forced, stream).status());
      RETURN_IF_ERROR(events[2 * i + 1].Record(stream));
    }
    CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    std::vector<double> us;
    for (int i = 0; i < launches; ++i) {
      ASSIGN_OR_RETURN(const float ms, ElapsedMilliseconds(events[2 * i], events[2 * i + 1]));
      us.push_back(ms * 1e3);
    }
    std::sort(us.begin(), us.end());
    tuning.candidates.push_back({.kernel = kernel, .median_us = us[us.size() / 2]});
  }
  if (tuning.candidates.empty()) {
    return absl::InternalError("no decode kernel took the problem");
  }
  tuning.fastest =
      std::min_element(tuning.candidates.begin(), tuning.candidates.end(),
                       [](const auto& a, const auto& b) { return a.median_us < b.median_us; })
          ->kernel;
  return tuning;
}

}  // namespace gpuprof::attention
