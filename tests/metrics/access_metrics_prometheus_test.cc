// The access-control metrics as a real Prometheus sees them: a real gpuprofd under an access
// policy refuses a request over a quota and preempts a running experiment, and Prometheus,
// scraping the daemon, answers queries for the refusal by reason, the preemption and the
// per-user quota use, whose user label is bounded by the policy.
#include <pwd.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/metrics/daemon_runs.h"
#include "tests/metrics/json_struct.h"
#include "tests/metrics/prometheus_server.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kScrapeInterval = absl::Seconds(1);

std::string ThisUser() {
  const passwd* entry = getpwuid(geteuid());
  return entry == nullptr ? absl::StrCat("uid:", geteuid()) : entry->pw_name;
}

std::string SubmittedId(const CommandResult& result) {
  auto events = ParseEventLines(result.out);
  return events.ok() && !events->empty() ? events->front().experiment_id() : "";
}

v1::ExperimentState StateOf(const DaemonProcess& daemon, const std::string& id) {
  auto experiment = ParseExperiment(daemon.CliAsIs({"get", id, "--json"}).out);
  return experiment.ok() ? experiment->state() : v1::EXPERIMENT_STATE_UNSPECIFIED;
}

TEST(AccessMetricsPrometheusTest, QuotaRefusalPreemptionAndUseReachPrometheus) {
  // The test's own user is an ordinary user with a policy entry (so it gets its own series),
  // may ask for priority up to 9, and priority 5 preempts after a second.
  const std::string me = ThisUser();
  const std::string policy = MakeTempDir("policy") + "/policy.textproto";
  std::ofstream(policy) << absl::StrCat(R"pb(
policy_version: 1
daemon_user_is_admin: false
users { user: ")pb", me, R"pb(" quota { max_priority: 9 } }
users { user: "nobody-here" quota { max_queued_experiments: 1 } }
preemption { min_preempting_priority: 5 grace_period { seconds: 1 } }
end_of_policy: true
)pb");
  DaemonProcess daemon(MakeTempDir("gpuprofd-access-metrics"),
                       {"--enable_test_faults",
                        "--worker_binary=" + RunfilePath("tests/ranks/fake_rank_worker"),
                        "--policy=" + policy, "--metrics_listen=127.0.0.1:0"});
  const absl::Status started = daemon.Start();
  ASSERT_TRUE(started.ok()) << started;
  const absl::StatusOr<int> metrics_port = MetricsPortFromLog(daemon.Log());
  ASSERT_TRUE(metrics_port.ok()) << metrics_port.status() << daemon.Log();
  const std::string target = absl::StrCat("127.0.0.1:", *metrics_port);
  auto prometheus =
      PrometheusServer::Start(MakeTempDir("prometheus"), {target}, kScrapeInterval);
  ASSERT_TRUE(prometheus.ok()) << prometheus.status();
  ASSERT_TRUE((*prometheus)->WaitForTargetsUp(absl::Seconds(60)).ok()) << (*prometheus)->Log();

  // Over the priority quota: refused.
  const CommandResult refused =
      daemon.CliAsIs({"submit", "collective", "--gpus", "0,1", "--priority", "10"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;  // PERMISSION_DENIED
  EXPECT_THAT(refused.err, HasSubstr("max_priority"));

  // A long experiment holds every fake GPU; an urgent one preempts it and runs 30 s, while the
  // preempted one waits in the queue again.
  const std::string background = SubmittedId(daemon.CliAsIs(
      {"submit", "collective", "--gpus", "0,1,2,3", "--label", "fake.run_ms=60000", "--json"}));
  ASSERT_FALSE(background.empty());
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline && StateOf(daemon, background) != v1::RUNNING) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(StateOf(daemon, background), v1::RUNNING) << daemon.Log();
  const std::string urgent = SubmittedId(daemon.CliAsIs(
      {"submit", "collective", "--gpus", "0,1", "--priority", "9", "--label",
       "fake.run_ms=30000", "--json"}));
  ASSERT_FALSE(urgent.empty());
  deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline && StateOf(daemon, urgent) != v1::RUNNING) {
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(StateOf(daemon, urgent), v1::RUNNING) << daemon.Log();

  PrometheusServer& server = **prometheus;
  const absl::Status refusal = server.WaitForValue(
      R"(gpuprof_access_refusals_total{reason="quota:max_priority"})", 1, absl::Seconds(60));
  EXPECT_TRUE(refusal.ok()) << refusal;
  const absl::Status preemption =
      server.WaitForValue("gpuprof_preemptions_total", 1, absl::Seconds(60));
  EXPECT_TRUE(preemption.ok()) << preemption;
  // The user's use while the urgent experiment runs and the preempted one is queued again.
  const absl::Status gpus = server.WaitForValue(
      absl::StrCat(R"(gpuprof_user_gpus_in_use{user=")", me, R"("})"), 2, absl::Seconds(60));
  EXPECT_TRUE(gpus.ok()) << gpus;
  const absl::Status queued = server.WaitForValue(
      absl::StrCat(R"(gpuprof_user_queued_experiments{user=")", me, R"("})"), 1,
      absl::Seconds(60));
  EXPECT_TRUE(queued.ok()) << queued;

  // The user label holds the policy's users and "(other)", nothing else.
  absl::StatusOr<google::protobuf::Struct> series =
      server.Query("gpuprof_user_queued_experiments");
  ASSERT_TRUE(series.ok()) << series.status();
  std::vector<std::string> users;
  for (const auto& result : ListField(*series, "result").values()) {
    users.push_back(StringField(StructField(result.struct_value(), "metric"), "user"));
  }
  EXPECT_THAT(users, ::testing::UnorderedElementsAre(me, "nobody-here", "(other)"));
  for (const std::string& id : {urgent, background}) daemon.CliAsIs({"cancel", id});
}

}  // namespace
}  // namespace gpuprof::testing
