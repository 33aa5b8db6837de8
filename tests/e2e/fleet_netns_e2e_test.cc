// A fleet for real on one machine: three gpuprofd, each in a network namespace made by this
// test (a veth pair to the host), each with its own state directory and TLS identity (an
// openssl-made CA and a server certificate per node), reached by the CLI over mutual TLS
// through a fleet file. A fleet sweep of CPU (radix) points is spread over the three; one
// daemon is killed with SIGKILL mid-sweep and restarted: the other two finish meanwhile, its
// points resume, the fleet sweep finishes and the --follow table covers every node. Sweeps
// are then compared across nodes. A real Prometheus scrapes the three daemons through
// file-based discovery, and every dashboard query is evaluated per node. Needs root (network
// namespaces) and Debian's iproute2, openssl and prometheus; skipped, saying why, without them.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tests/metrics/grafana_dashboards.h"
#include "tests/metrics/json_struct.h"
#include "tests/metrics/prometheus_server.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kExitPartial = 6;
constexpr absl::Duration kScrapeInterval = absl::Seconds(1);
const char* const kNodes[] = {"gpu-a", "gpu-b", "gpu-c"};
constexpr char kNamespacePrefix[] = "gpuprof-fleet-";

std::string IpTool() {
  for (const char* path : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

CommandResult Shell(const std::string& script) {
  return RunCommand({"/bin/sh", "-c", script}, absl::Seconds(120));
}

// Namespaces left by a run of this test that was killed (its process is gone).
void RemoveStaleNamespaces(const std::string& ip) {
  const CommandResult listed = Shell(absl::StrCat(ip, " netns list"));
  for (absl::string_view line : absl::StrSplit(listed.out, '\n', absl::SkipEmpty())) {
    const std::string name(line.substr(0, line.find(' ')));
    if (!absl::StartsWith(name, kNamespacePrefix)) continue;
    const std::vector<std::string> parts = absl::StrSplit(name, '-');
    int pid = 0;
    if (parts.size() >= 4 && absl::SimpleAtoi(parts[2], &pid) &&
        !std::filesystem::exists(absl::StrCat("/proc/", pid))) {
      Shell(absl::StrCat(ip, " netns del ", name));
    }
  }
}

// A network namespace with a veth pair to the host: the host side HOST_ADDR/24, the namespace
// side ADDR/24. Deleted on destruction (its end of the pair goes with it), whatever happened.
class NetworkNamespace {
 public:
  NetworkNamespace(std::string ip, std::string name, std::string host_link, std::string link,
                   std::string host_address, std::string address)
      : ip_(std::move(ip)),
        name_(std::move(name)),
        host_link_(std::move(host_link)),
        address_(std::move(address)) {
    const CommandResult made = Shell(absl::StrReplaceAll(
        R"sh(set -e
IP netns add NS
IP link add HOST type veth peer name PEER
IP link set PEER netns NS
IP addr add HOSTADDR/24 dev HOST
IP link set HOST up
IP netns exec NS IP addr add ADDR/24 dev PEER
IP netns exec NS IP link set PEER up
IP netns exec NS IP link set lo up
)sh",
        {{"IP", ip_},
         {"NS", name_},
         {"HOSTADDR", host_address},
         {"HOST", host_link_},
         {"PEER", link},
         {"ADDR", address_}}));
    ok_ = made.exit_code == 0;
    error_ = made.err;
  }
  ~NetworkNamespace() {
    Shell(absl::StrCat(ip_, " netns del ", name_, " 2>/dev/null; ", ip_, " link del ", host_link_,
                       " 2>/dev/null; true"));
  }
  NetworkNamespace(const NetworkNamespace&) = delete;
  NetworkNamespace& operator=(const NetworkNamespace&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  const std::string& name() const { return name_; }
  const std::string& address() const { return address_; }

 private:
  std::string ip_;
  std::string name_;
  std::string host_link_;
  std::string address_;
  bool ok_ = false;
  std::string error_;
};

// One CA; per node a server certificate for its name and address; a client certificate for
// the user "tester".
bool MakeCertificates(const std::string& dir, const std::vector<std::string>& addresses,
                      std::string& error) {
  std::string script = absl::StrCat(R"sh(set -e
cd )sh",
                                    dir, R"sh(
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
key ca
openssl req -x509 -new -key ca.key -out ca.pem -days 30 -subj "/CN=gpuprof fleet test CA"
leaf() {  # name extension-line
  key $1
  printf '%s\n' "$2" > $1.ext
  openssl req -new -key $1.key -out $1.csr -subj "/CN=$1"
  openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out $1.pem -days 30 \
    -extfile $1.ext 2>/dev/null
}
leaf tester 'extendedKeyUsage=clientAuth'
)sh");
  for (size_t i = 0; i < addresses.size(); ++i) {
    absl::StrAppend(&script, "leaf ", kNodes[i], " 'subjectAltName=DNS:", kNodes[i],
                    ",IP:", addresses[i], "'\n");
  }
  const CommandResult made = Shell(script);
  error = made.err;
  return made.exit_code == 0;
}

// Keeps a command's output among the test's outputs, for whoever reads a failure.
void SaveOutput(const std::string& name, const CommandResult& result) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir == nullptr) return;
  std::ofstream(absl::StrCat(dir, "/", name, ".txt"))
      << "exit " << result.exit_code << "\n--- stdout\n"
      << result.out << "--- stderr\n"
      << result.err;
}

class FleetNetnsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ip_ = IpTool();
    if (geteuid() != 0 || ip_.empty()) {
      GTEST_SKIP() << "needs root and iproute2 (ip) to make network namespaces; geteuid()="
                   << geteuid() << ", ip at \"" << ip_ << "\"";
    }
    RemoveStaleNamespaces(ip_);
    const int pid = getpid();
    // A /24 per node in 10.<200..249>.<1..3>.0: the first second octet from the process id on
    // that no interface of the host uses yet, so that two runs at once do not share addresses.
    const std::string in_use = Shell(absl::StrCat(ip_, " -o addr show")).out;
    int second_octet = 200 + pid % 50;
    for (int k = 0; k < 50; ++k) {
      second_octet = 200 + (pid + k) % 50;
      if (!absl::StrContains(in_use, absl::StrCat(" 10.", second_octet, "."))) break;
    }
    for (int i = 0; i < 3; ++i) {
      const std::string suffix = absl::StrCat(pid % 100000, i);
      namespaces_.push_back(std::make_unique<NetworkNamespace>(
          ip_, absl::StrCat(kNamespacePrefix, pid, "-", kNodes[i]), "gph" + suffix, "gpn" + suffix,
          absl::StrCat("10.", second_octet, ".", i + 1, ".1"),
          absl::StrCat("10.", second_octet, ".", i + 1, ".2")));
      if (!namespaces_.back()->ok()) {
        GTEST_SKIP() << "cannot make a network namespace here: " << namespaces_.back()->error();
      }
    }
    cert_dir_ = MakeTempDir("fleet-pki");
    std::string error;
    std::vector<std::string> addresses;
    for (const auto& ns : namespaces_) addresses.push_back(ns->address());
    ASSERT_TRUE(MakeCertificates(cert_dir_, addresses, error)) << error;

    fleet_file_ = MakeTempDir("fleet-file") + "/fleet.textproto";
    std::ofstream(cert_dir_ + "/policy.textproto")
        << "policy_version: 1\ntls_subjects_are_local_users: true\nend_of_policy: true\n";
    std::ofstream fleet(fleet_file_);
    fleet << "node_timeout: \"5s\"\n";
    for (int i = 0; i < 3; ++i) {
      const std::string address = namespaces_[i]->address();
      daemons_.push_back(
          std::make_unique<DaemonProcess>(MakeTempDir(absl::StrCat("fleet-state-", kNodes[i]))));
      DaemonProcess& daemon = *daemons_.back();
      daemon.SetLauncher({ip_, "netns", "exec", namespaces_[i]->name()});
      daemon.AddFlags({
          // The harness' unix socket (its health check and the test's direct reads) and TCP
          // inside the namespace for the CLI.
          absl::StrCat("--listen=", daemon.target(), ",", address, ":7070"),
          absl::StrCat("--metrics_listen=", address, ":9464"),
          absl::StrCat("--tls_cert=", cert_dir_, "/", kNodes[i], ".pem"),
          absl::StrCat("--tls_key=", cert_dir_, "/", kNodes[i], ".key"),
          absl::StrCat("--tls_client_ca=", cert_dir_, "/ca.pem"),
          // One point at a time, so that a point is always under way or queued mid-sweep.
          "--cpu_slots=1",
          // The fleet's CA names this box's accounts (the CLI's certificate is "tester").
          "--policy=" + cert_dir_ + "/policy.textproto",
          "--enable_test_faults",
      });
      const absl::Status started = daemon.Start();
      ASSERT_TRUE(started.ok()) << started;
      fleet << "node { name: \"" << kNodes[i] << "\" address: \"" << address << ":7070\"\n"
            << "  tls { ca_file: \"" << cert_dir_ << "/ca.pem\" cert_file: \"" << cert_dir_
            << "/tester.pem\" key_file: \"" << cert_dir_ << "/tester.key\" } }\n";
      metrics_targets_.push_back(absl::StrCat(address, ":9464"));
      node_of_target_[metrics_targets_.back()] = kNodes[i];
    }
    fleet.close();
    prometheus_start_ = absl::Now() - absl::Seconds(5);
    auto prometheus = PrometheusServer::Start(MakeTempDir("fleet-prometheus"), metrics_targets_,
                                              kScrapeInterval, node_of_target_);
    ASSERT_TRUE(prometheus.ok()) << prometheus.status();
    prometheus_ = *std::move(prometheus);
    const absl::Status up = prometheus_->WaitForTargetsUp(absl::Seconds(60));
    ASSERT_TRUE(up.ok()) << up << "\n" << prometheus_->Log();
  }

  CommandResult Fleet(std::vector<std::string> args, absl::Duration timeout = absl::Seconds(180)) {
    args.insert(args.begin(), {RunfilePath("client/gpuprof"), "--fleet=" + fleet_file_});
    return RunCommand(args, timeout);
  }

  // The part of fleet sweep `fleet_id` on node `i`, read over its unix socket.
  std::optional<v1::Sweep> PartOn(int i, const std::string& fleet_id) {
    auto stub = daemons_[i]->NewStub();
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    v1::ListSweepsRequest list;
    v1::ListSweepsResponse listed;
    if (!stub->ListSweeps(&context, list, &listed).ok()) return std::nullopt;
    for (const v1::Sweep& sweep : listed.sweeps()) {
      const auto& labels = sweep.request().base().labels();
      const auto found = labels.find("gpuprof.fleet-sweep");
      if (found == labels.end() || found->second != fleet_id) continue;
      grpc::ClientContext get_context;
      get_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
      v1::GetSweepRequest get;
      get.set_sweep_id(sweep.id());
      v1::Sweep full;
      if (stub->GetSweep(&get_context, get, &full).ok()) return full;
    }
    return std::nullopt;
  }

  // Any fleet sweep id the node holds a part of.
  std::string FleetSweepIdOn(int i) {
    auto stub = daemons_[i]->NewStub();
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    v1::ListSweepsResponse listed;
    if (!stub->ListSweeps(&context, v1::ListSweepsRequest(), &listed).ok()) return "";
    for (const v1::Sweep& sweep : listed.sweeps()) {
      const auto& labels = sweep.request().base().labels();
      if (const auto found = labels.find("gpuprof.fleet-sweep"); found != labels.end()) {
        return found->second;
      }
    }
    return "";
  }

  std::string ip_;
  std::string cert_dir_;
  std::string fleet_file_;
  std::vector<std::string> metrics_targets_;
  std::map<std::string, std::string> node_of_target_;
  absl::Time prometheus_start_;
  // Destroyed in reverse: Prometheus, then the daemons, then their namespaces.
  std::vector<std::unique_ptr<NetworkNamespace>> namespaces_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
  std::unique_ptr<PrometheusServer> prometheus_;
};

TEST_F(FleetNetnsE2eTest, FleetSweepSurvivesANodeKilledMidSweepAndPrometheusSeesEveryNode) {
  // Every node answers over TLS through its veth pair.
  const CommandResult health = Fleet({"health"});
  ASSERT_EQ(health.exit_code, 0) << health.out << health.err;

  // 18 points, 6 per node (the nodes have no GPU: shares are even), followed live.
  CommandResult follow;
  std::thread follower([&] {
    follow = Fleet(
        {"sweep", "radix", "--num-requests", "20000:54000:2000", "--follow", "--node-wait=5m"},
        absl::Minutes(10));
  });
  // The fleet sweep's id, from node b's part; then wait until b is mid-way: a point ended,
  // others not (it runs one at a time).
  std::string fleet_id;
  std::optional<v1::Sweep> b_before;
  const absl::Time deadline = absl::Now() + absl::Minutes(3);
  while (absl::Now() < deadline) {
    if (fleet_id.empty()) fleet_id = FleetSweepIdOn(1);
    if (!fleet_id.empty()) {
      b_before = PartOn(1, fleet_id);
      if (b_before.has_value() && b_before->points_finished() >= 1) break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_FALSE(fleet_id.empty()) << "no fleet sweep reached gpu-b";
  ASSERT_TRUE(b_before.has_value());
  ASSERT_EQ(b_before->points_size(), 6);
  daemons_[1]->KillHard();
  const int b_not_ended =
      b_before->points_size() - b_before->points_finished() - b_before->points_failed();
  ASSERT_GE(b_not_ended, 1) << "gpu-b ran its points before the kill; the test proves nothing";
  RecordProperty("gpu_b_points_not_ended_at_kill", b_not_ended);

  // With gpu-b down, the other nodes finish their parts.
  for (int i : {0, 2}) {
    std::optional<v1::Sweep> part;
    const absl::Time part_deadline = absl::Now() + absl::Minutes(4);
    while (absl::Now() < part_deadline) {
      part = PartOn(i, fleet_id);
      if (part.has_value() && part->state() != v1::SWEEP_RUNNING) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    ASSERT_TRUE(part.has_value());
    EXPECT_EQ(part->state(), v1::SWEEP_FINISHED) << kNodes[i];
  }
  // A node down: the others' parts are shown, the result is marked partial, exit 6.
  const CommandResult partial = Fleet({"sweep", "get", fleet_id});
  SaveOutput("get_with_a_node_down", partial);
  EXPECT_EQ(partial.exit_code, kExitPartial) << partial.out << partial.err;
  EXPECT_THAT(partial.out, HasSubstr("gpu-a/"));
  EXPECT_THAT(partial.err, HasSubstr("partial: no answer from gpu-b"));

  // gpu-b back from the same state: its points resume and the fleet sweep finishes.
  const absl::Status restarted = daemons_[1]->Start();
  ASSERT_TRUE(restarted.ok()) << restarted;
  follower.join();
  SaveOutput("follow", follow);
  EXPECT_EQ(follow.exit_code, 0) << follow.out << follow.err;
  for (const char* node : kNodes) {
    EXPECT_THAT(follow.out, HasSubstr(absl::StrCat("\n", node, " "))) << "no row from " << node;
  }
  EXPECT_THAT(follow.err, HasSubstr("gpu-b: no answer"));
  EXPECT_THAT(follow.err, HasSubstr("gpu-b answers again"));
  EXPECT_THAT(follow.out, HasSubstr(fleet_id + ": finished"));
  const std::optional<v1::Sweep> b_after = PartOn(1, fleet_id);
  ASSERT_TRUE(b_after.has_value());
  EXPECT_EQ(b_after->state(), v1::SWEEP_FINISHED);
  EXPECT_EQ(b_after->points_finished(), 6);

  const CommandResult got = Fleet({"sweep", "get", fleet_id});
  SaveOutput("get", got);
  EXPECT_EQ(got.exit_code, 0) << got.err;
  EXPECT_THAT(got.out, HasSubstr(fleet_id + "  finished  18 points on 3 node(s): 18 finished"));
  const CommandResult listed = Fleet({"sweep", "list"});
  SaveOutput("list", listed);
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_THAT(listed.out, HasSubstr("fleet sweep " + fleet_id + ": "));

  // The same grid again, compared point by point whichever node ran each.
  const CommandResult again =
      Fleet({"sweep", "radix", "--num-requests", "20000:54000:2000", "--follow"}, absl::Minutes(8));
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  // Sweeps are listed newest first: node a's newest fleet part is the second sweep's.
  const std::string again_id = FleetSweepIdOn(0);
  ASSERT_FALSE(again_id.empty());
  ASSERT_NE(again_id, fleet_id);
  const CommandResult compared = Fleet({"compare", fleet_id, again_id});
  SaveOutput("compare_fleet_sweeps", compared);
  EXPECT_EQ(compared.exit_code, 0) << compared.out << compared.err;
  EXPECT_THAT(compared.out, HasSubstr("NODE A"));
  EXPECT_THAT(compared.out, HasSubstr("18 point(s) compared"));
  EXPECT_THAT(compared.out, HasSubstr("provenance"));

  // Node a's sweep against node b's: one daemon each.
  std::map<std::string, std::string> single;
  for (const char* node : {"gpu-a", "gpu-b"}) {
    const CommandResult submitted =
        Fleet({"--node", node, "sweep", "radix", "--num-requests", "20000,30000", "--follow"});
    ASSERT_EQ(submitted.exit_code, 0) << submitted.out << submitted.err;
    const size_t at = submitted.err.find("submitted swp-");
    ASSERT_NE(at, std::string::npos) << submitted.err;
    single[node] = submitted.err.substr(at + 10, 10);
  }
  const CommandResult a_vs_b =
      Fleet({"compare", "gpu-a/" + single["gpu-a"], "gpu-b/" + single["gpu-b"], "--format", "csv"});
  SaveOutput("compare_node_a_vs_node_b", a_vs_b);
  EXPECT_EQ(a_vs_b.exit_code, 0) << a_vs_b.out << a_vs_b.err;
  EXPECT_THAT(a_vs_b.out, HasSubstr("node_a,node_b"));
  EXPECT_THAT(a_vs_b.out, HasSubstr(",gpu-a,gpu-b\n"));

  // What the failure panels show: a crashed worker, a timed-out one, an unknown id, per node.
  for (const char* node : kNodes) {
    EXPECT_EQ(
        Fleet({"--node", node, "submit", "radix", "--label", "gpuprof.fault=crash", "--follow"})
            .exit_code,
        1);
    EXPECT_EQ(Fleet({"--node", node, "submit", "radix", "--label", "gpuprof.fault=hang",
                     "--timeout", "1s", "--follow"})
                  .exit_code,
              1);
    EXPECT_EQ(Fleet({"--node", node, "get", "exp-999999"}).exit_code, 2);
  }
  for (const std::string& target : metrics_targets_) {
    const absl::Status scraped = prometheus_->WaitForValue(
        absl::StrCat(R"(sum(gpuprof_experiments_total{instance=")", target, R"("}))"), 2,
        absl::Seconds(60));
    ASSERT_TRUE(scraped.ok()) << target << ": " << scraped;
  }
  absl::SleepFor(4 * kScrapeInterval);  // points for rate() after the last events

  // Every dashboard query, with $node (and $instance) set to each node in turn.
  const absl::StatusOr<std::vector<Dashboard>> dashboards =
      LoadDashboards(RunfilePath("dashboards"));
  ASSERT_TRUE(dashboards.ok()) << dashboards.status();
  int queries = 0;
  for (size_t n = 0; n < metrics_targets_.size(); ++n) {
    const std::string node = kNodes[n];
    const std::map<std::string, std::string> values = {
        {"__rate_interval", absl::StrCat(4 * absl::ToInt64Seconds(kScrapeInterval), "s")},
        {"__interval", absl::StrCat(absl::ToInt64Seconds(kScrapeInterval), "s")},
        {"__range", "1h"},
        {"node", GrafanaRegexValue({node})},
        {"instance", GrafanaRegexValue({metrics_targets_[n]})},
        {"gpu", ".*"},
        {"datasource", "prometheus"},
    };
    for (const Dashboard& dashboard : *dashboards) {
      for (const DashboardPanel& panel : dashboard.panels) {
        if (panel.type == "row") continue;
        const std::string key = absl::StrCat(dashboard.uid, "/", panel.title);
        for (const auto& target_value : ListField(panel.json, "targets").values()) {
          const std::string expr =
              ExpandVariables(StringField(target_value.struct_value(), "expr"), values);
          if (expr.empty()) continue;
          SCOPED_TRACE(absl::StrCat(node, ": ", key, ": ", expr));
          ++queries;
          const absl::StatusOr<google::protobuf::Struct> data =
              prometheus_->QueryRange(expr, prometheus_start_, absl::Now(), kScrapeInterval);
          if (!data.ok()) {
            ADD_FAILURE() << "Prometheus rejected the query: " << data.status();
            continue;
          }
          if (GpuOnlyPanels().contains(key)) continue;
          EXPECT_GT(SeriesWithSamples(*data), 0) << "no series for " << node;
        }
      }
    }
  }
  EXPECT_GT(queries, 60);
}

}  // namespace
}  // namespace gpuprof::testing
