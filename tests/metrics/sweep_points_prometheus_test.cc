// A 20-point sweep that ends within a few scrapes, seen through a real Prometheus scraping a
// real gpuprofd: every point's figure is a series of its own (not one last value), with the
// figure the sweep reports, and the dashboards' annotation queries return the sweep at the time
// it started and ended. The run series stay --metrics_recent_window (15 minutes) after the
// sweep ended, far longer than this test: nothing depends on which scrape saw what.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "tests/metrics/daemon_runs.h"
#include "tests/metrics/grafana_dashboards.h"
#include "tests/metrics/json_struct.h"
#include "tests/metrics/prometheus_server.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

constexpr absl::Duration kScrapeInterval = absl::Seconds(1);
constexpr int kPoints = 20;

double Milliseconds(const google::protobuf::Timestamp& time) {
  return time.seconds() * 1e3 + time.nanos() / 1e6;
}

// The sample values of a range query's series, as numbers.
std::vector<double> Values(const google::protobuf::Struct& series) {
  std::vector<double> values;
  for (const auto& pair : ListField(series, "values").values()) {
    double value = 0;
    EXPECT_TRUE(absl::SimpleAtod(pair.list_value().values(1).string_value(), &value));
    values.push_back(value);
  }
  return values;
}

// The expression of the annotation `name` of the overview dashboard, its variables set to
// "All" as Grafana sends them.
std::string AnnotationQuery(const std::string& name) {
  const absl::StatusOr<std::vector<Dashboard>> dashboards =
      LoadDashboards(RunfilePath("dashboards"));
  EXPECT_TRUE(dashboards.ok()) << dashboards.status();
  if (!dashboards.ok()) return "";
  for (const Dashboard& dashboard : *dashboards) {
    if (dashboard.uid != "gpuprof-overview") continue;
    for (const auto& item : ListField(StructField(dashboard.json, "annotations"), "list").values()) {
      if (StringField(item.struct_value(), "name") != name) continue;
      return ExpandVariables(StringField(item.struct_value(), "expr"),
                             {{"node", ".*"}, {"instance", ".*"}});
    }
  }
  ADD_FAILURE() << "the overview has no annotation " << name;
  return "";
}

TEST(SweepPointsPrometheusTest, EveryPointOfAShortSweepAndItsAnnotationReachPrometheus) {
  DaemonProcess daemon(MakeTempDir("gpuprofd"),
                       {"--metrics_listen=127.0.0.1:0", "--cpu_slots=2"});
  const absl::Status started = daemon.Start();
  ASSERT_TRUE(started.ok()) << started;
  const absl::StatusOr<int> port = MetricsPortFromLog(daemon.Log());
  ASSERT_TRUE(port.ok()) << port.status() << daemon.Log();
  auto prometheus = PrometheusServer::Start(
      MakeTempDir("prometheus"), {absl::StrCat("127.0.0.1:", *port)}, kScrapeInterval);
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  const absl::Status up = (*prometheus)->WaitForTargetsUp(absl::Seconds(30));
  ASSERT_TRUE(up.ok()) << up << "\n" << (*prometheus)->Log();
  const absl::Time query_start = absl::Now() - absl::Seconds(5);

  // Twenty small radix points (a tenth of a second or less each, on the CPU).
  v1::SweepRequest request;
  request.set_user("metrics-test");
  request.mutable_base()->mutable_radix()->set_num_requests(50);
  v1::SweepAxis& axis = *request.add_axes();
  axis.set_field("num_requests");
  axis.mutable_range()->set_start(20);
  axis.mutable_range()->set_end(20 + kPoints - 1);
  auto stub = daemon.NewStub();
  const absl::Time submitted = absl::Now();
  v1::Sweep sweep;
  {
    grpc::ClientContext context;
    const grpc::Status status = stub->SubmitSweep(&context, request, &sweep);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }
  const std::string id = sweep.id();
  while (absl::Now() < submitted + absl::Seconds(60)) {
    grpc::ClientContext context;
    v1::GetSweepRequest get;
    get.set_sweep_id(id);
    get.set_points_page_size(kPoints);
    ASSERT_TRUE(stub->GetSweep(&context, get, &sweep).ok());
    if (sweep.state() != v1::SWEEP_RUNNING) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  const absl::Duration took = absl::Now() - submitted;
  ASSERT_EQ(sweep.state(), v1::SWEEP_FINISHED) << sweep.DebugString() << daemon.Log();
  ASSERT_EQ(sweep.points_size(), kPoints);
  EXPECT_LT(took, absl::Seconds(15)) << "the sweep should end well within the retention window";
  RecordProperty("sweep_seconds", absl::StrCat(absl::ToDoubleSeconds(took)));

  // Every point, by a PromQL query on the sweep's id.
  const std::string points_query =
      absl::StrCat(R"(gpuprof_experiment_headline{sweep=")", id, R"(", figure="match_ops"})");
  const absl::Status all_scraped = (*prometheus)->WaitForValue(
      absl::StrCat("count(", points_query, ")"), kPoints, absl::Seconds(20));
  ASSERT_TRUE(all_scraped.ok()) << all_scraped << "\n" << (*prometheus)->Log();
  const absl::StatusOr<google::protobuf::Struct> points = (*prometheus)->Query(points_query);
  ASSERT_TRUE(points.ok()) << points.status();
  std::map<int, double> figure_of_point;
  for (const auto& result : ListField(*points, "result").values()) {
    const google::protobuf::Struct& labels = StructField(result.struct_value(), "metric");
    int point = -1;
    ASSERT_TRUE(absl::SimpleAtoi(StringField(labels, "point"), &point));
    EXPECT_EQ(StringField(labels, "user"), "metrics-test");
    EXPECT_EQ(StringField(labels, "workload"), "radix");
    EXPECT_EQ(StringField(labels, "unit"), "operations_per_second");
    EXPECT_EQ(StringField(labels, "experiment"), sweep.points(point).experiment_id());
    double value = 0;
    ASSERT_TRUE(absl::SimpleAtod(
        ListField(result.struct_value(), "value").values(1).string_value(), &value));
    figure_of_point[point] = value;
  }
  ASSERT_EQ(figure_of_point.size(), static_cast<size_t>(kPoints));
  // The figures are the sweep's own: each point's match_prefix rate.
  for (const v1::SweepPoint& point : sweep.points()) {
    double match_ops = 0;
    for (const v1::OperationStats& operation : point.experiment().result().radix().operations()) {
      if (operation.operation() == "match_prefix") match_ops = operation.ops_per_second();
    }
    ASSERT_GT(match_ops, 0) << point.DebugString();
    EXPECT_NEAR(figure_of_point[point.index()], match_ops, match_ops * 1e-9) << point.index();
  }

  // The sweep's end is recorded once its last point's end reached the sweep manager.
  const absl::Status end_scraped = (*prometheus)->WaitForValue(
      absl::StrCat(R"(count(gpuprof_sweep_end_timestamp_seconds{sweep=")", id, R"("}))"), 1,
      absl::Seconds(20));
  ASSERT_TRUE(end_scraped.ok()) << end_scraped;

  // The dashboards' annotations, as Grafana queries them over the dashboard's range: one series
  // for the sweep, whose value (milliseconds, useValueForTime) is when it started and ended.
  const auto annotation_times = [&](const std::string& name) {
    std::set<double> times;
    // The range ends a little ahead: the API takes whole seconds, and the sweep's series may
    // have been scraped within the last one.
    const absl::StatusOr<google::protobuf::Struct> data = (*prometheus)->QueryRange(
        AnnotationQuery(name), query_start, absl::Now() + 2 * kScrapeInterval, kScrapeInterval);
    EXPECT_TRUE(data.ok()) << name << ": " << data.status();
    if (!data.ok()) return times;
    for (const auto& result : ListField(*data, "result").values()) {
      const google::protobuf::Struct& labels = StructField(result.struct_value(), "metric");
      if (StringField(labels, "sweep") != id) continue;
      EXPECT_EQ(StringField(labels, "user"), "metrics-test") << name;
      EXPECT_EQ(StringField(labels, "workload"), "radix") << name;
      for (double value : Values(result.struct_value())) times.insert(value);
    }
    return times;
  };
  const std::set<double> ended = annotation_times("Sweeps");
  ASSERT_EQ(ended.size(), 1u) << "the sweep's end, once, at one time";
  EXPECT_NEAR(*ended.begin(), Milliseconds(sweep.finished()), 1);
  const std::set<double> began = annotation_times("Sweep starts");
  ASSERT_EQ(began.size(), 1u);
  EXPECT_NEAR(*began.begin(), Milliseconds(sweep.created()), 1);
  // The sweep's end annotation says how it went.
  const absl::StatusOr<google::protobuf::Struct> headline = (*prometheus)->Query(
      absl::StrCat(R"(gpuprof_sweep_end_timestamp_seconds{sweep=")", id, R"("})"));
  ASSERT_TRUE(headline.ok()) << headline.status();
  ASSERT_EQ(ListField(*headline, "result").values_size(), 1);
  EXPECT_THAT(StringField(StructField(ListField(*headline, "result").values(0).struct_value(),
                                      "metric"),
                          "headline"),
              ::testing::StartsWith("20 of 20 points finished; best "));
  // And every point has its experiment annotation.
  const absl::StatusOr<google::protobuf::Struct> experiments = (*prometheus)->Query(
      absl::StrCat("count(", AnnotationQuery("Experiments"), R"( and on(sweep) )",
                   R"(gpuprof_sweep_end_timestamp_seconds{sweep=")", id, R"("}))"));
  ASSERT_TRUE(experiments.ok()) << experiments.status();
  ASSERT_EQ(ListField(*experiments, "result").values_size(), 1);
  EXPECT_EQ(ListField(ListField(*experiments, "result").values(0).struct_value(), "value")
                .values(1)
                .string_value(),
            absl::StrCat(kPoints));
}

}  // namespace
}  // namespace gpuprof::testing
