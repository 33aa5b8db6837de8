#include "workloads/copy/copy_routes.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kBytes = int64_t{1} << 28;

// Two H100 SXM as the probe describes them: GPUs 4 and 6 of the host, HBM 3352 GB/s.
std::vector<v1::GpuInfo> Gpus(int count = 2) {
  std::vector<v1::GpuInfo> gpus(count);
  for (int i = 0; i < count; ++i) {
    gpus[i].set_index(4 + 2 * i);
    gpus[i].set_compute_capability_major(9);
    gpus[i].set_spec_peak_bandwidth_gbps(3352);
  }
  return gpus;
}

std::vector<v1::GpuLink> Links(v1::LinkType type, int nvlinks) {
  std::vector<v1::GpuLink> links(2);
  for (int i = 0; i < 2; ++i) {
    links[i].set_gpu_a(i == 0 ? 4 : 6);
    links[i].set_gpu_b(i == 0 ? 6 : 4);
    links[i].set_type(type);
    links[i].set_nvlink_count(nvlinks);
  }
  return links;
}

const std::vector<LinkPeak> kPcie = {{.gbps = 63.0, .label = "PCIe Gen5 x16"},
                                     {.gbps = 31.5, .label = "PCIe Gen4 x16"}};

v1::CopySpec Spec(v1::CopyDirection direction, bool bidirectional = false,
                  v1::HostMemory memory = v1::HOST_MEMORY_UNSPECIFIED) {
  v1::CopySpec spec;
  spec.set_direction(direction);
  spec.set_bytes(kBytes);
  spec.set_bidirectional(bidirectional);
  spec.set_host_memory(memory);
  return spec;
}

TEST(PcieTest, BandwidthPerDirectionFollowsTheLineCode) {
  EXPECT_NEAR(PcieGbpsPerDirection(32.0, 16), 63.02, 0.01);  // Gen5 x16
  EXPECT_NEAR(PcieGbpsPerDirection(16.0, 16), 31.51, 0.01);  // Gen4 x16
  EXPECT_NEAR(PcieGbpsPerDirection(8.0, 16), 15.75, 0.01);   // Gen3 x16
  EXPECT_NEAR(PcieGbpsPerDirection(5.0, 8), 4.0, 1e-9);      // Gen2 x8, 8b/10b
  EXPECT_EQ(PcieLabel(32.0, 16), "PCIe Gen5 x16");
  EXPECT_EQ(PcieLabel(16.0, 8), "PCIe Gen4 x8");
  EXPECT_EQ(PcieLabel(8.0, 16), "PCIe Gen3 x16");
  EXPECT_EQ(PcieLabel(2.5, 1), "PCIe Gen1 x1");
}

TEST(PcieTest, ReadsTheLinkFromSysfsElseAssumesTheArchitecturesGeneration) {
  const std::string root = std::string(std::getenv("TEST_TMPDIR")) + "/pci";
  std::filesystem::create_directories(root + "/0000:1b:00.0");
  std::ofstream(root + "/0000:1b:00.0/max_link_speed") << "16.0 GT/s PCIe\n";
  std::ofstream(root + "/0000:1b:00.0/max_link_width") << "16\n";
  v1::GpuInfo gpu;
  gpu.set_pci_bus_id("00000000:1B:00.0");
  gpu.set_compute_capability_major(9);
  LinkPeak peak = PcieLinkPeak(gpu, root);
  EXPECT_NEAR(peak.gbps, 31.51, 0.01);
  EXPECT_EQ(peak.label, "PCIe Gen4 x16");

  gpu.set_pci_bus_id("00000000:2C:00.0");
  peak = PcieLinkPeak(gpu, root);
  EXPECT_NEAR(peak.gbps, 63.02, 0.01);
  EXPECT_THAT(peak.label, HasSubstr("PCIe Gen5 x16 (assumed"));
}

TEST(CopyRoutesTest, DeviceCopiesCountReadAndWriteAgainstHbm) {
  const std::vector<v1::GpuInfo> gpus = Gpus(1);
  const CopyRoutes routes =
      PlanCopyRoutes(Spec(v1::COPY_DIRECTION_DEVICE_TO_DEVICE), gpus, {}, kPcie);
  ASSERT_EQ(routes.each.size(), 1u);
  EXPECT_FALSE(routes.together.has_value());
  const CopyRoute& route = routes.each[0];
  EXPECT_EQ(route.label, "GPU 4 (device to device)");
  EXPECT_THAT(route.legs, ElementsAre(CopyLeg{0, 0}));
  EXPECT_EQ(route.bytes, 2 * kBytes);
  EXPECT_EQ(route.peak.gbps, 3352);
  EXPECT_EQ(route.peak.label, "HBM");
  EXPECT_THAT(route.gpu_indices, ElementsAre(4));
}

TEST(CopyRoutesTest, HostCopiesOnSeveralGpusRunEachAndTogether) {
  const std::vector<v1::GpuInfo> gpus = Gpus(2);
  const CopyRoutes routes = PlanCopyRoutes(
      Spec(v1::COPY_DIRECTION_HOST_TO_DEVICE, false, v1::HOST_MEMORY_PINNED), gpus, {}, kPcie);
  ASSERT_EQ(routes.each.size(), 2u);
  EXPECT_EQ(routes.each[0].label, "host (pinned) -> GPU 4");
  EXPECT_THAT(routes.each[0].legs, ElementsAre(CopyLeg{kHost, 0}));
  EXPECT_EQ(routes.each[0].legs[0].device(), 0);
  EXPECT_EQ(routes.each[1].peak.label, "PCIe Gen4 x16");
  ASSERT_TRUE(routes.together.has_value());
  EXPECT_EQ(routes.together->label, "GPUs 4,6 at once");
  EXPECT_EQ(routes.together->bytes, 2 * kBytes);
  EXPECT_DOUBLE_EQ(routes.together->peak.gbps, 63.0 + 31.5);
  EXPECT_EQ(routes.together->peak.label, "PCIe Gen5 x16, PCIe Gen4 x16");
  EXPECT_THAT(routes.together->gpu_indices, ElementsAre(4, 6));
}

TEST(CopyRoutesTest, BidirectionalHostCopiesRunBothWaysOnOneGpu) {
  const std::vector<v1::GpuInfo> gpus = Gpus(1);
  const CopyRoutes routes = PlanCopyRoutes(
      Spec(v1::COPY_DIRECTION_DEVICE_TO_HOST, true, v1::HOST_MEMORY_PINNED), gpus, {}, kPcie);
  ASSERT_EQ(routes.each.size(), 1u);
  EXPECT_EQ(routes.each[0].label, "GPU 4 <-> host (pinned)");
  EXPECT_THAT(routes.each[0].legs, ElementsAre(CopyLeg{0, kHost}, CopyLeg{kHost, 0}));
  EXPECT_EQ(routes.each[0].bytes, 2 * kBytes);
  EXPECT_DOUBLE_EQ(routes.each[0].peak.gbps, 2 * 63.0);
}

TEST(CopyRoutesTest, PageableCopiesNeverRunTogether) {
  const std::vector<v1::GpuInfo> gpus = Gpus(2);
  const CopyRoutes routes = PlanCopyRoutes(
      Spec(v1::COPY_DIRECTION_DEVICE_TO_HOST, false, v1::HOST_MEMORY_PAGEABLE), gpus, {}, kPcie);
  EXPECT_EQ(routes.each.size(), 2u);
  EXPECT_EQ(routes.each[1].label, "GPU 6 -> host (pageable)");
  EXPECT_FALSE(routes.together.has_value());
}

TEST(CopyRoutesTest, PeerCopiesOverNvLinkEveryOrderedPair) {
  const std::vector<v1::GpuInfo> gpus = Gpus(2);
  const std::vector<v1::GpuLink> links = Links(v1::LINK_TYPE_NVLINK, 18);
  const CopyRoutes routes = PlanCopyRoutes(Spec(v1::COPY_DIRECTION_PEER), gpus, links, kPcie);
  ASSERT_EQ(routes.each.size(), 2u);
  EXPECT_FALSE(routes.together.has_value());
  EXPECT_EQ(routes.each[0].label, "GPU 4 -> GPU 6");
  EXPECT_THAT(routes.each[0].legs, ElementsAre(CopyLeg{0, 1}));
  EXPECT_EQ(routes.each[1].label, "GPU 6 -> GPU 4");
  EXPECT_EQ(routes.each[0].bytes, kBytes);
  EXPECT_DOUBLE_EQ(routes.each[0].peak.gbps, 450.0);  // 18 links x 25 GB/s
  EXPECT_EQ(routes.each[0].peak.label, "NV18");
}

TEST(CopyRoutesTest, BidirectionalPeerCopiesEachPairOnceOverPcie) {
  const std::vector<v1::GpuInfo> gpus = Gpus(3);
  // No link known: the slower PCIe link of the two.
  const std::vector<LinkPeak> pcie = {kPcie[0], kPcie[1], kPcie[0]};
  const CopyRoutes three = PlanCopyRoutes(Spec(v1::COPY_DIRECTION_PEER, true), gpus, {}, pcie);
  ASSERT_EQ(three.each.size(), 3u);
  EXPECT_EQ(three.each[0].label, "GPU 4 <-> GPU 6");
  EXPECT_THAT(three.each[0].legs, ElementsAre(CopyLeg{0, 1}, CopyLeg{1, 0}));
  EXPECT_EQ(three.each[0].bytes, 2 * kBytes);
  EXPECT_DOUBLE_EQ(three.each[0].peak.gbps, 2 * 31.5);
  EXPECT_EQ(three.each[1].label, "GPU 4 <-> GPU 8");
  EXPECT_DOUBLE_EQ(three.each[1].peak.gbps, 2 * 63.0);
  EXPECT_EQ(three.each[2].label, "GPU 6 <-> GPU 8");
}

TEST(CopyRoutesTest, PeerCopiesOverAPcieLinkNameIt) {
  const std::vector<v1::GpuInfo> gpus = Gpus(2);
  const std::vector<v1::GpuLink> links = Links(v1::LINK_TYPE_CROSS_NUMA, 0);
  const CopyRoutes routes = PlanCopyRoutes(Spec(v1::COPY_DIRECTION_PEER), gpus, links, kPcie);
  EXPECT_DOUBLE_EQ(routes.each[0].peak.gbps, 31.5);
  EXPECT_EQ(routes.each[0].peak.label, "PCIe Gen4 x16 (SYS)");
}

}  // namespace
}  // namespace gpuprof::workloads
