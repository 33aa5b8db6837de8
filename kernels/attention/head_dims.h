// The head sizes the attention kernels (prefill, Hopper prefill, decode, reference) are
// instantiated for: one list, read by the kernels' dispatch, their validation and the
// workload's spec. No CUDA, so the CUDA-free spec can include it.
#ifndef GPUPROF_KERNELS_ATTENTION_HEAD_DIMS_H_
#define GPUPROF_KERNELS_ATTENTION_HEAD_DIMS_H_

#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpuprof::attention {

inline constexpr int kAttentionHeadDims[] = {64, 128, 256};
// As error messages list them.
inline constexpr absl::string_view kAttentionHeadDimsText = "64, 128, 256";

constexpr bool IsAttentionHeadDim(int head_dim) {
  for (int supported : kAttentionHeadDims) {
    if (head_dim == supported) return true;
  }
  return false;
}

// Calls `launch(std::integral_constant<int, D>())` for the instantiated head size D equal to
// `head_dim` and returns what it returns; InvalidArgument naming `kernel` otherwise. The
// instantiations are listed here once, beside kAttentionHeadDims.
template <typename Launch>
auto DispatchHeadDim(int head_dim, absl::string_view kernel, Launch&& launch)
    -> decltype(launch(std::integral_constant<int, 64>())) {
  static_assert(sizeof(kAttentionHeadDims) / sizeof(int) == 3,
                "a head size added to kAttentionHeadDims needs its case below");
  switch (head_dim) {
    case 64:
      return launch(std::integral_constant<int, 64>());
    case 128:
      return launch(std::integral_constant<int, 128>());
    case 256:
      return launch(std::integral_constant<int, 256>());
    default:
      return absl::InvalidArgumentError(absl::StrCat("head_dim (", head_dim, ") has no ", kernel,
                                                     " (", kAttentionHeadDimsText, ")"));
  }
}

}  // namespace gpuprof::attention

#endif  // GPUPROF_KERNELS_ATTENTION_HEAD_DIMS_H_
