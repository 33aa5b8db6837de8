// Every PromQL expression of every dashboard panel, evaluated by a real Prometheus that scraped
// a real gpuprofd after it ran experiments: each must parse, and each must return data unless
// only a GPU machine can produce its metrics (listed below, with the reason). Template variable
// queries are evaluated too, and their values are what the panels are queried with.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "tests/metrics/daemon_runs.h"
#include "tests/metrics/grafana_dashboards.h"
#include "tests/metrics/json_struct.h"
#include "tests/metrics/prometheus_server.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

constexpr absl::Duration kScrapeInterval = absl::Seconds(1);

class DashboardsPrometheusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string state_dir = MakeTempDir("gpuprofd");
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir,
        std::vector<std::string>{"--metrics_listen=127.0.0.1:0", "--enable_test_faults"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
    const absl::StatusOr<int> port = MetricsPortFromLog(daemon_->Log());
    ASSERT_TRUE(port.ok()) << port.status() << daemon_->Log();
    target_ = absl::StrCat("127.0.0.1:", *port);
    // A second, idle node of the fleet: the $node variable must tell the two apart.
    other_daemon_ = std::make_unique<DaemonProcess>(
        MakeTempDir("gpuprofd-other"), std::vector<std::string>{"--metrics_listen=127.0.0.1:0"});
    const absl::Status other_started = other_daemon_->Start();
    ASSERT_TRUE(other_started.ok()) << other_started;
    const absl::StatusOr<int> other_port = MetricsPortFromLog(other_daemon_->Log());
    ASSERT_TRUE(other_port.ok()) << other_port.status() << other_daemon_->Log();
    other_target_ = absl::StrCat("127.0.0.1:", *other_port);

    auto prometheus = PrometheusServer::Start(
        MakeTempDir("prometheus"), {target_, other_target_}, kScrapeInterval,
        {{target_, kNode}, {other_target_, kOtherNode}});
    ASSERT_TRUE(prometheus.ok()) << prometheus.status();
    prometheus_ = *std::move(prometheus);
    const absl::Status up = prometheus_->WaitForTargetsUp(absl::Seconds(30));
    ASSERT_TRUE(up.ok()) << up << "\n" << prometheus_->Log();
    start_ = absl::Now() - absl::Seconds(5);
  }

  // What a day of use leaves behind: finished runs, a crashed worker, a timed-out one, a
  // client asking for an experiment that does not exist.
  void RunExperiments() {
    auto stub = daemon_->NewStub();
    for (int i = 0; i < 2; ++i) ASSERT_EQ(*RunRadixExperiment(*stub), v1::FINISHED);
    ASSERT_EQ(*RunRadixExperiment(*stub, {{"gpuprof.fault", "crash"}}), v1::FAILED);
    ASSERT_EQ(*RunRadixExperiment(*stub, {{"gpuprof.fault", "hang"}}, absl::Seconds(1)),
              v1::TIMED_OUT);
    grpc::ClientContext context;
    v1::GetExperimentRequest missing;
    missing.set_experiment_id("exp-999999");
    v1::Experiment ignored;
    ASSERT_EQ(stub->GetExperiment(&context, missing, &ignored).error_code(),
              grpc::StatusCode::NOT_FOUND);
    // Prometheus has scraped all of it.
    const absl::Status scraped = prometheus_->WaitForValue(
        absl::StrCat(R"(sum(gpuprof_experiments_total{instance=")", target_, R"("}))"), 4,
        absl::Seconds(30));
    ASSERT_TRUE(scraped.ok()) << scraped;
    ASSERT_TRUE(prometheus_
                    ->WaitForValue(R"(sum(gpuprof_grpc_requests_total{code="NOT_FOUND"}))", 1,
                                   absl::Seconds(30))
                    .ok());
    // A few more scrapes, so that rate() over $__rate_interval has points after the events.
    absl::SleepFor(4 * kScrapeInterval);
  }

  // Evaluates label_values(<selector>, <label>) the way Grafana does: the label's values
  // across the series the selector matches.
  std::vector<std::string> LabelValues(const std::string& query) {
    absl::string_view inner = query;
    EXPECT_TRUE(absl::ConsumePrefix(&inner, "label_values(") && absl::ConsumeSuffix(&inner, ")"))
        << query;
    const size_t comma = inner.rfind(',');
    const std::string selector(absl::StripAsciiWhitespace(inner.substr(0, comma)));
    const std::string label(absl::StripAsciiWhitespace(inner.substr(comma + 1)));
    absl::StatusOr<google::protobuf::Struct> data = prometheus_->Query(selector);
    EXPECT_TRUE(data.ok()) << query << ": " << data.status();
    std::set<std::string> values;
    if (data.ok()) {
      for (const auto& result : ListField(*data, "result").values()) {
        const std::string value = StringField(StructField(result.struct_value(), "metric"), label);
        if (!value.empty()) values.insert(value);
      }
    }
    return {values.begin(), values.end()};
  }

  static constexpr char kNode[] = "gpu-node-a";
  static constexpr char kOtherNode[] = "gpu-node-b";

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<DaemonProcess> other_daemon_;
  std::unique_ptr<PrometheusServer> prometheus_;
  std::string target_;
  std::string other_target_;
  absl::Time start_;
};

// One dashboard shows the fleet (All nodes, All instances) or one node: the overview's
// daemon-up panel has a series per daemon, and only the picked node's daemon when one is.
TEST_F(DashboardsPrometheusTest, NodeVariableShowsTheFleetOrOneNode) {
  const absl::StatusOr<std::vector<Dashboard>> dashboards =
      LoadDashboards(RunfilePath("dashboards"));
  ASSERT_TRUE(dashboards.ok()) << dashboards.status();
  std::string up_expr;
  for (const Dashboard& dashboard : *dashboards) {
    if (dashboard.uid != "gpuprof-overview") continue;
    for (const DashboardPanel& panel : dashboard.panels) {
      for (const auto& target : ListField(panel.json, "targets").values()) {
        const std::string expr = StringField(target.struct_value(), "expr");
        if (up_expr.empty() && absl::StartsWith(expr, "max by (instance) (gpuprof_up{")) {
          up_expr = expr;
        }
      }
    }
  }
  ASSERT_FALSE(up_expr.empty()) << "the overview has no per-daemon up panel";
  const auto instances = [&](const std::map<std::string, std::string>& values) {
    absl::StatusOr<google::protobuf::Struct> data =
        prometheus_->Query(ExpandVariables(up_expr, values));
    EXPECT_TRUE(data.ok()) << data.status();
    std::set<std::string> found;
    if (!data.ok()) return found;
    for (const auto& result : ListField(*data, "result").values()) {
      found.insert(StringField(StructField(result.struct_value(), "metric"), "instance"));
    }
    return found;
  };
  // "All" nodes is allValue (.*); "All" instances is every value Grafana found.
  EXPECT_EQ(instances({{"node", ".*"}, {"instance", GrafanaRegexValue({target_, other_target_})}}),
            (std::set<std::string>{target_, other_target_}));
  EXPECT_EQ(instances({{"node", kOtherNode}, {"instance", ".*"}}),
            (std::set<std::string>{other_target_}));
  EXPECT_EQ(instances({{"node", kNode}, {"instance", ".*"}}), (std::set<std::string>{target_}));
}

TEST_F(DashboardsPrometheusTest, EveryPanelQueryParsesAndReturnsData) {
  RunExperiments();
  const absl::StatusOr<std::vector<Dashboard>> dashboards =
      LoadDashboards(RunfilePath("dashboards"));
  ASSERT_TRUE(dashboards.ok()) << dashboards.status();
  ASSERT_FALSE(dashboards->empty());

  std::set<std::string> panels_seen;
  int queries = 0;
  for (const Dashboard& dashboard : *dashboards) {
    // Variables in the order Grafana resolves them (later ones may use earlier ones).
    std::map<std::string, std::string> values = {
        {"__rate_interval", absl::StrCat(4 * absl::ToInt64Seconds(kScrapeInterval), "s")},
        {"__interval", absl::StrCat(absl::ToInt64Seconds(kScrapeInterval), "s")},
        {"__range", "1h"},
    };
    for (const auto& item : ListField(StructField(dashboard.json, "templating"), "list").values()) {
      const google::protobuf::Struct& variable = item.struct_value();
      if (StringField(variable, "type") != "query") continue;
      const std::string name = StringField(variable, "name");
      SCOPED_TRACE(absl::StrCat(dashboard.file, " variable $", name));
      const std::string query =
          ExpandVariables(StringField(StructField(variable, "query"), "query"), values);
      const std::vector<std::string> found = LabelValues(query);
      if (name == "node") {
        EXPECT_THAT(found, ::testing::UnorderedElementsAre(kNode, kOtherNode)) << query;
        // One node picked, as a user would: the daemon that ran the experiments.
        values[name] = GrafanaRegexValue({kNode});
      } else if (name == "instance") {
        // Only the picked node's daemon: the instance list follows $node.
        EXPECT_THAT(found, ::testing::ElementsAre(target_)) << query;
        values[name] = GrafanaRegexValue({target_});
      } else if (!found.empty()) {
        values[name] = GrafanaRegexValue(found);
      } else {
        EXPECT_TRUE(GpuOnlyVariables().contains(name))
            << query << " returned no values, and $" << name << " is not listed as GPU-only";
        values[name] = StringField(variable, "allValue");
      }
    }

    for (const DashboardPanel& panel : dashboard.panels) {
      if (panel.type == "row") continue;
      const std::string key = absl::StrCat(dashboard.uid, "/", panel.title);
      panels_seen.insert(key);
      const auto gpu_only = GpuOnlyPanels().find(key);
      for (const auto& target_value : ListField(panel.json, "targets").values()) {
        const google::protobuf::Struct& target = target_value.struct_value();
        const std::string expr = ExpandVariables(StringField(target, "expr"), values);
        SCOPED_TRACE(absl::StrCat(key, " target ", StringField(target, "refId"), ": ", expr));
        ++queries;
        EXPECT_THAT(ReferencedVariables(expr), ::testing::IsEmpty()) << "unresolved variable";
        // Grafana draws panels from range queries over the dashboard's time range.
        const absl::StatusOr<google::protobuf::Struct> data =
            prometheus_->QueryRange(expr, start_, absl::Now(), kScrapeInterval);
        if (!data.ok()) {
          // Report every broken panel, not only the first.
          ADD_FAILURE() << "Prometheus rejected the query: " << data.status();
          continue;
        }
        EXPECT_EQ(StringField(*data, "resultType"), "matrix");
        const int series = SeriesWithSamples(*data);
        if (gpu_only != GpuOnlyPanels().end()) {
          RecordProperty(key, absl::StrCat(series, " series (GPU-only: ", gpu_only->second, ")"));
          continue;
        }
        EXPECT_GT(series, 0) << "the panel would show \"No data\"";
      }
    }
  }
  EXPECT_GT(queries, 20);
  // The GPU-only list names real panels: a renamed panel must not silently lose its check.
  for (const auto& [key, reason] : GpuOnlyPanels()) {
    EXPECT_TRUE(panels_seen.contains(key)) << "GPU-only panel " << key << " does not exist";
  }
}

// What Prometheus holds for a node that never ran a workload: nothing. The idle node has no
// radix series (not a hit ratio of 0), and neither node has a GPU result it never measured.
TEST_F(DashboardsPrometheusTest, NoResultSeriesForWorkloadsThatNeverRan) {
  RunExperiments();
  const auto instances_with = [&](const std::string& selector) {
    absl::StatusOr<google::protobuf::Struct> data = prometheus_->Query(selector);
    EXPECT_TRUE(data.ok()) << selector << ": " << data.status();
    std::set<std::string> found;
    if (!data.ok()) return found;
    for (const auto& result : ListField(*data, "result").values()) {
      found.insert(StringField(StructField(result.struct_value(), "metric"), "instance"));
    }
    return found;
  };
  EXPECT_EQ(instances_with("gpuprof_result_radix_hit_ratio"), (std::set<std::string>{target_}));
  EXPECT_EQ(
      instances_with(R"(gpuprof_result_radix_operations_per_second{operation="match_prefix"})"),
      (std::set<std::string>{target_}));
  EXPECT_THAT(
      instances_with(R"({__name__=~"gpuprof_result_.*", __name__!~"gpuprof_result_radix_.*", )"
                     R"(workload!="radix"})"),
      ::testing::IsEmpty());
  // Both daemons are scraped: the idle one answers for its other series.
  EXPECT_EQ(instances_with("gpuprof_up"), (std::set<std::string>{target_, other_target_}));
}

TEST_F(DashboardsPrometheusTest, BrokenPromqlIsReportedNotSilentlyEmpty) {
  // The check above relies on Prometheus refusing bad expressions; make sure it does.
  const auto parsed = prometheus_->Query("sum by (workload (gpuprof_experiments_total)");
  EXPECT_FALSE(parsed.ok());
  EXPECT_THAT(std::string(parsed.status().message()), ::testing::HasSubstr("bad_data"));
}

}  // namespace
}  // namespace gpuprof::testing
