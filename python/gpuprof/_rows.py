"""Experiments and sweep points as flat rows (dicts) for pandas: one row per experiment or sweep
point, with the headline and the full statistics. The columns the CLI's `sweep get --format
csv` has (client/sweep_render.cc: point, the axes, state, experiment, gpu_ids, gpu, figure,
value, unit, noise, samples, min_us, median_us, p90_us, p99_us, gb_per_s, tflops, pct_of_copy)
keep its names and meaning; the others add what the CSV leaves out. None where not measured."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Optional, Sequence

from gpuprof import _fields
from gpuprof._headline import headline_of
from gpuprof._stubs import experiment_pb2, sweep_pb2, workloads_pb2

Row = Dict[str, Any]

_STATE = experiment_pb2.ExperimentState.DESCRIPTOR
_WORKLOAD = workloads_pb2.Workload.DESCRIPTOR


def state_name(state: int) -> str:
    """"finished", "timed-out": as the CLI prints it."""
    return _fields.enum_short_name(_STATE, state)


def _time(stamp: Any) -> Optional[datetime.datetime]:
    if stamp.seconds == 0 and stamp.nanos == 0:
        return None
    return stamp.ToDatetime().replace(tzinfo=datetime.timezone.utc)


def _positive(value: float) -> Optional[float]:
    return value if value > 0 else None


def axis_value(text: str) -> Any:
    """An axis value as typed ("4096", "bf16"): a number when it is plainly one, else text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def figures(experiment: experiment_pb2.Experiment) -> Row:
    """The headline and the statistics of one experiment's result."""
    row: Row = {}
    result = experiment.result
    row["gpu_ids"] = ",".join(str(gpu) for gpu in experiment.gpu_ids)
    row["gpu"] = result.provenance.gpus[0].name if result.provenance.gpus else ""
    headline = headline_of(experiment)
    row["figure"] = headline.name if headline else None
    row["value"] = headline.value if headline else None
    row["unit"] = headline.unit if headline else None
    row["noise"] = headline.relative_noise if headline else None
    measurement = result.measurement
    timed = result.HasField("measurement") and measurement.HasField("kernel_time")
    time = measurement.kernel_time
    samples = headline.samples if headline and headline.samples > 0 else 0
    if samples == 0 and timed:
        samples = time.samples
    row["samples"] = samples if samples > 0 else None
    # The GPU kernel's timing (empty for CPU workloads, as in the CLI's CSV).
    for name in ("min_us", "median_us", "p90_us", "p99_us", "mean_us", "max_us"):
        row[name] = getattr(time, name) if timed else None
    bandwidth = headline.bandwidth_gbps if headline and headline.bandwidth_gbps > 0 else 0.0
    tflops = headline.tflops if headline and headline.tflops > 0 else 0.0
    row["gb_per_s"] = _positive(bandwidth or measurement.bandwidth_gbps)
    row["tflops"] = _positive(tflops or measurement.tflops)
    row["pct_of_copy"] = _positive(headline.pct_of_copy_bandwidth) if headline else None
    row["pct_of_peak_bandwidth"] = _positive(measurement.pct_of_spec_peak_bandwidth)
    row["pct_of_peak_flops"] = _positive(measurement.pct_of_spec_peak_flops)
    # What bounds the headline and how close it gets: "% of copy" or "% of peak".
    row["bound"] = headline.bound if headline else None
    row["pct_of_bound"] = _positive(headline.pct_of_bound) if headline else None
    row["bound_reference"] = (headline.bound_reference or None) if headline else None
    row["phase"] = (headline.phase or None) if headline else None
    row["noise_unknown_because"] = (headline.noise_unknown_because or None) if headline else None
    # The median behind the headline whatever timed it: the kernel, the collective's largest
    # size, or radix's match_prefix latency.
    row["headline_median_us"] = _positive(headline.median_us) if headline else None
    for operation in result.radix.operations:
        prefix = operation.operation
        row[f"{prefix}_ops_per_second"] = operation.ops_per_second
        row[f"{prefix}_count"] = operation.count
        row[f"{prefix}_median_us"] = operation.latency.median_us
        row[f"{prefix}_p99_us"] = operation.latency.p99_us
    if result.HasField("radix"):
        row["hit_rate"] = result.radix.hit_rate
    return row


def experiment_row(experiment: experiment_pb2.Experiment) -> Row:
    row: Row = {
        "experiment": experiment.id,
        "workload": _fields.enum_short_name(_WORKLOAD, experiment.workload),
        "state": state_name(experiment.state),
        "user": experiment.user,
        "created": _time(experiment.created),
        "started": _time(experiment.started),
        "finished": _time(experiment.finished),
        "sweep": experiment.sweep_id or None,
        "description": experiment.request.description,
    }
    row.update(figures(experiment))
    row["reason"] = experiment.reason
    return row


def sweep_point_row(point: sweep_pb2.SweepPoint, axes: Sequence[str]) -> Row:
    row: Row = {"point": point.index}
    for axis in axes:
        row[axis] = axis_value(point.parameters[axis]) if axis in point.parameters else None
    row["state"] = state_name(point.state)
    row["experiment"] = point.experiment_id
    row["attempt"] = point.attempt
    row.update(figures(point.experiment))
    row["started"] = _time(point.experiment.started)
    row["finished"] = _time(point.experiment.finished)
    return row


def to_dataframe(rows: List[Row], columns: Optional[List[str]] = None) -> Any:
    """A pandas DataFrame of the rows, every column of every row (pandas is imported here, so
    that the client works without it)."""
    import pandas

    if columns is None:
        columns = []
        for row in rows:
            columns.extend(name for name in row if name not in columns)
    frame = pandas.DataFrame.from_records(rows, columns=columns)
    # A figure nobody measured is NaN in a float column, not None in an object column.
    for name in frame.columns:
        values = [row.get(name) for row in rows if row.get(name) is not None]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            frame[name] = pandas.to_numeric(frame[name], errors="coerce")
    return frame
