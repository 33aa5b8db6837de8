// The request label that asks a worker to misbehave, for fault tests: crash, hang, exit,
// cuda-error, on every rank or (with "@RANK") on one. The daemon accepts it only when started
// with --enable_test_faults, and the worker acts on it only when the daemon set
// GPUPROF_ENABLE_TEST_FAULTS=1 in its environment.
#ifndef GPUPROF_COMMON_FAULT_LABEL_H_
#define GPUPROF_COMMON_FAULT_LABEL_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace gpuprof {

inline constexpr char kFaultLabel[] = "gpuprof.fault";

struct FaultLabel {
  // "crash", "hang", "exit", "cuda-error"; "flood" (reports without end) and "garbage" (bytes
  // that are not a report) test the daemon's defences against a misbehaving worker.
  std::string fault;
  std::optional<int> rank;  // only this rank misbehaves; every rank when unset
  bool AppliesTo(int worker_rank) const { return !rank.has_value() || *rank == worker_rank; }
};

// "crash" or "hang@1"; nullopt for anything else (an unknown fault, a bad rank).
std::optional<FaultLabel> ParseFaultLabel(absl::string_view value);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_FAULT_LABEL_H_
