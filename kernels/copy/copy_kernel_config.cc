#include "kernels/copy/copy_kernel_config.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpuprof::kernels {
namespace {

// Largest row the kernels are specialised for: hidden 65536 of fp32.
constexpr int64_t kMaxRowBytes = int64_t{1} << 18;

const char* FieldPrefix(CopyKernelKind kind) {
  return kind == CopyKernelKind::kIndex ? "index" : "store";
}

// Splits whose slices are whole vectors and give every lane of a warp at least one vector.
bool SplitFits(int64_t row_bytes, int splits) {
  if (row_bytes % splits != 0) return false;
  const int64_t slice = row_bytes / splits;
  return slice >= 32 * WidestVectorBytes(slice);
}

}  // namespace

int WidestVectorBytes(int64_t bytes) {
  for (int width : {16, 8, 4, 2}) {
    if (bytes % width == 0) return width;
  }
  return 1;
}

absl::StatusOr<CopyKernelConfig> ChooseCopyKernelConfig(const CopyKernelRequest& request) {
  const char* prefix = FieldPrefix(request.kind);
  if (request.row_bytes < 1 || request.row_bytes > kMaxRowBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s row size: got %d bytes; must be in [1, %d]", prefix, request.row_bytes, kMaxRowBytes));
  }
  if (request.num_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.num_tokens: got %d; must be at least 1", prefix, request.num_tokens));
  }
  CopyKernelConfig config;
  config.kind = request.kind;
  config.row_bytes = request.row_bytes;
  config.use_pdl = request.use_pdl;
  config.masked = request.kind == CopyKernelKind::kIndex && request.masked;
  config.fused_kv = request.kind == CopyKernelKind::kStore && request.fused_kv;
  if (request.num_splits != 0) {
    if (request.num_splits < 1 || request.num_splits > kMaxSplits ||
        request.row_bytes % request.num_splits != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s.num_splits: got %d; must be in [1, %d] and divide the row of %d bytes",
          prefix, request.num_splits, kMaxSplits, request.row_bytes));
    }
    config.num_splits = request.num_splits;
  } else {
    // Few tokens: split rows until the GPU has enough warps, while each lane still moves at
    // least one vector. Many tokens: whole rows per warp, the longest runs of loads.
    const int64_t target_warps = int64_t{kTargetWarpsPerSm} * std::max(request.sm_count, 1);
    config.num_splits = 1;
    while (config.num_splits < kMaxAutoSplits &&
           request.num_tokens * config.num_splits < target_warps &&
           SplitFits(request.row_bytes, config.num_splits * 2)) {
      config.num_splits *= 2;
    }
  }
  // Gathers with many tokens (whole rows per warp so far). Measured on an H100 over every
  // hidden size of released models at 4Ki-64Ki tokens against torch.index_select
  // (docs/benchmarks/RESULTS.md, "Retuning the gather's launch"):
  //  - rows of 2-8 KiB: four warps per row in 256-thread blocks. At 4Ki tokens the working set
  //    is L2-resident and the kernel waits on latency, so four times the warps took 3-6 KiB
  //    rows from 101-110% to 107-130% of the copy bandwidth (h2048: 10.7 -> 8.8 us); at 16Ki-
  //    64Ki tokens it is 0-1% faster. A 2 KiB row would split below two vectors a lane (slower).
  //  - rows above 8 KiB: 128-thread blocks; 512-thread blocks were 1-2% slower there.
  //  - rows up to 2 KiB (and 2-8 KiB rows that do not split in four): 512-thread blocks,
  //    1-2% faster than 128 (H200, 2 and 8 KiB rows).
  const bool choose_launch = request.num_splits == 0 && request.threads == 0;
  const bool many_tokens =
      config.num_splits == 1 &&
      request.num_tokens >= int64_t{kTargetWarpsPerSm} * std::max(request.sm_count, 1);
  const bool gather_many_rows = request.kind == CopyKernelKind::kIndex && many_tokens;
  int chosen_threads = kDefaultThreadsPerBlock;
  if (gather_many_rows && choose_launch && request.row_bytes > kLargeBatchMaxRowBytes &&
      request.row_bytes <= kSplitRowMaxBytes &&
      SplitFits(request.row_bytes, kMediumRowSplits) &&
      request.max_occupancy * kMediumRowThreadsPerBlock <= 2048) {
    config.num_splits = kMediumRowSplits;
    chosen_threads = kMediumRowThreadsPerBlock;
  } else if (gather_many_rows && request.row_bytes <= kSplitRowMaxBytes &&
             request.max_occupancy * kLargeBatchThreadsPerBlock <= 2048) {
    chosen_threads = kLargeBatchThreadsPerBlock;
  }
  config.vec_bytes = WidestVectorBytes(request.row_bytes / config.num_splits);
  config.threads = request.threads != 0 ? request.threads : chosen_threads;
  if (config.threads % 32 != 0 || config.threads < 32 || config.threads > 1024) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.threads: got %d; must be a multiple of 32 in [32, 1024]", prefix, config.threads));
  }
  // __launch_bounds__ needs at least one resident block; 0 leaves registers to the compiler.
  config.max_occupancy = request.max_occupancy == 0 ? 1 : request.max_occupancy;
  if (config.max_occupancy < 1 || config.max_occupancy * config.threads > 2048) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.max_occupancy: got %d; must be in [0, %d] for %d threads per block (2048 threads "
        "per SM)",
        prefix, request.max_occupancy, 2048 / config.threads, config.threads));
  }
  return config;
}

bool CopyKernelVariantFlag(const CopyKernelConfig& config) {
  return config.kind == CopyKernelKind::kIndex ? config.masked : config.fused_kv;
}

absl::StatusOr<std::string> CopyKernelNameExpression(const CopyKernelConfig& config) {
  const char* prefix = FieldPrefix(config.kind);
  // Each runtime value maps to one template argument; the switches refuse values the kernel
  // templates' static_asserts would reject, with a message rather than a compile log.
  switch (config.vec_bytes) {
    case 1:
    case 2:
    case 4:
    case 8:
    case 16:
      break;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s vector width: got %d bytes; must be 1, 2, 4, 8 or 16", prefix, config.vec_bytes));
  }
  if (config.num_splits < 1 || config.num_splits > kMaxSplits) {
    return absl::InvalidArgumentError(absl::StrFormat("%s.num_splits: got %d; must be in [1, %d]",
                                                      prefix, config.num_splits, kMaxSplits));
  }
  if (config.row_bytes < 1 || config.row_bytes > kMaxRowBytes ||
      config.row_bytes % (int64_t{config.num_splits} * config.vec_bytes) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s row size: got %d bytes; must be in [1, %d] and split into %d slices of %d-byte "
        "vectors",
        prefix, config.row_bytes, kMaxRowBytes, config.num_splits, config.vec_bytes));
  }
  if (config.threads % 32 != 0 || config.threads < 32 || config.threads > 1024) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s.threads: got %d; must be a multiple of 32 in [32, 1024]", prefix, config.threads));
  }
  if (config.max_occupancy < 1 || config.max_occupancy * config.threads > 2048) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s.max_occupancy: got %d; must be in [1, %d]", prefix,
                        config.max_occupancy, 2048 / config.threads));
  }
  const char* kernel = nullptr;
  switch (config.kind) {
    case CopyKernelKind::kIndex:
      kernel = "IndexKernel";
      break;
    case CopyKernelKind::kStore:
      kernel = "StoreKernel";
      break;
    default:
      return absl::InvalidArgumentError("unknown copy kernel kind");
  }
  return absl::StrFormat("gpuprof::kernels::jit::%s<%d, %d, %d, %d, %d, %s, %s>", kernel,
                         config.row_bytes, config.num_splits, config.vec_bytes, config.threads,
                         config.max_occupancy, config.use_pdl ? "true" : "false",
                         CopyKernelVariantFlag(config) ? "true" : "false");
}

std::string CopyKernelSourcePath(CopyKernelKind kind) {
  return kind == CopyKernelKind::kIndex ? "kernels/copy/index_kernel.cuh" : "kernels/copy/store_kernel.cuh";
}

std::string CopyKernelName(const CopyKernelConfig& config) {
  if (config.kind == CopyKernelKind::kIndex) {
    return config.masked ? "index_gather_masked" : "index_gather";
  }
  return config.fused_kv ? "store_scatter_fused_kv" : "store_scatter";
}

std::string CopyKernelTemplateKey(const CopyKernelConfig& config) {
  return absl::StrFormat("row%d_s%d_v%d_t%d_o%d_pdl%d", config.row_bytes, config.num_splits,
                         config.vec_bytes, config.threads, config.max_occupancy,
                         config.use_pdl ? 1 : 0);
}

LaunchShape CopyKernelLaunchShape(const CopyKernelConfig& config, int64_t num_tokens) {
  const int64_t warps = num_tokens * config.num_splits;
  const int64_t warps_per_block = config.threads / 32;
  return LaunchShape{.blocks = (warps + warps_per_block - 1) / warps_per_block,
                     .threads = config.threads};
}

std::map<std::string, std::string> DescribeCopyKernelConfig(const CopyKernelConfig& config,
                                                            int64_t num_tokens) {
  const LaunchShape shape = CopyKernelLaunchShape(config, num_tokens);
  std::map<std::string, std::string> described = {
      {"kernel", CopyKernelName(config)},
      {"row_bytes", absl::StrCat(config.row_bytes)},
      {"num_splits", absl::StrCat(config.num_splits)},
      {"vector_bytes", absl::StrCat(config.vec_bytes)},
      {"threads", absl::StrCat(config.threads)},
      {"max_occupancy", absl::StrCat(config.max_occupancy)},
      {"use_pdl", config.use_pdl ? "true" : "false"},
      {"grid", absl::StrCat(shape.blocks)},
      {"block", absl::StrCat(shape.threads)},
  };
  if (config.kind == CopyKernelKind::kIndex) {
    described["masked"] = config.masked ? "true" : "false";
  } else {
    described["launch"] = config.fused_kv ? "fused_kv" : "separate_kv";
  }
  return described;
}

}  // namespace gpuprof::kernels
