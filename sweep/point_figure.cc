#include "sweep/point_figure.h"

#include "workloads/spec_table.h"

namespace gpuprof::sweep {

std::optional<PointFigure> FigureOf(const v1::Experiment& experiment) {
  return workloads::HeadlineOf(experiment);
}

}  // namespace gpuprof::sweep
