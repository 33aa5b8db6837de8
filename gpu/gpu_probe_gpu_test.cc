// Needs at least one GPU: the probe's fields and NVML agreement.
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
using ::testing::MatchesRegex;

TEST(GpuProbeGpuTest, ListsEveryGpu) {
  ProbeOptions options;
  options.gpuprof_version = "0.1.0-test";
  const v1::ListGpusResponse response = ProbeHost(options);
  ASSERT_GT(response.gpus_size(), 0) << "this test needs a GPU: " << response.probe_error();
  EXPECT_TRUE(response.probe_error().empty()) << response.probe_error();
  EXPECT_FALSE(response.host().driver_version().empty());
  EXPECT_THAT(response.host().cuda_driver_version(), MatchesRegex("[0-9]+\\.[0-9]+"));
  for (const v1::GpuInfo& gpu : response.gpus()) {
    ExpectSaneGpu(gpu);
    EXPECT_EQ(gpu.measured_copy_bandwidth_gbps(), 0) << "measured by measure/copy_bandwidth";
  }
  ExpectCoherentLinks(response);
  // Printed so that a GPU run leaves the figures in its log.
  std::cout << response.DebugString();
}

// Checks the NVML declarations against the real library: the UUID NVML reports must be the
// one formatted from CUDA's bytes, and the structs must come back with plausible contents.
TEST(GpuProbeGpuTest, NvmlAgreesWithCuda) {
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load();
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_THAT(*nvml->DriverVersion(), MatchesRegex("[0-9]+\\.[0-9.]+"));
  const v1::ListGpusResponse response = ProbeHost({});
  ASSERT_GT(response.gpus_size(), 0) << response.probe_error();
  for (const v1::GpuInfo& gpu : response.gpus()) {
    SCOPED_TRACE(gpu.pci_bus_id());
    absl::StatusOr<nvml::Device> device = nvml->DeviceByPciBusId(gpu.pci_bus_id());
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(*nvml->DeviceUuid(*device), gpu.uuid());
    absl::StatusOr<nvml::Device> by_uuid = nvml->DeviceByUuid(gpu.uuid());
    ASSERT_TRUE(by_uuid.ok()) << by_uuid.status();
    EXPECT_EQ(*by_uuid, *device);

    absl::StatusOr<nvml::Memory> memory = nvml->MemoryInfo(*device);
    ASSERT_TRUE(memory.ok()) << memory.status();
    EXPECT_GE(memory->total, static_cast<uint64_t>(gpu.total_memory_bytes()) * 9 / 10);
    EXPECT_LE(memory->total, static_cast<uint64_t>(gpu.total_memory_bytes()) * 11 / 10);
    EXPECT_LE(memory->used, memory->total);
    EXPECT_LE(memory->free, memory->total);

    absl::StatusOr<nvml::Utilization> utilization = nvml->UtilizationRates(*device);
    ASSERT_TRUE(utilization.ok()) << utilization.status();
    EXPECT_LE(utilization->gpu, 100u);
    EXPECT_LE(utilization->memory, 100u);

    absl::StatusOr<unsigned> max_sm_clock = nvml->MaxClockMhz(*device, nvml::ClockType::kSm);
    ASSERT_TRUE(max_sm_clock.ok()) << max_sm_clock.status();
    EXPECT_EQ(*max_sm_clock, static_cast<unsigned>(gpu.max_sm_clock_mhz()))
        << "CUDA's max SM clock vs NVML's";
    absl::StatusOr<unsigned> temperature = nvml->GpuTemperatureCelsius(*device);
    ASSERT_TRUE(temperature.ok()) << temperature.status();
    EXPECT_GT(*temperature, 0u);
    EXPECT_LT(*temperature, 120u);
    absl::StatusOr<unsigned> power = nvml->PowerUsageMilliwatts(*device);
    ASSERT_TRUE(power.ok()) << power.status();
    EXPECT_GT(*power, 10'000u);
    EXPECT_TRUE(nvml->ClocksEventReasons(*device).ok());
    EXPECT_TRUE(nvml->ClockMhz(*device, nvml::ClockType::kSm).ok());

    // Each active link's far end must decode to a PCI address or be a switch.
    for (unsigned link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
      absl::StatusOr<bool> active = nvml->NvLinkIsActive(*device, link);
      if (!active.ok() || !*active) continue;
      absl::StatusOr<nvml::NvLinkDeviceType> type = nvml->NvLinkRemoteDeviceType(*device, link);
      ASSERT_TRUE(type.ok()) << type.status();
      if (*type != nvml::NvLinkDeviceType::kGpu) continue;
      absl::StatusOr<nvml::PciInfo> remote = nvml->NvLinkRemotePciInfo(*device, link);
      ASSERT_TRUE(remote.ok()) << remote.status();
      EXPECT_TRUE(ParsePciBusId(remote->bus_id).has_value()) << remote->bus_id;
    }
  }
}

}  // namespace
}  // namespace gpuprof::gpu
