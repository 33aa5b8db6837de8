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
    const auto path = ResolveAxisField(experiment.request(), axis);
    parts.push_back(absl::StrCat(axis, "=", path.ok() ? FieldValueText(experiment.request(), *path)
                                                      : "-"));
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
    differences.push_back(absl::StrCat(what, ": ", a.empty() ? "?" : a, " vs ",
                                       b.empty() ? "?" : b));
  }
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
  for (const v1::Experiment& point : b.points) figures_b[ParametersOf(point, axes)] = FigureOf(point);
  std::set<std::string> seen;
  double log_sum = 0;
  for (const v1::Experiment& point : a.points) {
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
    compared.a = *figure_a;
    compared.b = *other->second;
    compared.ratio = compared.a.higher_is_better ? compared.b.value / compared.a.value
                                                 : compared.a.value / compared.b.value;
    compared.noise = std::sqrt(compared.a.relative_noise * compared.a.relative_noise +
                               compared.b.relative_noise * compared.b.relative_noise);
    const double threshold = std::max(compared.noise, options.min_change);
    if (compared.ratio > 1 + threshold) {
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
  AddDifference("GPU", GpuNames(a.provenance), GpuNames(b.provenance),
                comparison.provenance_differences);
  AddDifference("driver", a.provenance.driver_version(), b.provenance.driver_version(),
                comparison.provenance_differences);
  AddDifference("CUDA runtime", a.provenance.cuda_runtime_version(),
                b.provenance.cuda_runtime_version(), comparison.provenance_differences);
  AddDifference("NCCL", a.provenance.nccl_version(), b.provenance.nccl_version(),
                comparison.provenance_differences);
  AddDifference("gpuprof", a.provenance.gpuprof_version(), b.provenance.gpuprof_version(),
                comparison.provenance_differences);
  AddDifference("host", a.provenance.hostname(), b.provenance.hostname(),
                comparison.provenance_differences);
  return comparison;
}

bool RegressionBeyond(const Comparison& comparison, double pct) {
  for (const ComparedPoint& point : comparison.points) {
    if (point.verdict == Verdict::kRegression && 100 * (1 - point.ratio) > pct) return true;
  }
  return false;
}

}  // namespace gpuprof::sweep
