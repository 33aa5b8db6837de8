"""The generated gpuprof.v1 modules, with a clear error when they were never generated."""

from __future__ import annotations

try:
    from gpuprof.v1 import access_pb2, experiment_pb2, gpus_pb2, profiler_pb2, profiler_pb2_grpc
    from gpuprof.v1 import sweep_pb2, workloads_pb2
except ImportError as error:  # pragma: no cover - depends on how the package was set up
    raise ImportError(
        "gpuprof: the gpuprof.v1 modules are missing; generate them from proto/ with "
        "tools/setup.sh (or python/generate_stubs.sh python), or install with "
        f"`pip install ./python` ({error})"
    ) from error

__all__ = [
    "access_pb2",
    "experiment_pb2",
    "gpus_pb2",
    "profiler_pb2",
    "profiler_pb2_grpc",
    "sweep_pb2",
    "workloads_pb2",
]
