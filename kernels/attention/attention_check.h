// Compares an attention output with the fp32 reference: largest absolute and relative error,
// relative L2 error, and pass/fail against a tolerance. Host code over host arrays.
#ifndef GPUPROF_KERNELS_ATTENTION_ATTENTION_CHECK_H_
#define GPUPROF_KERNELS_ATTENTION_ATTENTION_CHECK_H_

#include <cstdint>
#include <span>
#include <string>

#include "kernels/attention/attention_params.h"

namespace gpuprof::attention {

struct AttentionTolerance {
  double atol = 0;
  double rtol = 0;
  double max_rel_l2 = 0;  // bound on ||actual - expected|| / ||expected||
};

// Tolerances for outputs of inputs in `dtype` (P is rounded to dtype before P.V, as every
// FlashAttention kernel does): bf16 1.5e-2 abs + 1.5e-2 rel, rel-L2 1e-2; fp16 4e-3 / 4e-3 /
// 3e-3; fp8 e4m3 (bf16 O, P in e4m3) 6e-2 / 6e-2 / 4e-2.
AttentionTolerance DefaultTolerance(AttentionDtype dtype);

struct AttentionErrorReport {
  int64_t elements = 0;
  double max_abs_error = 0;
  // Largest |a - e| / max(|e|, atol): relative where values are not tiny.
  double max_rel_error = 0;
  double rel_l2_error = 0;
  int64_t worst_index = -1;  // element with the largest |a - e| - (atol + rtol |e|)
  int64_t mismatches = 0;    // elements over atol + rtol |e|
  int64_t non_finite = 0;    // NaN or Inf in `actual` (never passes)
  AttentionTolerance tolerance;
  bool passed = false;

  std::string ToString() const;
};

AttentionErrorReport CompareAttentionOutputs(std::span<const float> actual,
                                             std::span<const float> expected,
                                             const AttentionTolerance& tolerance);

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_ATTENTION_CHECK_H_
