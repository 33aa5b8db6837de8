// Finding 8 and part of finding 10 of issue 22, against the real daemon and CLI:
//  - an empty policy file, or one cut at a line break (which still parses), used to be taken on
//    SIGHUP and dropped every quota; now it is refused, the quotas in force stay, the audit
//    trail says policy-reload-rejected with what was missing, and a daemon does not start with
//    one;
//  - a CRL published while the daemon runs used to be ignored until a restart (OpenSSL keeps a
//    CRL it has read); now it applies on SIGHUP, and when the CRL directory changes on disk.
// The quota'd user is a second local account (made by the test, which needs root; skipped with
// the reason otherwise); the daemon's own user is the admin that reads the audit trail.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/experiment.pb.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/local_account.h"
#include "tests/testing/tls_fixture.h"

namespace gpuprof::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kTenant[] = "gpuprof-tenant";

// The tenant may have one experiment QUEUED (`max_queued` in general). One entry a line, as an
// operator writes it, so that a cut at any line break still parses.
std::string TenantPolicy(int max_queued) {
  return absl::StrCat("policy_version: 1\n",
                      "default_quota { max_priority: 0 }\n",  // everyone else
                      "users { user: \"", kTenant,
                      "\" quota { max_queued_experiments: ", max_queued, " } }\n",
                      "users { user: \"gpuprof-bystander\" quota { max_queued_experiments: 9 } }\n",
                      "end_of_policy: true\n");
}

// A collective on two fake GPUs that runs until cancelled.
std::vector<std::string> HangingCollective() {
  return {"submit", "collective", "--gpus", "0,1", "--label", "gpuprof.fault=hang", "--json"};
}

bool LogShows(const DaemonProcess& daemon, const std::string& text, int occurrences = 1) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    const std::string log = daemon.Log();
    int found = 0;
    for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) {
      ++found;
    }
    if (found >= occurrences) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

class PolicyReloadSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tenant = EnsureLocalAccount(kTenant);
    if (!tenant.ok()) GTEST_SKIP() << "no second local account: " << tenant.status();
    tenant_ = *tenant;
    const std::string state_dir = MakeTempDir("gpuprofd-policy");
    policy_path_ = MakeTempDir("policy") + "/policy.textproto";
    WriteFile(policy_path_, TenantPolicy(1));
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir,
        std::vector<std::string>{"--enable_test_faults", "--policy=" + policy_path_,
                                 "--worker_binary=" + RunfilePath("tests/ranks/fake_rank_worker")});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  void TearDown() override {
    if (daemon_ == nullptr) return;
    for (const std::string& id : submitted_) daemon_->CliAsIs({"cancel", id});
  }

  // The tenant submits; the id, or "" when refused (`result` says why).
  std::string TenantSubmits(CommandResult* result) {
    *result = daemon_->CliAs(tenant_, HangingCollective());
    auto events = ParseEventLines(result->out);
    if (result->exit_code != 0 || !events.ok() || events->empty()) return "";
    submitted_.push_back(events->front().experiment_id());
    return submitted_.back();
  }

  v1::ExperimentState StateOf(const std::string& id, v1::ExperimentState wanted) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    v1::ExperimentState state = v1::EXPERIMENT_STATE_UNSPECIFIED;
    while (absl::Now() < deadline) {
      auto experiment = ParseExperiment(daemon_->CliAsIs({"get", id, "--json"}).out);
      if (experiment.ok()) state = experiment->state();
      if (state == wanted) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return state;
  }

  // The tenant's quota is what refuses a second queued experiment.
  void ExpectQuotaHolds(const std::string& after) {
    SCOPED_TRACE(after);
    CommandResult refused;
    EXPECT_EQ(TenantSubmits(&refused), "");
    EXPECT_EQ(refused.exit_code, 4) << refused.out << refused.err;  // RESOURCE_EXHAUSTED
    EXPECT_THAT(refused.err, AllOf(HasSubstr(absl::StrCat("quota max_queued_experiments for ",
                                                          kTenant, " (users entry) is 1")),
                                   HasSubstr("1 queued")));
  }

  std::vector<v1::AuditEntry> Audit() {
    const CommandResult audit = daemon_->CliAsIs({"audit", "--limit", "1000", "--json"});
    EXPECT_EQ(audit.exit_code, 0) << audit.err;
    const auto entries = ParseJsonLines<v1::AuditEntry>(audit.out);
    EXPECT_TRUE(entries.ok()) << entries.status();
    return entries.value_or(std::vector<v1::AuditEntry>());
  }

  LocalAccount tenant_;
  std::string policy_path_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::vector<std::string> submitted_;
};

TEST_F(PolicyReloadSecurityTest, EmptyAndCutPoliciesAreRefusedOnReloadAndTheQuotaStays) {
  // The tenant runs one experiment and queues one: her whole allowance.
  CommandResult result;
  const std::string running = TenantSubmits(&result);
  ASSERT_FALSE(running.empty()) << result.err << daemon_->Log();
  ASSERT_EQ(StateOf(running, v1::RUNNING), v1::RUNNING);
  const std::string queued = TenantSubmits(&result);
  ASSERT_FALSE(queued.empty()) << result.err;
  ASSERT_EQ(StateOf(queued, v1::QUEUED), v1::QUEUED);
  ExpectQuotaHolds("under the policy as started");

  // What `> policy.textproto` leaves before the new text is written: an empty file.
  std::ofstream(policy_path_, std::ios::trunc).flush();
  ASSERT_EQ(std::filesystem::file_size(policy_path_), 0u);
  daemon_->Hangup();
  ASSERT_TRUE(LogShows(*daemon_, "policy reload refused", 1)) << daemon_->Log();
  EXPECT_THAT(daemon_->Log(), HasSubstr(policy_path_ + ": empty (no field set)"));
  ExpectQuotaHolds("an empty policy file and SIGHUP");

  // A write cut short at a line break, before the tenant's entry: the text parses, to a policy
  // without her quota.
  const std::string whole = TenantPolicy(1);
  const std::string cut = whole.substr(0, whole.find("users {"));
  ASSERT_THAT(cut, HasSubstr("default_quota"));
  WriteFile(policy_path_, cut);
  daemon_->Hangup();
  ASSERT_TRUE(LogShows(*daemon_, "policy reload refused", 2)) << daemon_->Log();
  EXPECT_THAT(daemon_->Log(), HasSubstr(policy_path_ + ": end_of_policy: missing"));
  ExpectQuotaHolds("a policy cut at a line break and SIGHUP");

  // The audit trail has both refusals, each naming what was missing.
  std::vector<std::string> rejected;
  for (const v1::AuditEntry& entry : Audit()) {
    if (entry.action() == "policy-reload-rejected") rejected.push_back(entry.detail());
    EXPECT_NE(entry.action(), "policy-reload") << entry.detail();
  }
  ASSERT_EQ(rejected.size(), 2u);
  EXPECT_THAT(rejected[0], HasSubstr("end_of_policy: missing"));  // newest first
  EXPECT_THAT(rejected[1], HasSubstr("empty (no field set)"));

  // A whole policy is still taken: with room for two, her second queued experiment gets in.
  WriteFile(policy_path_, TenantPolicy(2));
  daemon_->Hangup();
  ASSERT_TRUE(LogShows(*daemon_, "policy reloaded from " + policy_path_)) << daemon_->Log();
  const std::string second_queued = TenantSubmits(&result);
  EXPECT_FALSE(second_queued.empty()) << result.err;
}

// A daemon never starts with a policy that is empty or cut short: it says why and exits, rather
// than serve without the limits.
TEST(PolicyStartupSecurityTest, ADaemonWithAnEmptyOrCutPolicyRefusesToStart) {
  const std::string whole = TenantPolicy(1);
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& bad : std::vector<Case>{
           {"", ": empty (no field set)"},
           {whole.substr(0, whole.find("users {")), ": end_of_policy: missing"},
           {whole.substr(0, whole.find("end_of_policy")), ": end_of_policy: missing"},
       }) {
    SCOPED_TRACE(bad.text);
    const std::string policy = MakeTempDir("policy") + "/policy.textproto";
    WriteFile(policy, bad.text);
    DaemonProcess daemon(MakeTempDir("gpuprofd-policy-start"), {"--policy=" + policy});
    daemon.SpawnOnly();
    const int status = daemon.WaitForExit();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status << daemon.Log();
    EXPECT_THAT(daemon.Log(), HasSubstr("gpuprofd: " + policy + bad.message));
  }
  // The whole file starts.
  const std::string policy = MakeTempDir("policy") + "/policy.textproto";
  WriteFile(policy, whole);
  DaemonProcess daemon(MakeTempDir("gpuprofd-policy-start"), {"--policy=" + policy});
  const absl::Status started = daemon.Start();
  EXPECT_TRUE(started.ok()) << started;
}

// A CRL replaced while the daemon runs: mutual TLS on loopback, ca1's CRL in --tls_crl_dir.
class CrlReloadSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cert_dir_ = MakeTempDir("certs");
    crl_dir_ = cert_dir_ + "/crl";
    certs_ = std::make_unique<Certificates>(Certificates::Make(cert_dir_));
    const CommandResult published = certs_->PublishCrl(crl_dir_, {});  // revokes nobody
    ASSERT_EQ(published.exit_code, 0) << published.out << published.err;
    port_ = FreeLoopbackPort();
    tcp_target_ = absl::StrCat("localhost:", port_);
  }

  void StartDaemon(const std::string& reload_interval) {
    daemon_ = std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd-crl"));
    daemon_->AddFlags({absl::StrCat("--listen=", daemon_->target(), ",127.0.0.1:", port_),
                       "--tls_cert=" + certs_->Path("server1", "pem"),
                       "--tls_key=" + certs_->Path("server1", "key"),
                       "--tls_client_ca=" + certs_->Path("ca1", "pem"), "--tls_crl_dir=" + crl_dir_,
                       "--tls_reload_interval=" + reload_interval});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  CommandResult WhoAmI(const std::string& user) {
    std::vector<std::string> argv = {"--target", tcp_target_};
    for (const std::string& flag : certs_->ClientFlags(user)) argv.push_back(flag);
    argv.push_back("whoami");
    return daemon_->CliAsIs(argv);
  }

  // Polls until `user`'s handshake gives `exit_code` (3: refused), for at most 30 s.
  CommandResult WaitForWhoAmI(const std::string& user, int exit_code) {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    CommandResult result = WhoAmI(user);
    while (result.exit_code != exit_code && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(200));
      result = WhoAmI(user);
    }
    return result;
  }

  std::string cert_dir_;
  std::string crl_dir_;
  std::unique_ptr<Certificates> certs_;
  int port_ = 0;
  std::string tcp_target_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(CrlReloadSecurityTest, ACrlPublishedWhileRunningAppliesOnSighup) {
  // Files are not checked for changes within the test: only SIGHUP brings the CRL in.
  StartDaemon("1h");
  const CommandResult before = WhoAmI("alice");
  ASSERT_EQ(before.exit_code, 0) << before.err << daemon_->Log();
  EXPECT_THAT(before.out, HasSubstr("alice"));

  const CommandResult published = certs_->PublishCrl(crl_dir_, {"alice"});
  ASSERT_EQ(published.exit_code, 0) << published.out << published.err;
  // Until the signal the CRL in use is the one the daemon started with.
  EXPECT_EQ(WhoAmI("alice").exit_code, 0);

  daemon_->Hangup();
  ASSERT_TRUE(LogShows(*daemon_, "SIGHUP: TLS files reloaded (" + crl_dir_)) << daemon_->Log();
  const CommandResult revoked = WaitForWhoAmI("alice", 3);
  EXPECT_EQ(revoked.exit_code, 3) << revoked.out << daemon_->Log();
  EXPECT_THAT(revoked.err, HasSubstr("no TLS session with gpuprofd"));
  // OpenSSL's X509_V_ERR_CERT_REVOKED is 23.
  EXPECT_TRUE(LogShows(*daemon_, "Certificate verify failed with code 23")) << daemon_->Log();
  // Only alice: bob, from the same CA, still gets in, over a new connection too.
  const CommandResult bob = WhoAmI("bob");
  EXPECT_EQ(bob.exit_code, 0) << bob.err;
}

TEST_F(CrlReloadSecurityTest, ACrlChangedOnDiskAppliesAndADamagedOneKeepsTheOneInUse) {
  StartDaemon("1s");
  ASSERT_EQ(WhoAmI("bob").exit_code, 0) << daemon_->Log();
  const CommandResult published = certs_->PublishCrl(crl_dir_, {"bob"});
  ASSERT_EQ(published.exit_code, 0) << published.out << published.err;
  // No signal: the CRL directory is watched like the certificate files.
  const CommandResult revoked = WaitForWhoAmI("bob", 3);
  EXPECT_EQ(revoked.exit_code, 3) << revoked.out << daemon_->Log();
  EXPECT_THAT(daemon_->Log(), HasSubstr("changed on disk: TLS files reloaded (" + crl_dir_));

  // A CRL cut short (a copy interrupted halfway) is refused: the CRL in use stays, so bob is
  // still out and alice still in, instead of everyone of the CA being locked out. (A poll may
  // already have caught the write above half done: count refusals from here.)
  const std::string refused = "the CRLs in use stay";
  int refusals_before = 0;
  const std::string log = daemon_->Log();
  for (size_t at = log.find(refused); at != std::string::npos; at = log.find(refused, at + 1)) {
    ++refusals_before;
  }
  const std::string crl = ReadFile(crl_dir_ + "/ca1.crl.pem");
  std::ofstream(crl_dir_ + "/ca1.crl.pem", std::ios::trunc) << crl.substr(0, crl.size() / 2);
  ASSERT_TRUE(LogShows(*daemon_, refused, refusals_before + 1)) << daemon_->Log();
  EXPECT_EQ(WhoAmI("bob").exit_code, 3);
  const CommandResult alice = WhoAmI("alice");
  EXPECT_EQ(alice.exit_code, 0) << alice.err << daemon_->Log();
}

}  // namespace
}  // namespace gpuprof::testing
