#include "daemon/metrics/prometheus_daemon_metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "daemon/admission/access_policy.h"
#include "daemon/metrics/metric_names.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Series (name plus labels, as written) -> value, from the text exposition format.
std::map<std::string, double> ParseSamples(const std::string& exposition) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(exposition, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    samples[std::string(line.substr(0, space))] =
        std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
  }
  return samples;
}

// The value of `series`, failing the test (and dumping what there was) when it is missing.
double ValueOf(const std::map<std::string, double>& samples, const std::string& series) {
  const auto it = samples.find(series);
  if (it != samples.end()) return it->second;
  std::string present;
  for (const auto& [name, value] : samples) absl::StrAppend(&present, "\n  ", name);
  ADD_FAILURE() << "no series " << series << "; present:" << present;
  return -1;
}

std::string HostName() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  return name;
}

google::protobuf::Timestamp At(double seconds) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(static_cast<int64_t>(seconds));
  timestamp.set_nanos(static_cast<int32_t>((seconds - timestamp.seconds()) * 1e9));
  return timestamp;
}

v1::Experiment EndedExperiment(v1::Workload workload, v1::ExperimentState state) {
  v1::Experiment experiment;
  experiment.set_id("01J9SECRETEXPERIMENTID");
  experiment.set_user("alice");
  experiment.set_workload(workload);
  experiment.set_state(state);
  *experiment.mutable_created() = At(100);
  *experiment.mutable_started() = At(102.5);
  *experiment.mutable_finished() = At(103);
  return experiment;
}

TEST(PrometheusDaemonMetricsTest, StartsWithEveryBoundedSeriesAtZero) {
  PrometheusDaemonMetrics metrics("1.2.3");
  const auto samples = ParseSamples(metrics.ExpositionText());
  EXPECT_EQ(ValueOf(samples, "gpuprof_up"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_build_info{version="1.2.3"})"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiments_total{state="failed",workload="attention"})"),
            0);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiments_total{state="interrupted",workload="radix"})"),
            0);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_worker_failures_total{reason="crash"})"), 0);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_worker_failures_total{reason="timeout"})"), 0);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiment_run_seconds_count{workload="collective"})"), 0);
  EXPECT_EQ(ValueOf(samples, "gpuprof_queued_experiments"), 0);
  EXPECT_EQ(ValueOf(samples, "gpuprof_nvml_available"), 0);
  metrics.SetUp(false);
  EXPECT_EQ(ValueOf(ParseSamples(metrics.ExpositionText()), "gpuprof_up"), 0);
}

TEST(PrometheusDaemonMetricsTest, NamesFollowPrometheusRules) {
  PrometheusDaemonMetrics metrics("1.2.3");
  // Families without series are not written: give every family one.
  v1::ListGpusResponse inventory;
  inventory.add_gpus()->set_index(0);
  metrics.SetGpuInventory(inventory);
  metrics.RpcFinished("Submit", grpc::StatusCode::OK);
  GpuTelemetry telemetry;
  telemetry.utilization_ratio = telemetry.memory_controller_utilization_ratio = 0.5;
  telemetry.memory_used_bytes = telemetry.memory_total_bytes = 1e9;
  telemetry.sm_clock_hertz = 1.98e9;
  telemetry.temperature_celsius = telemetry.power_watts = 60;
  telemetry.clocks_event_reasons = 0;
  metrics.SetGpuTelemetry(telemetry);
  v1::Experiment attention = EndedExperiment(v1::WORKLOAD_ATTENTION, v1::FINISHED);
  attention.mutable_request()->mutable_attention();
  attention.add_gpu_ids(0);
  attention.mutable_result()->mutable_measurement()->set_tflops(1);
  attention.mutable_result()->mutable_measurement()->set_bandwidth_gbps(1);
  attention.mutable_result()->mutable_measurement()->set_pct_of_measured_copy_bandwidth(1);
  metrics.ExperimentEnded(attention);
  v1::Experiment collective = EndedExperiment(v1::WORKLOAD_COLLECTIVE, v1::FINISHED);
  collective.mutable_request()->mutable_collective();
  collective.mutable_result()->mutable_collective()->set_busbw_gbps(1);
  metrics.ExperimentEnded(collective);
  v1::Experiment radix = EndedExperiment(v1::WORKLOAD_RADIX, v1::FINISHED);
  radix.mutable_result()->mutable_radix()->add_operations()->set_operation("insert");
  metrics.ExperimentEnded(radix);
  metrics.ExperimentStarted(attention);
  metrics.SetGpuLeases({{0, attention.id()}});
  v1::Sweep sweep;
  sweep.set_id("swp-000001");
  metrics.SweepStarted(sweep);
  metrics.SweepEnded(sweep);
  metrics.Refused("quota:max_priority");
  metrics.Preempted();
  v1::QuotaReport policy_user;
  policy_user.set_user("policy-user");
  policy_user.set_gpu_hours_last_day(1.5);
  metrics.SetUserQuotaUse({policy_user});
  v1::ListGpusResponse health = inventory;
  health.mutable_gpus(0)->set_health(v1::GPU_HEALTH_HEALTHY);
  health.mutable_gpus(0)->mutable_memory_errors()->set_ecc_corrected(0);
  metrics.SetGpuHealth(health);

  std::set<std::string> families;
  for (absl::string_view line : absl::StrSplit(metrics.ExpositionText(), '\n')) {
    if (!absl::StartsWith(line, "# TYPE ")) continue;
    const std::vector<std::string> fields = absl::StrSplit(line, ' ');
    ASSERT_EQ(fields.size(), 4u) << line;
    const std::string& name = fields[2];
    const std::string& type = fields[3];
    families.insert(name);
    EXPECT_TRUE(absl::StartsWith(name, "gpuprof_")) << name;
    EXPECT_EQ(type == "counter", absl::EndsWith(name, "_total")) << name << " is a " << type;
  }
  // Exactly the documented names, so that dashboards can be checked against the list.
  const std::set<std::string> documented(std::begin(metric_names::kAll),
                                         std::end(metric_names::kAll));
  for (const std::string& name : documented) {
    EXPECT_TRUE(families.contains(name)) << name << " is not exported";
  }
  for (const std::string& name : families) {
    EXPECT_TRUE(documented.contains(name)) << name << " is not in metric_names::kAll";
  }
}

TEST(PrometheusDaemonMetricsTest, QuotaUseSeriesFollowThePolicyUsers) {
  PrometheusDaemonMetrics metrics("1.2.3");
  v1::QuotaReport bob;
  bob.set_user("bob");
  bob.set_running_gpus(2);
  bob.set_gpu_hours_last_day(0.5);
  v1::QuotaReport other;
  other.set_user(kOtherUsers);
  other.set_queued_experiments(3);
  metrics.SetUserQuotaUse({bob, other});
  std::string text = metrics.ExpositionText();
  EXPECT_THAT(text, HasSubstr("gpuprof_user_gpus_in_use{user=\"bob\"} 2"));
  EXPECT_THAT(text, HasSubstr("gpuprof_user_gpu_hours_last_day{user=\"bob\"} 0.5"));
  EXPECT_THAT(text, HasSubstr("gpuprof_user_queued_experiments{user=\"(other)\"} 3"));
  EXPECT_THAT(text, Not(HasSubstr("gpuprof_user_gpu_hours_last_day{user=\"(other)\"}")));
  // bob left the policy: his series go.
  metrics.SetUserQuotaUse({other});
  text = metrics.ExpositionText();
  EXPECT_THAT(text, Not(HasSubstr("user=\"bob\"")));
}

// A policy user literally named "other" is a user like any other: own series, GPU-hours
// included, apart from the catch-all's.
TEST(PrometheusDaemonMetricsTest, AUserNamedOtherIsNotTheCatchAll) {
  PrometheusDaemonMetrics metrics("1.2.3");
  v1::QuotaReport named_other;
  named_other.set_user("other");
  named_other.set_queued_experiments(1);
  named_other.set_gpu_hours_last_day(0.25);
  v1::QuotaReport everyone_else;
  everyone_else.set_user(kOtherUsers);
  everyone_else.set_queued_experiments(7);
  metrics.SetUserQuotaUse({named_other, everyone_else});
  const std::string text = metrics.ExpositionText();
  EXPECT_THAT(text, HasSubstr("gpuprof_user_queued_experiments{user=\"other\"} 1"));
  EXPECT_THAT(text, HasSubstr("gpuprof_user_gpu_hours_last_day{user=\"other\"} 0.25"));
  EXPECT_THAT(text, HasSubstr("gpuprof_user_queued_experiments{user=\"(other)\"} 7"));
  EXPECT_THAT(text, Not(HasSubstr("gpuprof_user_gpu_hours_last_day{user=\"(other)\"}")));
}

TEST(PrometheusDaemonMetricsTest, CountsEndedExperimentsAndTimesThem) {
  // Without run series (window 0), as the counters and histograms alone would be.
  PrometheusDaemonMetrics metrics("1.2.3", RecentSeriesLimits{.window = absl::ZeroDuration()});
  v1::Experiment radix = EndedExperiment(v1::WORKLOAD_RADIX, v1::FINISHED);
  v1::RadixResult& result = *radix.mutable_result()->mutable_radix();
  result.set_hit_rate(0.75);
  v1::OperationStats& match = *result.add_operations();
  match.set_operation("match_prefix");
  match.set_ops_per_second(1e6);
  metrics.ExperimentEnded(radix);
  metrics.ExperimentEnded(EndedExperiment(v1::WORKLOAD_RADIX, v1::FAILED));
  // Cancelled while queued: counted, but it has neither a queue time nor a run time.
  v1::Experiment cancelled = EndedExperiment(v1::WORKLOAD_INDEX, v1::CANCELLED);
  cancelled.clear_started();
  metrics.ExperimentEnded(cancelled);

  const std::string text = metrics.ExpositionText();
  const auto samples = ParseSamples(text);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiments_total{state="finished",workload="radix"})"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiments_total{state="failed",workload="radix"})"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiments_total{state="cancelled",workload="index"})"),
            1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiment_queue_seconds_count{workload="radix"})"), 2);
  EXPECT_DOUBLE_EQ(ValueOf(samples, R"(gpuprof_experiment_queue_seconds_sum{workload="radix"})"),
                   5);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiment_queue_seconds_bucket{workload="radix",le="1"})"),
            0);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiment_queue_seconds_bucket{workload="radix",le="5"})"),
            2);
  EXPECT_DOUBLE_EQ(ValueOf(samples, R"(gpuprof_experiment_run_seconds_sum{workload="radix"})"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_experiment_queue_seconds_count{workload="index"})"), 0);
  EXPECT_EQ(ValueOf(samples, "gpuprof_result_radix_hit_ratio"), 0.75);
  EXPECT_EQ(
      ValueOf(samples, R"(gpuprof_result_radix_operations_per_second{operation="match_prefix"})"),
      1e6);
  // Without run series, neither the experiment's id nor its user is a label.
  EXPECT_THAT(text, Not(HasSubstr("SECRET")));
  EXPECT_THAT(text, Not(HasSubstr("alice")));
}

TEST(PrometheusDaemonMetricsTest, RecordsGpuResultsInBaseUnitsByBoundedLabels) {
  PrometheusDaemonMetrics metrics("1.2.3");
  v1::Experiment index = EndedExperiment(v1::WORKLOAD_INDEX, v1::FINISHED);
  index.mutable_request()->mutable_index();
  index.add_gpu_ids(3);
  index.mutable_result()->mutable_measurement()->set_bandwidth_gbps(1500);
  index.mutable_result()->mutable_measurement()->set_pct_of_measured_copy_bandwidth(75);
  metrics.ExperimentEnded(index);

  v1::Experiment attention = EndedExperiment(v1::WORKLOAD_ATTENTION, v1::FINISHED);
  attention.mutable_request()->mutable_attention()->set_phase(v1::ATTENTION_PHASE_PREFILL);
  attention.add_gpu_ids(1);
  attention.mutable_result()->mutable_measurement()->set_tflops(250);
  metrics.ExperimentEnded(attention);

  v1::Experiment all_reduce = EndedExperiment(v1::WORKLOAD_COLLECTIVE, v1::FINISHED);
  all_reduce.mutable_request()->mutable_collective()->set_op(v1::COLLECTIVE_OP_ALL_REDUCE);
  for (int gpu : {0, 1, 2, 3}) all_reduce.add_gpu_ids(gpu);
  all_reduce.mutable_result()->mutable_collective()->set_ranks(4);
  all_reduce.mutable_result()->mutable_collective()->set_busbw_gbps(300);
  metrics.ExperimentEnded(all_reduce);

  // A failed run's numbers are not results.
  v1::Experiment failed = EndedExperiment(v1::WORKLOAD_STORE, v1::FAILED);
  failed.add_gpu_ids(0);
  failed.mutable_result()->mutable_measurement()->set_bandwidth_gbps(1);
  metrics.ExperimentEnded(failed);

  const std::string text = metrics.ExpositionText();
  const auto samples = ParseSamples(text);
  EXPECT_EQ(
      ValueOf(samples, R"(gpuprof_result_bandwidth_bytes_per_second{gpu="3",workload="index"})"),
      1.5e12);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_result_copy_bandwidth_ratio{gpu="3",workload="index"})"),
            0.75);
  EXPECT_EQ(
      ValueOf(samples, R"(gpuprof_result_attention_flops_per_second{gpu="1",phase="prefill"})"),
      2.5e14);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_result_collective_bus_bandwidth_bytes_per_second{)"
                             R"(collective="all_reduce",tp_degree="4"})"),
            3e11);
  EXPECT_THAT(text, Not(HasSubstr(R"(workload="store",gpu)")));
  EXPECT_THAT(text, Not(HasSubstr(R"(gpu="0",workload="store")")));
}

// Prefill and decode are two figures (6% and 95% of copy on an H100): each phase its own series,
// never one that alternates between them. Other workloads carry no phase.
TEST(PrometheusDaemonMetricsTest, AttentionResultsCarryTheirPhase) {
  PrometheusDaemonMetrics metrics("1.2.3");
  for (const auto& [phase, pct] : {std::pair{v1::ATTENTION_PHASE_DECODE, 94.8},
                                   std::pair{v1::ATTENTION_PHASE_PREFILL, 6.2}}) {
    v1::Experiment attention = EndedExperiment(v1::WORKLOAD_ATTENTION, v1::FINISHED);
    attention.mutable_request()->mutable_attention()->set_phase(phase);
    attention.add_gpu_ids(0);
    v1::GpuMeasurement& measurement = *attention.mutable_result()->mutable_measurement();
    measurement.set_bandwidth_gbps(pct * 30);
    measurement.set_pct_of_measured_copy_bandwidth(pct);
    measurement.set_tflops(pct * 10);
    metrics.ExperimentEnded(attention);
  }
  v1::Experiment index = EndedExperiment(v1::WORKLOAD_INDEX, v1::FINISHED);
  index.mutable_request()->mutable_index();
  index.add_gpu_ids(0);
  index.mutable_result()->mutable_measurement()->set_bandwidth_gbps(1500);
  index.mutable_result()->mutable_measurement()->set_pct_of_measured_copy_bandwidth(75);
  metrics.ExperimentEnded(index);

  const std::string text = metrics.ExpositionText();
  const auto samples = ParseSamples(text);
  EXPECT_DOUBLE_EQ(ValueOf(samples, R"(gpuprof_result_copy_bandwidth_ratio{)"
                                    R"(gpu="0",phase="decode",workload="attention"})"),
                   0.948);
  EXPECT_DOUBLE_EQ(ValueOf(samples, R"(gpuprof_result_copy_bandwidth_ratio{)"
                                    R"(gpu="0",phase="prefill",workload="attention"})"),
                   0.062);
  EXPECT_DOUBLE_EQ(ValueOf(samples, R"(gpuprof_result_bandwidth_bytes_per_second{)"
                                    R"(gpu="0",phase="decode",workload="attention"})"),
                   94.8 * 30 * 1e9);
  EXPECT_DOUBLE_EQ(
      ValueOf(samples, R"(gpuprof_result_attention_flops_per_second{gpu="0",phase="decode"})"),
      948e12);
  EXPECT_DOUBLE_EQ(
      ValueOf(samples, R"(gpuprof_result_attention_flops_per_second{gpu="0",phase="prefill"})"),
      62e12);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_result_copy_bandwidth_ratio{gpu="0",workload="index"})"),
            0.75);
  // No attention series without its phase.
  EXPECT_THAT(text, Not(HasSubstr(R"(gpu="0",workload="attention")")));
}

// A custom kernel's figures are a series of their own: ours keep theirs, without the label.
TEST(PrometheusDaemonMetricsTest, ACustomKernelsResultsAreTheirOwnSeries) {
  PrometheusDaemonMetrics metrics("1.2.3");
  for (const bool custom : {false, true}) {
    v1::Experiment index = EndedExperiment(v1::WORKLOAD_INDEX, v1::FINISHED);
    index.mutable_request()->mutable_index();
    if (custom) index.mutable_request()->mutable_custom_kernel()->set_kernel_name("my_gather");
    index.add_gpu_ids(0);
    index.mutable_result()->mutable_measurement()->set_bandwidth_gbps(custom ? 1600 : 1500);
    metrics.ExperimentEnded(index);
    v1::Experiment decode = EndedExperiment(v1::WORKLOAD_ATTENTION, v1::FINISHED);
    decode.mutable_request()->mutable_attention()->set_phase(v1::ATTENTION_PHASE_DECODE);
    if (custom) decode.mutable_request()->mutable_custom_kernel()->set_kernel_name("my_decode");
    decode.add_gpu_ids(0);
    decode.mutable_result()->mutable_measurement()->set_tflops(custom ? 20 : 10);
    metrics.ExperimentEnded(decode);
  }
  const auto samples = ParseSamples(metrics.ExpositionText());
  EXPECT_EQ(
      ValueOf(samples, R"(gpuprof_result_bandwidth_bytes_per_second{gpu="0",workload="index"})"),
      1.5e12);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_result_bandwidth_bytes_per_second{)"
                             R"(gpu="0",kernel="custom",workload="index"})"),
            1.6e12);
  EXPECT_EQ(
      ValueOf(samples, R"(gpuprof_result_attention_flops_per_second{gpu="0",phase="decode"})"),
      1e13);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_result_attention_flops_per_second{)"
                             R"(gpu="0",kernel="custom",phase="decode"})"),
            2e13);
}

// A node that never ran a workload exports nothing for it: no radix hit ratio of 0, no
// bandwidth of 0.
TEST(PrometheusDaemonMetricsTest, NoResultSeriesForWorkloadsThatNeverRan) {
  PrometheusDaemonMetrics metrics("1.2.3");
  const auto result_series = [&metrics] {
    std::set<std::string> series;
    for (const auto& [name, value] : ParseSamples(metrics.ExpositionText())) {
      if (absl::StartsWith(name, "gpuprof_result_")) series.insert(name);
    }
    return series;
  };
  EXPECT_THAT(result_series(), ::testing::IsEmpty());
  // A failed radix run is no result either.
  metrics.ExperimentEnded(EndedExperiment(v1::WORKLOAD_RADIX, v1::FAILED));
  EXPECT_THAT(result_series(), ::testing::IsEmpty());

  v1::Experiment index = EndedExperiment(v1::WORKLOAD_INDEX, v1::FINISHED);
  index.mutable_request()->mutable_index();
  index.add_gpu_ids(0);
  index.mutable_result()->mutable_measurement()->set_bandwidth_gbps(1500);
  metrics.ExperimentEnded(index);
  EXPECT_THAT(result_series(),
              ::testing::Contains(
                  R"(gpuprof_result_bandwidth_bytes_per_second{gpu="0",workload="index"})"));
  // The index result's histogram series too, but nothing of radix.
  for (const std::string& series : result_series()) {
    EXPECT_THAT(series, Not(HasSubstr("radix"))) << series;
  }

  v1::Experiment radix = EndedExperiment(v1::WORKLOAD_RADIX, v1::FINISHED);
  radix.mutable_result()->mutable_radix()->set_hit_rate(0);
  metrics.ExperimentEnded(radix);
  // Now a hit ratio of 0 is a measured 0.
  EXPECT_EQ(ValueOf(ParseSamples(metrics.ExpositionText()), "gpuprof_result_radix_hit_ratio"), 0);
}

TEST(PrometheusDaemonMetricsTest, CountsWorkerFailuresAndRpcs) {
  PrometheusDaemonMetrics metrics("1.2.3");
  metrics.WorkerFailed(/*timed_out=*/false);
  metrics.WorkerFailed(/*timed_out=*/false);
  metrics.WorkerFailed(/*timed_out=*/true);
  metrics.RpcFinished("Submit", grpc::StatusCode::OK);
  metrics.RpcFinished("Submit", grpc::StatusCode::OK);
  metrics.RpcFinished("GetExperiment", grpc::StatusCode::NOT_FOUND);
  // A code beyond gRPC's named ones, within the enum's range (a value outside it, such as 1234,
  // is undefined behaviour: clang's UBSan stops on it).
  metrics.RpcFinished("Cancel", static_cast<grpc::StatusCode>(17));

  const auto samples = ParseSamples(metrics.ExpositionText());
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_worker_failures_total{reason="crash"})"), 2);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_worker_failures_total{reason="timeout"})"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_grpc_requests_total{code="OK",method="Submit"})"), 2);
  EXPECT_EQ(
      ValueOf(samples, R"(gpuprof_grpc_requests_total{code="NOT_FOUND",method="GetExperiment"})"),
      1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_grpc_requests_total{code="INVALID_CODE",method="Cancel"})"),
            1);
}

TEST(PrometheusDaemonMetricsTest, ExportsInventoryLeasesAndDecodedTelemetry) {
  PrometheusDaemonMetrics metrics("1.2.3");
  v1::ListGpusResponse inventory;
  for (int index : {0, 1}) {
    v1::GpuInfo& gpu = *inventory.add_gpus();
    gpu.set_index(index);
    gpu.set_name("NVIDIA H100 80GB HBM3");
    gpu.set_uuid(absl::StrCat("GPU-", index));
  }
  metrics.SetGpuInventory(inventory);
  metrics.SetGpuLeases({{1, "01J9SECRETEXPERIMENTID"}});
  metrics.SetQueuedExperiments(4);
  metrics.SetStoreSizeBytes(1 << 20);
  metrics.SetStoreSpace(3 << 20, /*read_only=*/true);
  metrics.SetTelemetryAvailable(true);
  GpuTelemetry telemetry;
  telemetry.gpu = 0;
  telemetry.utilization_ratio = 0.5;
  telemetry.temperature_celsius = 61;
  telemetry.power_watts = 350.5;
  telemetry.clocks_event_reasons = 0x4 | 0x40;  // software power cap, hardware thermal
  metrics.SetGpuTelemetry(telemetry);

  std::string text = metrics.ExpositionText();
  auto samples = ParseSamples(text);
  EXPECT_EQ(ValueOf(samples, "gpuprof_gpus"), 2);
  EXPECT_EQ(ValueOf(samples, absl::StrCat(R"(gpuprof_gpu_info{Hostname=")", HostName(),
                                         R"(",UUID="GPU-1",gpu="1",modelName="NVIDIA H100 80GB )"
                                         R"(HBM3",name="NVIDIA H100 80GB HBM3",uuid="GPU-1"})")),
            1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_leased{gpu="0"})"), 0);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_leased{gpu="1"})"), 1);
  EXPECT_EQ(ValueOf(samples, "gpuprof_queued_experiments"), 4);
  EXPECT_EQ(ValueOf(samples, "gpuprof_store_size_bytes"), 1 << 20);
  EXPECT_EQ(ValueOf(samples, "gpuprof_store_disk_free_bytes"), 3 << 20);
  EXPECT_EQ(ValueOf(samples, "gpuprof_store_read_only"), 1);
  EXPECT_EQ(ValueOf(samples, "gpuprof_nvml_available"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_utilization_ratio{gpu="0"})"), 0.5);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_temperature_celsius{gpu="0"})"), 61);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_power_watts{gpu="0"})"), 350.5);
  EXPECT_EQ(
      ValueOf(samples, R"(gpuprof_gpu_throttle_reason_active{gpu="0",reason="sw_power_cap"})"), 1);
  EXPECT_EQ(ValueOf(samples,
                    R"(gpuprof_gpu_throttle_reason_active{gpu="0",reason="hw_thermal_slowdown"})"),
            1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_throttle_reason_active{gpu="0",reason="gpu_idle"})"),
            0);
  EXPECT_EQ(samples.count(R"(gpuprof_gpu_memory_used_bytes{gpu="0"})"), 0u);

  // A reading that stops being available disappears instead of going stale.
  telemetry.temperature_celsius.reset();
  telemetry.clocks_event_reasons.reset();
  metrics.SetGpuTelemetry(telemetry);
  metrics.SetGpuLeases({});
  samples = ParseSamples(metrics.ExpositionText());
  EXPECT_EQ(samples.count(R"(gpuprof_gpu_temperature_celsius{gpu="0"})"), 0u);
  EXPECT_EQ(samples.count(R"(gpuprof_gpu_throttle_reason_active{gpu="0",reason="gpu_idle"})"), 0u);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_utilization_ratio{gpu="0"})"), 0.5);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_leased{gpu="1"})"), 0);
}

// GET /metrics over a plain socket, as Prometheus does.
std::string HttpGetMetrics(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return "";
  }
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

TEST(PrometheusDaemonMetricsTest, ServesTheScrapeOnLoopback) {
  PrometheusDaemonMetrics metrics("1.2.3");
  EXPECT_EQ(metrics.port(), 0);
  ASSERT_TRUE(metrics.Serve("127.0.0.1:0").ok());
  ASSERT_GT(metrics.port(), 0);
  const std::string response = HttpGetMetrics(metrics.port());
  EXPECT_THAT(response, HasSubstr(" 200 "));
  EXPECT_THAT(response, HasSubstr("\ngpuprof_up 1\n"));
  EXPECT_EQ(metrics.Serve("127.0.0.1:0").code(), absl::StatusCode::kFailedPrecondition);

  // A port in use is a clear error, not a crash.
  PrometheusDaemonMetrics second("1.2.3");
  const absl::Status taken = second.Serve(absl::StrCat("127.0.0.1:", metrics.port()));
  EXPECT_EQ(taken.code(), absl::StatusCode::kUnavailable) << taken;
}

TEST(PrometheusDaemonMetricsTest, GpuHealthXidsAndMemoryErrorsPerGpu) {
  PrometheusDaemonMetrics metrics("1.2.3");
  v1::ListGpusResponse gpus;
  v1::GpuInfo& healthy = *gpus.add_gpus();
  healthy.set_index(0);
  healthy.set_health(v1::GPU_HEALTH_HEALTHY);
  healthy.mutable_memory_errors()->set_ecc_uncorrected(2);
  healthy.mutable_memory_errors()->set_remapped_rows_correctable(-1);  // unreadable
  v1::GpuInfo& drained = *gpus.add_gpus();
  drained.set_index(1);
  drained.set_health(v1::GPU_HEALTH_UNHEALTHY);
  gpus.add_gpus()->set_index(2);  // not watched
  metrics.SetGpuHealth(gpus);
  metrics.GpuXid(1, v1::GPU_FAULT_CLASS_HARDWARE);
  metrics.GpuXid(1, v1::GPU_FAULT_CLASS_HARDWARE);

  const std::string text = metrics.ExpositionText();
  const auto samples = ParseSamples(text);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_healthy{gpu="0"})"), 1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_healthy{gpu="1"})"), 0);
  EXPECT_EQ(text.find(R"(gpuprof_gpu_healthy{gpu="2"})"), std::string::npos);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_xid_events_total{class="hardware",gpu="1"})"), 2);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_xid_events_total{class="application",gpu="0"})"), 0);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_memory_errors{gpu="0",kind="ecc_uncorrected"})"), 2);
  EXPECT_EQ(text.find(R"(kind="remapped_correctable")"), std::string::npos);
  // GPU 1 has no reading: no memory error series.
  EXPECT_EQ(text.find(R"(gpuprof_gpu_memory_errors{gpu="1")"), std::string::npos);
}

// The series of `samples` named `name` whose labels contain every one of `parts`.
std::vector<std::string> SeriesWith(const std::map<std::string, double>& samples,
                                    const std::string& name,
                                    const std::vector<std::string>& parts) {
  std::vector<std::string> found;
  for (const auto& [series, value] : samples) {
    if (!absl::StartsWith(series, absl::StrCat(name, "{"))) continue;
    bool all = true;
    for (const std::string& part : parts) all = all && absl::StrContains(series, part);
    if (all) found.push_back(series);
  }
  return found;
}

v1::Experiment RadixPoint(int point, double match_ops_per_second) {
  v1::Experiment experiment = EndedExperiment(v1::WORKLOAD_RADIX, v1::FINISHED);
  experiment.set_id(absl::StrCat("exp-", 100 + point));
  experiment.set_user("carol");
  experiment.set_sweep_id("swp-000002");
  experiment.set_sweep_point(point);
  experiment.mutable_request()->mutable_radix();
  v1::OperationStats& match = *experiment.mutable_result()->mutable_radix()->add_operations();
  match.set_operation("match_prefix");
  match.set_ops_per_second(match_ops_per_second);
  return experiment;
}

// Twenty points that end between two scrapes are twenty series, each with its id, sweep and
// point, and an end time for the annotation; every one also counts in the histogram.
TEST(PrometheusDaemonMetricsTest, EveryExperimentAndSweepPointHasItsOwnRunSeries) {
  PrometheusDaemonMetrics metrics("1.2.3");
  v1::Sweep sweep;
  sweep.set_id("swp-000002");
  sweep.set_user("carol");
  sweep.mutable_request()->mutable_base()->mutable_radix();
  sweep.set_points_total(20);
  *sweep.mutable_created() = At(90);
  metrics.SweepStarted(sweep);
  for (int point = 0; point < 20; ++point) {
    const v1::Experiment experiment = RadixPoint(point, 1e6 + point * 1000);
    metrics.ExperimentStarted(experiment);
    metrics.ExperimentEnded(experiment);
  }
  sweep.set_state(v1::SWEEP_FINISHED);
  sweep.set_points_finished(20);
  *sweep.mutable_finished() = At(110);
  metrics.SweepEnded(sweep);

  const auto samples = ParseSamples(metrics.ExpositionText());
  const std::vector<std::string> figures = SeriesWith(
      samples, "gpuprof_experiment_headline",
      {R"(sweep="swp-000002")", R"(figure="match_ops")", R"(unit="operations_per_second")",
       R"(user="carol")", R"(workload="radix")"});
  ASSERT_EQ(figures.size(), 20u);
  const std::vector<std::string> point_7 = SeriesWith(
      samples, "gpuprof_experiment_headline", {R"(point="7")", R"(experiment="exp-107")"});
  ASSERT_EQ(point_7.size(), 1u);
  EXPECT_EQ(ValueOf(samples, point_7[0]), 1.007e6);
  EXPECT_EQ((SeriesWith(samples, "gpuprof_experiment_end_timestamp_seconds",
                        {R"(sweep="swp-000002")", R"(state="finished")"})
                 .size()),
            20u);
  const std::vector<std::string> end = SeriesWith(
      samples, "gpuprof_experiment_end_timestamp_seconds",
      {R"(experiment="exp-119")", R"(headline="1.019M match op/s")", R"(point="19")"});
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(ValueOf(samples, end[0]), 103);
  const std::vector<std::string> start =
      SeriesWith(samples, "gpuprof_experiment_start_timestamp_seconds", {R"(experiment="exp-119")"});
  ASSERT_EQ(start.size(), 1u);
  EXPECT_EQ(ValueOf(samples, start[0]), 102.5);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_sweep_start_timestamp_seconds{points="20",)"
                             R"(sweep="swp-000002",user="carol",workload="radix"})"),
            90);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_sweep_end_timestamp_seconds{headline="20 of 20 points )"
                             R"m(finished; best 1.019M match op/s (point 19)",points="20",)m"
                             R"(state="finished",sweep="swp-000002",user="carol",)"
                             R"(workload="radix"})"),
            110);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_result_headline_count{figure="match_ops",)"
                             R"(unit="operations_per_second",workload="radix"})"),
            20);

  // A window later the run series are gone; the histogram keeps every result.
  metrics.ExpireRecentRuns(absl::Now() + absl::Minutes(15));
  const auto later = ParseSamples(metrics.ExpositionText());
  EXPECT_THAT(SeriesWith(later, "gpuprof_experiment_headline", {}), ::testing::IsEmpty());
  EXPECT_THAT(SeriesWith(later, "gpuprof_experiment_end_timestamp_seconds", {}),
              ::testing::IsEmpty());
  EXPECT_THAT(SeriesWith(later, "gpuprof_sweep_end_timestamp_seconds", {}), ::testing::IsEmpty());
  EXPECT_EQ(ValueOf(later, R"(gpuprof_result_headline_count{figure="match_ops",)"
                           R"(unit="operations_per_second",workload="radix"})"),
            20);
}

TEST(PrometheusDaemonMetricsTest, RunSeriesAreCappedInNumber) {
  PrometheusDaemonMetrics metrics("1.2.3", RecentSeriesLimits{.window = absl::Hours(1),
                                                              .max_runs = 5});
  for (int point = 0; point < 20; ++point) metrics.ExperimentEnded(RadixPoint(point, 1e6));
  const auto samples = ParseSamples(metrics.ExpositionText());
  EXPECT_EQ(SeriesWith(samples, "gpuprof_experiment_end_timestamp_seconds", {}).size(), 5u);
  // The last five to end are kept.
  EXPECT_EQ(SeriesWith(samples, "gpuprof_experiment_headline", {R"(point="15")"}).size(), 1u);
  EXPECT_EQ(SeriesWith(samples, "gpuprof_experiment_headline", {R"(point="14")"}).size(), 0u);
}

TEST(PrometheusDaemonMetricsTest, AFailedRunsAnnotationSaysWhy) {
  PrometheusDaemonMetrics metrics("1.2.3");
  v1::Experiment failed = EndedExperiment(v1::WORKLOAD_INDEX, v1::FAILED);
  failed.set_id("exp-000009");
  failed.set_reason("worker crashed (signal 11)\nstack follows");
  metrics.ExperimentEnded(failed);
  const auto samples = ParseSamples(metrics.ExpositionText());
  EXPECT_EQ((SeriesWith(samples, "gpuprof_experiment_end_timestamp_seconds",
                        {R"m(headline="worker crashed (signal 11)")m", R"(state="failed")"})
                 .size()),
            1u);
  EXPECT_THAT(SeriesWith(samples, "gpuprof_experiment_headline", {}), ::testing::IsEmpty());
}

// Who holds each GPU, with dcgm-exporter's labels so that its series join on UUID.
TEST(PrometheusDaemonMetricsTest, LeaseInfoNamesTheHolderWithDcgmLabels) {
  PrometheusDaemonMetrics metrics("1.2.3", {}, "gpu-node-7");
  v1::ListGpusResponse inventory;
  for (int index : {0, 1}) {
    v1::GpuInfo& gpu = *inventory.add_gpus();
    gpu.set_index(index);
    gpu.set_name("NVIDIA H100 80GB HBM3");
    gpu.set_uuid(absl::StrCat("GPU-", index));
  }
  metrics.SetGpuInventory(inventory);
  v1::Experiment index = EndedExperiment(v1::WORKLOAD_INDEX, v1::RUNNING);
  index.set_id("exp-000007");
  index.set_user("bob");
  index.add_gpu_ids(1);
  metrics.ExperimentStarted(index);

  auto samples = ParseSamples(metrics.ExpositionText());
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_lease_info{Hostname="gpu-node-7",UUID="GPU-1",)"
                             R"(experiment="exp-000007",gpu="1",modelName="NVIDIA H100 80GB )"
                             R"(HBM3",user="bob",workload="index"})"),
            1);
  EXPECT_EQ(ValueOf(samples, R"(gpuprof_gpu_info{Hostname="gpu-node-7",UUID="GPU-0",gpu="0",)"
                             R"(modelName="NVIDIA H100 80GB HBM3",name="NVIDIA H100 80GB HBM3",)"
                             R"(uuid="GPU-0"})"),
            1);
  // The sampler agrees; then the GPU is freed.
  metrics.SetGpuLeases({{1, "exp-000007"}});
  EXPECT_EQ(SeriesWith(ParseSamples(metrics.ExpositionText()), "gpuprof_gpu_lease_info", {}).size(),
            1u);
  index.set_state(v1::FINISHED);
  metrics.ExperimentEnded(index);
  samples = ParseSamples(metrics.ExpositionText());
  EXPECT_THAT(SeriesWith(samples, "gpuprof_gpu_lease_info", {}), ::testing::IsEmpty());
}

TEST(PrometheusDaemonMetricsTest, OldestQueuedExperimentAge) {
  PrometheusDaemonMetrics metrics("1.2.3");
  EXPECT_EQ(ValueOf(ParseSamples(metrics.ExpositionText()),
                    "gpuprof_oldest_queued_experiment_age_seconds"),
            0);
  metrics.SetOldestQueuedExperimentAge(absl::Seconds(90));
  EXPECT_EQ(ValueOf(ParseSamples(metrics.ExpositionText()),
                    "gpuprof_oldest_queued_experiment_age_seconds"),
            90);
}

}  // namespace
}  // namespace gpuprof::daemon
