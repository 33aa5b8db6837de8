// Which algorithm and protocol NCCL chose for each collective. NCCL reports its choice only in
// its debug log ("AllReduce: 8 Bytes -> Algo RING proto LL ..." with NCCL_DEBUG=INFO and
// NCCL_DEBUG_SUBSYS=TUNING), so a rank worker turns that log on into a file of its own and
// reads back the lines each collective added. Warnings NCCL writes there are passed on to
// stderr, where they went before.
#ifndef GPUPROF_COMM_NCCL_TUNING_LOG_H_
#define GPUPROF_COMM_NCCL_TUNING_LOG_H_

#include <optional>
#include <string>
#include "absl/strings/string_view.h"

namespace gpuprof::comm {

struct NcclChoice {
  std::string algorithm;  // "RING", "TREE", "NVLS", "PAT", ...
  std::string protocol;   // "LL", "LL128", "SIMPLE"
};

// The choice in one log line for the named operation ("AllReduce", "AllGather",
// "ReduceScatter", "Broadcast", "Reduce"); nullopt for any other line.
std::optional<NcclChoice> ParseNcclTuningLine(absl::string_view line, absl::string_view operation);

// NCCL's name of an operation in its log, from ours ("all_reduce" -> "AllReduce"); empty for
// operations NCCL runs as point-to-point sends (all_to_all), which it does not tune.
std::string NcclLogOperationName(absl::string_view operation);

class NcclTuningLog {
 public:
  // Points NCCL's debug output at an unlinked file this process reads, unless NCCL_DEBUG,
  // NCCL_DEBUG_SUBSYS or NCCL_DEBUG_FILE are already set (the user's choice wins; then no
  // choices are reported). Call before the process's first NCCL call that can log.
  static NcclTuningLog EnableForThisProcess();

  NcclTuningLog(NcclTuningLog&& other) noexcept;
  NcclTuningLog& operator=(NcclTuningLog&& other) noexcept;
  NcclTuningLog(const NcclTuningLog&) = delete;
  NcclTuningLog& operator=(const NcclTuningLog&) = delete;
  ~NcclTuningLog();

  bool enabled() const { return fd_ >= 0; }

  // The last choice for `operation` among the lines written since the previous call; lines
  // with NCCL's WARN go to stderr.
  std::optional<NcclChoice> LatestChoice(absl::string_view operation);

 private:
  explicit NcclTuningLog(int fd) : fd_(fd) {}

  int fd_ = -1;
  long offset_ = 0;
  std::string partial_line_;
};

// The process's log, enabled on first use (EnableForThisProcess): a worker calls it before
// it creates a communicator, runners read choices from it.
NcclTuningLog& ProcessNcclTuningLog();

}  // namespace gpuprof::comm

#endif  // GPUPROF_COMM_NCCL_TUNING_LOG_H_
