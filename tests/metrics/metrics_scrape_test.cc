// promtool's linter on a live scrape of the real gpuprofd, after it has run experiments (a
// finished one, a crashed worker, a timed-out one) so that every kind of series is present.
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "tests/metrics/daemon_runs.h"
#include "tests/metrics/http_client.h"
#include "tests/metrics/prometheus_server.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsScrapeTest, LiveScrapePassesPromtoolCheckMetrics) {
  const std::string state_dir = MakeTempDir("gpuprofd");
  DaemonProcess daemon(state_dir, {"--metrics_listen=127.0.0.1:0", "--enable_test_faults"});
  const absl::Status started = daemon.Start();
  ASSERT_TRUE(started.ok()) << started;
  const absl::StatusOr<int> port = MetricsPortFromLog(daemon.Log());
  ASSERT_TRUE(port.ok()) << port.status() << "\n" << daemon.Log();

  auto stub = daemon.NewStub();
  EXPECT_EQ(*RunRadixExperiment(*stub), v1::FINISHED);
  EXPECT_EQ(*RunRadixExperiment(*stub, {{"gpuprof.fault", "crash"}}), v1::FAILED);
  EXPECT_EQ(*RunRadixExperiment(*stub, {{"gpuprof.fault", "hang"}}, absl::Seconds(1)),
            v1::TIMED_OUT);
  grpc::ClientContext context;
  v1::GetExperimentRequest missing;
  missing.set_experiment_id("exp-999999");
  v1::Experiment ignored;
  EXPECT_EQ(stub->GetExperiment(&context, missing, &ignored).error_code(),
            grpc::StatusCode::NOT_FOUND);

  const absl::StatusOr<HttpResponse> scrape = HttpGet(*port, "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  ASSERT_EQ(scrape->status_code, 200);
  const std::string& text = scrape->body;
  EXPECT_THAT(text, HasSubstr("\ngpuprof_up 1\n"));
  EXPECT_THAT(text, HasSubstr(R"(gpuprof_experiments_total{state="finished",workload="radix"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(gpuprof_experiments_total{state="failed",workload="radix"} 1)"));
  EXPECT_THAT(text,
              HasSubstr(R"(gpuprof_experiments_total{state="timed_out",workload="radix"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(gpuprof_worker_failures_total{reason="crash"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(gpuprof_worker_failures_total{reason="timeout"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(code="NOT_FOUND",method="GetExperiment"} 1)"));
  EXPECT_THAT(text, HasSubstr(R"(gpuprof_experiment_run_seconds_count{workload="radix"} 3)"));
  EXPECT_THAT(text, HasSubstr("gpuprof_result_radix_hit_ratio "));
  EXPECT_THAT(text,
              HasSubstr(R"(gpuprof_result_radix_operations_per_second{operation="match_prefix"})"));
  // The user and the experiment ids label only the run series, which go a window after the
  // run ended (--metrics_recent_window); every other series has bounded labels.
  int run_series = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "#") || !absl::StrContains(line, "metrics-test")) continue;
    ++run_series;
    EXPECT_TRUE(absl::StartsWith(line, "gpuprof_experiment_start_timestamp_seconds{") ||
                absl::StartsWith(line, "gpuprof_experiment_end_timestamp_seconds{") ||
                absl::StartsWith(line, "gpuprof_experiment_headline{"))
        << line;
  }
  // Three starts, three ends, one headline (the finished run).
  EXPECT_EQ(run_series, 7);

  const std::string scrape_file = state_dir + "/scrape.txt";
  std::ofstream(scrape_file) << text;
  const std::string promtool = PrometheusToolPath("promtool", "PROMTOOL_BINARY");
  const CommandResult lint =
      RunCommand({"/bin/sh", "-c", absl::StrCat(promtool, " check metrics < ", scrape_file)});
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  // promtool prints nothing for a clean exposition; any line is a lint finding.
  EXPECT_EQ(lint.out + lint.err, "");
}

TEST(MetricsScrapeTest, ReportsWhyThereIsNoGpuTelemetry) {
  DaemonProcess daemon(MakeTempDir("gpuprofd"), {"--metrics_listen=127.0.0.1:0"});
  ASSERT_TRUE(daemon.Start().ok());
  const absl::StatusOr<int> port = MetricsPortFromLog(daemon.Log());
  ASSERT_TRUE(port.ok()) << port.status();
  const absl::StatusOr<HttpResponse> scrape = HttpGet(*port, "/metrics");
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  if (scrape->body.find("\ngpuprof_nvml_available 1\n") != std::string::npos) {
    GTEST_SKIP() << "NVML telemetry is available on this machine";
  }
  // Without GPUs or NVML: no telemetry series, and the log and an info metric say so.
  EXPECT_THAT(scrape->body, HasSubstr("\ngpuprof_nvml_available 0\n"));
  EXPECT_THAT(scrape->body, Not(HasSubstr("gpuprof_gpu_temperature_celsius")));
  EXPECT_THAT(daemon.Log(), HasSubstr("GPU telemetry"));
}

TEST(MetricsScrapeTest, EmptyListenAddressDisablesMetrics) {
  DaemonProcess daemon(MakeTempDir("gpuprofd"), {"--metrics_listen="});
  ASSERT_TRUE(daemon.Start().ok());
  EXPECT_FALSE(MetricsPortFromLog(daemon.Log()).ok()) << daemon.Log();
}

TEST(MetricsScrapeTest, DaemonRefusesToStartWhenTheMetricsPortIsTaken) {
  DaemonProcess first(MakeTempDir("gpuprofd"), {"--metrics_listen=127.0.0.1:0"});
  ASSERT_TRUE(first.Start().ok());
  const absl::StatusOr<int> port = MetricsPortFromLog(first.Log());
  ASSERT_TRUE(port.ok()) << port.status();
  DaemonProcess second(MakeTempDir("gpuprofd"),
                       {absl::StrCat("--metrics_listen=127.0.0.1:", *port)});
  const absl::Status started = second.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_THAT(started.message(), HasSubstr("cannot serve metrics"));
}

}  // namespace
}  // namespace gpuprof::testing
