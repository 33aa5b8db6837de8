// Warp stall breakdown per kernel from CUPTI PC sampling (cupti_pcsampling.h): the SMs sample
// each warp's program counter every 2^N cycles along with why it is not issuing; summed per
// kernel and reason, that says where the kernel's warps spend their time (long scoreboard =
// waiting on global memory, barrier, ...). Kernels are serialised while sampling.
#ifndef GPUPROF_CUPTI_PC_SAMPLING_H_
#define GPUPROF_CUPTI_PC_SAMPLING_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuprof::cupti {

struct StallBreakdown {
  // The kernel's name as CUPTI reports it (mangled for C++ kernels).
  std::string function_name;
  uint64_t samples = 0;
  // (short reason, % of the kernel's samples), largest first; sums to ~100.
  std::vector<std::pair<std::string, double>> percent_by_reason;
  // Per sampled instruction, by its offset from the function's start (the offsets the
  // disassembler prints): its samples and the reason most of them stalled for.
  struct PcSamples {
    uint64_t pc_offset = 0;
    uint64_t samples = 0;
    std::string top_reason;  // short name, "long_scoreboard"
  };
  std::vector<PcSamples> by_pc;  // ascending offset
};

struct PcSamplingOptions {
  // Sampling period 2^period cycles, 5..31; smaller samples more often.
  uint32_t sampling_period_log2 = 10;
  // PCs collected per read of CUPTI's buffer.
  size_t pcs_per_read = 4096;
};

// Samples every kernel that `launch` runs on the current device (it must enqueue and wait for
// them) and returns one breakdown per kernel, most-sampled first. Kernels whose modules were
// loaded long before are fine. If CUPTI has lost track of the loaded modules (see the .cc), it
// is detached and `launch` runs a second time. NOT_FOUND, with the sample counts (see
// UnattributedSamplesMessage), when no sample could be attributed to a kernel.
absl::StatusOr<std::vector<StallBreakdown>> CollectStallBreakdown(
    const PcSamplingOptions& options, const std::function<absl::Status()>& launch);

// ---- Pure pieces, for tests. ----

// "long_scoreboard" for "smsp__pcsamp_warps_issue_stalled_long_scoreboard".
std::string ShortStallReasonName(absl::string_view cupti_name);

// CUPTI reports each reason twice: all samples stalled for it, and the subset that also did
// not issue ("..._not_issued"). Only the first kind adds up to the kernel's samples; the
// "not issued" ones are left out.
bool IsNotIssuedVariant(absl::string_view cupti_name);

// Why no sample was attributed, from CUPTI's counts: all of them in code CUPTI does not know
// (it says "outside user kernels"), dropped, or none taken.
std::string UnattributedSamplesMessage(uint64_t total, uint64_t dropped,
                                       uint64_t outside_user_kernels, bool hardware_buffer_full);

// Percentages of `samples_by_reason` (CUPTI reason names), largest first, zero counts dropped.
StallBreakdown SummarizeStalls(std::string function_name,
                               const absl::flat_hash_map<std::string, uint64_t>& samples_by_reason);

// Per instruction: `samples_by_pc` maps a PC offset to its samples by CUPTI reason name; each
// becomes its samples (the "not issued" variants left out) and its most common reason (ties to
// the first name). Offsets without samples are dropped.
std::vector<StallBreakdown::PcSamples> SummarizePcStalls(
    const std::map<uint64_t, absl::flat_hash_map<std::string, uint64_t>>& samples_by_pc);

}  // namespace gpuprof::cupti

#endif  // GPUPROF_CUPTI_PC_SAMPLING_H_
