"""Python client of gpuprofd: submit, watch, list and get experiments and sweeps, results as
dicts and pandas DataFrames.

    import gpuprof
    c = gpuprof.Client("unix:/run/gpuprof/gpuprofd.sock")
    e = c.submit("index", tokens=4096, hidden=4096, gpus=[0], wait=True)
    print(e.headline, e.result["measurement"]["kernel_time"])
    c.experiments(mine=True).to_dataframe()
    c.sweep("swp-000001").to_dataframe()

gpuprof.aio.AsyncClient is the asyncio flavour (watch streams as async iterators). The
gpuprof.v1 modules are generated from proto/ (python/README.md says how).
"""

from gpuprof._client import (
    CaptureReport,
    Client,
    EventStream,
    Experiment,
    ExperimentList,
    GpuprofError,
    Sweep,
    message_to_dict,
)
from gpuprof._compare import Comparison, ComparedPoint
from gpuprof._connection import ConnectionOptions, resolve as resolve_connection
from gpuprof._headline import Headline, headline_of
from gpuprof._request import build_request, build_sweep_request, workload_names
from gpuprof._rows import experiment_row, sweep_point_row

__all__ = [
    "CaptureReport",
    "Client",
    "Comparison",
    "ComparedPoint",
    "ConnectionOptions",
    "EventStream",
    "Experiment",
    "ExperimentList",
    "GpuprofError",
    "Headline",
    "Sweep",
    "build_request",
    "build_sweep_request",
    "experiment_row",
    "headline_of",
    "message_to_dict",
    "resolve_connection",
    "sweep_point_row",
    "workload_names",
]

__version__ = "0.1.0"
