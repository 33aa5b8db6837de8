#include "kernels/attention/attention_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace gpuprof::attention {

AttentionTolerance DefaultTolerance(AttentionDtype dtype) {
  switch (dtype) {
    case AttentionDtype::kBf16:
      return {.atol = 1.5e-2, .rtol = 1.5e-2, .max_rel_l2 = 1e-2};
    case AttentionDtype::kFp16:
      return {.atol = 4e-3, .rtol = 4e-3, .max_rel_l2 = 3e-3};
    case AttentionDtype::kFp8E4m3:
      // P is rounded to e4m3 (3 mantissa bits, a relative step of 2^-3) before P.V, against
      // 2^-8 for bf16. Measured over the fp8 GPU tests' 11 shapes on an H100 and an H200: max
      // abs error 0.025, relative L2 error 0.018-0.026; the bounds leave 2.4x and 1.5x.
      return {.atol = 6e-2, .rtol = 6e-2, .max_rel_l2 = 4e-2};
  }
  return {};
}

std::string AttentionErrorReport::ToString() const {
  return absl::StrFormat(
      "%s: %d elements, max abs %.3g, max rel %.3g, rel L2 %.3g, %d over atol %.3g + rtol %.3g, "
      "%d non-finite, worst at %d",
      passed ? "PASS" : "FAIL", elements, max_abs_error, max_rel_error, rel_l2_error, mismatches,
      tolerance.atol, tolerance.rtol, non_finite, worst_index);
}

AttentionErrorReport CompareAttentionOutputs(std::span<const float> actual,
                                             std::span<const float> expected,
                                             const AttentionTolerance& tolerance) {
  AttentionErrorReport report;
  report.tolerance = tolerance;
  if (actual.size() != expected.size()) {
    report.elements = static_cast<int64_t>(std::min(actual.size(), expected.size()));
    report.mismatches =
        static_cast<int64_t>(std::max(actual.size(), expected.size())) - report.elements;
    report.passed = false;
    return report;
  }
  report.elements = static_cast<int64_t>(actual.size());
  double diff_sq = 0;
  double ref_sq = 0;
  double worst_excess = -INFINITY;
  const double floor = std::max(tolerance.atol, 1e-30);
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    if (!std::isfinite(a)) {
      ++report.non_finite;
      if (report.worst_index < 0 || worst_excess < INFINITY) {
        worst_excess = INFINITY;
        report.worst_index = static_cast<int64_t>(i);
      }
      continue;
    }
    const double diff = std::abs(a - e);
    diff_sq += diff * diff;
    ref_sq += e * e;
    report.max_abs_error = std::max(report.max_abs_error, diff);
    report.max_rel_error = std::max(report.max_rel_error, diff / std::max(std::abs(e), floor));
    const double excess = diff - (tolerance.atol + tolerance.rtol * std::abs(e));
    if (excess > 0) ++report.mismatches;
    if (excess > worst_excess) {
      worst_excess = excess;
      report.worst_index = static_cast<int64_t>(i);
    }
  }
  report.rel_l2_error = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  report.passed = report.non_finite == 0 && report.mismatches == 0 &&
                  report.rel_l2_error <= tolerance.max_rel_l2;
  return report;
}

}  // namespace gpuprof::attention
