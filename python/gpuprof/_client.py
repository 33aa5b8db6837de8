"""The blocking client: a thin layer over the Profiler service's RPCs that returns handles whose
results read as dicts and pandas DataFrames."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

import grpc
from google.protobuf import json_format

from gpuprof import _compare, _connection, _fields, _request, _rows
from gpuprof._headline import Headline, headline_of
from gpuprof._stubs import access_pb2, experiment_pb2, gpus_pb2, profiler_pb2, profiler_pb2_grpc
from gpuprof._stubs import sweep_pb2, workloads_pb2

ExperimentEvent = experiment_pb2.ExperimentEvent
SweepEvent = sweep_pb2.SweepEvent

# States after which an experiment does not change (PREEMPTED is queued again).
FINAL_STATES = frozenset(
    {
        experiment_pb2.FINISHED,
        experiment_pb2.FAILED,
        experiment_pb2.CANCELLED,
        experiment_pb2.TIMED_OUT,
        experiment_pb2.INTERRUPTED,
    }
)


class GpuprofError(Exception):
    """An RPC the daemon refused or could not answer: `code` (grpc.StatusCode) and the daemon's
    message, which says what to change."""

    def __init__(self, code: grpc.StatusCode, details: str, method: str = "") -> None:
        self.code = code
        self.details = details
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {details}")

    @classmethod
    def from_rpc(cls, error: grpc.RpcError, method: str) -> "GpuprofError":
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        if code == grpc.StatusCode.UNAVAILABLE:
            details = f"{details}; is gpuprofd running? (target, $GPUPROF_TARGET)"
        return cls(code, details or "", method)


def message_to_dict(message: Any) -> Dict[str, Any]:
    """A message as a dict with the proto's field names (int64 as str, as JSON has them)."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


class EventStream(Iterator[Any]):
    """A server stream of events (Watch, WatchSweep) as an iterator. It ends when the
    experiment or sweep ends; cancel() (or leaving a `with` block) stops watching early and
    never cancels the experiment."""

    def __init__(self, call: Any, method: str) -> None:
        self._call = call
        self._method = method
        self._cancelled = False

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Any:
        try:
            return next(self._call)
        except grpc.RpcError as error:
            if self._cancelled and error.code() == grpc.StatusCode.CANCELLED:
                raise StopIteration from None
            if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise TimeoutError(f"{self._method}: no end before the timeout") from None
            raise GpuprofError.from_rpc(error, self._method) from None

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.cancel()


_HandleT = TypeVar("_HandleT", bound="_Handle")


class _Handle:
    """What Experiment and Sweep share: the daemon's last copy of the run, the blocking client
    that fetches it again, and waiting for the run to end."""

    proto: Any
    _client: Optional["Client"]

    @property
    def done(self) -> bool:
        raise NotImplementedError

    def refresh(self: _HandleT) -> _HandleT:
        raise NotImplementedError

    def watch(self, from_seq: int = 0, timeout: Optional[float] = None) -> EventStream:
        raise NotImplementedError

    def _needs_client(self) -> "Client":
        if self._client is None:
            raise RuntimeError(
                f"this {type(self).__name__} has no blocking Client (use AsyncClient's calls)"
            )
        return self._client

    def wait(self: _HandleT, timeout: Optional[float] = None) -> _HandleT:
        """Blocks until the experiment, or every point of the sweep, has ended (TimeoutError
        after `timeout` seconds)."""
        if not self.done:
            for _ in self.watch(from_seq=max(self.proto.last_seq, 1), timeout=timeout):
                pass
        return self.refresh()


class Experiment(_Handle):
    """One experiment as the daemon last reported it. Reads (result, headline, row) use that
    copy; refresh() and wait() fetch it again."""

    def __init__(self, proto: experiment_pb2.Experiment, client: Optional["Client"] = None):
        self.proto = proto
        self._client = client

    @property
    def id(self) -> str:
        return self.proto.id

    @property
    def state(self) -> str:
        """"queued", "running", "finished", "failed", ...: as the CLI prints it."""
        return _rows.state_name(self.proto.state)

    @property
    def done(self) -> bool:
        return self.proto.state in FINAL_STATES

    @property
    def workload(self) -> str:
        return _fields.enum_short_name(workloads_pb2.Workload.DESCRIPTOR, self.proto.workload)

    @property
    def result(self) -> Optional[Dict[str, Any]]:
        """The result as a dict (proto field names), or None while there is none."""
        return message_to_dict(self.proto.result) if self.proto.HasField("result") else None

    @property
    def headline(self) -> Optional[Headline]:
        return headline_of(self.proto)

    def to_dict(self) -> Dict[str, Any]:
        """The whole experiment: request, state, times, result."""
        return message_to_dict(self.proto)

    def row(self) -> Dict[str, Any]:
        """One flat row: id, workload, state, times, headline and statistics."""
        return _rows.experiment_row(self.proto)

    def to_dataframe(self) -> Any:
        return _rows.to_dataframe([self.row()])

    def refresh(self) -> "Experiment":
        self.proto = self._needs_client()._get_experiment(self.id)
        return self

    def watch(self, from_seq: int = 0, timeout: Optional[float] = None) -> EventStream:
        return self._needs_client().watch(self.id, from_seq=from_seq, timeout=timeout)

    def cancel(self, reason: str = "") -> "Experiment":
        self.proto = self._needs_client().cancel(self.id, reason)
        return self

    def save_report(self, path: Optional[str] = None, *, force: bool = False) -> str:
        """Fetches the Nsight report of an experiment submitted with capture="ncu" or "nsys"
        and writes it to `path` (default: the name the daemon suggests, "exp-000042.ncu-rep",
        in the working directory); returns the path. Refuses to overwrite unless force=True."""
        report = self._needs_client().capture_report(self.id)
        path = path if path is not None else report.file_name
        nsys = report.tool == "nsys"
        wanted, other = (".nsys-rep", ".ncu-rep") if nsys else (".ncu-rep", ".nsys-rep")
        if path.endswith(other):
            raise ValueError(
                f"{path}: this is an {report.tool} report; name the file {wanted} (the Nsight "
                "tools go by the extension)"
            )
        with open(path, "wb" if force else "xb") as file:
            file.write(report.data)
        return path

    def __repr__(self) -> str:
        headline = self.headline
        figure = f" {headline.value:.6g} {headline.unit}" if headline else ""
        return f"<Experiment {self.id} {self.workload} {self.state}{figure}>"


@dataclasses.dataclass(frozen=True)
class CaptureReport:
    """An Nsight report as the daemon kept it: its bytes (checked against the recorded size and
    SHA-256), the suggested file name, the tool ("ncu" or "nsys") and the tool's version."""

    file_name: str
    tool: str
    tool_version: str
    sha256: str
    data: bytes

    def open_with(self, path: str) -> str:
        """The command line that reads the report saved at `path`."""
        if self.tool == "nsys":
            return f"nsys stats {path}"
        return f"ncu --import {path} --page details"


class CaptureReportPages:
    """GetCaptureReport's pages joined into a CaptureReport, for the blocking and the asyncio
    client alike: next_request() while not done, add() each page, then report()."""

    METHOD = "GetCaptureReport"

    def __init__(self, experiment_id: str) -> None:
        self.experiment_id = experiment_id
        self.done = False
        self._chunks: List[bytes] = []
        self._received = 0
        self._record: Optional[experiment_pb2.CaptureReport] = None

    def next_request(self) -> profiler_pb2.GetCaptureReportRequest:
        return profiler_pb2.GetCaptureReportRequest(
            experiment_id=self.experiment_id, offset=self._received
        )

    def add(self, page: profiler_pb2.CaptureReportPage) -> None:
        if self._record is None:
            self._record = page.report
        self._chunks.append(page.data)
        self._received += len(page.data)
        self.done = page.eof
        if not page.eof and not page.data:
            raise GpuprofError(
                grpc.StatusCode.DATA_LOSS,
                f"the daemon sent an empty page of {self.experiment_id}'s report at byte "
                f"{self._received}",
                self.METHOD,
            )

    def report(self) -> CaptureReport:
        record = self._record if self._record is not None else experiment_pb2.CaptureReport()
        data = b"".join(self._chunks)
        digest = hashlib.sha256(data).hexdigest()
        if len(data) != record.size_bytes or (record.sha256 and digest != record.sha256):
            raise GpuprofError(
                grpc.StatusCode.DATA_LOSS,
                f"{self.experiment_id}'s report arrived as {len(data)} bytes with SHA-256 "
                f"{digest}; the daemon recorded {record.size_bytes} bytes with {record.sha256}",
                self.METHOD,
            )
        tool_enum = experiment_pb2.NsightCapture.Tool.DESCRIPTOR
        return CaptureReport(
            file_name=os.path.basename(record.file_name) or f"{self.experiment_id}.report",
            tool=_fields.enum_short_name(tool_enum, record.tool),
            tool_version=record.tool_version,
            sha256=record.sha256,
            data=data,
        )


class ExperimentList(Sequence[Experiment]):
    """A listing (ListExperiments, every page): experiments newest first, and the stored rows
    that did not parse (`damaged`)."""

    def __init__(self, experiments: List[Experiment], damaged: List[Any]) -> None:
        self._experiments = experiments
        self.damaged = damaged

    def __getitem__(self, index: Any) -> Any:
        return self._experiments[index]

    def __len__(self) -> int:
        return len(self._experiments)

    def rows(self) -> List[Dict[str, Any]]:
        return [experiment.row() for experiment in self._experiments]

    def to_dataframe(self) -> Any:
        """One row per experiment: id, workload, state, user, times, headline, statistics."""
        return _rows.to_dataframe(self.rows())


class Sweep(_Handle):
    """A sweep with every point (GetSweep's pages joined), as the daemon last reported it."""

    def __init__(self, proto: sweep_pb2.Sweep, client: Optional["Client"] = None) -> None:
        self.proto = proto
        self._client = client

    @property
    def id(self) -> str:
        return self.proto.id

    @property
    def state(self) -> str:
        """"running", "finished", "incomplete", "cancelled"."""
        return _fields.enum_short_name(sweep_pb2.SweepState.DESCRIPTOR, self.proto.state)

    @property
    def done(self) -> bool:
        return self.proto.state not in (sweep_pb2.SWEEP_RUNNING, sweep_pb2.SWEEP_STATE_UNSPECIFIED)

    @property
    def axes(self) -> List[str]:
        """The axes' field names, in the request's order."""
        return [axis.field for axis in self.proto.request.axes]

    @property
    def points(self) -> Sequence[sweep_pb2.SweepPoint]:
        return self.proto.points

    def experiments(self) -> List[Experiment]:
        """Each point's latest experiment (without provenance), in point order."""
        return [Experiment(point.experiment, self._client) for point in self.proto.points]

    def to_dict(self) -> Dict[str, Any]:
        return message_to_dict(self.proto)

    def rows(self) -> List[Dict[str, Any]]:
        return [_rows.sweep_point_row(point, self.axes) for point in self.proto.points]

    def to_dataframe(self) -> Any:
        """One row per point: its index, each axis' value, state, experiment, the headline and
        the statistics (the columns of `gpuprof sweep get ID --format csv`, and more)."""
        return _rows.to_dataframe(self.rows())

    def refresh(self) -> "Sweep":
        self.proto = self._needs_client()._get_sweep(self.id)
        return self

    def watch(self, from_seq: int = 0, timeout: Optional[float] = None) -> EventStream:
        return self._needs_client().watch_sweep(self.id, from_seq=from_seq, timeout=timeout)

    def cancel(self, reason: str = "") -> "Sweep":
        self._needs_client().cancel_sweep(self.id, reason)
        return self.refresh()

    def __repr__(self) -> str:
        total = self.proto.points_total or len(self.proto.points)
        return f"<Sweep {self.id} {self.state} {total} points>"


def _page_size(value: int, most: int) -> int:
    if not 0 <= value <= most:
        raise ValueError(f"page size {value}: between 1 and {most} (0: the daemon's default)")
    return value


class Client(_connection.Connected):
    """A connection to gpuprofd.

        c = gpuprof.Client("unix:/run/gpuprof/gpuprofd.sock")   # or "host:port"
        e = c.submit("index", tokens=4096, hidden=4096, gpus=[0], wait=True)
        e.headline, e.result, c.experiments(mine=True).to_dataframe()

    Target, TLS files and token come as the CLI's do: arguments, then $GPUPROF_TARGET and
    $GPUPROF_TOKEN, then the CLI's config file; `timeout` (seconds) bounds each unary call."""

    def _open_channel(self) -> None:
        self._channel = _connection.open_channel(self.options)
        self._stub = profiler_pb2_grpc.ProfilerStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<gpuprof.Client {self.options.target}>"

    # --- plumbing ---------------------------------------------------------------------------

    def _unary(self, method: str, request: Any) -> Any:
        try:
            return getattr(self._stub, method)(
                request, timeout=self.timeout, metadata=self._metadata
            )
        except grpc.RpcError as error:
            raise GpuprofError.from_rpc(error, method) from None

    def _stream(self, method: str, request: Any, timeout: Optional[float]) -> EventStream:
        call = getattr(self._stub, method)(request, timeout=timeout, metadata=self._metadata)
        return EventStream(call, method)

    # --- who and what -----------------------------------------------------------------------

    def whoami(self) -> Dict[str, Any]:
        """Who the daemon takes this client for: user, authenticated_by, admin."""
        return message_to_dict(self._unary("WhoAmI", access_pb2.WhoAmIRequest()))

    def gpus(self) -> List[Dict[str, Any]]:
        response = self._unary("ListGpus", gpus_pb2.ListGpusRequest())
        return [message_to_dict(gpu) for gpu in response.gpus]

    # --- experiments ------------------------------------------------------------------------

    def submit(self, workload: str, *, wait: bool = False, **fields: Any) -> Experiment:
        """Queues an experiment: `workload` is index, store, attention, collective, radix or
        copy; keyword arguments set its spec's fields by name (num_tokens=4096, or the CLI's
        short names: tokens=4096, hidden=4096) and the options every workload shares (gpus=[0],
        gpu_count, tp, priority, timeout, labels, warmup, min_iters, max_iters, time_budget,
        min_time, noise, l2, graph, trace, user, description). Enums take their short names
        ("bf16", "cold"), durations seconds or "500ms". custom_kernel= runs a kernel of your own
        (index, store, attention decode): a CustomKernel or a dict of its fields, e.g.
        {"source": open("g.cu").read(), "file_name": "g.cu", "kernel_name": "g"}. With
        wait=True, returns once it ended."""
        return self.submit_request(_request.build_request(workload, fields), wait=wait)

    def submit_request(
        self, request: experiment_pb2.ExperimentRequest, *, wait: bool = False
    ) -> Experiment:
        stream = self._stream("Submit", request, timeout=self.timeout)
        try:
            first = next(stream)  # QUEUED, with the id; admission errors arrive here
        except StopIteration:
            raise GpuprofError(grpc.StatusCode.UNKNOWN, "no event", "Submit") from None
        finally:
            stream.cancel()  # detaches: the experiment keeps running
        experiment = self.experiment(first.experiment_id)
        return experiment.wait() if wait else experiment

    def _get_experiment(self, experiment_id: str) -> experiment_pb2.Experiment:
        return self._unary(
            "GetExperiment", profiler_pb2.GetExperimentRequest(experiment_id=experiment_id)
        )

    def experiment(self, experiment_id: str) -> Experiment:
        return Experiment(self._get_experiment(experiment_id), self)

    def experiments(
        self,
        *,
        mine: bool = False,
        user: Optional[str] = None,
        states: Optional[Iterable[str]] = None,
        workload: Optional[str] = None,
        limit: Optional[int] = None,
        page_size: int = 500,
    ) -> ExperimentList:
        """Experiments newest first, every page of ListExperiments (up to `limit`): mine=True
        lists the caller's (as the daemon identifies it), user= someone's; states=["finished"]
        and workload="index" filter."""
        if mine and user is not None:
            raise ValueError("give mine=True or user=, not both")
        request = profiler_pb2.ListExperimentsRequest(page_size=_page_size(page_size, 1000))
        if mine:
            request.user = self.whoami()["user"]
        elif user is not None:
            request.user = user
        for state in states or ():
            state_enum = experiment_pb2.ExperimentState.DESCRIPTOR
            request.states.append(_fields.parse_enum(state_enum, state).number)
        if workload is not None:
            workload_enum = workloads_pb2.Workload.DESCRIPTOR
            request.workload = _fields.parse_enum(workload_enum, workload).number
        experiments: List[Experiment] = []
        damaged: List[Any] = []
        while True:
            response = self._unary("ListExperiments", request)
            experiments.extend(Experiment(e, self) for e in response.experiments)
            damaged.extend(response.damaged)
            if not response.next_page_token or (limit is not None and len(experiments) >= limit):
                break
            request.page_token = response.next_page_token
        return ExperimentList(experiments[:limit] if limit is not None else experiments, damaged)

    def watch(
        self, experiment_id: str, *, from_seq: int = 0, timeout: Optional[float] = None
    ) -> EventStream:
        """The experiment's events (ExperimentEvent), the stored ones from `from_seq` first,
        then live ones until it ends."""
        request = profiler_pb2.WatchRequest(experiment_id=experiment_id, from_seq=from_seq)
        return self._stream("Watch", request, timeout)

    def capture_report(self, experiment_id: str) -> CaptureReport:
        """The Nsight report of an experiment submitted with capture="ncu" or "nsys" (its owner
        or an admin), read page by page and checked against its recorded size and SHA-256."""
        pages = CaptureReportPages(experiment_id)
        while not pages.done:
            pages.add(self._unary(pages.METHOD, pages.next_request()))
        return pages.report()

    def cancel(self, experiment_id: str, reason: str = "") -> experiment_pb2.Experiment:
        return self._unary(
            "Cancel", profiler_pb2.CancelRequest(experiment_id=experiment_id, reason=reason)
        )

    # --- sweeps -----------------------------------------------------------------------------

    def submit_sweep(
        self,
        workload: str,
        axes: Mapping[str, Union[Sequence[Any], range, Dict[str, Any]]],
        *,
        zipped: bool = False,
        max_concurrent_gpus: int = 0,
        description: str = "",
        wait: bool = False,
        **fields: Any,
    ) -> Sweep:
        """Queues a sweep: every combination of the axes' values (zipped=True: the i-th value
        of every axis), each point an experiment. Axes map a field (any name submit takes:
        "num_requests" or "requests", "priority", "gpu_count") to its values, a range, or
        {"powers_of_two": (min, max)}; keyword arguments set what every point shares."""
        request = _request.build_sweep_request(
            workload,
            axes,
            fields,
            zipped=zipped,
            max_concurrent_gpus=max_concurrent_gpus,
            description=description,
        )
        created = self._unary("SubmitSweep", request)
        sweep = self.sweep(created.id)
        return sweep.wait() if wait else sweep

    def _get_sweep(self, sweep_id: str, points_page_size: int = 0) -> sweep_pb2.Sweep:
        request = sweep_pb2.GetSweepRequest(
            sweep_id=sweep_id, points_page_size=_page_size(points_page_size, 5000)
        )
        sweep = self._unary("GetSweep", request)
        while sweep.next_points_page_token:
            request.points_page_token = sweep.next_points_page_token
            page = self._unary("GetSweep", request)
            sweep.points.extend(page.points)
            sweep.next_points_page_token = page.next_points_page_token
        return sweep

    def sweep(self, sweep_id: str, *, points_page_size: int = 0) -> Sweep:
        """The sweep with every point, GetSweep's pages of `points_page_size` (0: the daemon's
        default, 500) joined."""
        return Sweep(self._get_sweep(sweep_id, points_page_size), self)

    def sweeps(
        self, *, mine: bool = False, user: Optional[str] = None, limit: Optional[int] = None
    ) -> List[Dict[str, Any]]:
        """Sweeps newest first, without their points: id, state, user, created, counts."""
        request = sweep_pb2.ListSweepsRequest(page_size=200)
        if mine:
            request.user = self.whoami()["user"]
        elif user is not None:
            request.user = user
        rows: List[Dict[str, Any]] = []
        while True:
            response = self._unary("ListSweeps", request)
            for sweep in response.sweeps:
                rows.append(
                    {
                        "sweep": sweep.id,
                        "state": Sweep(sweep).state,
                        "user": sweep.user,
                        "created": sweep.created.ToDatetime().replace(
                            tzinfo=datetime.timezone.utc
                        ),
                        "points": sweep.points_total,
                        "finished": sweep.points_finished,
                        "failed": sweep.points_failed,
                        "description": sweep.request.description,
                    }
                )
            if not response.next_page_token or (limit is not None and len(rows) >= limit):
                break
            request.page_token = response.next_page_token
        return rows[:limit] if limit is not None else rows

    def watch_sweep(
        self, sweep_id: str, *, from_seq: int = 0, timeout: Optional[float] = None
    ) -> EventStream:
        """The sweep's events (SweepEvent): CREATED, a POINT per change of a point's state, and
        last its end."""
        request = sweep_pb2.WatchSweepRequest(sweep_id=sweep_id, from_seq=from_seq)
        return self._stream("WatchSweep", request, timeout)

    # --- comparing ----------------------------------------------------------------------------

    def _compare_side(self, name: str) -> _compare.CompareSide:
        if name.startswith("exp-"):
            return _compare.CompareSide(name, [], [self._get_experiment(name)])
        if name.startswith("swp-"):
            sweep = Sweep(self._get_sweep(name))
            return _compare.CompareSide(name, sweep.axes, [p.experiment for p in sweep.points])
        baselines = self._unary("ListBaselines", sweep_pb2.ListBaselinesRequest(name=name))
        if not baselines.baselines:
            raise ValueError(
                f'"{name}" is not an experiment (exp-...), a sweep (swp-...) or a baseline'
            )
        side = self._compare_side(baselines.baselines[0].target_id)
        side.id = f"baseline {name} ({side.id})"
        return side

    def compare(
        self,
        a: str,
        b: str,
        *,
        min_change: float = 0.01,
        cpu_run_noise: Optional[float] = None,
    ) -> _compare.Comparison:
        """Compares two runs as `gpuprof compare A B` does: experiments, sweeps or baselines by
        name; points matched by parameters, ratio > 1 when B is better, a verdict against the
        noise both measured (never "regression" when a noise is unknown; CPU rates are judged
        only with `cpu_run_noise`, as --cpu-run-noise). `.to_dataframe()`, `.regressions`,
        `.worst_regression_pct`, `.geomean_ratio`."""
        return _compare.compare(
            self._compare_side(a), self._compare_side(b), min_change, cpu_run_noise
        )

    def cancel_sweep(self, sweep_id: str, reason: str = "") -> sweep_pb2.Sweep:
        return self._unary(
            "CancelSweep", sweep_pb2.CancelSweepRequest(sweep_id=sweep_id, reason=reason)
        )
