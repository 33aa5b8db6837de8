"""The asyncio client (grpc.aio): the same connection settings as gpuprof.Client, with watch
streams as async iterators.

    async with gpuprof.aio.AsyncClient("unix:/run/gpuprof/gpuprofd.sock") as c:
        experiment = await c.submit("radix", requests=2000)
        async for event in c.watch(experiment.id):
            print(event.seq, event.WhichOneof("payload"))
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Mapping, Optional

import grpc
import grpc.aio

from gpuprof import _connection, _request
from gpuprof._client import CaptureReport, CaptureReportPages, Experiment, GpuprofError, Sweep
from gpuprof._stubs import experiment_pb2, profiler_pb2, profiler_pb2_grpc, sweep_pb2


class AsyncEventStream(AsyncIterator[Any]):
    """A server stream of events as an async iterator; it ends when the experiment or sweep
    ends. cancel() (or leaving an `async with` block) stops watching, never the experiment."""

    def __init__(self, call: Any, method: str) -> None:
        self._call = call
        self._method = method
        self._cancelled = False

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Any:
        try:
            event = await self._call.read()
        except asyncio.CancelledError:
            if self._cancelled:
                raise StopAsyncIteration from None
            raise
        except grpc.RpcError as error:
            if self._cancelled and error.code() == grpc.StatusCode.CANCELLED:
                raise StopAsyncIteration from None
            if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise TimeoutError(f"{self._method}: no end before the timeout") from None
            raise GpuprofError.from_rpc(error, self._method) from None
        if event is grpc.aio.EOF:
            raise StopAsyncIteration
        return event

    def cancel(self) -> None:
        self._cancelled = True
        self._call.cancel()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.cancel()


class AsyncClient(_connection.Connected):
    """As gpuprof.Client, for asyncio code. Handles it returns read as the blocking client's do
    (result, headline, row, to_dataframe); refreshing them goes through this client's calls."""

    def _open_channel(self) -> None:
        creds = _connection.credentials(self.options)
        arguments = _connection.channel_arguments()
        self._channel = (
            grpc.aio.insecure_channel(self.options.target, options=arguments)
            if creds is None
            else grpc.aio.secure_channel(self.options.target, creds, options=arguments)
        )
        self._stub = profiler_pb2_grpc.ProfilerStub(self._channel)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def _unary(self, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub, method)(
                request, timeout=self.timeout, metadata=self._metadata
            )
        except grpc.RpcError as error:
            raise GpuprofError.from_rpc(error, method) from None

    def _events(self, method: str, request: Any, timeout: Optional[float]) -> "AsyncEventStream":
        call = getattr(self._stub, method)(request, timeout=timeout, metadata=self._metadata)
        return AsyncEventStream(call, method)

    def watch(
        self, experiment_id: str, *, from_seq: int = 0, timeout: Optional[float] = None
    ) -> "AsyncEventStream":
        """`async for event in c.watch(id)`: stored events from `from_seq`, then live ones until
        the experiment ends."""
        request = profiler_pb2.WatchRequest(experiment_id=experiment_id, from_seq=from_seq)
        return self._events("Watch", request, timeout)

    def watch_sweep(
        self, sweep_id: str, *, from_seq: int = 0, timeout: Optional[float] = None
    ) -> "AsyncEventStream":
        request = sweep_pb2.WatchSweepRequest(sweep_id=sweep_id, from_seq=from_seq)
        return self._events("WatchSweep", request, timeout)

    async def submit(self, workload: str, *, wait: bool = False, **fields: Any) -> Experiment:
        """As Client.submit."""
        request = _request.build_request(workload, fields)
        call = self._stub.Submit(request, timeout=self.timeout, metadata=self._metadata)
        try:
            first = await call.read()
        except grpc.RpcError as error:
            raise GpuprofError.from_rpc(error, "Submit") from None
        finally:
            call.cancel()  # detaches: the experiment keeps running
        if first is grpc.aio.EOF:
            raise GpuprofError(grpc.StatusCode.UNKNOWN, "no event", "Submit")
        if wait:
            return await self.wait(first.experiment_id)
        return await self.experiment(first.experiment_id)

    async def experiment(self, experiment_id: str) -> Experiment:
        request = profiler_pb2.GetExperimentRequest(experiment_id=experiment_id)
        return Experiment(await self._unary("GetExperiment", request))

    async def wait(self, experiment_id: str, timeout: Optional[float] = None) -> Experiment:
        """The experiment once it ended."""
        async for _ in self.watch(experiment_id, timeout=timeout):
            pass
        return await self.experiment(experiment_id)

    async def capture_report(self, experiment_id: str) -> CaptureReport:
        """As Client.capture_report."""
        pages = CaptureReportPages(experiment_id)
        while not pages.done:
            pages.add(await self._unary(pages.METHOD, pages.next_request()))
        return pages.report()

    async def cancel(self, experiment_id: str, reason: str = "") -> Experiment:
        request = profiler_pb2.CancelRequest(experiment_id=experiment_id, reason=reason)
        return Experiment(await self._unary("Cancel", request))

    async def submit_sweep(
        self, workload: str, axes: Mapping[str, Any], *, zipped: bool = False,
        max_concurrent_gpus: int = 0, description: str = "", **fields: Any
    ) -> Sweep:
        request = _request.build_sweep_request(
            workload, axes, fields, zipped=zipped, max_concurrent_gpus=max_concurrent_gpus,
            description=description,
        )
        created = await self._unary("SubmitSweep", request)
        return await self.sweep(created.id)

    async def sweep(self, sweep_id: str, *, points_page_size: int = 0) -> Sweep:
        """The sweep with every point (GetSweep's pages joined)."""
        request = sweep_pb2.GetSweepRequest(sweep_id=sweep_id, points_page_size=points_page_size)
        sweep = await self._unary("GetSweep", request)
        while sweep.next_points_page_token:
            request.points_page_token = sweep.next_points_page_token
            page = await self._unary("GetSweep", request)
            sweep.points.extend(page.points)
            sweep.next_points_page_token = page.next_points_page_token
        return Sweep(sweep)
