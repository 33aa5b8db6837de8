// The GPU health calls against the real driver's NVML, on a GPU machine: the event set the
// daemon waits on and the memory error counters it reads. What CPU tests cannot show: that
// the declarations in nvml_loader.h (nvmlEventData_t's layout, the counters' signatures) match
// the library. A healthy GPU reports no Xid while the test waits; the readings are recorded
// as test properties, for the record of the run.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gpu/nvml_loader.h"

namespace gpuprof::gpu {
namespace {

// OK, or UNIMPLEMENTED when this GPU has no such counter (ECC off, a generation without row
// remapping); anything else is a wrong declaration or a broken driver.
void ExpectReadOrUnsupported(const absl::Status& status, const std::string& what) {
  EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kUnimplemented)
      << what << ": " << status;
}

TEST(NvmlHealthGpuTest, EventsAndMemoryErrorCountersOnEveryGpu) {
  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load();
  ASSERT_TRUE(nvml.ok()) << nvml.status();
  absl::StatusOr<unsigned> count = nvml->DeviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  ASSERT_GT(*count, 0u);
  absl::StatusOr<nvml::EventSet> set = nvml->CreateEventSet();
  ASSERT_TRUE(set.ok()) << set.status();
  for (unsigned index = 0; index < *count; ++index) {
    SCOPED_TRACE(absl::StrCat("GPU ", index));
    absl::StatusOr<nvml::Device> device = nvml->DeviceByIndex(index);
    ASSERT_TRUE(device.ok()) << device.status();
    // The handle the daemon finds by UUID is the same GPU.
    absl::StatusOr<std::string> uuid = nvml->DeviceUuid(*device);
    ASSERT_TRUE(uuid.ok()) << uuid.status();
    EXPECT_EQ(*nvml->DeviceByUuid(*uuid), *device);
    const absl::Status registered =
        nvml->RegisterEvents(*device, nvml::kEventTypeXidCriticalError, *set);
    EXPECT_TRUE(registered.ok()) << registered;

    const auto corrected = nvml->TotalEccErrors(*device, nvml::MemoryErrorType::kCorrected,
                                                nvml::EccCounterType::kVolatile);
    const auto uncorrected = nvml->TotalEccErrors(*device, nvml::MemoryErrorType::kUncorrected,
                                                  nvml::EccCounterType::kVolatile);
    const auto retired = nvml->RetiredPageCount(*device,
                                                nvml::PageRetirementCause::kDoubleBitEccError);
    const auto pending = nvml->RetiredPagesPending(*device);
    const auto rows = nvml->RemappedRows(*device);
    ExpectReadOrUnsupported(corrected.status(), "nvmlDeviceGetTotalEccErrors (corrected)");
    ExpectReadOrUnsupported(uncorrected.status(), "nvmlDeviceGetTotalEccErrors (uncorrected)");
    ExpectReadOrUnsupported(retired.status(), "nvmlDeviceGetRetiredPages");
    ExpectReadOrUnsupported(pending.status(), "nvmlDeviceGetRetiredPagesPendingStatus");
    ExpectReadOrUnsupported(rows.status(), "nvmlDeviceGetRemappedRows");
    const std::string prefix = absl::StrCat("gpu", index, "_");
    auto record = [&](const std::string& name, const auto& value) {
      ::testing::Test::RecordProperty(prefix + name,
                                      value.ok() ? absl::StrCat(*value) : "unsupported");
    };
    record("ecc_corrected", corrected);
    record("ecc_uncorrected", uncorrected);
    record("retired_double_bit", retired);
    if (rows.ok()) {
      ::testing::Test::RecordProperty(
          prefix + "remapped_rows",
          absl::StrCat(rows->correctable, " correctable, ", rows->uncorrectable,
                       " uncorrectable, pending ", rows->pending, ", failed ",
                       rows->failure_occurred));
    }
  }
  // Nothing is wrong with these GPUs: the wait times out empty (and does not crash on the
  // event data it is handed).
  absl::StatusOr<std::optional<nvml::EventData>> event = nvml->WaitForEvent(*set, 500);
  ASSERT_TRUE(event.ok()) << event.status();
  EXPECT_FALSE(event->has_value()) << "Xid " << (*event)->event_data;
  nvml->FreeEventSet(*set);
}

}  // namespace
}  // namespace gpuprof::gpu
