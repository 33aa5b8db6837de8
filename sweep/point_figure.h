// The one figure that sums up an experiment's result for sweeps, plots and comparisons, with
// the noise it was measured with: the workload's headline (workloads/headline.h), the same
// figure `list`, `get` and the daemon's metrics show.
#ifndef GPUPROF_SWEEP_POINT_FIGURE_H_
#define GPUPROF_SWEEP_POINT_FIGURE_H_

#include <optional>

#include "gpuprof/v1/experiment.pb.h"
#include "workloads/headline.h"

namespace gpuprof::sweep {

using PointFigure = workloads::Headline;

// nullopt when the experiment has no result with a figure (not finished, or failed).
std::optional<PointFigure> FigureOf(const v1::Experiment& experiment);

}  // namespace gpuprof::sweep

#endif  // GPUPROF_SWEEP_POINT_FIGURE_H_
