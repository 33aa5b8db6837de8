#include "workloads/headline.h"

#include "absl/strings/str_format.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// A GPU timing's noise is known once two samples or more were timed (one sample has no
// spread). Results that predate the sample count carry a non-zero noise only when measured.
std::optional<double> NoiseOf(const v1::TimingStats& time) {
  if (time.samples() >= 2 || (time.samples() == 0 && time.relative_noise() > 0)) {
    return time.relative_noise();
  }
  return std::nullopt;
}

// What every GPU figure shares: its timing, both rates and the copy reference.
Headline FromMeasurement(const v1::GpuMeasurement& measurement) {
  Headline headline;
  headline.relative_noise = NoiseOf(measurement.kernel_time());
  headline.samples = measurement.kernel_time().samples();
  headline.median_us = measurement.kernel_time().median_us();
  headline.bandwidth_gbps = measurement.bandwidth_gbps();
  headline.tflops = measurement.tflops();
  headline.pct_of_copy_bandwidth = measurement.pct_of_measured_copy_bandwidth();
  return headline;
}

}  // namespace

std::string HeadlineBoundName(HeadlineBound bound) {
  switch (bound) {
    case HeadlineBound::kBandwidth:
      return "bandwidth-bound";
    case HeadlineBound::kCompute:
      return "compute-bound";
    case HeadlineBound::kLatency:
      return "latency-bound";
    case HeadlineBound::kCpuRate:
      return "CPU work";
  }
  return "";
}

std::optional<Headline> BandwidthHeadline(const v1::Experiment& experiment) {
  const v1::GpuMeasurement& measurement = experiment.result().measurement();
  if (measurement.bandwidth_gbps() <= 0) return std::nullopt;
  Headline headline = FromMeasurement(measurement);
  headline.name = "bandwidth";
  headline.unit = "GB/s";
  headline.value = measurement.bandwidth_gbps();
  headline.bound = HeadlineBound::kBandwidth;
  // The measured copy is the practical limit; without it, the spec peak.
  if (measurement.pct_of_measured_copy_bandwidth() > 0) {
    headline.pct_of_bound = measurement.pct_of_measured_copy_bandwidth();
    headline.bound_reference = "copy";
  } else if (measurement.pct_of_spec_peak_bandwidth() > 0) {
    headline.pct_of_bound = measurement.pct_of_spec_peak_bandwidth();
    headline.bound_reference = "peak";
  }
  return headline;
}

std::optional<Headline> ComputeHeadline(const v1::Experiment& experiment) {
  const v1::GpuMeasurement& measurement = experiment.result().measurement();
  if (measurement.tflops() <= 0) return std::nullopt;
  Headline headline = FromMeasurement(measurement);
  headline.name = "tflops";
  headline.unit = "TFLOP/s";
  headline.value = measurement.tflops();
  headline.bound = HeadlineBound::kCompute;
  if (measurement.pct_of_spec_peak_flops() > 0) {
    headline.pct_of_bound = measurement.pct_of_spec_peak_flops();
    headline.bound_reference = "peak";
  }
  return headline;
}

std::optional<Headline> BusBandwidthHeadline(const v1::Experiment& experiment) {
  const v1::CollectiveResult& collective = experiment.result().collective();
  Headline headline;
  headline.name = "busbw";
  headline.value = collective.busbw_gbps();
  if (collective.ranks() == 1 && collective.algbw_gbps() > 0) {
    // One rank moves no bytes between GPUs (nccl-tests' bus factor is 0): what it measures is
    // the collective's own copy, so that is the figure.
    headline.name = "algbw";
    headline.value = collective.algbw_gbps();
  }
  if (headline.value <= 0) return std::nullopt;
  headline.unit = "GB/s";
  headline.bound = HeadlineBound::kBandwidth;
  headline.bandwidth_gbps = headline.value;
  if (collective.points_size() > 0) {
    const v1::TimingStats& largest = collective.points(collective.points_size() - 1).time();
    headline.relative_noise = NoiseOf(largest);
    headline.samples = largest.samples();
    headline.median_us = largest.median_us();
  }
  return headline;
}

std::optional<Headline> MatchRateHeadline(const v1::Experiment& experiment) {
  for (const v1::OperationStats& operation : experiment.result().radix().operations()) {
    if (operation.operation() != "match_prefix" || operation.ops_per_second() <= 0) continue;
    Headline headline;
    headline.name = "match_ops";
    headline.unit = "op/s";
    headline.value = operation.ops_per_second();
    headline.bound = HeadlineBound::kCpuRate;
    headline.noise_covers_runs = false;
    // Only the spread over repeated timed passes is the throughput's noise; the spread of
    // per-operation latencies is not (requests differ in length by design).
    const v1::RadixResult& radix = experiment.result().radix();
    if (radix.online_cpus() > 0 && radix.other_cpus() >= kSharedCpuOtherCpus) {
      // Every pass slowed alike agrees with the others: their spread says nothing here.
      headline.noise_unknown_because =
          absl::StrFormat("other processes took %.1f of %d CPUs while it ran", radix.other_cpus(),
                          radix.online_cpus());
    } else if (operation.has_ops_per_second_relative_noise()) {
      headline.relative_noise = operation.ops_per_second_relative_noise();
    }
    headline.samples = operation.passes();
    headline.median_us = operation.latency().median_us();
    return headline;
  }
  return std::nullopt;
}

std::optional<Headline> LinkBandwidthHeadline(const v1::Experiment& experiment) {
  const v1::GpuMeasurement& measurement = experiment.result().measurement();
  if (measurement.bandwidth_gbps() <= 0) return std::nullopt;
  const v1::CopyResult& copy = experiment.result().copy();
  Headline headline = FromMeasurement(measurement);
  headline.name = "bandwidth";
  headline.unit = "GB/s";
  headline.value = measurement.bandwidth_gbps();
  headline.bound = HeadlineBound::kBandwidth;
  headline.pct_of_bound = measurement.pct_of_spec_peak_bandwidth();
  headline.bound_reference = copy.link().empty() ? "peak" : copy.link();
  if (headline.pct_of_copy_bandwidth <= 0) {
    headline.pct_of_copy_bandwidth = copy.pct_of_probe_copy_bandwidth();
  }
  return headline;
}

std::optional<Headline> HeadlineByResultType(const v1::Experiment& experiment) {
  if (!experiment.has_result()) return std::nullopt;
  const v1::ExperimentResult& result = experiment.result();
  if (result.has_collective()) return BusBandwidthHeadline(experiment);
  if (result.has_radix()) return MatchRateHeadline(experiment);
  if (result.has_copy()) return LinkBandwidthHeadline(experiment);
  if (!result.has_measurement()) return std::nullopt;
  if (result.measurement().bandwidth_gbps() > 0) return BandwidthHeadline(experiment);
  return ComputeHeadline(experiment);
}

}  // namespace gpuprof::workloads
