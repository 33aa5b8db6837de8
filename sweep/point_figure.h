// The one figure that sums up an experiment's result for sweeps, plots and comparisons, with
// the noise it was measured with: bandwidth for index and store, TFLOP/s for attention, busbw
// at the largest size for collectives, match_prefix operations per second for radix.
#ifndef GPUPROF_SWEEP_POINT_FIGURE_H_
#define GPUPROF_SWEEP_POINT_FIGURE_H_

#include <optional>
#include <string>

#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::sweep {

struct PointFigure {
  std::string name;  // "bandwidth", "tflops", "busbw", "match_ops"
  std::string unit;  // "GB/s", "TFLOP/s", "op/s"
  double value = 0;
  // stddev / mean of the samples behind the value (0 when unknown).
  double relative_noise = 0;
  bool higher_is_better = true;
  // Index and store: % of the copy bandwidth measured on the GPU (0 when unknown).
  double pct_of_copy_bandwidth = 0;
  // The median time behind the figure, in microseconds (0 when not timed on a GPU).
  double median_us = 0;
};

// nullopt when the experiment has no result with a figure (not finished, or failed).
std::optional<PointFigure> FigureOf(const v1::Experiment& experiment);

}  // namespace gpuprof::sweep

#endif  // GPUPROF_SWEEP_POINT_FIGURE_H_
