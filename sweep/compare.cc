#include "sweep/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sweep/sweep_expansion.h"

namespace gpuprof::sweep {
namespace {

// The point's value of every axis of either side, read from its request.
std::string ParametersOf(const v1::Experiment& experiment, const std::vector<std::string>& axes) {
  std::vector<std::string> parts;
  for (const std::string& axis : axes) {
    if (axis == kKernelAxis) {
      parts.push_back(absl::StrCat(axis, "=", KernelAxisValue(experiment.request())));
      continue;
    }
    const auto path = ResolveAxisField(experiment.request(), axis);
    parts.push_back(
        absl::StrCat(axis, "=", path.ok() ? FieldValueText(experiment.request(), *path) : "-"));
  }
  return parts.empty() ? "(single point)" : absl::StrJoin(parts, " ");
}

std::string GpuNames(const v1::Provenance& provenance) {
  std::vector<std::string> names;
  for (const v1::GpuInfo& gpu : provenance.gpus()) names.push_back(gpu.name());
  return absl::StrJoin(names, "+");
}

void AddDifference(const std::string& what, const std::string& a, const std::string& b,
                   std::vector<std::string>& differences) {
  if (a.empty() && b.empty()) return;
  if (a != b) {
    differences.push_back(
        absl::StrCat(what, ": ", a.empty() ? "?" : a, " vs ", b.empty() ? "?" : b));
  }
}

std::vector<std::string> ProvenanceDifferences(const v1::Provenance& a, const v1::Provenance& b) {
  std::vector<std::string> differences;
  AddDifference("GPU", GpuNames(a), GpuNames(b), differences);
  AddDifference("driver", a.driver_version(), b.driver_version(), differences);
  AddDifference("CUDA runtime", a.cuda_runtime_version(), b.cuda_runtime_version(), differences);
  AddDifference("NCCL", a.nccl_version(), b.nccl_version(), differences);
  AddDifference("gpuprof", a.gpuprof_version(), b.gpuprof_version(), differences);
  AddDifference("host", a.hostname(), b.hostname(), differences);
  return differences;
}

std::string NodeOf(const CompareSide& side, size_t point) {
  return point < side.point_nodes.size() ? side.point_nodes[point] : "";
}

// The change two identical runs may show by chance: two standard deviations of the ratio, each
// side's noise taken at the 95% upper bound its sample count allows (a CPU figure's 5 passes say
// less about its spread than a GPU figure's 500 samples). Between runs a machine varies more
// than within one (clocks, other work on a shared box), which the bound also leaves room for.
// nullopt where a side's noise is unknown, or covers one run only and no run-to-run noise was
// given for it.
std::optional<double> ChanceChange(const PointFigure& a, const PointFigure& b,
                                   const CompareOptions& options) {
  constexpr double kStandardDeviations = 2;
  const auto noise = [&](const PointFigure& figure) -> std::optional<double> {
    if (!figure.relative_noise.has_value()) return std::nullopt;
    const double measured = *figure.relative_noise * NoiseUpperBoundFactor(figure.samples);
    if (figure.noise_covers_runs) return measured;
    if (!options.cpu_run_noise.has_value()) return std::nullopt;
    return std::max(measured, *options.cpu_run_noise);
  };
  const std::optional<double> noise_a = noise(a), noise_b = noise(b);
  if (!noise_a.has_value() || !noise_b.has_value()) return std::nullopt;
  return kStandardDeviations * std::sqrt(*noise_a * *noise_a + *noise_b * *noise_b);
}

const v1::Provenance& ProvenanceOf(const CompareSide& side, const std::string& node) {
  const auto found = side.node_provenance.find(node);
  return found == side.node_provenance.end() ? side.provenance : found->second;
}

}  // namespace

std::string VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kSame:
      return "same";
    case Verdict::kImprovement:
      return "better";
    case Verdict::kRegression:
      return "worse";
    case Verdict::kNoiseUnknown:
      return "unknown";
  }
  return "";
}

Comparison Compare(const CompareSide& a, const CompareSide& b, const CompareOptions& options) {
  std::vector<std::string> axes = a.axes;
  for (const std::string& axis : b.axes) {
    if (std::find(axes.begin(), axes.end(), axis) == axes.end()) axes.push_back(axis);
  }
  Comparison comparison;
  // Parameters -> figure, in the order of A's points (then B's leftovers).
  std::map<std::string, std::optional<PointFigure>> figures_b;
  std::map<std::string, std::string> nodes_b;
  for (size_t i = 0; i < b.points.size(); ++i) {
    const std::string parameters = ParametersOf(b.points[i], axes);
    figures_b[parameters] = FigureOf(b.points[i]);
    nodes_b[parameters] = NodeOf(b, i);
  }
  std::set<std::string> seen;
  // Pairs of nodes whose points were compared, for the provenance each pair differs in.
  std::set<std::pair<std::string, std::string>> node_pairs;
  double log_sum = 0;
  for (size_t i = 0; i < a.points.size(); ++i) {
    const v1::Experiment& point = a.points[i];
    const std::string parameters = ParametersOf(point, axes);
    if (!seen.insert(parameters).second) continue;
    const auto other = figures_b.find(parameters);
    if (other == figures_b.end()) {
      comparison.only_in_a.push_back(parameters);
      continue;
    }
    const std::optional<PointFigure> figure_a = FigureOf(point);
    if (!figure_a.has_value() || !other->second.has_value() || figure_a->value <= 0 ||
        other->second->value <= 0 || figure_a->name != other->second->name) {
      comparison.without_result.push_back(parameters);
      continue;
    }
    ComparedPoint compared;
    compared.parameters = parameters;
    compared.node_a = NodeOf(a, i);
    compared.node_b = nodes_b[parameters];
    node_pairs.insert({compared.node_a, compared.node_b});
    compared.a = *figure_a;
    compared.b = *other->second;
    compared.ratio = compared.a.higher_is_better ? compared.b.value / compared.a.value
                                                 : compared.a.value / compared.b.value;
    compared.noise = ChanceChange(compared.a, compared.b, options);
    const double threshold = std::max(compared.noise.value_or(0), options.min_change);
    if (!compared.noise.has_value()) {
      // Without the noise a difference cannot be called significant, however large (one run's
      // figure may be anywhere in its spread); nor can a small one be called the same.
      compared.verdict = Verdict::kNoiseUnknown;
      ++comparison.noise_unknown;
    } else if (threshold < 1 && compared.ratio > 1 / (1 - threshold)) {
      // The mirror of the test below, so that swapping A and B swaps the verdict: with
      // 1 + threshold one run 26x faster than another at 101% noise was "better" one way round
      // and "within noise" the other. A chance change of 100% or more judges nothing.
      compared.verdict = Verdict::kImprovement;
      ++comparison.improvements;
    } else if (compared.ratio < 1 - threshold) {
      compared.verdict = Verdict::kRegression;
      ++comparison.regressions;
      comparison.worst_regression_pct =
          std::max(comparison.worst_regression_pct, 100 * (1 - compared.ratio));
    }
    log_sum += std::log(compared.ratio);
    comparison.points.push_back(std::move(compared));
  }
  for (const v1::Experiment& point : b.points) {
    const std::string parameters = ParametersOf(point, axes);
    if (!seen.contains(parameters)) {
      comparison.only_in_b.push_back(parameters);
      seen.insert(parameters);
    }
  }
  if (!comparison.points.empty()) {
    comparison.geomean_ratio = std::exp(log_sum / static_cast<double>(comparison.points.size()));
  }
  if (a.node_provenance.empty() && b.node_provenance.empty()) {
    comparison.provenance_differences = ProvenanceDifferences(a.provenance, b.provenance);
    return comparison;
  }
  for (const auto& [node_a, node_b] : node_pairs) {
    for (const std::string& difference :
         ProvenanceDifferences(ProvenanceOf(a, node_a), ProvenanceOf(b, node_b))) {
      comparison.provenance_differences.push_back(
          absl::StrCat(node_a.empty() ? a.id : node_a, " vs ", node_b.empty() ? b.id : node_b, ": ",
                       difference));
    }
  }
  return comparison;
}

double NoiseUpperBoundFactor(int64_t samples) {
  constexpr double kMaxFactor = 10;
  if (samples < 2) return kMaxFactor;
  const double k = static_cast<double>(samples - 1);
  constexpr double kZ05 = 1.6448536;  // the standard normal's 5% quantile, negated
  const double root = 1 - 2 / (9 * k) - kZ05 * std::sqrt(2 / (9 * k));
  if (root <= 0) return kMaxFactor;
  const double quantile = k * root * root * root;
  return std::min(kMaxFactor, std::sqrt(k / quantile));
}

bool RegressionBeyond(const Comparison& comparison, double pct) {
  for (const ComparedPoint& point : comparison.points) {
    if (point.verdict == Verdict::kRegression && 100 * (1 - point.ratio) > pct) return true;
  }
  return false;
}

int UnjudgedWorseThan(const Comparison& comparison, double pct) {
  int count = 0;
  for (const ComparedPoint& point : comparison.points) {
    if (point.verdict == Verdict::kNoiseUnknown && 100 * (1 - point.ratio) > pct) ++count;
  }
  return count;
}

}  // namespace gpuprof::sweep
