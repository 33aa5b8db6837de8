#include "common/gpu_links.h"

#include "gtest/gtest.h"

namespace gpuprof {
namespace {

google::protobuf::RepeatedPtrField<v1::GpuLink> Links(
    std::initializer_list<std::tuple<int, int, v1::LinkType, int>> links) {
  google::protobuf::RepeatedPtrField<v1::GpuLink> out;
  for (const auto& [a, b, type, count] : links) {
    for (auto [from, to] : {std::pair{a, b}, std::pair{b, a}}) {
      v1::GpuLink& link = *out.Add();
      link.set_gpu_a(from);
      link.set_gpu_b(to);
      link.set_type(type);
      link.set_nvlink_count(count);
    }
  }
  return out;
}

TEST(GpuLinksTest, OneLabelWhenEveryPairIsAlike) {
  EXPECT_EQ(DescribeGpuPath(Links({{0, 1, v1::LINK_TYPE_NVLINK, 18}})), "NV18");
  EXPECT_EQ(DescribeGpuPath(Links({{0, 1, v1::LINK_TYPE_NVLINK, 12},
                                   {0, 2, v1::LINK_TYPE_NVLINK, 12},
                                   {1, 2, v1::LINK_TYPE_NVLINK, 12}})),
            "NV12");
}

TEST(GpuLinksTest, EachPairWhenTheyDiffer) {
  EXPECT_EQ(DescribeGpuPath(Links({{0, 1, v1::LINK_TYPE_NVLINK, 4},
                                   {0, 2, v1::LINK_TYPE_CROSS_NUMA, 0},
                                   {1, 2, v1::LINK_TYPE_PCIE_HOST_BRIDGE, 0}})),
            "0-1 NV4, 0-2 SYS, 1-2 PHB");
  EXPECT_EQ(DescribeGpuPath({}), "");
}

}  // namespace
}  // namespace gpuprof
