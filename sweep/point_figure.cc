#include "sweep/point_figure.h"

namespace gpuprof::sweep {

std::optional<PointFigure> FigureOf(const v1::Experiment& experiment) {
  if (!experiment.has_result()) return std::nullopt;
  const v1::ExperimentResult& result = experiment.result();
  PointFigure figure;
  if (result.has_collective() && result.collective().points_size() > 0) {
    const v1::CollectivePoint& largest =
        result.collective().points(result.collective().points_size() - 1);
    figure.name = "busbw";
    figure.unit = "GB/s";
    figure.value = result.collective().busbw_gbps();
    figure.relative_noise = largest.time().relative_noise();
    figure.median_us = largest.time().median_us();
    return figure;
  }
  if (result.has_radix()) {
    for (const v1::OperationStats& operation : result.radix().operations()) {
      if (operation.operation() != "match_prefix") continue;
      figure.name = "match_ops";
      figure.unit = "op/s";
      figure.value = operation.ops_per_second();
      // The spread of per-operation latencies is not the noise of the throughput (requests
      // differ in length by design): one run carries no run-to-run noise, so none is claimed.
      figure.relative_noise = 0;
      figure.median_us = operation.latency().median_us();
      return figure;
    }
    return std::nullopt;
  }
  if (!result.has_measurement()) return std::nullopt;
  const v1::GpuMeasurement& measurement = result.measurement();
  figure.relative_noise = measurement.kernel_time().relative_noise();
  figure.median_us = measurement.kernel_time().median_us();
  if (experiment.workload() == v1::WORKLOAD_ATTENTION ||
      (measurement.tflops() > 0 && measurement.bandwidth_gbps() <= 0)) {
    if (measurement.tflops() <= 0) return std::nullopt;
    figure.name = "tflops";
    figure.unit = "TFLOP/s";
    figure.value = measurement.tflops();
    return figure;
  }
  if (measurement.bandwidth_gbps() <= 0) return std::nullopt;
  figure.name = "bandwidth";
  figure.unit = "GB/s";
  figure.value = measurement.bandwidth_gbps();
  figure.pct_of_copy_bandwidth = measurement.pct_of_measured_copy_bandwidth();
  return figure;
}

}  // namespace gpuprof::sweep
