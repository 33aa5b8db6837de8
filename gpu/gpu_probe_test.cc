// Runs anywhere: a coherent answer with or without GPUs, and the pure helpers. What needs a
// GPU is in gpu_probe_gpu_test.cc.
#include "gpu/gpu_probe.h"

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu/gpu_probe_expectations.h"
#include "gpu/nvml_loader.h"

namespace gpuprof::gpu {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::DoubleNear;
using ::testing::MatchesRegex;
using ::testing::Optional;

TEST(ProbeHostTest, GivesACoherentAnswerOnAnyMachine) {
  v1::ListGpusResponse response = ProbeHost({.gpuprof_version = "0.1.0-test"});
  const v1::HostInfo& host = response.host();
  EXPECT_FALSE(host.hostname().empty());
  EXPECT_EQ(host.gpuprof_version(), "0.1.0-test");
  EXPECT_THAT(host.cuda_runtime_version(), MatchesRegex("[0-9]+\\.[0-9]+"));
  EXPECT_THAT(host.nccl_version(), MatchesRegex("[0-9]+\\.[0-9]+\\.[0-9]+"));
  EXPECT_THAT(host.cupti_version(), MatchesRegex("[0-9]+"));
  EXPECT_GE(host.numa_nodes(), 0);
  EXPECT_TRUE(response.supported_workloads().empty());

  if (response.gpus().empty()) {
    EXPECT_FALSE(response.probe_error().empty());
    EXPECT_TRUE(response.links().empty());
    return;
  }
  EXPECT_TRUE(response.probe_error().empty()) << response.probe_error();
  EXPECT_FALSE(host.driver_version().empty());
  for (const v1::GpuInfo& gpu : response.gpus()) {
    ExpectSaneGpu(gpu);
    EXPECT_EQ(gpu.measured_copy_bandwidth_gbps(), 0) << "not asked to measure";
  }
  ExpectCoherentLinks(response);
}

TEST(FormatTest, GpuUuidLikeNvidiaSmi) {
  const uint8_t bytes[16] = {0x3f, 0x2a, 0x0c, 0x91, 0x7b, 0x1e, 0x5d, 0x40,
                             0x88, 0x02, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45};
  EXPECT_EQ(FormatGpuUuid(bytes), "GPU-3f2a0c91-7b1e-5d40-8802-abcdef012345");
}

TEST(FormatTest, Versions) {
  EXPECT_EQ(FormatCudaVersion(13000), "13.0");
  EXPECT_EQ(FormatCudaVersion(12080), "12.8");
  EXPECT_EQ(FormatCudaVersion(0), "");
  EXPECT_EQ(FormatNcclVersion(22803), "2.28.3");
  EXPECT_EQ(FormatNcclVersion(21903), "2.19.3");
  EXPECT_EQ(FormatNcclVersion(2708), "2.7.8");
}

TEST(PciTest, ParsesCudaAndNvmlForms) {
  EXPECT_THAT(ParsePciBusId("0000:1B:00.0"), Optional(PciAddress{0, 0x1b, 0, 0}));
  EXPECT_THAT(ParsePciBusId("00000000:3b:1f.7"), Optional(PciAddress{0, 0x3b, 0x1f, 7}));
  EXPECT_THAT(ParsePciBusId("0001:C1:00.0"), Optional(PciAddress{1, 0xc1, 0, 0}));
  EXPECT_THAT(ParsePciBusId("3B:00.0"), Optional(PciAddress{0, 0x3b, 0, 0}));
  EXPECT_EQ(ParsePciBusId(""), std::nullopt);
  EXPECT_EQ(ParsePciBusId("0000:1B:00"), std::nullopt);
  EXPECT_EQ(ParsePciBusId("0000:1G:00.0"), std::nullopt);
  EXPECT_EQ(ParsePciBusId("0000:100:00.0"), std::nullopt);
}

TEST(PciTest, SysfsNameIsLowerCaseWithAFourDigitDomain) {
  EXPECT_EQ(SysfsPciName(*ParsePciBusId("00000000:3B:00.0")), "0000:3b:00.0");
  EXPECT_EQ(SysfsPciName(*ParsePciBusId("0000:C1:1F.3")), "0000:c1:1f.3");
}

class SysfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
            ("gpu_probe_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void WriteFile(const std::filesystem::path& path, const std::string& text) {
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  std::filesystem::path root_;
};

TEST_F(SysfsTest, ReadsThePciDevicesNumaNode) {
  WriteFile(root_ / "pci" / "0000:3b:00.0" / "numa_node", "1\n");
  WriteFile(root_ / "pci" / "0000:1b:00.0" / "numa_node", "-1\n");
  const std::string pci = (root_ / "pci").string();
  EXPECT_EQ(ReadPciNumaNode(*ParsePciBusId("00000000:3B:00.0"), pci), 1);
  EXPECT_EQ(ReadPciNumaNode(*ParsePciBusId("0000:1B:00.0"), pci), -1);
  EXPECT_EQ(ReadPciNumaNode(*ParsePciBusId("0000:5e:00.0"), pci), -1);
}

TEST_F(SysfsTest, CountsNumaNodes) {
  for (const char* name : {"node0", "node1", "node12", "online", "nodeX", "power"}) {
    std::filesystem::create_directories(root_ / "node" / name);
  }
  EXPECT_EQ(CountNumaNodes((root_ / "node").string()), 3);
  EXPECT_EQ(CountNumaNodes((root_ / "absent").string()), 0);
}

TEST(SpecPeakTest, MatchesDatasheets) {
  // A100 SXM: 108 SMs at 1410 MHz; 40 GB HBM2 at 1215 MHz on 5120 bits.
  EXPECT_THAT(SpecPeakBf16Tflops(108, 1410, 8, 0), DoubleNear(312, 1));
  EXPECT_THAT(SpecPeakFp32Tflops(108, 1410, 8, 0), DoubleNear(19.5, 0.1));
  EXPECT_THAT(SpecPeakBandwidthGbps(1215, 5120), DoubleNear(1555, 1));
  // H100 SXM: 132 SMs, 989 dense BF16 TFLOP/s at 1830 MHz, 67 FP32 TFLOP/s at 1980 MHz;
  // HBM3 at 2619 MHz on 5120 bits: 3.35 TB/s.
  EXPECT_THAT(SpecPeakBf16Tflops(132, 1830, 9, 0), DoubleNear(989.4, 1));
  EXPECT_THAT(SpecPeakFp32Tflops(132, 1980, 9, 0), DoubleNear(66.9, 0.1));
  EXPECT_THAT(SpecPeakBandwidthGbps(2619, 5120), DoubleNear(3352, 1));
  // Unknown architectures report 0 rather than a guess.
  EXPECT_EQ(SpecPeakBf16Tflops(100, 2000, 6, 1), 0);
  EXPECT_EQ(SpecPeakFp32Tflops(100, 2000, 6, 1), 0);
  EXPECT_EQ(PeaksForComputeCapability(6, 1), std::nullopt);
}

TEST(LinkTypeTest, FromNvmlTopology) {
  EXPECT_EQ(LinkTypeFromTopologyLevel(nvml::TopologyLevel::kInternal), v1::LINK_TYPE_PCIE_SWITCH);
  EXPECT_EQ(LinkTypeFromTopologyLevel(nvml::TopologyLevel::kSingle), v1::LINK_TYPE_PCIE_SWITCH);
  EXPECT_EQ(LinkTypeFromTopologyLevel(nvml::TopologyLevel::kMultiple), v1::LINK_TYPE_PCIE_SWITCH);
  EXPECT_EQ(LinkTypeFromTopologyLevel(nvml::TopologyLevel::kHostBridge),
            v1::LINK_TYPE_PCIE_HOST_BRIDGE);
  EXPECT_EQ(LinkTypeFromTopologyLevel(nvml::TopologyLevel::kNode), v1::LINK_TYPE_PCIE_HOST_BRIDGE);
  EXPECT_EQ(LinkTypeFromTopologyLevel(nvml::TopologyLevel::kSystem), v1::LINK_TYPE_CROSS_NUMA);
  EXPECT_EQ(LinkTypeFromTopologyLevel(static_cast<nvml::TopologyLevel>(60)),
            v1::LINK_TYPE_CROSS_NUMA);
}

TEST(LinkTypeTest, FromNumaNodes) {
  EXPECT_EQ(LinkTypeFromNumaNodes(0, 1), v1::LINK_TYPE_CROSS_NUMA);
  EXPECT_EQ(LinkTypeFromNumaNodes(1, 1), v1::LINK_TYPE_PCIE_HOST_BRIDGE);
  EXPECT_EQ(LinkTypeFromNumaNodes(-1, 1), v1::LINK_TYPE_PCIE_HOST_BRIDGE);
}

std::vector<NvLinkEnd> LinksTo(const PciAddress& remote, int count) {
  return std::vector<NvLinkEnd>(count, NvLinkEnd{NvLinkEnd::Kind::kGpu, remote});
}

std::vector<NvLinkEnd> SwitchLinks(int count) {
  return std::vector<NvLinkEnd>(count, NvLinkEnd{NvLinkEnd::Kind::kSwitch, {}});
}

TEST(CountNvLinksTest, DirectPairs) {
  // Two NVLink bridges: 0-1 and 2-3, four links each; GPU 3 also has a link to a GPU that
  // is not listed (hidden by CUDA_VISIBLE_DEVICES), which counts for nobody.
  const std::vector<PciAddress> gpus = {
      {0, 0x1b, 0, 0}, {0, 0x3b, 0, 0}, {0, 0x86, 0, 0}, {0, 0xaf, 0, 0}};
  std::vector<std::vector<NvLinkEnd>> links = {LinksTo(gpus[1], 4), LinksTo(gpus[0], 4),
                                               LinksTo(gpus[3], 4), LinksTo(gpus[2], 4)};
  links[3].push_back(NvLinkEnd{NvLinkEnd::Kind::kGpu, {0, 0xd8, 0, 0}});
  const std::vector<std::vector<int>> counts = CountNvLinksBetweenGpus(gpus, links);
  EXPECT_EQ(counts[0][1], 4);
  EXPECT_EQ(counts[1][0], 4);
  EXPECT_EQ(counts[2][3], 4);
  EXPECT_EQ(counts[0][2], 0);
  EXPECT_EQ(counts[3][1], 0);
  EXPECT_EQ(counts[0][0], 0);
}

TEST(CountNvLinksTest, NvSwitchBoardConnectsEveryPair) {
  // HGX H100: every GPU has 18 links, all to NVSwitches.
  std::vector<PciAddress> gpus;
  std::vector<std::vector<NvLinkEnd>> links;
  for (uint32_t bus : {0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}) {
    gpus.push_back({0, bus, 0, 0});
    links.push_back(SwitchLinks(18));
  }
  const std::vector<std::vector<int>> counts = CountNvLinksBetweenGpus(gpus, links);
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = 0; j < gpus.size(); ++j) EXPECT_EQ(counts[i][j], i == j ? 0 : 18);
  }
}

TEST(CountNvLinksTest, GpuWithoutSwitchLinksGetsNoneThroughTheSwitch) {
  const std::vector<PciAddress> gpus = {{0, 1, 0, 0}, {0, 2, 0, 0}, {0, 3, 0, 0}};
  const std::vector<std::vector<NvLinkEnd>> links = {SwitchLinks(12), SwitchLinks(6), {}};
  const std::vector<std::vector<int>> counts = CountNvLinksBetweenGpus(gpus, links);
  EXPECT_EQ(counts[0][1], 6);
  EXPECT_EQ(counts[1][0], 6);
  EXPECT_EQ(counts[0][2], 0);
  EXPECT_EQ(counts[2][1], 0);
}

}  // namespace
}  // namespace gpuprof::gpu
