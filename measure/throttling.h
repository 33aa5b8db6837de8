// Did the GPU hold its clock while it was timed? NVML's SM clock and throttle reasons around
// the timed phase when NVML is present, the drift of the samples either way.
#ifndef GPUPROF_MEASURE_THROTTLING_H_
#define GPUPROF_MEASURE_THROTTLING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpu/nvml_loader.h"

namespace gpuprof::measure {

// Clock readings of one GPU, when NVML can give them.
class ClockProbe {
 public:
  // Never fails: without NVML or the GPU, readings are empty and unavailable() says why.
  explicit ClockProbe(const std::string& gpu_uuid);
  std::optional<unsigned> SmClockMhz() const;
  // nvmlClocksEventReason* bits; 0 when unknown.
  uint64_t ClocksEventReasons() const;
  const std::string& unavailable() const { return unavailable_; }

 private:
  // The process's NVML (loaded once; see throttling.cc), or null when it could not load.
  const gpu::NvmlLibrary* nvml_ = nullptr;
  gpu::nvml::Device device_ = nullptr;
  std::string unavailable_;
};

// Without clock readings: a rise of the last quarter's median over the first quarter's by
// more than 5% (the sign of a clock that dropped while timing). "" when steady or too few.
std::string DescribeTimingDrift(const std::vector<double>& samples_us);

// From NVML readings around the timed phase: "" when the SM clock held and no throttle
// reason is set; otherwise what happened, e.g. "SM clock 1980 -> 1650 MHz; reasons: software
// power cap".
std::string DescribeClockThrottling(unsigned sm_clock_before_mhz, unsigned sm_clock_after_mhz,
                                    uint64_t clocks_event_reasons);

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_THROTTLING_H_
