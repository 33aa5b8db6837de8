"""The one figure that sums up a finished experiment, computed from its result exactly as the
CLI and the daemon compute it (workloads/headline.cc, chosen per workload as the specs in
workloads/*/ choose it): index, store and attention decode: bandwidth in GB/s and % of the
copy bandwidth measured on the GPU; attention prefill: TFLOP/s and % of the spec peak;
collective: bus bandwidth at the largest size; radix: match_prefix operations per second;
copy: bandwidth against the link's spec peak."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional

from gpuprof._stubs import experiment_pb2, workloads_pb2


@dataclasses.dataclass(frozen=True)
class Headline:
    name: str  # "bandwidth", "tflops", "busbw" (algbw for one rank), "match_ops"
    unit: str  # "GB/s", "TFLOP/s", "op/s"
    value: float
    # "bandwidth-bound", "compute-bound", "CPU work".
    bound: str
    # stddev / mean of the samples (or timed passes) behind the value; None when nothing
    # measured it, which is not a noise of 0.
    relative_noise: Optional[float] = None
    # Why the noise is unknown though samples measured one ("other processes took 1.4 of 2
    # CPUs while it ran"); empty otherwise.
    noise_unknown_because: str = ""
    # Whether the noise also bounds how far another run lands: a GPU kernel's samples do, a CPU
    # rate's passes do not (workloads/headline.h), so compare judges those only with a
    # run-to-run noise given to it.
    noise_covers_runs: bool = True
    # The samples (GPU) or timed passes (CPU) the value rests on; 0 when unknown.
    samples: int = 0
    # The median time behind the figure in microseconds (0 when not timed).
    median_us: float = 0.0
    # The figure as a percentage of what bounds it (0 when unknown) and what that is: "copy",
    # "peak", or a link ("PCIe Gen5 x16").
    pct_of_bound: float = 0.0
    bound_reference: str = ""
    # Attention: "prefill" or "decode".
    phase: str = ""
    # Both rates where the run measured them, whichever is the headline (0 when not).
    bandwidth_gbps: float = 0.0
    tflops: float = 0.0
    pct_of_copy_bandwidth: float = 0.0
    higher_is_better: bool = True


def _noise(time: experiment_pb2.TimingStats) -> Optional[float]:
    # Known once two samples were timed; results without a sample count only when non-zero.
    if time.samples >= 2 or (time.samples == 0 and time.relative_noise > 0):
        return time.relative_noise
    return None


def _from_measurement(measurement: experiment_pb2.GpuMeasurement, **figure: Any) -> Headline:
    time = measurement.kernel_time
    return Headline(
        relative_noise=_noise(time),
        samples=time.samples,
        median_us=time.median_us,
        bandwidth_gbps=measurement.bandwidth_gbps,
        tflops=measurement.tflops,
        pct_of_copy_bandwidth=measurement.pct_of_measured_copy_bandwidth,
        **figure,
    )


def bandwidth_headline(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    measurement = experiment.result.measurement
    if measurement.bandwidth_gbps <= 0:
        return None
    # The measured copy is the practical limit; without it, the spec peak.
    pct, reference = 0.0, ""
    if measurement.pct_of_measured_copy_bandwidth > 0:
        pct, reference = measurement.pct_of_measured_copy_bandwidth, "copy"
    elif measurement.pct_of_spec_peak_bandwidth > 0:
        pct, reference = measurement.pct_of_spec_peak_bandwidth, "peak"
    return _from_measurement(
        measurement,
        name="bandwidth",
        unit="GB/s",
        value=measurement.bandwidth_gbps,
        bound="bandwidth-bound",
        pct_of_bound=pct,
        bound_reference=reference,
    )


def compute_headline(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    measurement = experiment.result.measurement
    if measurement.tflops <= 0:
        return None
    peak = measurement.pct_of_spec_peak_flops
    return _from_measurement(
        measurement,
        name="tflops",
        unit="TFLOP/s",
        value=measurement.tflops,
        bound="compute-bound",
        pct_of_bound=peak if peak > 0 else 0.0,
        bound_reference="peak" if peak > 0 else "",
    )


def bus_bandwidth_headline(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    collective = experiment.result.collective
    name, value = "busbw", collective.busbw_gbps
    if collective.ranks == 1 and collective.algbw_gbps > 0:
        # One rank moves no bytes between GPUs: its figure is the collective's own copy.
        name, value = "algbw", collective.algbw_gbps
    if value <= 0:
        return None
    noise, samples, median_us = None, 0, 0.0
    if collective.points:
        largest = collective.points[-1].time
        noise, samples, median_us = _noise(largest), largest.samples, largest.median_us
    return Headline(
        name=name,
        unit="GB/s",
        value=value,
        bound="bandwidth-bound",
        relative_noise=noise,
        samples=samples,
        median_us=median_us,
        bandwidth_gbps=value,
    )


# A CPU figure measured while other processes took this many of the host's CPUs on average (or
# more) has no known noise (workloads/headline.h's kSharedCpuOtherCpus).
SHARED_CPU_OTHER_CPUS = 0.5


def match_rate_headline(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    radix = experiment.result.radix
    for operation in radix.operations:
        if operation.operation != "match_prefix" or operation.ops_per_second <= 0:
            continue
        # Only the spread over repeated timed passes is the throughput's noise; unset: unknown.
        # Passes all slowed alike by another process on the CPU agree with each other, so a run
        # that shared the CPU has no known noise either (results that predate the CPU figures
        # have none of them).
        noise: Optional[float] = None
        because = ""
        online_cpus = getattr(radix, "online_cpus", 0)
        other_cpus = getattr(radix, "other_cpus", 0.0)
        if online_cpus > 0 and other_cpus >= SHARED_CPU_OTHER_CPUS:
            because = f"other processes took {other_cpus:.1f} of {online_cpus} CPUs while it ran"
        elif operation.HasField("ops_per_second_relative_noise"):
            noise = operation.ops_per_second_relative_noise
        return Headline(
            name="match_ops",
            unit="op/s",
            value=operation.ops_per_second,
            bound="CPU work",
            noise_covers_runs=False,
            relative_noise=noise,
            noise_unknown_because=because,
            samples=operation.passes,
            median_us=operation.latency.median_us,
        )
    return None


def link_bandwidth_headline(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    measurement = experiment.result.measurement
    if measurement.bandwidth_gbps <= 0:
        return None
    copy = experiment.result.copy
    headline = _from_measurement(
        measurement,
        name="bandwidth",
        unit="GB/s",
        value=measurement.bandwidth_gbps,
        bound="bandwidth-bound",
        pct_of_bound=measurement.pct_of_spec_peak_bandwidth,
        bound_reference=copy.link or "peak",
    )
    if headline.pct_of_copy_bandwidth <= 0:
        headline = dataclasses.replace(
            headline, pct_of_copy_bandwidth=copy.pct_of_probe_copy_bandwidth
        )
    return headline


def attention_headline(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    # Decode reads the whole KV cache per query token: bandwidth-bound; prefill reuses each
    # cached token across many queries: compute-bound. Unset phase is the default, decode.
    prefill = experiment.request.attention.phase == workloads_pb2.ATTENTION_PHASE_PREFILL
    headline = compute_headline(experiment) if prefill else bandwidth_headline(experiment)
    if headline is None:
        return None
    return dataclasses.replace(headline, phase="prefill" if prefill else "decode")


def headline_by_result_type(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    if not experiment.HasField("result"):
        return None
    result = experiment.result
    if result.HasField("collective"):
        return bus_bandwidth_headline(experiment)
    if result.HasField("radix"):
        return match_rate_headline(experiment)
    if result.HasField("copy"):
        return link_bandwidth_headline(experiment)
    if not result.HasField("measurement"):
        return None
    if result.measurement.bandwidth_gbps > 0:
        return bandwidth_headline(experiment)
    return compute_headline(experiment)


_BY_WORKLOAD: Dict[str, Callable[[experiment_pb2.Experiment], Optional[Headline]]] = {
    "index": bandwidth_headline,
    "store": bandwidth_headline,
    "attention": attention_headline,
    "collective": bus_bandwidth_headline,
    "radix": match_rate_headline,
    "copy": link_bandwidth_headline,
}
_WORKLOAD_FIELD = {
    workloads_pb2.WORKLOAD_INDEX: "index",
    workloads_pb2.WORKLOAD_STORE: "store",
    workloads_pb2.WORKLOAD_ATTENTION: "attention",
    workloads_pb2.WORKLOAD_COLLECTIVE: "collective",
    workloads_pb2.WORKLOAD_RADIX: "radix",
    workloads_pb2.WORKLOAD_COPY: "copy",
}


def headline_of(experiment: experiment_pb2.Experiment) -> Optional[Headline]:
    """None when the experiment has no result with a figure (not finished, or failed)."""
    if not experiment.HasField("result"):
        return None
    workload = _WORKLOAD_FIELD.get(experiment.workload) or experiment.request.WhichOneof(
        "workload"
    )
    chooser = _BY_WORKLOAD.get(workload or "")
    return chooser(experiment) if chooser is not None else headline_by_result_type(experiment)
