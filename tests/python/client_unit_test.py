"""The Python client's pure parts, without a daemon: keyword arguments onto the request as the
CLI's flags set it, the headline of each workload's result as workloads/headline.cc computes it
(GPU results included, which the CPU-only e2e test cannot produce), the rows of a GPU result,
compare's verdicts, and the connection settings' checks and precedence."""

from __future__ import annotations

import datetime
import os
import tempfile
import unittest
from unittest import mock

import gpuprof
from gpuprof import _compare, _connection
from gpuprof.v1 import experiment_pb2, sweep_pb2, workloads_pb2


class RequestTest(unittest.TestCase):
    def test_custom_kernel_passes_through(self) -> None:
        source = 'extern "C" __global__ void g() {}\n'
        request = gpuprof.build_request(
            "index",
            dict(hidden=7168, custom_kernel={"source": source, "file_name": "g.cu",
                                             "block_threads": 128, "mode": "MODE_TEST"}),
        )
        self.assertEqual(request.custom_kernel.source, source)
        self.assertEqual(request.custom_kernel.block_threads, 128)
        self.assertEqual(request.custom_kernel.mode, experiment_pb2.CustomKernel.MODE_TEST)
        self.assertEqual(request.index.hidden_dim, 7168)
        kernel = experiment_pb2.CustomKernel(source=source, kernel_name="g")
        self.assertEqual(
            gpuprof.build_request("store", dict(custom_kernel=kernel)).custom_kernel, kernel
        )

    def test_spec_fields_aliases_and_common_options(self) -> None:
        request = gpuprof.build_request(
            "index",
            dict(
                tokens=4096,
                hidden="4Ki",
                vocab_size=32000,
                dtype="BF16",
                vocab_range=(0, 16000),
                gpus=[0, 1],
                tp=2,
                noise=0.01,
                time_budget="1m30s",
                min_time=datetime.timedelta(milliseconds=20),
                l2="cold",
                trace="off",
                labels={"team": "serving"},
                priority=3,
            ),
        )
        self.assertEqual(request.WhichOneof("workload"), "index")
        self.assertEqual(request.index.num_tokens, 4096)
        self.assertEqual(request.index.hidden_dim, 4096)
        self.assertEqual(request.index.vocab_size, 32000)
        self.assertEqual(request.index.dtype, workloads_pb2.DATA_TYPE_BF16)
        self.assertEqual((request.index.vocab_range.start, request.index.vocab_range.end), (0, 16000))
        self.assertEqual(list(request.gpus.gpu_ids), [0, 1])
        self.assertEqual(request.tp_degree, 2)
        self.assertEqual(request.measurement.noise_target, 0.01)
        self.assertEqual(request.measurement.time_budget.seconds, 90)
        self.assertEqual(request.measurement.min_time.ToMilliseconds(), 20)
        self.assertTrue(request.measurement.HasField("min_time"))
        self.assertEqual(request.measurement.l2_mode, experiment_pb2.MeasurementOptions.L2_MODE_COLD)
        self.assertEqual(request.tracing.level, experiment_pb2.TracingOptions.LEVEL_OFF)
        self.assertEqual(dict(request.labels), {"team": "serving"})
        self.assertEqual(request.priority, 3)

    def test_workload_selected_with_no_fields_and_zero_time_floor_is_sent(self) -> None:
        request = gpuprof.build_request("radix", dict(min_time=0, history_growth_probability=0.0))
        self.assertTrue(request.HasField("radix"))
        # An explicit 0 means "no floor", unset means the default: presence must survive.
        self.assertTrue(request.measurement.HasField("min_time"))
        self.assertTrue(request.radix.HasField("history_growth_probability"))

    def test_sizes_follow_the_cli_units(self) -> None:
        # "bytes" fields: K/M/G are 1024-based; counts: 1000-based; Ki always 1024.
        self.assertEqual(gpuprof.build_request("copy", dict(bytes="64M")).copy.bytes, 64 << 20)
        self.assertEqual(
            gpuprof.build_request("collective", dict(bytes="1G")).collective.bytes_per_rank, 1 << 30
        )
        self.assertEqual(gpuprof.build_request("radix", dict(requests="32K")).radix.num_requests, 32000)
        self.assertEqual(gpuprof.build_request("radix", dict(requests="1.5M")).radix.num_requests, 1500000)
        self.assertEqual(gpuprof.build_request("index", dict(tokens="0x10")).index.num_tokens, 16)

    def test_errors_say_what_is_allowed(self) -> None:
        with self.assertRaisesRegex(TypeError, r'index takes no argument "tokenz" \(did you mean "tokens"\?\)'):
            gpuprof.build_request("index", dict(tokenz=1))
        # An alias of another workload is not this one's.
        with self.assertRaisesRegex(TypeError, r'radix takes no argument "hidden"'):
            gpuprof.build_request("radix", dict(hidden=1))
        with self.assertRaisesRegex(ValueError, r'"bf61" is not one of fp32, fp16, bf16'):
            gpuprof.build_request("index", dict(dtype="bf61"))
        with self.assertRaisesRegex(ValueError, r"tokens=True: True is not an integer"):
            gpuprof.build_request("index", dict(tokens=True))
        with self.assertRaisesRegex(ValueError, r"timeout='soon'.*not a duration"):
            gpuprof.build_request("index", dict(timeout="soon"))
        with self.assertRaisesRegex(ValueError, r'"32KB" is not an integer'):
            gpuprof.build_request("radix", dict(requests="32KB"))
        with self.assertRaisesRegex(ValueError, r'unknown workload "gemm"; choose one of index, store'):
            gpuprof.build_request("gemm", {})

    def test_sweep_axes_take_any_submit_name(self) -> None:
        request = gpuprof.build_sweep_request(
            "index",
            {"tokens": [1024, 4096], "dtype": ["bf16", "fp32"], "l2": ["hot", "cold"],
             "gpu_count": range(1, 3), "hidden": {"powers_of_two": (1024, 8192)}},
            dict(gpus=[0]),
            zipped=False,
        )
        self.assertEqual(
            [axis.field for axis in request.axes],
            ["num_tokens", "dtype", "measurement.l2_mode", "gpus.gpu_count", "hidden_dim"],
        )
        self.assertEqual(list(request.axes[0].values), ["1024", "4096"])
        self.assertEqual(list(request.axes[3].values), ["1", "2"])
        self.assertEqual((request.axes[4].powers_of_two.min, request.axes[4].powers_of_two.max), (1024, 8192))
        self.assertEqual(request.combination, sweep_pb2.SweepRequest.CARTESIAN)
        with self.assertRaisesRegex(ValueError, "a sweep needs at least one axis"):
            gpuprof.build_sweep_request("radix", {}, {})
        with self.assertRaisesRegex(ValueError, "sweep axis requests: no values"):
            gpuprof.build_sweep_request("radix", {"requests": []}, {})


def timing(samples: int, median_us: float, noise: float) -> experiment_pb2.TimingStats:
    return experiment_pb2.TimingStats(
        samples=samples, min_us=median_us * 0.9, median_us=median_us, mean_us=median_us,
        p90_us=median_us * 1.1, p99_us=median_us * 1.2, max_us=median_us * 1.3,
        relative_noise=noise,
    )


def gpu_experiment(workload: int, request: experiment_pb2.ExperimentRequest,
                   measurement: experiment_pb2.GpuMeasurement) -> experiment_pb2.Experiment:
    return experiment_pb2.Experiment(
        id="exp-000001", workload=workload, state=experiment_pb2.FINISHED, request=request,
        gpu_ids=[0, 1], result=experiment_pb2.ExperimentResult(measurement=measurement),
    )


class HeadlineTest(unittest.TestCase):
    def test_index_is_bandwidth_against_the_measured_copy(self) -> None:
        experiment = gpu_experiment(
            workloads_pb2.WORKLOAD_INDEX, gpuprof.build_request("index", {}),
            experiment_pb2.GpuMeasurement(
                kernel_time=timing(200, 12.5, 0.004), bandwidth_gbps=2854.5,
                pct_of_spec_peak_bandwidth=85.0, pct_of_measured_copy_bandwidth=96.2, tflops=0.1),
        )
        experiment.result.provenance.gpus.add(name="NVIDIA H100 80GB HBM3")
        headline = gpuprof.headline_of(experiment)
        self.assertEqual((headline.name, headline.unit, headline.value), ("bandwidth", "GB/s", 2854.5))
        self.assertEqual((headline.pct_of_bound, headline.bound_reference), (96.2, "copy"))
        self.assertEqual((headline.relative_noise, headline.samples, headline.median_us), (0.004, 200, 12.5))
        row = gpuprof.experiment_row(experiment)
        self.assertEqual(row["workload"], "index")
        self.assertEqual(row["gpu_ids"], "0,1")
        self.assertEqual(row["gpu"], "NVIDIA H100 80GB HBM3")
        self.assertEqual(
            [row[c] for c in ("figure", "value", "unit", "noise", "samples")],
            ["bandwidth", 2854.5, "GB/s", 0.004, 200],
        )
        self.assertEqual(
            [row[c] for c in ("min_us", "median_us", "p90_us", "p99_us")],
            [12.5 * 0.9, 12.5, 12.5 * 1.1, 12.5 * 1.2],
        )
        self.assertEqual((row["gb_per_s"], row["tflops"], row["pct_of_copy"]), (2854.5, 0.1, 96.2))
        self.assertEqual((row["pct_of_peak_bandwidth"], row["pct_of_bound"]), (85.0, 96.2))

    def test_without_a_copy_measurement_the_spec_peak_bounds_bandwidth(self) -> None:
        experiment = gpu_experiment(
            workloads_pb2.WORKLOAD_STORE, gpuprof.build_request("store", {}),
            experiment_pb2.GpuMeasurement(kernel_time=timing(1, 3.0, 0.0), bandwidth_gbps=100.0,
                                          pct_of_spec_peak_bandwidth=3.0),
        )
        headline = gpuprof.headline_of(experiment)
        self.assertEqual((headline.pct_of_bound, headline.bound_reference), (3.0, "peak"))
        # One sample has no spread: unknown, not 0.
        self.assertIsNone(headline.relative_noise)
        self.assertIsNone(gpuprof.experiment_row(experiment)["pct_of_copy"])

    def test_attention_prefill_is_compute_and_decode_bandwidth(self) -> None:
        measurement = experiment_pb2.GpuMeasurement(
            kernel_time=timing(50, 80.0, 0.01), bandwidth_gbps=1200.0,
            pct_of_measured_copy_bandwidth=40.0, tflops=410.0, pct_of_spec_peak_flops=41.4)
        prefill = gpu_experiment(workloads_pb2.WORKLOAD_ATTENTION,
                                 gpuprof.build_request("attention", dict(phase="prefill")), measurement)
        headline = gpuprof.headline_of(prefill)
        self.assertEqual((headline.name, headline.unit, headline.value), ("tflops", "TFLOP/s", 410.0))
        self.assertEqual((headline.pct_of_bound, headline.bound_reference, headline.phase),
                         (41.4, "peak", "prefill"))
        decode = gpu_experiment(workloads_pb2.WORKLOAD_ATTENTION,
                                gpuprof.build_request("attention", dict(phase="decode")), measurement)
        headline = gpuprof.headline_of(decode)
        self.assertEqual((headline.name, headline.value, headline.pct_of_bound, headline.phase),
                         ("bandwidth", 1200.0, 40.0, "decode"))

    def test_collective_is_busbw_at_the_largest_size(self) -> None:
        experiment = experiment_pb2.Experiment(
            workload=workloads_pb2.WORKLOAD_COLLECTIVE,
            result=experiment_pb2.ExperimentResult(collective=experiment_pb2.CollectiveResult(
                busbw_gbps=370.0,
                points=[experiment_pb2.CollectivePoint(bytes=1024, time=timing(40, 9.0, 0.05)),
                        experiment_pb2.CollectivePoint(bytes=1 << 30, time=timing(30, 5000.0, 0.002))],
            )),
        )
        headline = gpuprof.headline_of(experiment)
        self.assertEqual((headline.name, headline.unit, headline.value), ("busbw", "GB/s", 370.0))
        self.assertEqual((headline.relative_noise, headline.samples, headline.median_us), (0.002, 30, 5000.0))

    def test_radix_noise_is_unknown_unless_measured(self) -> None:
        result = experiment_pb2.ExperimentResult()
        result.radix.operations.add(operation="insert", ops_per_second=5.0, passes=5)
        match = result.radix.operations.add(operation="match_prefix", ops_per_second=1.5e6, passes=1)
        match.latency.median_us = 0.7
        experiment = experiment_pb2.Experiment(workload=workloads_pb2.WORKLOAD_RADIX, result=result)
        headline = gpuprof.headline_of(experiment)
        self.assertEqual((headline.name, headline.unit, headline.value), ("match_ops", "op/s", 1.5e6))
        self.assertIsNone(headline.relative_noise)
        self.assertEqual((headline.samples, headline.median_us, headline.bound), (1, 0.7, "CPU work"))
        # Set, even to 0, it is measured (the constructor copied `result`: set it in place).
        experiment.result.radix.operations[1].ops_per_second_relative_noise = 0.0
        self.assertEqual(gpuprof.headline_of(experiment).relative_noise, 0.0)
        radix = experiment.result.radix
        if "other_cpus" in radix.DESCRIPTOR.fields_by_name:
            # Other processes took the CPU while it ran: the passes' spread says nothing.
            radix.online_cpus, radix.other_cpus = 2, 1.4
            headline = gpuprof.headline_of(experiment)
            self.assertIsNone(headline.relative_noise)
            self.assertEqual(headline.noise_unknown_because,
                             "other processes took 1.4 of 2 CPUs while it ran")
            radix.other_cpus = 0.4
            self.assertEqual(gpuprof.headline_of(experiment).relative_noise, 0.0)

    def test_no_result_no_headline(self) -> None:
        experiment = experiment_pb2.Experiment(workload=workloads_pb2.WORKLOAD_INDEX,
                                               state=experiment_pb2.FAILED)
        self.assertIsNone(gpuprof.headline_of(experiment))
        row = gpuprof.experiment_row(experiment)
        self.assertEqual((row["state"], row["figure"], row["value"]), ("failed", None, None))

    def test_sweep_rows_to_dataframe(self) -> None:
        point = sweep_pb2.SweepPoint(index=0, parameters={"num_tokens": "4096", "dtype": "bf16"},
                                     experiment_id="exp-000002", state=experiment_pb2.RUNNING)
        other = sweep_pb2.SweepPoint(index=1, parameters={"num_tokens": "4Ki", "dtype": "fp32"},
                                     experiment_id="exp-000003", state=experiment_pb2.TIMED_OUT)
        sweep = gpuprof.Sweep(sweep_pb2.Sweep(
            id="swp-000001", points=[point, other],
            request=sweep_pb2.SweepRequest(axes=[sweep_pb2.SweepAxis(field="num_tokens"),
                                                 sweep_pb2.SweepAxis(field="dtype")])))
        frame = sweep.to_dataframe()
        self.assertEqual(list(frame.columns[:5]), ["point", "num_tokens", "dtype", "state", "experiment"])
        self.assertEqual(list(frame["state"]), ["running", "timed-out"])
        self.assertEqual(list(frame["num_tokens"]), [4096, "4Ki"])
        # Nothing measured: NaN in a float column, not None in an object column.
        self.assertEqual(str(frame["value"].dtype), "float64")


def index_point(tokens: int, gbps: float, noise: float, samples: int = 100) -> experiment_pb2.Experiment:
    return gpu_experiment(
        workloads_pb2.WORKLOAD_INDEX, gpuprof.build_request("index", dict(tokens=tokens, dtype="bf16")),
        experiment_pb2.GpuMeasurement(kernel_time=timing(samples, 10.0, noise), bandwidth_gbps=gbps),
    )


class CompareTest(unittest.TestCase):
    def test_noise_bound_as_the_cli_takes_it(self) -> None:
        # sweep/compare.h: 2.4 for the 5 timed passes of a CPU figure, 1.05 for 500 samples.
        self.assertAlmostEqual(_compare.noise_upper_bound_factor(5), 2.41, places=2)
        self.assertAlmostEqual(_compare.noise_upper_bound_factor(500), 1.055, places=3)
        self.assertEqual(_compare.noise_upper_bound_factor(1), 10.0)

    def test_verdicts_against_the_noise_both_measured(self) -> None:
        a = _compare.CompareSide("swp-000001", ["num_tokens", "dtype"], [
            index_point(1024, 1000.0, 0.01), index_point(2048, 1000.0, 0.01),
            index_point(4096, 1000.0, 0.01), index_point(8192, 1000.0, 0.01, samples=1),
            index_point(16384, 1000.0, 0.01)])
        b = _compare.CompareSide("swp-000002", ["num_tokens"], [
            index_point(1024, 1030.0, 0.01),   # +3%: inside what chance allows (3.2%)
            index_point(2048, 900.0, 0.01),    # -10%: a regression
            index_point(4096, 1100.0, 0.01),   # +10%: an improvement
            index_point(8192, 500.0, 0.01),    # A's one sample: noise unknown, never a regression
            index_point(32768, 1000.0, 0.01)])
        result = _compare.compare(a, b)
        self.assertEqual([p.parameters["num_tokens"] for p in result.points], ["1024", "2048", "4096", "8192"])
        self.assertEqual([p.parameters["dtype"] for p in result.points], ["bf16"] * 4)
        self.assertEqual([p.verdict for p in result.points], ["same", "regression", "improvement", "noise unknown"])
        # 2 standard deviations of the ratio, each noise at its 95% bound for 100 samples.
        factor = _compare.noise_upper_bound_factor(100)
        self.assertAlmostEqual(factor, 1.1336, places=3)
        self.assertAlmostEqual(result.points[0].noise, 2 * 0.01 * factor * 2 ** 0.5)
        self.assertIsNone(result.points[3].noise)
        self.assertEqual((result.regressions, result.improvements), (1, 1))
        self.assertAlmostEqual(result.worst_regression_pct, 10.0)
        self.assertEqual(result.only_in_a, [{"num_tokens": "16384", "dtype": "bf16"}])
        self.assertEqual(result.only_in_b, [{"num_tokens": "32768", "dtype": "bf16"}])
        self.assertAlmostEqual(result.geomean_ratio, (1.03 * 0.9 * 1.1 * 0.5) ** 0.25)
        frame = result.to_dataframe()
        self.assertEqual(list(frame["verdict"]), [p.verdict for p in result.points])
        self.assertAlmostEqual(frame["change_pct"][1], -10.0)


class ConnectionTest(unittest.TestCase):
    def setUp(self) -> None:
        self.directory = tempfile.mkdtemp()
        self.config = os.path.join(self.directory, "config.textproto")
        patcher = mock.patch.dict(os.environ, {"GPUPROF_CONFIG": self.config}, clear=False)
        patcher.start()
        self.addCleanup(patcher.stop)
        for name in ("GPUPROF_TARGET", "GPUPROF_TOKEN"):
            os.environ.pop(name, None)

    def write(self, name: str, text: str) -> str:
        path = os.path.join(self.directory, name)
        with open(path, "w") as file:
            file.write(text)
        return path

    def test_precedence_argument_environment_config_default(self) -> None:
        self.assertEqual(_connection.resolve().target, "127.0.0.1:7070")
        self.write("config.textproto", 'target: "unix:/from/config"\n')
        self.assertEqual(_connection.resolve().target, "unix:/from/config")
        os.environ["GPUPROF_TARGET"] = "unix:/from/env"
        self.assertEqual(_connection.resolve().target, "unix:/from/env")
        self.assertEqual(_connection.resolve("unix:/from/argument").target, "unix:/from/argument")

    def test_token_only_over_tls(self) -> None:
        with self.assertRaisesRegex(ValueError, "a bearer token is sent only over TLS"):
            _connection.resolve("host:7070", token="secret")
        token_file = self.write("token", "secret\n")
        ca = self.write("ca.pem", "not used before connecting")
        options = _connection.resolve("host:7070", tls_ca=ca, token_file=token_file)
        self.assertEqual(options.token, "secret")
        self.assertNotIn("secret", repr(options))
        self.write("config.textproto", f'tls_ca: "{ca}"\ntoken_file: "{token_file}"\n')
        self.assertEqual(_connection.resolve("host:7070").token, "secret")
        os.environ["GPUPROF_TOKEN"] = "from-env"
        self.assertEqual(_connection.resolve("host:7070").token, "from-env")

    def test_bad_settings_are_named(self) -> None:
        with self.assertRaisesRegex(ValueError, "tls_cert and tls_key go together"):
            _connection.resolve("host:7070", tls_ca="ca", tls_cert="cert")
        with self.assertRaisesRegex(ValueError, r"token_file: .*/empty is empty"):
            _connection.resolve("host:7070", tls_ca="ca", token_file=self.write("empty", " \n"))
        with self.assertRaisesRegex(ValueError, r"user \"caf\u00e9\": '\u00e9' at offset 3"):
            _connection.resolve("host:7070", user="caf\u00e9")
        self.write("config.textproto", "targett: 1\n")
        with self.assertRaisesRegex(ValueError, r"config file .*config.textproto: .*targett"):
            _connection.resolve()


if __name__ == "__main__":
    unittest.main(verbosity=2)
