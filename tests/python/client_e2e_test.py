"""The Python client against a real gpuprofd (real unix socket, real SQLite, real workers): radix
experiments and a radix sweep run on the CPU. The sweep's DataFrame must hold the same numbers
as the CLI's `gpuprof sweep get ID --format csv`, column by column, to the CSV's rounding.
Run by run_python_test.sh with the daemon, worker and CLI from Bazel's runfiles."""

from __future__ import annotations

import asyncio
import csv
import decimal
import hashlib
import io
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from typing import Any, Dict, List
from unittest import mock

import grpc
import pandas

import gpuprof
import gpuprof.aio
from gpuprof.v1.experiment_pb2 import NsightCapture

RUNFILES = os.environ["GPUPROF_RUNFILES"]
GPUPROFD = os.path.join(RUNFILES, "daemon/gpuprofd")
WORKER = os.path.join(RUNFILES, "worker/gpuprof_worker")
CLI = os.path.join(RUNFILES, "client/gpuprof")
EXAMPLE = os.path.join(RUNFILES, "python/examples/sweep_notebook.py")
# Not Nsight Systems: runs the worker's child and writes a small report where nsys would
# (tests/e2e/nsight_capture_e2e_test.cc tests the daemon's side with it; here, the client's).
STAND_IN_NSYS = os.path.join(RUNFILES, "tests/e2e/nsight/stand_in_nsys_for_plumbing_test.sh")

# Radix runs kept short: a few hundred requests, its fewest timed passes, no time floor.
QUICK = dict(users=8, max_iters=5, min_time=0)


def is_empty(value: Any) -> bool:
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def rounding_tolerance(text: str) -> float:
    """Half a unit in the last digit the CSV printed: "0.1043" -> 0.00005."""
    exponent = decimal.Decimal(text).as_tuple().exponent
    return 0.5 * 10.0 ** int(exponent)


def free_loopback_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class DaemonTest(unittest.TestCase):
    daemon: subprocess.Popen
    target: str
    socket_dir: str
    state_dir: str
    # What a subclass adds: more daemon flags, and how to connect to it.
    extra_flags: List[str] = []
    client_settings: Dict[str, Any] = {}

    @classmethod
    def prepare(cls) -> None:
        """Runs before the daemon starts (certificates, ...)."""

    @classmethod
    def setUpClass(cls) -> None:
        # Unix socket paths are limited to 107 bytes; the test's own temp dir can be longer.
        cls.socket_dir = tempfile.mkdtemp(prefix="gpuprof-py-")
        cls.state_dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"), prefix="state-")
        cls.target = f"unix:{cls.socket_dir}/gpuprofd.sock"
        cls.prepare()
        # The flags tests/testing/daemon_harness.cc starts it with.
        with open(os.path.join(cls.state_dir, "gpuprofd.log"), "wb") as log:
            cls.daemon = subprocess.Popen(
                [
                    GPUPROFD,
                    f"--state_dir={cls.state_dir}",
                    f"--listen={cls.target}",
                    f"--worker_binary={WORKER}",
                    "--measure_copy_bandwidth=false",
                    "--metrics_listen=",
                    *cls.extra_flags,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 60
        while True:
            if cls.daemon.poll() is not None:
                raise RuntimeError(f"gpuprofd exited at start-up:\n{cls.daemon_log()}")
            try:
                with gpuprof.Client(cls.target, timeout=0.5, **cls.client_settings) as probe:
                    probe.whoami()
                break
            except gpuprof.GpuprofError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gpuprofd did not answer:\n{cls.daemon_log()}")
                time.sleep(0.05)
        cls.client = gpuprof.Client(cls.target, **cls.client_settings)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()
        cls.daemon.send_signal(signal.SIGTERM)
        try:
            cls.daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            cls.daemon.kill()
            cls.daemon.wait()
        shutil.rmtree(cls.socket_dir, ignore_errors=True)

    @classmethod
    def daemon_log(cls) -> str:
        with open(os.path.join(cls.state_dir, "gpuprofd.log"), errors="replace") as file:
            return file.read()[-4000:]

    def cli(self, *args: str) -> str:
        run = subprocess.run(
            [CLI, f"--target={self.target}", *args], capture_output=True, text=True, timeout=60
        )
        self.assertEqual(run.returncode, 0, f"gpuprof {' '.join(args)}: {run.stderr}")
        return run.stdout


class ClientTest(DaemonTest):
    extra_flags = [f"--nsys_path={STAND_IN_NSYS}", "--ncu_path=/nonexistent/ncu"]

    def test_submit_wait_result_and_headline(self) -> None:
        experiment = self.client.submit("radix", requests=300, seed=7, wait=True, **QUICK)
        self.assertEqual(experiment.state, "finished", experiment.proto.reason)
        self.assertTrue(experiment.id.startswith("exp-"))
        self.assertEqual(experiment.workload, "radix")
        # The request as submitted, keyword arguments on the spec's fields.
        self.assertEqual(experiment.proto.request.radix.num_requests, 300)
        self.assertEqual(experiment.proto.request.radix.num_users, 8)
        self.assertEqual(experiment.proto.request.radix.seed, 7)

        result = experiment.result
        self.assertIsInstance(result, dict)
        operations = {op["operation"]: op for op in result["radix"]["operations"]}
        match = operations["match_prefix"]
        headline = experiment.headline
        self.assertEqual((headline.name, headline.unit, headline.bound),
                         ("match_ops", "op/s", "CPU work"))
        self.assertEqual(headline.value, match["ops_per_second"])
        self.assertEqual(headline.samples, match["passes"])
        # The passes' spread, unless other processes shared the CPU (a busy test machine):
        # then, as the CLI says, unknown and why.
        shared = result["radix"].get("other_cpus", 0) >= gpuprof._headline.SHARED_CPU_OTHER_CPUS
        if "ops_per_second_relative_noise" in match and not shared:
            self.assertEqual(headline.relative_noise, match["ops_per_second_relative_noise"])
        else:
            self.assertIsNone(headline.relative_noise)
        self.assertEqual(bool(headline.noise_unknown_because), shared)
        self.assertGreater(headline.value, 0)

        row = experiment.row()
        self.assertEqual(row["experiment"], experiment.id)
        self.assertEqual(row["value"], headline.value)
        self.assertEqual(row["match_prefix_ops_per_second"], headline.value)
        # The same figures again through a fresh GetExperiment.
        again = self.client.experiment(experiment.id)
        self.assertEqual(again.headline, headline)
        frame = again.to_dataframe()
        self.assertEqual(len(frame), 1)
        self.assertEqual(frame["value"][0], headline.value)

    def test_errors_name_what_to_change(self) -> None:
        with self.assertRaisesRegex(TypeError, r'radix takes no argument "requestz".*"requests"'):
            self.client.submit("radix", requestz=300)
        with self.assertRaisesRegex(ValueError, r"unknown workload \"radx\"; choose one of index"):
            self.client.submit("radx")
        with self.assertRaisesRegex(ValueError, r"l2='tepid'.*not one of hot, cold"):
            self.client.submit("radix", requests=300, l2="tepid")
        # The daemon's own validation comes back as INVALID_ARGUMENT with its message.
        with self.assertRaises(gpuprof.GpuprofError) as refused:
            self.client.submit("radix", requests=-5)
        self.assertEqual(refused.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("num_requests", refused.exception.details)
        with self.assertRaises(gpuprof.GpuprofError) as missing:
            self.client.experiment("exp-999999")
        self.assertEqual(missing.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_capture_report_fetched_checked_and_saved(self) -> None:
        experiment = self.client.submit(
            "radix", requests=200, capture="nsys", wait=True, **QUICK
        )
        self.assertEqual(experiment.state, "finished", experiment.proto.reason)
        self.assertEqual(experiment.proto.request.capture.tool, NsightCapture.TOOL_NSYS)
        report = self.client.capture_report(experiment.id)
        kept = os.path.join(self.state_dir, "reports", f"{experiment.id}.nsys-rep")
        with open(kept, "rb") as file:
            self.assertEqual(report.data, file.read())
        self.assertEqual(report.file_name, f"{experiment.id}.nsys-rep")
        self.assertEqual(report.tool, "nsys")
        self.assertEqual(report.sha256, hashlib.sha256(report.data).hexdigest())
        self.assertIn("--capture-child=", report.data.decode())
        out = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "r.nsys-rep")
        self.assertEqual(experiment.save_report(out), out)
        self.assertEqual(report.open_with(out), f"nsys stats {out}")
        with self.assertRaises(FileExistsError):
            experiment.save_report(out)
        with self.assertRaisesRegex(ValueError, r"this is an nsys report; name the file .nsys-rep"):
            experiment.save_report(out + ".ncu-rep")
        experiment.save_report(out, force=True)
        async def fetch_async() -> gpuprof.CaptureReport:
            async with gpuprof.aio.AsyncClient(self.target) as client:
                return await client.capture_report(experiment.id)

        self.assertEqual(asyncio.run(fetch_async()), report)
        # The same bytes the CLI fetches.
        self.cli("report", experiment.id, "-o", out + ".cli")
        with open(out, "rb") as mine, open(out + ".cli", "rb") as theirs:
            self.assertEqual(mine.read(), theirs.read())
        # Refusals come back as the daemon words them.
        plain = self.client.submit("radix", requests=200, wait=True, **QUICK)
        with self.assertRaises(gpuprof.GpuprofError) as none:
            self.client.capture_report(plain.id)
        self.assertIn("was not submitted with a capture", none.exception.details)
        with self.assertRaises(gpuprof.GpuprofError) as no_ncu:
            self.client.submit("index", tokens=64, capture="ncu")
        self.assertIn("ncu is not installed on this node", no_ncu.exception.details)
        with self.assertRaisesRegex(ValueError, r"capture='vtune'.*not one of ncu, nsys"):
            self.client.submit("radix", requests=200, capture="vtune")

    def test_watch_blocking_and_async_see_the_same_events(self) -> None:
        async def submit_and_watch() -> List[Any]:
            async with gpuprof.aio.AsyncClient(self.target) as client:
                experiment = await client.submit("radix", requests=200, **QUICK)
                events = [event async for event in client.watch(experiment.id)]
                # Stopping a watch early ends the stream, not the experiment.
                async with client.watch(experiment.id) as stream:
                    first = await stream.__anext__()
                    self.assertEqual(first.seq, 1)
                    stream.cancel()
                    self.assertEqual([e async for e in stream], [])
                finished = await client.experiment(experiment.id)
                self.assertEqual(finished.state, "finished")
                return events

        async_events = asyncio.run(submit_and_watch())
        experiment_id = async_events[0].experiment_id
        blocking_events = list(self.client.watch(experiment_id))
        self.assertEqual([e.seq for e in blocking_events], list(range(1, len(blocking_events) + 1)))
        self.assertEqual(
            [e.SerializeToString() for e in async_events],
            [e.SerializeToString() for e in blocking_events],
        )
        self.assertEqual(blocking_events[0].state.state, gpuprof.v1.experiment_pb2.QUEUED)
        self.assertEqual(blocking_events[-1].state.state, gpuprof.v1.experiment_pb2.FINISHED)
        self.assertEqual(sum(e.HasField("result") for e in blocking_events), 1)
        # from_seq replays from there on.
        tail = list(self.client.watch(experiment_id, from_seq=len(blocking_events) - 1))
        self.assertEqual([e.seq for e in tail], [len(blocking_events) - 1, len(blocking_events)])

    def test_sweep_dataframe_has_the_cli_csv_numbers(self) -> None:
        sweep = self.client.submit_sweep(
            "radix", {"requests": [200, 300], "seed": [1, 2]}, wait=True, **QUICK
        )
        self.assertEqual(sweep.state, "finished", sweep.proto.reason)
        # One point a page: the client joins GetSweep's pages.
        paged = self.client.sweep(sweep.id, points_page_size=1)
        frame = paged.to_dataframe()
        self.assertIsInstance(frame, pandas.DataFrame)
        self.assertEqual(list(frame["point"]), list(range(4)))
        self.assertEqual(list(frame["num_requests"]), [200, 200, 300, 300])
        self.assertEqual(list(frame["seed"]), [1, 2, 1, 2])
        self.assertTrue((frame["value"] > 0).all())

        cli_csv = self.cli("sweep", "get", sweep.id, "--format", "csv")
        csv_rows = list(csv.DictReader(io.StringIO(cli_csv)))
        self.assertEqual(len(csv_rows), len(frame))
        cli_columns = list(csv_rows[0])
        needed_columns = ("point", "state", "experiment", "figure", "value", "unit", "noise", "samples")
        for needed in needed_columns:
            self.assertIn(needed, cli_columns)
        shared = [column for column in cli_columns if column in frame.columns]
        only_cli = [column for column in cli_columns if column not in frame.columns]
        self.assertEqual(only_cli, [], "columns of the CLI's CSV the DataFrame lacks")
        compared = 0
        for csv_row, (_, frame_row) in zip(csv_rows, frame.iterrows()):
            for column in shared:
                text, value = csv_row[column], frame_row[column]
                where = f"point {csv_row['point']} column {column}: CSV {text!r}, frame {value!r}"
                if text == "":
                    self.assertTrue(is_empty(value), where)
                    continue
                self.assertFalse(is_empty(value), where)
                try:
                    number = float(text)
                except ValueError:
                    self.assertEqual(str(value), text, where)
                    continue
                self.assertLessEqual(abs(float(value) - number), rounding_tolerance(text), where)
                compared += 1
        # value, noise and samples at least, for each of the four points.
        self.assertGreaterEqual(compared, 4 * 3)

        # compare, as `gpuprof compare`: a sweep against itself (through a baseline the CLI
        # saved) is the same everywhere; against one of its points, that point alone matches.
        self.cli("baseline", "save", "py-sweep", sweep.id)
        itself = self.client.compare("py-sweep", sweep.id)
        self.assertEqual(len(itself.points), 4)
        # The same figures: never a change (unknown where the CPU was shared while it ran).
        for point in itself.points:
            self.assertEqual(point.ratio, 1)
            self.assertEqual(point.verdict, "same" if point.noise is not None else "noise unknown")
        self.assertEqual((itself.regressions, itself.geomean_ratio), (0, 1.0))
        self.assertIn(sweep.id, itself.a)
        one = self.client.compare(sweep.id, paged.points[3].experiment_id)
        self.assertEqual([p.parameters for p in one.points], [{"num_requests": "300", "seed": "2"}])
        self.assertEqual(len(one.only_in_a), 3)
        table = one.to_dataframe()
        self.assertIn(table["verdict"][0], ("same", "noise unknown"))
        self.assertEqual(table["a"][0], frame["value"][3])

    def test_experiments_list_pages_and_filters(self) -> None:
        submitted = [self.client.submit("radix", requests=200 + i, **QUICK) for i in range(2)]
        for experiment in submitted:
            experiment.wait(timeout=60)
        listing = self.client.experiments(mine=True, page_size=1)
        ids = [experiment.id for experiment in listing]
        self.assertEqual(len(ids), len(set(ids)), "a page repeated an experiment")
        for experiment in submitted:
            self.assertIn(experiment.id, ids)
        frame = listing.to_dataframe()
        self.assertEqual(list(frame["experiment"]), ids)
        self.assertTrue(set(frame["user"]) == {self.client.whoami()["user"]})
        for experiment in submitted:
            row = frame[frame["experiment"] == experiment.id].iloc[0]
            fresh = self.client.experiment(experiment.id)
            self.assertEqual(row["state"], "finished")
            self.assertEqual(row["value"], fresh.headline.value)
            self.assertEqual(row["workload"], "radix")
        self.assertEqual(len(self.client.experiments(mine=True, limit=2)), 2)
        self.assertEqual(len(self.client.experiments(user="nobody-here")), 0)
        finished = self.client.experiments(states=["finished"], workload="radix")
        self.assertTrue(all(e.state == "finished" for e in finished))

    def test_notebook_example_runs(self) -> None:
        run = subprocess.run(
            [sys.executable, "-B", EXAMPLE],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(os.environ, GPUPROF_TARGET=self.target),
        )
        self.assertEqual(run.returncode, 0, run.stderr[-3000:])
        self.assertIn("match_ops", run.stdout)
        self.assertIn("events seen by asyncio", run.stdout)


# Certificates as tests/testing/tls_fixture.cc makes them: a CA, a server certificate for
# 127.0.0.1, a client certificate whose CN is the user.
MAKE_CERTIFICATES = r"""
set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
key ca
openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj "/CN=gpuprof python test ca"
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > server.ext
printf 'extendedKeyUsage=clientAuth\n' > client.ext
leaf() {
  key $1
  openssl req -new -key $1.key -out $1.csr -subj "/CN=$1"
  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $1.pem -days 2 \
    -extfile $2 2>/dev/null
}
leaf server server.ext
leaf alice client.ext
"""


ROBOT_TOKEN = "python-client-test-token-0123456789"
# What the policy lists: the token's SHA-256 only (docs/security.md).
ROBOT_TOKEN_SHA256 = hashlib.sha256(ROBOT_TOKEN.encode()).hexdigest()


class TlsTest(DaemonTest):
    """The client's TLS settings against a daemon on loopback TCP with TLS: a client
    certificate (the daemon takes the caller for its CN) or a bearer token (the user the policy
    lists for its SHA-256), as docs/security.md describes them."""

    @classmethod
    def prepare(cls) -> None:
        cls.certs = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"), prefix="certs-")
        subprocess.run(["bash", "-c", MAKE_CERTIFICATES], cwd=cls.certs, check=True)
        policy = os.path.join(cls.certs, "policy.textproto")
        with open(policy, "w") as file:
            file.write(
                "policy_version: 1\n"
                "tls_subjects_are_local_users: true\n"
                f'tokens {{ user: "robot" sha256: "{ROBOT_TOKEN_SHA256}" }}\n'
                "end_of_policy: true\n"
            )
        with open(os.path.join(cls.certs, "robot.token"), "w") as file:
            file.write(ROBOT_TOKEN + "\n")
        cls.target = f"127.0.0.1:{free_loopback_port()}"
        cls.extra_flags = [
            f"--listen={cls.target}",
            f"--tls_cert={cls.certs}/server.pem",
            f"--tls_key={cls.certs}/server.key",
            f"--tls_client_ca={cls.certs}/ca.pem",
            "--tls_require_client_cert=false",
            f"--policy={policy}",
        ]
        cls.client_settings = dict(
            tls_ca=f"{cls.certs}/ca.pem",
            tls_cert=f"{cls.certs}/alice.pem",
            tls_key=f"{cls.certs}/alice.key",
        )

    def test_identified_by_the_client_certificate(self) -> None:
        caller = self.client.whoami()
        self.assertEqual(caller["user"], "alice")
        self.assertIn("TLS client certificate", caller["authenticated_by"])
        experiment = self.client.submit("radix", requests=200, wait=True, **QUICK)
        self.assertEqual(experiment.state, "finished", experiment.proto.reason)
        self.assertEqual(experiment.proto.user, "alice")
        self.assertIn(experiment.id, [e.id for e in self.client.experiments(mine=True)])

    def test_identified_by_the_bearer_token_from_file_or_environment(self) -> None:
        ca = f"{self.certs}/ca.pem"
        with gpuprof.Client(self.target, tls_ca=ca, token_file=f"{self.certs}/robot.token") as robot:
            caller = robot.whoami()
            self.assertEqual((caller["user"], caller["authenticated_by"]), ("robot", "bearer token"))
        with mock.patch.dict(os.environ, {"GPUPROF_TOKEN": ROBOT_TOKEN}):
            with gpuprof.Client(self.target, tls_ca=ca) as robot:
                self.assertEqual(robot.whoami()["user"], "robot")

    def test_without_a_certificate_or_tls_the_daemon_refuses(self) -> None:
        with gpuprof.Client(self.target, tls_ca=f"{self.certs}/ca.pem", timeout=5) as nobody:
            with self.assertRaises(gpuprof.GpuprofError) as refused:
                nobody.whoami()
            self.assertEqual(refused.exception.code, grpc.StatusCode.UNAUTHENTICATED)
        with self.assertRaisesRegex(ValueError, "a bearer token is sent only over TLS"):
            gpuprof.Client(self.target, token=ROBOT_TOKEN)
        with gpuprof.Client(self.target, timeout=5) as plaintext:
            with self.assertRaises(gpuprof.GpuprofError) as refused:
                plaintext.whoami()
            self.assertEqual(refused.exception.code, grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main(verbosity=2)
