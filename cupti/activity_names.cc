#include "cupti/activity_names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace gpuprof::cupti {

std::string PhaseName(gpuprof::v1::Phase phase) {
  if (phase == gpuprof::v1::PHASE_UNSPECIFIED) return "unspecified";
  std::string name = gpuprof::v1::Phase_Name(phase);
  if (absl::StartsWith(name, "PHASE_")) name = name.substr(6);
  return absl::AsciiStrToLower(name);
}

}  // namespace gpuprof::cupti
