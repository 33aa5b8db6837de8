#include "gpu/nvml_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::gpu {
namespace {

using ::testing::HasSubstr;

std::string FakeNvmlPath() {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  const std::string root = runfiles != nullptr ? std::string(runfiles) + "/gpuprof/" : "";
  return root + "gpu/libnvml_loader_test_fake_nvml.so";
}

// Reads one of the fake library's counters through its own dlopen handle (the same object).
int FakeCounter(const char* name) {
  void* handle = dlopen(FakeNvmlPath().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  auto counter = reinterpret_cast<int (*)()>(dlsym(handle, name));
  const int value = counter != nullptr ? counter() : -1;
  dlclose(handle);
  return value;
}

TEST(NvmlLibraryTest, MissingLibraryIsUnavailableWithTheReason) {
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load("libnvidia-ml-absent.so.1");
  ASSERT_FALSE(nvml.ok());
  EXPECT_EQ(nvml.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(nvml.status().message(), HasSubstr("libnvidia-ml-absent.so.1"));
}

TEST(NvmlLibraryTest, LoadsTheDefaultLibraryOrSaysWhyNot) {
  // Runs on every machine: with a driver NVML loads, without one the status explains.
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load();
  if (nvml.ok()) {
    absl::StatusOr<std::string> version = nvml->DriverVersion();
    ASSERT_TRUE(version.ok()) << version.status();
    EXPECT_FALSE(version->empty());
  } else {
    EXPECT_THAT(nvml.status().message(), HasSubstr("NVML unavailable"));
  }
}

TEST(NvmlLibraryTest, CallsThroughToTheLibrary) {
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  EXPECT_EQ(*nvml->DriverVersion(), "580.95.05");

  absl::StatusOr<nvml::Device> first = nvml->DeviceByPciBusId("00000000:1b:00.0");
  absl::StatusOr<nvml::Device> second = nvml->DeviceByPciBusId("00000000:43:00.0");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*nvml->DeviceUuid(*first), "GPU-00000000-1111-2222-3333-444444444444");
  EXPECT_EQ(nvml->DeviceByPciBusId("00000000:99:00.0").status().code(),
            absl::StatusCode::kNotFound);

  EXPECT_EQ(*nvml->TopologyCommonAncestor(*first, *second), nvml::TopologyLevel::kSystem);
  EXPECT_TRUE(*nvml->NvLinkIsActive(*first, 0));
  EXPECT_FALSE(*nvml->NvLinkIsActive(*first, 17));
  absl::StatusOr<nvml::PciInfo> remote = nvml->NvLinkRemotePciInfo(*first, 1);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_STREQ(remote->bus_id, "00000000:43:00.0");
  EXPECT_EQ(remote->bus, 0x43u);

  absl::StatusOr<nvml::Memory> memory = nvml->MemoryInfo(*first);
  ASSERT_TRUE(memory.ok()) << memory.status();
  EXPECT_EQ(memory->total, uint64_t{80} << 30);
  EXPECT_EQ(memory->free, uint64_t{79} << 30);
  EXPECT_EQ(memory->used, uint64_t{1} << 30);
}

TEST(NvmlLibraryTest, ReportsUnsupportedAndMissingFunctions) {
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  nvml::Device device = *nvml->DeviceByPciBusId("00000000:1B:00.0");

  absl::Status unsupported = nvml->GpuTemperatureCelsius(device).status();
  EXPECT_EQ(unsupported.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(unsupported.message(), HasSubstr("Not Supported"));

  absl::Status missing = nvml->PowerUsageMilliwatts(device).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(missing.message(), HasSubstr("not available"));
  EXPECT_EQ(nvml->ClocksEventReasons(device).status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(nvml->P2pSupported(device, device, nvml::P2pCapability::kNvLink).status().code(),
            absl::StatusCode::kUnimplemented);
}

TEST(NvmlLibraryTest, WaitsForXidEventsAndReadsMemoryErrorCounters) {
  const std::string control = std::string(std::getenv("TEST_TMPDIR")) + "/nvml_control";
  std::ofstream(control) << "ecc GPU-55555555-6666-7777-8888-999999999999 7 2\n"
                         << "retired GPU-55555555-6666-7777-8888-999999999999 3 1 1\n"
                         << "remap GPU-55555555-6666-7777-8888-999999999999 5 1 0 1\n";
  setenv("FAKE_NVML_CONTROL", control.c_str(), 1);
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load(FakeNvmlPath());
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  nvml::Device first = *nvml->DeviceByPciBusId("00000000:1B:00.0");
  nvml::Device second = *nvml->DeviceByUuid("GPU-55555555-6666-7777-8888-999999999999");

  EXPECT_EQ(*nvml->TotalEccErrors(second, nvml::MemoryErrorType::kCorrected,
                                  nvml::EccCounterType::kVolatile),
            7u);
  EXPECT_EQ(*nvml->TotalEccErrors(second, nvml::MemoryErrorType::kUncorrected,
                                  nvml::EccCounterType::kVolatile),
            2u);
  EXPECT_EQ(*nvml->RetiredPageCount(second, nvml::PageRetirementCause::kMultipleSingleBitEccErrors),
            3u);
  EXPECT_EQ(*nvml->RetiredPageCount(second, nvml::PageRetirementCause::kDoubleBitEccError), 1u);
  EXPECT_TRUE(*nvml->RetiredPagesPending(second));
  const nvml::RemappedRows rows = *nvml->RemappedRows(second);
  EXPECT_EQ(rows.correctable, 5u);
  EXPECT_EQ(rows.uncorrectable, 1u);
  EXPECT_FALSE(rows.pending);
  EXPECT_TRUE(rows.failure_occurred);
  // A GPU without control lines has no errors.
  EXPECT_EQ(*nvml->RetiredPageCount(first, nvml::PageRetirementCause::kDoubleBitEccError), 0u);

  absl::StatusOr<nvml::EventSet> set = nvml->CreateEventSet();
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_TRUE(nvml->RegisterEvents(second, nvml::kEventTypeXidCriticalError, *set).ok());
  // Nothing happened yet: the wait times out empty.
  absl::StatusOr<std::optional<nvml::EventData>> none = nvml->WaitForEvent(*set, 50);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->has_value());
  // An Xid on an unregistered GPU is not this set's; one on the registered GPU is.
  std::ofstream(control, std::ios::app) << "xid GPU-00000000-1111-2222-3333-444444444444 13\n"
                                        << "xid GPU-55555555-6666-7777-8888-999999999999 79\n";
  absl::StatusOr<std::optional<nvml::EventData>> event = nvml->WaitForEvent(*set, 30'000);
  ASSERT_TRUE(event.ok()) << event.status();
  ASSERT_TRUE(event->has_value());
  EXPECT_EQ((*event)->device, second);
  EXPECT_EQ((*event)->event_type, nvml::kEventTypeXidCriticalError);
  EXPECT_EQ((*event)->event_data, 79u);
  nvml->FreeEventSet(*set);
}

TEST(NvmlLibraryTest, ShutsDownOnceAfterMoves) {
  // Keep the fake mapped for the whole test, so that its counters survive the dlclose calls.
  void* pinned = dlopen(FakeNvmlPath().c_str(), RTLD_NOW);
  ASSERT_NE(pinned, nullptr) << dlerror();
  const int inits_before = FakeCounter("FakeNvmlInitCount");
  const int shutdowns_before = FakeCounter("FakeNvmlShutdownCount");
  {
    absl::StatusOr<NvmlLibrary> loaded = NvmlLibrary::Load(FakeNvmlPath());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    NvmlLibrary moved = *std::move(loaded);
    NvmlLibrary moved_again = std::move(moved);
    EXPECT_EQ(*moved_again.DriverVersion(), "580.95.05");
    EXPECT_EQ(FakeCounter("FakeNvmlShutdownCount"), shutdowns_before);
  }
  EXPECT_EQ(FakeCounter("FakeNvmlInitCount"), inits_before + 1);
  EXPECT_EQ(FakeCounter("FakeNvmlShutdownCount"), shutdowns_before + 1);
  dlclose(pinned);
}

TEST(NvmlLibraryTest, MapsReturnCodes) {
  EXPECT_EQ(NvmlReturnToStatusCode(nvml::kSuccess), absl::StatusCode::kOk);
  EXPECT_EQ(NvmlReturnToStatusCode(nvml::kErrorNotSupported), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(NvmlReturnToStatusCode(nvml::kErrorNoPermission), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(NvmlReturnToStatusCode(nvml::kErrorDriverNotLoaded),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(NvmlReturnToStatusCode(nvml::kErrorUnknown), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace gpuprof::gpu
