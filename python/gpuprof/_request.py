"""Keyword arguments -> ExperimentRequest, as `gpuprof submit WORKLOAD --flag value` builds it
(client/request_builder.cc): the workload's spec fields by their proto names ("num_tokens") or
the CLI's short aliases ("tokens"), and the options every workload shares ("gpus", "noise",
"l2", ...). Unknown names are a TypeError that lists what the workload takes."""

from __future__ import annotations

import difflib
from typing import Any, Dict, List, Mapping

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from gpuprof import _fields
from gpuprof._stubs import experiment_pb2, sweep_pb2

# The CLI's short names for the fields typed most often (request_builder.cc's kFieldAliases,
# '-' as '_'). An alias applies to a workload only when its spec has the target field and no
# field of the alias's own name.
FIELD_ALIASES: Dict[str, str] = {
    "tokens": "num_tokens",
    "hidden": "hidden_dim",
    "vocab": "vocab_size",
    "heads": "num_qo_heads",
    "kv_heads": "num_kv_heads",
    "batch": "batch_size",
    "bytes": "bytes_per_rank",
    "pattern": "slot_pattern",
    "requests": "num_requests",
    "splits": "num_splits",
    "users": "num_users",
    "system_prompts": "num_system_prompts",
    "slots": "cache_slots",
    "budget": "cache_token_budget",
}

# Options every workload shares: the CLI's common flags ('-' as '_') -> their field path in
# ExperimentRequest. The paths' own names work too ("tp_degree", "gpu_count").
COMMON_OPTIONS: Dict[str, str] = {
    "gpus": "gpus.gpu_ids",
    "gpu_count": "gpus.gpu_count",
    "placement": "gpus.placement",
    "tp": "tp_degree",
    "tp_degree": "tp_degree",
    "priority": "priority",
    "timeout": "timeout",
    "labels": "labels",
    "warmup": "measurement.warmup_iterations",
    "min_iters": "measurement.min_iterations",
    "max_iters": "measurement.max_iterations",
    "time_budget": "measurement.time_budget",
    "min_time": "measurement.min_time",
    "noise": "measurement.noise_target",
    "noise_target": "measurement.noise_target",
    "l2": "measurement.l2_mode",
    "host_inputs": "measurement.host_inputs",
    "graph": "measurement.graph_launches_per_sample",
    "eager_launches": "measurement.eager_launches_per_sample",
    "trace": "tracing.level",
    "metrics": "tracing.extra_metrics",
    # An Nsight report taken on the daemon's side (docs/nsight.md): capture="ncu" or "nsys".
    "capture": "capture.tool",
    "ncu_set": "capture.ncu_set",
    "ncu_kernel": "capture.kernel_filter",
    "ncu_launch_skip": "capture.launch_skip",
    "ncu_launch_count": "capture.launch_count",
    "user": "user",
    "description": "description",
}

_REQUEST = experiment_pb2.ExperimentRequest.DESCRIPTOR


def workload_names() -> List[str]:
    """What submit accepts: the fields of ExperimentRequest's `workload` oneof, in order."""
    return [field.name for field in _REQUEST.oneofs_by_name["workload"].fields]


def _workload_field(workload: str) -> FieldDescriptor:
    for field in _REQUEST.oneofs_by_name["workload"].fields:
        if field.name == workload:
            return field
    raise ValueError(f'unknown workload "{workload}"; choose one of {", ".join(workload_names())}')


def _common_path(path: str) -> List[FieldDescriptor]:
    fields: List[FieldDescriptor] = []
    message: Descriptor = _REQUEST
    for name in path.split("."):
        field = message.fields_by_name[name]
        fields.append(field)
        message = field.message_type
    return fields


class RequestFields:
    """The names one workload takes, each with its field path from ExperimentRequest."""

    def __init__(self, workload: str) -> None:
        self.workload = workload
        self.workload_field = _workload_field(workload)
        spec: Descriptor = self.workload_field.message_type
        self.paths: Dict[str, List[FieldDescriptor]] = {}
        # Common options first: their names stay the same across workloads.
        for name, path in COMMON_OPTIONS.items():
            self.paths[name] = _common_path(path)
        self.spec_names: List[str] = []
        for field in spec.fields:
            # A spec field named like a common option is reached as "<workload>_<name>".
            name = field.name if field.name not in self.paths else f"{workload}_{field.name}"
            self.paths[name] = [self.workload_field, field]
            self.spec_names.append(name)
        self.aliases: Dict[str, str] = {}
        for alias, target in FIELD_ALIASES.items():
            if target in spec.fields_by_name and alias not in self.paths:
                self.aliases[alias] = target
                self.paths[alias] = [self.workload_field, spec.fields_by_name[target]]

    def api_name(self, name: str) -> str:
        """The field's name for a sweep axis: the spec field's own name, or the dotted path."""
        path = self.path(name)
        if path[0] is self.workload_field:
            return path[-1].name
        return ".".join(field.name for field in path)

    def path(self, name: str) -> List[FieldDescriptor]:
        found = self.paths.get(name)
        if found is None:
            raise TypeError(self._unknown(name))
        return found

    def _unknown(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self.paths), n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        fields = ", ".join(
            f"{n} ({_fields.value_syntax(self.paths[n][-1])})" for n in self.spec_names
        )
        aliases = ", ".join(f"{a}={t}" for a, t in self.aliases.items())
        return (
            f'{self.workload} takes no argument "{name}"{hint}. Its fields: {fields}'
            + (f"; short names: {aliases}" if aliases else "")
            + f"; options of every workload: {', '.join(COMMON_OPTIONS)}"
        )

    def build(self, values: Mapping[str, Any]) -> experiment_pb2.ExperimentRequest:
        request = experiment_pb2.ExperimentRequest()
        getattr(request, self.workload).SetInParent()
        for name, value in values.items():
            if name == "custom_kernel" and value is not None:
                # A kernel of your own (docs/custom-kernels.md), passed through as given: a
                # CustomKernel or a dict of its fields ({"source": ..., "kernel_name": ...}).
                if isinstance(value, Mapping):
                    value = json_format.ParseDict(dict(value), experiment_pb2.CustomKernel())
                request.custom_kernel.CopyFrom(value)
                continue
            path = self.path(name)
            if value is None:
                continue
            message = request
            for field in path[:-1]:
                message = getattr(message, field.name)
            try:
                _fields.set_field(message, path[-1], value)
            except ValueError as error:
                raise ValueError(f"{self.workload} {name}={value!r}: {error}") from None
        return request


def build_request(workload: str, values: Mapping[str, Any]) -> experiment_pb2.ExperimentRequest:
    return RequestFields(workload).build(values)


def build_sweep_request(
    workload: str,
    axes: Mapping[str, Any],
    values: Mapping[str, Any],
    *,
    zipped: bool = False,
    max_concurrent_gpus: int = 0,
    description: str = "",
) -> sweep_pb2.SweepRequest:
    """A SweepRequest: `values` set the base request as submit's do; each axis maps a field
    (any name submit takes) to a list of values, or to range(start, stop, step) (stop excluded,
    as Python's range), or to a dict {"powers_of_two": (min, max)}."""
    fields = RequestFields(workload)
    request = sweep_pb2.SweepRequest(
        base=fields.build(values),
        combination=(
            sweep_pb2.SweepRequest.ZIPPED if zipped else sweep_pb2.SweepRequest.CARTESIAN
        ),
        max_concurrent_gpus=max_concurrent_gpus,
        description=description,
    )
    if not axes:
        raise ValueError("a sweep needs at least one axis")
    for name, axis_values in axes.items():
        axis = request.axes.add(field=fields.api_name(name))
        if isinstance(axis_values, dict) and set(axis_values) == {"powers_of_two"}:
            low, high = axis_values["powers_of_two"]
            axis.powers_of_two.min, axis.powers_of_two.max = int(low), int(high)
        elif isinstance(axis_values, (list, tuple, range)):
            if len(axis_values) == 0:
                raise ValueError(f"sweep axis {name}: no values")
            axis.values.extend(_fields.axis_text(v) for v in axis_values)
        else:
            raise ValueError(
                f"sweep axis {name}={axis_values!r}: give a list of values, a range, or "
                '{"powers_of_two": (min, max)}'
            )
    return request

