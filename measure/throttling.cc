#include "measure/throttling.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/statistics.h"

namespace gpuprof::measure {
namespace {

// The drift and clock checks flag changes larger than this.
constexpr double kThrottleThreshold = 0.05;

}  // namespace

namespace {

// Loading and initialising NVML takes ~15 ms, more than a small experiment's whole timed
// phase, so a worker loads it once and keeps it (NVML is thread-safe). Never freed: it must
// outlive every probe, and the process's exit releases it.
const absl::StatusOr<gpu::NvmlLibrary>& ProcessNvml() {
  static const auto* const nvml =
      new absl::StatusOr<gpu::NvmlLibrary>(gpu::NvmlLibrary::Load());
  return *nvml;
}

}  // namespace

ClockProbe::ClockProbe(const std::string& gpu_uuid) {
  const absl::StatusOr<gpu::NvmlLibrary>& nvml = ProcessNvml();
  if (!nvml.ok()) {
    unavailable_ = std::string(nvml.status().message());
    return;
  }
  absl::StatusOr<gpu::nvml::Device> device = nvml->DeviceByUuid(gpu_uuid);
  if (!device.ok()) {
    unavailable_ = std::string(device.status().message());
    return;
  }
  device_ = *device;
  nvml_ = &*nvml;
}

std::optional<unsigned> ClockProbe::SmClockMhz() const {
  if (nvml_ == nullptr) return std::nullopt;
  absl::StatusOr<unsigned> clock = nvml_->ClockMhz(device_, gpu::nvml::ClockType::kSm);
  if (!clock.ok()) return std::nullopt;
  return *clock;
}

uint64_t ClockProbe::ClocksEventReasons() const {
  if (nvml_ == nullptr) return 0;
  absl::StatusOr<uint64_t> reasons = nvml_->ClocksEventReasons(device_);
  return reasons.ok() ? *reasons : 0;
}

std::string DescribeTimingDrift(const std::vector<double>& samples_us) {
  constexpr size_t kMinimumSamples = 20;
  if (samples_us.size() < kMinimumSamples) return "";
  const size_t quarter = samples_us.size() / 4;
  const double first = Median({samples_us.begin(), samples_us.begin() + quarter});
  const double last = Median({samples_us.end() - quarter, samples_us.end()});
  if (first <= 0 || last <= first * (1 + kThrottleThreshold)) return "";
  return absl::StrFormat(
      "sample times rose %.1f%% from the first to the last quarter of the run (%.2f -> %.2f "
      "us median): the clock may have dropped",
      100.0 * (last / first - 1), first, last);
}

std::string DescribeClockThrottling(unsigned sm_clock_before_mhz, unsigned sm_clock_after_mhz,
                                    uint64_t clocks_event_reasons) {
  // nvmlClocksEventReason* bits that mean the GPU was held back (not idle, not app clocks).
  static constexpr std::pair<uint64_t, const char*> kReasons[] = {{0x4, "software power cap"},
                                                                  {0x8, "hardware slowdown"},
                                                                  {0x20, "software thermal"},
                                                                  {0x40, "hardware thermal"},
                                                                  {0x80, "hardware power brake"}};
  std::vector<std::string> reasons;
  for (const auto& [bit, name] : kReasons) {
    if ((clocks_event_reasons & bit) != 0) reasons.push_back(name);
  }
  const bool clock_dropped = sm_clock_after_mhz < sm_clock_before_mhz * (1 - kThrottleThreshold);
  if (!clock_dropped && reasons.empty()) return "";
  std::string description =
      absl::StrFormat("SM clock %u -> %u MHz", sm_clock_before_mhz, sm_clock_after_mhz);
  if (!reasons.empty()) absl::StrAppend(&description, "; reasons: ", absl::StrJoin(reasons, ", "));
  return description;
}

}  // namespace gpuprof::measure
