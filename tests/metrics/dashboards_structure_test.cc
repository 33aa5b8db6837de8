// The Grafana dashboards' JSON has the structure Grafana needs: unique uids and panel ids,
// every panel on the Prometheus data source variable, every target with a PromQL expression
// over metrics the daemon exports, the instance and GPU variables; the provisioning files and
// the example scrape config are in place.
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "daemon/metrics/metric_names.h"
#include "tests/metrics/grafana_dashboards.h"
#include "tests/metrics/json_struct.h"
#include "tests/metrics/prometheus_server.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kDatasourceVariable[] = "${datasource}";
// The uid of the data source in dashboards/provisioning/datasources/prometheus.yaml.
constexpr char kProvisionedDatasourceUid[] = "gpuprof-prometheus";
// Variables Grafana itself defines.
const std::set<std::string>& GrafanaBuiltins() {
  static const auto* const kBuiltins = new std::set<std::string>{
      "__rate_interval", "__interval", "__interval_ms", "__range", "__range_s", "__range_ms"};
  return *kBuiltins;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::vector<Dashboard> Dashboards() {
  absl::StatusOr<std::vector<Dashboard>> dashboards = LoadDashboards(RunfilePath("dashboards"));
  EXPECT_TRUE(dashboards.ok()) << dashboards.status();
  return dashboards.ok() ? *dashboards : std::vector<Dashboard>{};
}

// Metric names a PromQL expression refers to, histogram series mapped to their family.
std::set<std::string> GpuprofMetrics(const std::string& expr) {
  static const std::regex kName("gpuprof_[a-z0-9_]+");
  std::set<std::string> names;
  for (auto it = std::sregex_iterator(expr.begin(), expr.end(), kName);
       it != std::sregex_iterator(); ++it) {
    std::string name = it->str();
    for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
      if (absl::EndsWith(name, suffix) && !absl::EndsWith(name, "_total")) {
        const std::string family(absl::StripSuffix(name, suffix));
        if (family == daemon::metric_names::kExperimentQueueSeconds ||
            family == daemon::metric_names::kExperimentRunSeconds ||
            family == daemon::metric_names::kResultHeadline) {
          name = family;
        }
      }
    }
    names.insert(name);
  }
  return names;
}

void ExpectDatasourceRef(const google::protobuf::Struct& json, const std::string& where) {
  const google::protobuf::Struct& datasource = StructField(json, "datasource");
  EXPECT_EQ(StringField(datasource, "type"), "prometheus") << where;
  EXPECT_EQ(StringField(datasource, "uid"), kDatasourceVariable) << where;
}

TEST(DashboardsStructureTest, TheThreeDashboardsShip) {
  std::set<std::string> uids;
  for (const Dashboard& dashboard : Dashboards()) uids.insert(dashboard.uid);
  EXPECT_EQ(uids, (std::set<std::string>{"gpuprof-overview", "gpuprof-workload-performance",
                                         "gpuprof-gpu-telemetry"}));
}

TEST(DashboardsStructureTest, DashboardsAreUniquelyIdentifiedAndTagged) {
  std::set<std::string> uids, titles;
  for (const Dashboard& dashboard : Dashboards()) {
    SCOPED_TRACE(dashboard.file);
    EXPECT_FALSE(dashboard.uid.empty());
    // Grafana rejects longer uids.
    EXPECT_LE(dashboard.uid.size(), 40u);
    EXPECT_TRUE(uids.insert(dashboard.uid).second) << "duplicate uid " << dashboard.uid;
    EXPECT_FALSE(dashboard.title.empty());
    EXPECT_TRUE(titles.insert(dashboard.title).second) << "duplicate title " << dashboard.title;
    EXPECT_GT(Field(dashboard.json, "schemaVersion").number_value(), 0);
    // Provisioned dashboards must not carry a database id.
    EXPECT_FALSE(dashboard.json.fields().count("id") > 0 &&
                 Field(dashboard.json, "id").has_number_value());
    bool tagged = false;
    for (const auto& tag : ListField(dashboard.json, "tags").values()) {
      tagged |= tag.string_value() == "gpuprof";
    }
    EXPECT_TRUE(tagged) << "the dashboard links find each other by the gpuprof tag";
    EXPECT_FALSE(dashboard.panels.empty());
  }
}

TEST(DashboardsStructureTest, TemplatingHasDatasourceInstanceAndGpuVariables) {
  for (const Dashboard& dashboard : Dashboards()) {
    SCOPED_TRACE(dashboard.file);
    std::map<std::string, google::protobuf::Struct> variables;
    for (const auto& variable :
         ListField(StructField(dashboard.json, "templating"), "list").values()) {
      const std::string name = StringField(variable.struct_value(), "name");
      EXPECT_TRUE(variables.emplace(name, variable.struct_value()).second) << "twice: " << name;
    }
    ASSERT_TRUE(variables.contains("datasource"));
    const google::protobuf::Struct& datasource = variables["datasource"];
    EXPECT_EQ(StringField(datasource, "type"), "datasource");
    EXPECT_EQ(StringField(datasource, "query"), "prometheus");
    EXPECT_EQ(StringField(StructField(datasource, "current"), "value"), kProvisionedDatasourceUid);

    for (const std::string name : {"node", "instance", "gpu"}) {
      ASSERT_TRUE(variables.contains(name)) << name;
      const google::protobuf::Struct& variable = variables[name];
      EXPECT_EQ(StringField(variable, "type"), "query") << name;
      ExpectDatasourceRef(variable, name);
      const std::string query = StringField(StructField(variable, "query"), "query");
      EXPECT_TRUE(absl::StartsWith(query, "label_values(")) << query;
      EXPECT_TRUE(absl::EndsWith(query, absl::StrCat(", ", name, ")"))) << query;
      EXPECT_EQ(StringField(variable, "definition"), query) << name;
      EXPECT_TRUE(Field(variable, "includeAll").bool_value()) << name;
      EXPECT_TRUE(Field(variable, "multi").bool_value()) << name;
    }
    // "All" GPUs must also match series of a machine without GPUs, and "All" nodes series
    // scraped without a node label (a daemon outside Kubernetes).
    EXPECT_EQ(StringField(variables["gpu"], "allValue"), ".*");
    EXPECT_EQ(StringField(variables["node"], "allValue"), ".*");
    // One node picked narrows the instances offered to that node's daemons.
    EXPECT_THAT(StringField(StructField(variables["instance"], "query"), "query"),
                HasSubstr(R"(node=~"$node")"));
  }
}

// Every query that picks instances picks nodes too, so one dashboard shows the fleet or a
// node.
TEST(DashboardsStructureTest, EveryInstanceFilterAlsoFiltersTheNode) {
  for (const Dashboard& dashboard : Dashboards()) {
    int filtered = 0;
    for (const DashboardPanel& panel : dashboard.panels) {
      for (const auto& target : ListField(panel.json, "targets").values()) {
        const std::string expr = StringField(target.struct_value(), "expr");
        if (!absl::StrContains(expr, R"(instance=~"$instance")")) continue;
        ++filtered;
        EXPECT_THAT(expr, HasSubstr(R"(node=~"$node", instance=~"$instance")"))
            << dashboard.file << " panel \"" << panel.title << "\"";
      }
    }
    EXPECT_GT(filtered, 0) << dashboard.file;
  }
}

TEST(DashboardsStructureTest, PanelsHaveUniqueIdsLayoutAndPrometheusTargets) {
  std::set<std::string> known_metrics(std::begin(daemon::metric_names::kAll),
                                      std::end(daemon::metric_names::kAll));
  for (const Dashboard& dashboard : Dashboards()) {
    std::set<std::string> variables = GrafanaBuiltins();
    for (const auto& variable :
         ListField(StructField(dashboard.json, "templating"), "list").values()) {
      variables.insert(StringField(variable.struct_value(), "name"));
    }
    std::set<double> ids;
    int targets = 0;
    for (const DashboardPanel& panel : dashboard.panels) {
      const std::string where =
          absl::StrCat(dashboard.file, " panel ", panel.id, " \"", panel.title, "\"");
      SCOPED_TRACE(where);
      EXPECT_GT(panel.id, 0);
      EXPECT_EQ(panel.id, static_cast<int>(panel.id));
      EXPECT_TRUE(ids.insert(panel.id).second) << "duplicate panel id";
      EXPECT_FALSE(panel.title.empty());
      EXPECT_FALSE(panel.type.empty());
      const google::protobuf::Struct& grid = StructField(panel.json, "gridPos");
      const double x = Field(grid, "x").number_value();
      const double w = Field(grid, "w").number_value();
      EXPECT_GT(w, 0);
      EXPECT_GT(Field(grid, "h").number_value(), 0);
      EXPECT_GE(x, 0);
      EXPECT_LE(x + w, 24) << "Grafana's grid is 24 columns wide";
      if (panel.type == "row") continue;

      ExpectDatasourceRef(panel.json, where);
      const auto& panel_targets = ListField(panel.json, "targets").values();
      EXPECT_FALSE(panel_targets.empty()) << "a panel without a query shows nothing";
      std::set<std::string> ref_ids;
      for (const auto& target_value : panel_targets) {
        const google::protobuf::Struct& target = target_value.struct_value();
        ++targets;
        const std::string ref_id = StringField(target, "refId");
        EXPECT_FALSE(ref_id.empty());
        EXPECT_TRUE(ref_ids.insert(ref_id).second) << "duplicate refId " << ref_id;
        ExpectDatasourceRef(target, absl::StrCat(where, " target ", ref_id));
        const std::string expr = StringField(target, "expr");
        EXPECT_FALSE(expr.empty()) << "target " << ref_id << " has no expr";
        for (const std::string& name : ReferencedVariables(expr)) {
          EXPECT_TRUE(variables.contains(name)) << "undefined variable $" << name << " in " << expr;
        }
        const std::set<std::string> metrics = GpuprofMetrics(expr);
        EXPECT_FALSE(metrics.empty()) << expr;
        for (const std::string& metric : metrics) {
          EXPECT_TRUE(known_metrics.contains(metric))
              << metric << " is not a metric gpuprofd exports (daemon/metrics/metric_names.h)";
        }
      }
    }
    EXPECT_GT(targets, 0) << dashboard.file;
  }
}

// Every dashboard marks experiments and sweeps: Prometheus annotations whose series value is the
// time (useValueForTime reads milliseconds, the series hold Unix seconds), titled from labels.
TEST(DashboardsStructureTest, EveryDashboardAnnotatesExperimentsAndSweeps) {
  const std::set<std::string> known_metrics(std::begin(daemon::metric_names::kAll),
                                            std::end(daemon::metric_names::kAll));
  for (const Dashboard& dashboard : Dashboards()) {
    std::set<std::string> names;
    for (const auto& item : ListField(StructField(dashboard.json, "annotations"), "list").values()) {
      const google::protobuf::Struct& annotation = item.struct_value();
      const std::string name = StringField(annotation, "name");
      SCOPED_TRACE(absl::StrCat(dashboard.file, " annotation ", name));
      names.insert(name);
      ExpectDatasourceRef(annotation, name);
      EXPECT_TRUE(Field(annotation, "enable").bool_value());
      EXPECT_TRUE(Field(annotation, "useValueForTime").bool_value());
      const std::string expr = StringField(annotation, "expr");
      EXPECT_TRUE(absl::EndsWith(expr, ") * 1000")) << expr;
      EXPECT_THAT(expr, HasSubstr(R"(node=~"$node", instance=~"$instance")"));
      for (const std::string& metric : GpuprofMetrics(expr)) {
        EXPECT_TRUE(known_metrics.contains(metric)) << metric;
        EXPECT_TRUE(absl::EndsWith(metric, "_timestamp_seconds")) << metric;
      }
      EXPECT_THAT(StringField(annotation, "titleFormat"), HasSubstr("{{"));
      EXPECT_THAT(StringField(annotation, "textFormat"),
                  ::testing::AnyOf(HasSubstr("{{headline}}"), HasSubstr("{{points}}")));
    }
    EXPECT_EQ(names, (std::set<std::string>{"Experiments", "Sweep starts", "Sweeps"}))
        << dashboard.file;
  }
}

TEST(DashboardsStructureTest, ProvisioningPointsGrafanaAtTheDashboardsAndPrometheus) {
  const std::string datasources =
      ReadFile(RunfilePath("dashboards/provisioning/datasources/prometheus.yaml"));
  EXPECT_THAT(datasources, HasSubstr("apiVersion: 1"));
  EXPECT_THAT(datasources, HasSubstr("type: prometheus"));
  EXPECT_THAT(datasources, HasSubstr(absl::StrCat("uid: ", kProvisionedDatasourceUid)));
  const std::string providers =
      ReadFile(RunfilePath("dashboards/provisioning/dashboards/gpuprof.yaml"));
  EXPECT_THAT(providers, HasSubstr("apiVersion: 1"));
  EXPECT_THAT(providers, HasSubstr("type: file"));
  EXPECT_THAT(providers, HasSubstr("path: "));
}

TEST(DashboardsStructureTest, ExampleScrapeConfigPassesPromtool) {
  const std::string config = RunfilePath("dashboards/prometheus.yml");
  EXPECT_THAT(ReadFile(config), HasSubstr(":9464"));
  const CommandResult check =
      RunCommand({PrometheusToolPath("promtool", "PROMTOOL_BINARY"), "check", "config", config});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

}  // namespace
}  // namespace gpuprof::testing
