"""Two runs (experiments or sweeps) compared as `gpuprof compare` compares them
(sweep/compare.cc): points matched by their parameters read from each point's request, the
ratio of their headlines (> 1: B is better), and whether the difference is beyond what chance
allows given the noise both runs measured; a point whose noise is unknown is never a
regression."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Optional, Sequence

from gpuprof import _fields
from gpuprof._headline import Headline, headline_of
from gpuprof._stubs import experiment_pb2

SAME, IMPROVEMENT, REGRESSION, NOISE_UNKNOWN = "same", "improvement", "regression", "noise unknown"


@dataclasses.dataclass
class CompareSide:
    id: str  # as named: "exp-000012", "swp-000003", "baseline main"
    axes: List[str]
    points: List[experiment_pb2.Experiment]


def _axis_value(request: experiment_pb2.ExperimentRequest, axis: str) -> str:
    """The value of an axis field ("num_tokens", "index.num_tokens", "measurement.l2_mode") in
    the request, as text; "-" when the request has no such field."""
    message: Any = request
    names = axis.split(".")
    workload = request.WhichOneof("workload")
    if len(names) == 1 and workload and names[0] not in request.DESCRIPTOR.fields_by_name:
        names = [workload, *names]
    for name in names[:-1]:
        if name not in message.DESCRIPTOR.fields_by_name:
            return "-"
        message = getattr(message, name)
    field = message.DESCRIPTOR.fields_by_name.get(names[-1])
    if field is None:
        return "-"
    value = getattr(message, field.name)
    if field.label == field.LABEL_REPEATED:
        return ",".join(str(item) for item in value)
    if field.type == field.TYPE_ENUM:
        return _fields.enum_short_name(field.enum_type, value)
    if field.message_type is not None:
        return " ".join(f"{f.name}:{v}" for f, v in value.ListFields())
    return str(value).lower() if isinstance(value, bool) else str(value)


def parameters_of(experiment: experiment_pb2.Experiment, axes: Sequence[str]) -> Dict[str, str]:
    return {axis: _axis_value(experiment.request, axis) for axis in axes}


@dataclasses.dataclass
class ComparedPoint:
    parameters: Dict[str, str]
    a: Headline
    b: Headline
    # b / a where higher is better, a / b otherwise: > 1 means B is better.
    ratio: float
    # The change the ratio may show by chance, as a fraction: 2 x sqrt(noise_a^2 + noise_b^2),
    # each side's noise at the 95% upper bound its sample count allows; None when either side's
    # noise is unknown. Beyond it (and min_change) a point is better or worse.
    noise: Optional[float]
    verdict: str


@dataclasses.dataclass
class Comparison:
    a: str
    b: str
    points: List[ComparedPoint]
    only_in_a: List[Dict[str, str]]
    only_in_b: List[Dict[str, str]]
    without_result: List[Dict[str, str]]
    geomean_ratio: float

    @property
    def regressions(self) -> int:
        return sum(point.verdict == REGRESSION for point in self.points)

    @property
    def improvements(self) -> int:
        return sum(point.verdict == IMPROVEMENT for point in self.points)

    @property
    def worst_regression_pct(self) -> float:
        worst = [100 * (1 - p.ratio) for p in self.points if p.verdict == REGRESSION]
        return max(worst, default=0.0)

    def rows(self) -> List[Dict[str, Any]]:
        rows = []
        for point in self.points:
            row: Dict[str, Any] = dict(point.parameters)
            row.update(
                figure=point.a.name,
                unit=point.a.unit,
                a=point.a.value,
                b=point.b.value,
                ratio=point.ratio,
                change_pct=100 * (point.ratio - 1),
                noise=point.noise,
                verdict=point.verdict,
                a_noise=point.a.relative_noise,
                b_noise=point.b.relative_noise,
            )
            rows.append(row)
        return rows

    def to_dataframe(self) -> Any:
        """One row per matched point: its parameters, both figures, ratio, noise, verdict."""
        from gpuprof._rows import to_dataframe

        return to_dataframe(self.rows())


def noise_upper_bound_factor(samples: int) -> float:
    """How far above the stddev seen in `samples` samples the true one may be, at 95%
    confidence (sqrt((n-1) / chi2_0.05(n-1)), Wilson and Hilferty's approximation): 2.4 for 5
    passes, 1.05 for 500 samples, at most 10 (fewer than 2 samples)."""
    most = 10.0
    if samples < 2:
        return most
    k = float(samples - 1)
    z05 = 1.6448536  # the standard normal's 5% quantile, negated
    root = 1 - 2 / (9 * k) - z05 * math.sqrt(2 / (9 * k))
    if root <= 0:
        return most
    return min(most, math.sqrt(k / (k * root**3)))


def chance_change(
    a: Headline, b: Headline, cpu_run_noise: Optional[float] = None
) -> Optional[float]:
    """Two standard deviations of the ratio, each side's noise at its 95% upper bound; for a
    figure whose noise covers one run only (a CPU rate), at least `cpu_run_noise`. None where a
    noise is unknown, or covers one run and no `cpu_run_noise` was given."""

    def noise(figure: Headline) -> Optional[float]:
        if figure.relative_noise is None:
            return None
        measured = figure.relative_noise * noise_upper_bound_factor(figure.samples)
        if figure.noise_covers_runs:
            return measured
        return None if cpu_run_noise is None else max(measured, cpu_run_noise)

    noise_a, noise_b = noise(a), noise(b)
    if noise_a is None or noise_b is None:
        return None
    return 2 * math.hypot(noise_a, noise_b)


def compare(
    a: CompareSide,
    b: CompareSide,
    min_change: float = 0.01,
    cpu_run_noise: Optional[float] = None,
) -> Comparison:
    axes = list(a.axes) + [axis for axis in b.axes if axis not in a.axes]
    key = lambda experiment: tuple(parameters_of(experiment, axes).items())  # noqa: E731
    figures_b: Dict[Any, Optional[Headline]] = {key(p): headline_of(p) for p in b.points}
    seen = set()
    points: List[ComparedPoint] = []
    only_in_a: List[Dict[str, str]] = []
    without_result: List[Dict[str, str]] = []
    log_sum = 0.0
    for experiment in a.points:
        parameters = key(experiment)
        if parameters in seen:
            continue
        seen.add(parameters)
        if parameters not in figures_b:
            only_in_a.append(dict(parameters))
            continue
        figure_a, figure_b = headline_of(experiment), figures_b[parameters]
        if (
            figure_a is None
            or figure_b is None
            or figure_a.value <= 0
            or figure_b.value <= 0
            or figure_a.name != figure_b.name
        ):
            without_result.append(dict(parameters))
            continue
        ratio = (
            figure_b.value / figure_a.value
            if figure_a.higher_is_better
            else figure_a.value / figure_b.value
        )
        noise = chance_change(figure_a, figure_b, cpu_run_noise)
        threshold = max(noise or 0.0, min_change)
        if noise is None:
            # Without the noise a difference cannot be called significant, nor the same.
            verdict = NOISE_UNKNOWN
        elif threshold < 1 and ratio > 1 / (1 - threshold):
            # The mirror of the regression test, so that swapping A and B swaps the verdict.
            verdict = IMPROVEMENT
        elif ratio < 1 - threshold:
            verdict = REGRESSION
        else:
            verdict = SAME
        log_sum += math.log(ratio)
        points.append(ComparedPoint(dict(parameters), figure_a, figure_b, ratio, noise, verdict))
    only_in_b = []
    for experiment in b.points:
        parameters = key(experiment)
        if parameters not in seen:
            only_in_b.append(dict(parameters))
            seen.add(parameters)
    geomean = math.exp(log_sum / len(points)) if points else 1.0
    return Comparison(a.id, b.id, points, only_in_a, only_in_b, without_result, geomean)
