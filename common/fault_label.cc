#include "common/fault_label.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace gpuprof {

std::optional<FaultLabel> ParseFaultLabel(absl::string_view value) {
  const std::vector<absl::string_view> parts = absl::StrSplit(value, absl::MaxSplits('@', 1));
  if (parts[0] != "crash" && parts[0] != "hang" && parts[0] != "exit" &&
      parts[0] != "cuda-error" && parts[0] != "flood" && parts[0] != "garbage") {
    return std::nullopt;
  }
  FaultLabel label{.fault = std::string(parts[0])};
  if (parts.size() == 2) {
    int rank = 0;
    if (!absl::SimpleAtoi(parts[1], &rank) || rank < 0) return std::nullopt;
    label.rank = rank;
  }
  return label;
}

}  // namespace gpuprof
