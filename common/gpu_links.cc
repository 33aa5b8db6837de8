#include "common/gpu_links.h"

#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuprof {

std::string LinkLabel(const v1::GpuLink& link) {
  switch (link.type()) {
    case v1::LINK_TYPE_SELF:
      return "X";
    case v1::LINK_TYPE_NVLINK:
      return absl::StrCat("NV", link.nvlink_count());
    case v1::LINK_TYPE_PCIE_SWITCH:
      return "PIX";
    case v1::LINK_TYPE_PCIE_HOST_BRIDGE:
      return "PHB";
    case v1::LINK_TYPE_CROSS_NUMA:
      return "SYS";
    default:
      return "?";
  }
}

std::string DescribeGpuPath(const google::protobuf::RepeatedPtrField<v1::GpuLink>& links) {
  std::set<std::string> labels;
  std::vector<std::string> pairs;
  for (const v1::GpuLink& link : links) {
    // Links come for both orders of a pair; each pair is said once.
    if (link.gpu_a() >= link.gpu_b()) continue;
    labels.insert(LinkLabel(link));
    pairs.push_back(absl::StrCat(link.gpu_a(), "-", link.gpu_b(), " ", LinkLabel(link)));
  }
  if (labels.size() == 1) return *labels.begin();
  return absl::StrJoin(pairs, ", ");
}

}  // namespace gpuprof
