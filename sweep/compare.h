// Comparing two runs (experiments or sweeps): points matched by their parameters, each with
// both figures, the ratio, and whether the difference is beyond the noise both runs measured
// (as nvbench's compare does), a summary and the provenance that differs. Where a figure's noise
// is unknown, so is whether a difference is significant: such a point is never a regression. Pure.
#ifndef GPUPROF_SWEEP_COMPARE_H_
#define GPUPROF_SWEEP_COMPARE_H_

#include <cstdint>
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
  // The run-to-run noise (stddev/mean) to assume for figures whose noise comes from one run only
  // (CPU rates: Headline::noise_covers_runs), as the larger of it and their own; unset, such
  // points are not judged (kNoiseUnknown).
  std::optional<double> cpu_run_noise;
};

// kNoiseUnknown: a side's noise was not measured (radix without repeated passes, a GPU run of
// one sample, a run on a shared CPU) or covers one run only (a CPU rate without
// CompareOptions::cpu_run_noise), so the difference cannot be judged against it.
enum class Verdict { kSame, kImprovement, kRegression, kNoiseUnknown };

struct ComparedPoint {
  // "num_tokens=4096 dtype=bf16", or "(single point)".
  std::string parameters;
  PointFigure a;
  PointFigure b;
  // b / a for figures where higher is better, a / b otherwise: > 1 means B is better.
  double ratio = 1;
  // The change the ratio may show by chance, as a fraction: 2 x sqrt(noise_a^2 + noise_b^2),
  // each side's noise at the 95% upper bound its sample count allows (x2.4 for 5 passes, x1.07
  // for 500 samples); nullopt when either side's is unknown. Beyond it (and min_change) a
  // point is worse (ratio below 1 - chance) or better (above 1 / (1 - chance)): the same test
  // whichever side is A.
  std::optional<double> noise;
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
  // Points whose verdict is kNoiseUnknown: counted as neither, never gated on.
  int noise_unknown = 0;
  // The largest significant regression, as a positive percentage (0 without one).
  double worst_regression_pct = 0;
  // "GPU: NVIDIA H100 80GB HBM3 vs NVIDIA H200", "driver: 550.54 vs 560.28", ...; across
  // nodes, per pair of nodes whose points were compared: "gpu-a vs gpu-c: driver: ...".
  std::vector<std::string> provenance_differences;
};

Comparison Compare(const CompareSide& a, const CompareSide& b, const CompareOptions& options);

// How far above the stddev seen in `samples` samples the true one may be, at 95% confidence
// (sqrt((n-1) / chi2_0.05(n-1)), Wilson and Hilferty's approximation): 2.4 for the 5 timed
// passes of a CPU figure, 1.05 for 500 GPU samples, at most 10 (fewer than 2 samples).
double NoiseUpperBoundFactor(int64_t samples);

// "exit 1 if B is more than 5% worse": true when any significant regression exceeds pct. A point
// whose noise is unknown never counts.
bool RegressionBeyond(const Comparison& comparison, double pct);

// Points whose noise is unknown and whose B is worse than A by more than pct: what the gate did
// not judge.
int UnjudgedWorseThan(const Comparison& comparison, double pct);

// "same", "better", "worse", "unknown".
std::string VerdictName(Verdict verdict);

}  // namespace gpuprof::sweep

#endif  // GPUPROF_SWEEP_COMPARE_H_
