// Comparing two runs (experiments or sweeps): points matched by their parameters, each with
// both figures, the ratio, and whether the difference is beyond the noise both runs measured
// (as nvbench's compare does), a summary and the provenance that differs. Pure.
#ifndef GPUPROF_SWEEP_COMPARE_H_
#define GPUPROF_SWEEP_COMPARE_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuprof/v1/experiment.pb.h"
#include "sweep/point_figure.h"

namespace gpuprof::sweep {

// One side of a comparison: an experiment (one point, no axes) or a sweep's points.
struct CompareSide {
  std::string id;  // as the user named it: "exp-000012", "swp-000003", "baseline main"
  // Axis fields the points differ in (a sweep's axes; none for one experiment).
  std::vector<std::string> axes;
  // Each point's experiment: its request (to read the parameters) and result.
  std::vector<v1::Experiment> points;
  // Of one finished point: where the figures were measured.
  v1::Provenance provenance;
  // Across a fleet: the node each point ran on (parallel to `points`; empty for one daemon),
  // and where each node measured (its provenance replaces `provenance` for its points).
  std::vector<std::string> point_nodes;
  std::map<std::string, v1::Provenance> node_provenance;
};

struct CompareOptions {
  // Differences smaller than this fraction are never significant, whatever the noise says
  // (a run can report near-zero noise).
  double min_change = 0.01;
};

enum class Verdict { kSame, kImprovement, kRegression };

struct ComparedPoint {
  // "num_tokens=4096 dtype=bf16", or "(single point)".
  std::string parameters;
  PointFigure a;
  PointFigure b;
  // b / a for figures where higher is better, a / b otherwise: > 1 means B is better.
  double ratio = 1;
  // The relative noise of the ratio: sqrt(noise_a^2 + noise_b^2).
  double noise = 0;
  Verdict verdict = Verdict::kSame;
  // The nodes the two figures came from, when a side spans a fleet (else empty).
  std::string node_a;
  std::string node_b;
};

struct Comparison {
  std::vector<ComparedPoint> points;
  // Parameters found on one side only, or without a figure on either side.
  std::vector<std::string> only_in_a;
  std::vector<std::string> only_in_b;
  std::vector<std::string> without_result;
  double geomean_ratio = 1;
  int improvements = 0;
  int regressions = 0;
  // The largest significant regression, as a positive percentage (0 without one).
  double worst_regression_pct = 0;
  // "GPU: NVIDIA H100 80GB HBM3 vs NVIDIA H200", "driver: 550.54 vs 560.28", ...; across
  // nodes, per pair of nodes whose points were compared: "gpu-a vs gpu-c: driver: ...".
  std::vector<std::string> provenance_differences;
};

Comparison Compare(const CompareSide& a, const CompareSide& b, const CompareOptions& options);

// "exit 1 if B is more than 5% worse": true when any significant regression exceeds pct.
bool RegressionBeyond(const Comparison& comparison, double pct);

std::string VerdictName(Verdict verdict);

}  // namespace gpuprof::sweep

#endif  // GPUPROF_SWEEP_COMPARE_H_
