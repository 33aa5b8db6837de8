#include "daemon/admission/custom_kernel_audit.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/admission/access_policy.h"

namespace gpuprof::daemon {

std::string CustomKernelAuditDetail(const std::vector<v1::ExperimentRequest>& requests) {
  std::vector<std::string> kernels;
  std::set<std::string> seen;
  for (const v1::ExperimentRequest& request : requests) {
    if (!request.has_custom_kernel()) continue;
    const v1::CustomKernel& kernel = request.custom_kernel();
    const std::string sha256 = Sha256Hex(kernel.source());
    // A sweep's points share their source unless it is an axis.
    if (!seen.insert(absl::StrCat(sha256, " ", kernel.file_name(), " ", kernel.kernel_name()))
             .second) {
      continue;
    }
    kernels.push_back(absl::StrCat(kernel.file_name(), " (", kernel.kernel_name(),
                                   "), source sha256 ", sha256, ", ", kernel.source().size(),
                                   " bytes"));
  }
  if (kernels.empty()) return "";
  return absl::StrCat(kernels.size() == 1 ? "; custom kernel " : "; custom kernels ",
                      absl::StrJoin(kernels, "; "));
}

}  // namespace gpuprof::daemon
