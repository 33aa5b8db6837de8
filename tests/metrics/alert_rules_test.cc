// The Prometheus alerting rules in dashboards/alerts: promtool accepts them, their unit tests
// (alerts that fire, and do not, on given series) pass, and every gpuprof_ metric they query
// is one gpuprofd exports.
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "daemon/metrics/metric_names.h"
#include "tests/metrics/prometheus_server.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

constexpr char kRules[] = "dashboards/alerts/gpuprof_alerts.yml";
constexpr char kRuleTests[] = "dashboards/alerts/gpuprof_alerts_test.yml";

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  return std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
}

TEST(AlertRulesTest, PromtoolChecksTheRules) {
  const CommandResult check = RunCommand(
      {PrometheusToolPath("promtool", "PROMTOOL_BINARY"), "check", "rules", RunfilePath(kRules)});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_THAT(check.out, ::testing::HasSubstr("SUCCESS"));
}

TEST(AlertRulesTest, TheRulesUnitTestsPass) {
  const CommandResult test = RunCommand({PrometheusToolPath("promtool", "PROMTOOL_BINARY"),
                                         "test", "rules", RunfilePath(kRuleTests)});
  EXPECT_EQ(test.exit_code, 0) << test.out << test.err;
}

TEST(AlertRulesTest, EveryMetricQueriedIsExported) {
  const std::string rules = ReadFile(RunfilePath(kRules));
  ASSERT_FALSE(rules.empty());
  const std::set<std::string> exported(std::begin(daemon::metric_names::kAll),
                                       std::end(daemon::metric_names::kAll));
  // The metrics of every rule's expression (the `expr:` lines).
  const std::regex expression(R"(\n\s*expr:([^\n]*))");
  const std::regex metric(R"(gpuprof_[a-z_]+)");
  int queried = 0;
  for (auto line = std::sregex_iterator(rules.begin(), rules.end(), expression);
       line != std::sregex_iterator(); ++line) {
    const std::string text = (*line)[1].str();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), metric);
         it != std::sregex_iterator(); ++it) {
      EXPECT_TRUE(exported.count(it->str()) > 0) << it->str() << " is not a gpuprofd metric";
      ++queried;
    }
  }
  EXPECT_EQ(queried, 7);
}

// The alerts an operator of a GPU node needs, each with a unit test that makes it fire.
TEST(AlertRulesTest, DaemonQueueWorkerAndGpuAlertsExistAndAreTested) {
  const std::string rules = ReadFile(RunfilePath(kRules));
  const std::string tests = ReadFile(RunfilePath(kRuleTests));
  for (const std::string alert : {"GpuprofDaemonDown", "GpuprofQueueStuck", "GpuprofWorkerFailures",
                                  "GpuprofGpuDrained", "GpuprofGpuXid", "GpuprofStoreReadOnly",
                                  "GpuprofStoreDiskAlmostFull"}) {
    EXPECT_THAT(rules, ::testing::HasSubstr("alert: " + alert + "\n")) << alert;
    EXPECT_THAT(tests, ::testing::HasSubstr("alertname: " + alert + "\n")) << alert;
  }
}

}  // namespace
}  // namespace gpuprof::testing
