// How the index and store kernels are specialised and launched: the runtime request is mapped
// to template arguments (row size, splits, vector width, threads, occupancy, PDL, and the
// masked gather or fused K+V scatter),
// which name one NVRTC instantiation. Plain C++ (no CUDA types), so it is testable anywhere.
#ifndef GPUPROF_KERNELS_COPY_COPY_KERNEL_CONFIG_H_
#define GPUPROF_KERNELS_COPY_COPY_KERNEL_CONFIG_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace gpuprof::kernels {

enum class CopyKernelKind {
  kIndex,  // gather; `masked` selects the vocabulary-sharded kernel
  kStore,  // scatter; `fused_kv` writes K and V in one launch
};

// What the caller asks for; zero means "choose".
struct CopyKernelRequest {
  CopyKernelKind kind = CopyKernelKind::kIndex;
  int64_t row_bytes = 0;
  int64_t num_tokens = 0;
  int num_splits = 0;
  int threads = 0;
  int max_occupancy = 0;
  bool use_pdl = false;
  bool masked = false;    // index only: ids outside the vocabulary range give zero rows
  bool fused_kv = false;  // store only: K and V in one launch
  // Multiprocessors of the GPU: the automatic split count aims to fill them.
  int sm_count = 0;
};

// One instantiation of a kernel template.
struct CopyKernelConfig {
  CopyKernelKind kind = CopyKernelKind::kIndex;
  int64_t row_bytes = 0;
  int num_splits = 1;
  int vec_bytes = 16;
  int threads = 128;
  int max_occupancy = 1;
  bool use_pdl = false;
  bool masked = false;    // index only
  bool fused_kv = false;  // store only
};

// The kind-specific flag the kernel template takes as its last argument.
bool CopyKernelVariantFlag(const CopyKernelConfig& config);

struct LaunchShape {
  int64_t blocks = 0;
  int threads = 0;
};

inline constexpr int kDefaultThreadsPerBlock = 128;
// Index (gather) blocks when many tokens each get a whole row per warp.
inline constexpr int kLargeBatchThreadsPerBlock = 512;
// ... for rows up to this size; longer rows keep kDefaultThreadsPerBlock.
inline constexpr int64_t kLargeBatchMaxRowBytes = 2048;
// Gathers of many rows longer than kLargeBatchMaxRowBytes and up to this size split each row
// over kMediumRowSplits warps in blocks of kMediumRowThreadsPerBlock.
inline constexpr int64_t kSplitRowMaxBytes = 8192;
inline constexpr int kMediumRowSplits = 4;
inline constexpr int kMediumRowThreadsPerBlock = 256;
// Warps a row may be split over when asked for (a 64 KiB row at one 16-byte vector a lane)...
inline constexpr int kMaxSplits = 128;
// ... and when chosen automatically (the choices RESULTS.md measured).
inline constexpr int kMaxAutoSplits = 32;
// The automatic split count adds warps until about this many per multiprocessor exist.
inline constexpr int kTargetWarpsPerSm = 16;

// The widest access (16, 8, 4, 2 or 1 bytes) that divides `bytes`, so that every row, and
// every slice of one, starts aligned to it.
int WidestVectorBytes(int64_t bytes);

// Validates the request and fills the choices. Errors name the offending field.
absl::StatusOr<CopyKernelConfig> ChooseCopyKernelConfig(const CopyKernelRequest& request);

// The C++ name of the instantiation for NVRTC, e.g.
// "gpuprof::kernels::jit::IndexKernel<8192, 1, 16, 128, 1, false, false>". Each runtime value
// is mapped to the template argument it may take; anything else is an error.
absl::StatusOr<std::string> CopyKernelNameExpression(const CopyKernelConfig& config);

// The source file (in KernelSources()) that defines the kernel.
std::string CopyKernelSourcePath(CopyKernelKind kind);

// "index_gather" / "index_gather_masked" / "store_scatter_fused_kv" / "store_scatter".
std::string CopyKernelName(const CopyKernelConfig& config);

// Template arguments as the JIT cache keys them: "row8192_s1_v16_t128_o1_pdl0".
std::string CopyKernelTemplateKey(const CopyKernelConfig& config);

// Blocks and threads for `num_tokens` tokens: one warp per slice of a row.
LaunchShape CopyKernelLaunchShape(const CopyKernelConfig& config, int64_t num_tokens);

// The configuration as name -> value, for ExperimentResult.kernel_config.
std::map<std::string, std::string> DescribeCopyKernelConfig(const CopyKernelConfig& config,
                                                            int64_t num_tokens);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_COPY_COPY_KERNEL_CONFIG_H_
