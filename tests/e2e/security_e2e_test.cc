// Sharing the box safely, end to end: the real gpuprofd and gpuprof CLI over real sockets, with
// certificates made by openssl in each test. Who is asking (kernel credentials on the unix
// socket and loopback TCP, mutual TLS, bearer tokens), who may do what (owner or admin
// cancels, admins act on behalf of others), quotas, policy reloads and certificate rotation.
// GPU work is stood in for by tests/ranks/fake_rank_worker (fake GPUs, the real protocol), so
// GPU quotas are exercised without a GPU.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/sweep.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/tls_fixture.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A collective on two fake GPUs that runs until cancelled.
std::vector<std::string> HangingCollective(const std::string& gpus) {
  return {"submit", "collective", "--gpus", gpus, "--label", "gpuprof.fault=hang", "--json"};
}

std::string ThisUser() {
  const passwd* entry = getpwuid(geteuid());
  return entry == nullptr ? absl::StrCat("uid:", geteuid()) : entry->pw_name;
}

constexpr char kRobotToken[] = "robot-token-0123456789";
// sha256("robot-token-0123456789")
std::string RobotTokenHash() {
  const CommandResult hashed =
      RunCommand({"/bin/sh", "-c", absl::StrCat("printf %s '", kRobotToken, "' | sha256sum")});
  return hashed.out.substr(0, 64);
}

// Open-ended: tests append entries, and whoever writes the file closes it (kEndOfPolicy).
std::string TestPolicy(int alice_max_priority = 5) {
  return absl::StrCat(R"pb(
policy_version: 1
admins: "carol"
daemon_user_is_admin: false
tls_subjects_are_local_users: true
users {
  user: "alice"
  quota {
    max_queued_experiments: 2
    max_concurrent_gpus: 2
    max_priority: )pb", alice_max_priority, R"pb(
    max_timeout { seconds: 600 }
  }
}
users { user: "dave" quota { max_gpu_hours_per_day: 0.0002 } }
tokens { user: "robot" sha256: ")pb", RobotTokenHash(), R"pb(" }
)pb");
}

constexpr char kEndOfPolicy[] = "end_of_policy: true\n";

class SecurityE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = MakeTempDir("gpuprofd-security");
    cert_dir_ = MakeTempDir("certs");
    ASSERT_FALSE(state_dir_.empty());
    certs_ = std::make_unique<Certificates>(Certificates::Make(cert_dir_));
    policy_path_ = state_dir_ + "/policy.textproto";
    port_ = FreeLoopbackPort();
    tcp_target_ = absl::StrCat("localhost:", port_);
  }

  // A daemon on the unix socket and on loopback TCP (mutual TLS when `tls`).
  void StartDaemon(bool tls, std::vector<std::string> flags = {}) {
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_, std::vector<std::string>{"--enable_test_faults",
                                             "--worker_binary=" +
                                                 RunfilePath("tests/ranks/fake_rank_worker")});
    daemon_->AddFlags({absl::StrCat("--listen=", daemon_->target(), ",127.0.0.1:", port_)});
    if (tls) {
      daemon_->AddFlags({"--tls_cert=" + cert_dir_ + "/server.pem",
                         "--tls_key=" + cert_dir_ + "/server.key",
                         "--tls_client_ca=" + cert_dir_ + "/client_ca.pem"});
      std::filesystem::copy_file(certs_->Path("server1", "pem"), cert_dir_ + "/server.pem",
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::copy_file(certs_->Path("server1", "key"), cert_dir_ + "/server.key",
                                 std::filesystem::copy_options::overwrite_existing);
      std::filesystem::copy_file(certs_->Path("ca1", "pem"), cert_dir_ + "/client_ca.pem",
                                 std::filesystem::copy_options::overwrite_existing);
    }
    daemon_->AddFlags(flags);
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  void StartWithPolicy(bool tls, const std::string& policy, std::vector<std::string> flags = {}) {
    std::ofstream(policy_path_) << policy << kEndOfPolicy;
    flags.push_back("--policy=" + policy_path_);
    StartDaemon(tls, flags);
  }

  // The CLI over TLS as `user` (certificate from ca1).
  CommandResult As(const std::string& user, std::vector<std::string> args) {
    std::vector<std::string> argv = {"--target", tcp_target_};
    for (const std::string& flag : certs_->ClientFlags(user)) argv.push_back(flag);
    argv.insert(argv.end(), args.begin(), args.end());
    return daemon_->CliAsIs(argv);
  }

  std::string SubmitAs(const std::string& user, const std::vector<std::string>& args) {
    const CommandResult result = As(user, args);
    EXPECT_EQ(result.exit_code, 0) << result.err << daemon_->Log();
    auto events = ParseEventLines(result.out);
    if (!events.ok() || events->empty()) return "";
    return events->front().experiment_id();
  }

  v1::Experiment Get(const std::string& id) {
    const CommandResult result = daemon_->CliAsIs({"get", id, "--json"});
    auto experiment = ParseExperiment(result.out);
    EXPECT_TRUE(experiment.ok()) << result.err;
    return experiment.ok() ? *experiment : v1::Experiment();
  }

  v1::Experiment WaitForState(const std::string& id, v1::ExperimentState state) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    v1::Experiment experiment;
    while (absl::Now() < deadline) {
      experiment = Get(id);
      if (experiment.state() == state) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return experiment;
  }

  // Polls the daemon's log (a reload is asynchronous to the signal) for `text`.
  bool WaitForLog(const std::string& text, int occurrences = 1) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      const std::string log = daemon_->Log();
      int found = 0;
      for (size_t at = log.find(text); at != std::string::npos; at = log.find(text, at + 1)) {
        ++found;
      }
      if (found >= occurrences) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  std::string state_dir_;
  std::string cert_dir_;
  std::string policy_path_;
  std::unique_ptr<Certificates> certs_;
  int port_ = 0;
  std::string tcp_target_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(SecurityE2eTest, LocalCallersAreWhoTheKernelSaysAndCannotActForOthers) {
  StartWithPolicy(/*tls=*/false, TestPolicy());
  // Unix socket: SO_PEERCRED.
  const CommandResult unix_whoami = daemon_->CliAsIs({"whoami", "--json"});
  ASSERT_EQ(unix_whoami.exit_code, 0) << unix_whoami.err << daemon_->Log();
  EXPECT_THAT(unix_whoami.out, HasSubstr(absl::StrCat("\"user\":\"", ThisUser(), "\"")));
  EXPECT_THAT(unix_whoami.out,
              HasSubstr(absl::StrCat("unix peer credentials (uid ", geteuid(), ")")));
  // Loopback TCP: the kernel's socket table.
  const CommandResult tcp_whoami =
      daemon_->CliAsIs({"--target", absl::StrCat("127.0.0.1:", port_), "whoami", "--json"});
  ASSERT_EQ(tcp_whoami.exit_code, 0) << tcp_whoami.err;
  EXPECT_THAT(tcp_whoami.out, HasSubstr(absl::StrCat("loopback TCP owner (uid ", geteuid(), ")")));

  // Not an admin here (daemon_user_is_admin: false): --user of another is refused.
  const CommandResult impersonating =
      daemon_->CliAsIs({"--user", "alice", "submit", "collective", "--gpus", "0,1"});
  EXPECT_EQ(impersonating.exit_code, 2);
  EXPECT_THAT(impersonating.err, HasSubstr("PERMISSION_DENIED"));
  EXPECT_THAT(impersonating.err,
              HasSubstr("only admins may submit on behalf of another user (asked for alice)"));
  // Without --user the experiment is the caller's.
  const CommandResult own = daemon_->CliAsIs({"submit", "collective", "--gpus", "0,1", "--json"});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  auto events = ParseEventLines(own.out);
  ASSERT_TRUE(events.ok() && !events->empty());
  EXPECT_EQ(Get(events->front().experiment_id()).user(), ThisUser());
}

TEST_F(SecurityE2eTest, TheDaemonsOwnUserIsAnAdminWhoActsOnBehalfOfOthers) {
  StartDaemon(/*tls=*/false);  // the built-in policy
  const CommandResult submitted = daemon_->CliAsIs(
      {"--user", "alice", "submit", "collective", "--gpus", "0,1", "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  auto events = ParseEventLines(submitted.out);
  ASSERT_TRUE(events.ok() && !events->empty());
  const v1::Experiment experiment = Get(events->front().experiment_id());
  EXPECT_EQ(experiment.user(), "alice");
  EXPECT_EQ(experiment.submitted_by(), ThisUser());
  const CommandResult audit = daemon_->CliAsIs({"audit"});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_THAT(audit.out, HasSubstr(absl::StrCat("admin ", ThisUser(), " on behalf of alice")));
}

TEST_F(SecurityE2eTest, PlaintextTcpOffLoopbackAndTokensOverPlaintextAreRefused) {
  // A plaintext address reachable from other hosts: the daemon will not start.
  DaemonProcess exposed(MakeTempDir("exposed"),
                        {absl::StrCat("--listen=0.0.0.0:", FreeLoopbackPort())});
  const absl::Status started = exposed.Start();
  EXPECT_FALSE(started.ok());
  EXPECT_THAT(std::string(started.message()), HasSubstr("refusing to serve plaintext TCP"));
  EXPECT_THAT(std::string(started.message()), HasSubstr("--allow_insecure_tcp"));

  StartWithPolicy(/*tls=*/false, TestPolicy());
  // The CLI will not send a token without TLS...
  const std::string token_file = cert_dir_ + "/token";
  std::ofstream(token_file) << kRobotToken;
  const CommandResult cli = daemon_->CliAsIs(
      {"--target", absl::StrCat("127.0.0.1:", port_), "--token", token_file, "whoami"});
  EXPECT_EQ(cli.exit_code, 2);
  EXPECT_THAT(cli.err, HasSubstr("a bearer token is sent only over TLS"));
  // ...and the daemon refuses one that arrives in plaintext anyway.
  auto stub = v1::Profiler::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                                        grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.AddMetadata("authorization", absl::StrCat("Bearer ", kRobotToken));
  v1::CallerInfo caller;
  const grpc::Status status = stub->WhoAmI(&context, v1::WhoAmIRequest(), &caller);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(status.error_message(), HasSubstr("accepted only over TLS"));
}

// A certificate's subject is not a local account unless the policy says so: without
// tls_subjects_are_local_users, CN=carol is "tls:carol", neither the admin "carol" of the
// policy nor the owner of local carol's experiments.
TEST_F(SecurityE2eTest, CertificateSubjectsAreTheirOwnNameSpace) {
  StartWithPolicy(/*tls=*/true,
                  "policy_version: 1\nadmins: \"carol\"\ndaemon_user_is_admin: true\n");
  const CommandResult carol = As("carol", {"whoami", "--json"});
  ASSERT_EQ(carol.exit_code, 0) << carol.err << daemon_->Log();
  EXPECT_THAT(carol.out, HasSubstr("\"user\":\"tls:carol\""));
  EXPECT_THAT(carol.out, Not(HasSubstr("\"admin\":true")));
  // The daemon's own account (root in CI) submits over the unix socket; a certificate naming
  // the same account cannot touch it.
  const CommandResult local = daemon_->CliAsIs(
      {"submit", "collective", "--gpus", "0,1", "--label", "gpuprof.fault=hang", "--json"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto events = ParseEventLines(local.out);
  ASSERT_TRUE(events.ok() && !events->empty());
  const CommandResult cancel = As("carol", {"cancel", events->front().experiment_id()});
  EXPECT_NE(cancel.exit_code, 0) << cancel.out;
  EXPECT_THAT(cancel.err, HasSubstr("tls:carol"));
  const CommandResult audit = As("carol", {"audit"});
  EXPECT_NE(audit.exit_code, 0);
}

TEST_F(SecurityE2eTest, MutualTlsTakesTheUserFromTheCertificateAndRefusesBadOnes) {
  StartWithPolicy(/*tls=*/true, TestPolicy());
  const CommandResult alice = As("alice", {"whoami", "--json"});
  ASSERT_EQ(alice.exit_code, 0) << alice.err << daemon_->Log();
  EXPECT_THAT(alice.out, HasSubstr("\"user\":\"alice\""));
  EXPECT_THAT(alice.out, HasSubstr("TLS client certificate (CN)"));
  const CommandResult carol = As("carol", {"whoami"});
  EXPECT_THAT(carol.out, HasSubstr("admin (listed in admins)"));

  // No client certificate: the handshake is refused.
  const CommandResult anonymous = daemon_->CliAsIs(
      {"--target", tcp_target_, "--tls-ca", certs_->Path("ca1", "pem"), "whoami"});
  EXPECT_EQ(anonymous.exit_code, 3);
  EXPECT_THAT(anonymous.err, HasSubstr("refused the handshake"));
  // A certificate from another CA.
  const CommandResult foreign = daemon_->CliAsIs(
      {"--target", tcp_target_, "--tls-ca", certs_->Path("ca1", "pem"), "--tls-cert",
       certs_->Path("mallory", "pem"), "--tls-key", certs_->Path("mallory", "key"), "whoami"});
  EXPECT_EQ(foreign.exit_code, 3);
  EXPECT_THAT(foreign.err, HasSubstr("signed by the daemon's client CA"));
  // An expired certificate: the CLI says so before connecting...
  const CommandResult expired = daemon_->CliAsIs(
      {"--target", tcp_target_, "--tls-ca", certs_->Path("ca1", "pem"), "--tls-cert",
       certs_->Path("old", "pem"), "--tls-key", certs_->Path("old", "key"), "whoami"});
  EXPECT_EQ(expired.exit_code, 2);
  EXPECT_THAT(expired.err, HasSubstr("expired on Jan  2 00:00:00 2020 GMT"));
  // ...and the daemon refuses it all the same when a client sends it.
  for (const char* user : {"old", "mallory", ""}) {
    auto stub = v1::Profiler::NewStub(
        grpc::CreateChannel(tcp_target_, certs_->Credentials(user)));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    v1::CallerInfo caller;
    const grpc::Status status = stub->WhoAmI(&context, v1::WhoAmIRequest(), &caller);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << user;
  }
}

TEST_F(SecurityE2eTest, ARevokedClientCertificateIsRefusedWhileOthersGetIn) {
  // The CA revokes bob's certificate and publishes its CRL where --tls_crl_dir looks (by hash).
  const CommandResult revoked = RunCommand(
      {"/bin/sh", "-c",
       absl::StrReplaceAll(R"sh(
set -e
cd DIR
echo 01 > crlnumber
openssl ca -config ca.cnf -cert ca1.pem -keyfile ca1.key -revoke bob.pem 2>&1
mkdir -p crl
openssl ca -config ca.cnf -cert ca1.pem -keyfile ca1.key -gencrl -out crl/ca1.crl.pem 2>&1
openssl rehash crl
openssl crl -in crl/ca1.crl.pem -noout -text | grep -A1 'Serial Number'
)sh",
                           {{"DIR", cert_dir_}})});
  ASSERT_EQ(revoked.exit_code, 0) << revoked.out << revoked.err;
  StartWithPolicy(/*tls=*/true, TestPolicy(), {"--tls_crl_dir=" + cert_dir_ + "/crl"});

  // Alice's certificate, from the same CA and not revoked, still gets in.
  const CommandResult alice = As("alice", {"whoami", "--json"});
  ASSERT_EQ(alice.exit_code, 0) << alice.err << daemon_->Log();
  EXPECT_THAT(alice.out, HasSubstr("\"user\":\"alice\""));
  // Bob's is refused at the handshake, and the CLI says what to check.
  const CommandResult bob = As("bob", {"whoami"});
  EXPECT_EQ(bob.exit_code, 3) << bob.out;
  EXPECT_THAT(bob.err, HasSubstr("no TLS session with gpuprofd"));
  EXPECT_THAT(bob.err, HasSubstr("not revoked"));
  std::printf("what a client with a revoked certificate is told:\n%s\n", bob.err.c_str());
  // The daemon's log names the reason: OpenSSL's X509_V_ERR_CERT_REVOKED is 23.
  EXPECT_TRUE(WaitForLog("Certificate verify failed with code 23")) << daemon_->Log();
  auto stub = v1::Profiler::NewStub(grpc::CreateChannel(tcp_target_, certs_->Credentials("bob")));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::CallerInfo caller;
  const grpc::Status status = stub->WhoAmI(&context, v1::WhoAmIRequest(), &caller);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE) << status.error_message();
}

TEST_F(SecurityE2eTest, BearerTokensOverTlsWhenClientCertificatesAreOptional) {
  StartWithPolicy(/*tls=*/true, TestPolicy(), {"--tls_require_client_cert=false"});
  const std::string token_file = cert_dir_ + "/token";
  std::ofstream(token_file) << kRobotToken << "\n";
  const CommandResult robot =
      daemon_->CliAsIs({"--target", tcp_target_, "--tls-ca", certs_->Path("ca1", "pem"),
                        "--token", token_file, "whoami", "--json"});
  ASSERT_EQ(robot.exit_code, 0) << robot.err << daemon_->Log();
  EXPECT_THAT(robot.out, HasSubstr("\"user\":\"robot\""));
  EXPECT_THAT(robot.out, HasSubstr("bearer token"));

  std::ofstream(token_file) << "not-a-token";
  const CommandResult wrong =
      daemon_->CliAsIs({"--target", tcp_target_, "--tls-ca", certs_->Path("ca1", "pem"),
                        "--token", token_file, "whoami"});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_THAT(wrong.err, HasSubstr("the bearer token is not in the daemon's policy"));

  const CommandResult nothing = daemon_->CliAsIs(
      {"--target", tcp_target_, "--tls-ca", certs_->Path("ca1", "pem"), "whoami"});
  EXPECT_EQ(nothing.exit_code, 2);
  EXPECT_THAT(nothing.err, HasSubstr("no client certificate and no bearer token"));
  // A client certificate still works.
  EXPECT_EQ(As("alice", {"whoami"}).exit_code, 0);
}

TEST_F(SecurityE2eTest, OnlyTheOwnerOrAnAdminCancels) {
  StartWithPolicy(/*tls=*/true, TestPolicy());
  const std::string id = SubmitAs("bob", HangingCollective("0,1"));
  ASSERT_FALSE(id.empty());
  const CommandResult by_alice = As("alice", {"cancel", id});
  EXPECT_EQ(by_alice.exit_code, 2);
  EXPECT_THAT(by_alice.err, HasSubstr(absl::StrCat("experiment ", id, " belongs to bob; only "
                                                   "its owner or an admin may cancel it")));
  EXPECT_NE(Get(id).state(), v1::CANCELLED);
  // Everyone reads.
  EXPECT_EQ(As("alice", {"get", id}).exit_code, 0);

  const CommandResult by_carol = As("carol", {"cancel", id});
  ASSERT_EQ(by_carol.exit_code, 0) << by_carol.err;
  const v1::Experiment cancelled = Get(id);
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  EXPECT_EQ(cancelled.reason(), "cancelled by carol");

  const std::string own = SubmitAs("bob", HangingCollective("2,3"));
  EXPECT_EQ(As("bob", {"cancel", own}).exit_code, 0);

  // The audit trail, for admins only.
  EXPECT_EQ(As("bob", {"audit"}).exit_code, 2);
  const CommandResult audit = As("carol", {"audit", "--experiment", id});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_THAT(audit.out, HasSubstr("cancel"));
  EXPECT_THAT(audit.out, HasSubstr("submit"));
  const CommandResult refusals = As("carol", {"audit", "--user", "alice"});
  EXPECT_THAT(refusals.out, HasSubstr("not-owner"));
}

TEST_F(SecurityE2eTest, EveryQuotaRefusesWithItsNameValueAndUse) {
  StartWithPolicy(/*tls=*/true, TestPolicy());
  // Two GPUs running (alice's max_concurrent_gpus), then two queued: the next one waits on
  // her GPU cap, not on free GPUs (2 and 3 are free).
  const std::string running = SubmitAs("alice", HangingCollective("0,1"));
  ASSERT_EQ(WaitForState(running, v1::RUNNING).state(), v1::RUNNING);
  const std::vector<std::string> any_two = {"submit", "collective", "--gpu-count", "2", "--label",
                                            "gpuprof.fault=hang", "--json"};
  const std::string capped = SubmitAs("alice", any_two);
  const std::string queued = SubmitAs("alice", any_two);
  EXPECT_EQ(Get(capped).state(), v1::QUEUED);
  EXPECT_EQ(Get(queued).state(), v1::QUEUED);
  // Another user gets GPUs 2 and 3 at once.
  const std::string bobs = SubmitAs("bob", HangingCollective("2,3"));
  EXPECT_EQ(WaitForState(bobs, v1::RUNNING).state(), v1::RUNNING);
  EXPECT_EQ(Get(capped).state(), v1::QUEUED);

  const CommandResult third = As("alice", HangingCollective("2,3"));
  EXPECT_EQ(third.exit_code, 4);  // RESOURCE_EXHAUSTED
  EXPECT_THAT(third.err, HasSubstr("RESOURCE_EXHAUSTED: quota max_queued_experiments for alice "
                                   "(users entry) is 2; in use: 2 queued experiment(s)"));
  const CommandResult wide = As("alice", {"submit", "collective", "--gpu-count", "4"});
  EXPECT_EQ(wide.exit_code, 2);
  EXPECT_THAT(wide.err, HasSubstr("PERMISSION_DENIED: quota max_concurrent_gpus for alice "
                                  "(users entry) is 2; the request needs 4 GPU(s)"));
  const CommandResult urgent =
      As("alice", {"submit", "collective", "--gpus", "0,1", "--priority", "9"});
  EXPECT_EQ(urgent.exit_code, 2);
  EXPECT_THAT(urgent.err, HasSubstr("PERMISSION_DENIED: quota max_priority for alice (users "
                                    "entry) is 5; the request asks for 9"));
  const CommandResult slow =
      As("alice", {"submit", "collective", "--gpus", "0,1", "--timeout", "1h"});
  EXPECT_EQ(slow.exit_code, 2);
  EXPECT_THAT(slow.err, HasSubstr("PERMISSION_DENIED: quota max_timeout for alice (users "
                                  "entry) is 10m; the request asks for 1h"));

  // The queue moves when her GPUs free up.
  ASSERT_EQ(As("alice", {"cancel", running}).exit_code, 0);
  EXPECT_EQ(WaitForState(capped, v1::RUNNING).state(), v1::RUNNING);
  for (const std::string& id : {capped, queued}) {
    ASSERT_EQ(As("alice", {"cancel", id}).exit_code, 0);
  }
  ASSERT_EQ(As("bob", {"cancel", bobs}).exit_code, 0);

  // GPU-hours over the last day: dave may use 0.0002 (0.72 GPU-seconds).
  const std::string daves = SubmitAs("dave", {"submit", "collective", "--gpus", "0,1", "--json"});
  ASSERT_EQ(WaitForState(daves, v1::FINISHED).state(), v1::FINISHED);
  const std::string hog = SubmitAs("dave", HangingCollective("0,1"));
  ASSERT_EQ(WaitForState(hog, v1::RUNNING).state(), v1::RUNNING);
  // Hold the GPUs until the allowance is used up (2 GPUs for about 0.4 s).
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    const CommandResult use = As("dave", {"quota", "--json"});
    v1::QuotaReport report;
    if (google::protobuf::util::JsonStringToMessage(use.out, &report).ok() &&
        report.gpu_hours_last_day() >= 0.0002) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(As("dave", {"cancel", hog}).exit_code, 0);
  const CommandResult over = As("dave", {"submit", "collective", "--gpus", "0,1"});
  EXPECT_EQ(over.exit_code, 4);  // RESOURCE_EXHAUSTED
  EXPECT_THAT(over.err, HasSubstr("RESOURCE_EXHAUSTED: quota max_gpu_hours_per_day for dave "
                                  "(users entry) is 0.0002; in use: 0.00"));
  const CommandResult quota = As("dave", {"quota", "--json"});
  EXPECT_THAT(quota.out, HasSubstr("\"maxGpuHoursPerDay\":0.0002"));

  // Each refusal is in the audit trail.
  const CommandResult audit = As("carol", {"audit", "--user", "alice"});
  EXPECT_THAT(audit.out, HasSubstr("quota:max_queued_experiments"));
  EXPECT_THAT(audit.out, HasSubstr("quota:max_priority"));
}

// A sweep over two message sizes on fake GPUs 0 and 1 whose points run until cancelled.
std::vector<std::string> HangingSweep(const std::string& sizes) {
  return {"sweep", "collective", "--gpus", "0,1", "--bytes-per-rank", sizes, "--label",
          "gpuprof.fault=hang"};
}

v1::Sweep ParseSweep(const CommandResult& result) {
  v1::Sweep sweep;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(result.out, &sweep).ok())
      << result.out << result.err;
  return sweep;
}

TEST_F(SecurityE2eTest, OnlyTheOwnerOrAnAdminCancelsASweep) {
  StartWithPolicy(/*tls=*/true, TestPolicy());
  std::vector<std::string> submit = HangingSweep("1M,2M");
  submit.push_back("--json");
  const CommandResult submitted = As("bob", submit);
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err << daemon_->Log();
  const v1::Sweep sweep = ParseSweep(submitted);
  ASSERT_FALSE(sweep.id().empty());
  // The sweep and its points belong to the authenticated caller.
  EXPECT_EQ(sweep.user(), "bob");
  EXPECT_THAT(sweep.authenticated_by(), HasSubstr("TLS client certificate"));
  EXPECT_EQ(Get(sweep.points(0).experiment_id()).user(), "bob");

  const CommandResult by_alice = As("alice", {"sweep", "cancel", sweep.id()});
  EXPECT_EQ(by_alice.exit_code, 2);
  EXPECT_THAT(by_alice.err, HasSubstr(absl::StrCat("sweep ", sweep.id(), " belongs to bob; only "
                                                   "its owner or an admin may cancel it")));
  const v1::Sweep untouched = ParseSweep(As("alice", {"sweep", "get", sweep.id(), "--json"}));
  EXPECT_EQ(untouched.state(), v1::SWEEP_RUNNING);
  EXPECT_FALSE(untouched.cancel_requested());
  for (const v1::SweepPoint& point : untouched.points()) {
    EXPECT_NE(point.state(), v1::CANCELLED);
  }
  // Nor may she submit one in bob's name: --user is for admins.
  std::vector<std::string> for_bob = {"--user", "bob"};
  for (const std::string& arg : HangingSweep("1M,2M")) for_bob.push_back(arg);
  const CommandResult on_behalf = As("alice", for_bob);
  EXPECT_EQ(on_behalf.exit_code, 2);
  EXPECT_THAT(on_behalf.err,
              HasSubstr("only admins may submit a sweep on behalf of another user (asked for "
                        "bob)"));

  const CommandResult by_carol = As("carol", {"sweep", "cancel", sweep.id(), "--json"});
  ASSERT_EQ(by_carol.exit_code, 0) << by_carol.err;
  const v1::Sweep cancelled = ParseSweep(by_carol);
  EXPECT_EQ(cancelled.state(), v1::SWEEP_CANCELLED);
  EXPECT_EQ(cancelled.reason(), "cancelled by carol");

  // Submit and cancel are in the audit trail, and so is alice's refusal.
  const CommandResult audit = As("carol", {"audit", "--experiment", sweep.id()});
  ASSERT_EQ(audit.exit_code, 0) << audit.err;
  EXPECT_THAT(audit.out, HasSubstr("sweep-submit"));
  EXPECT_THAT(audit.out, HasSubstr("sweep-cancel"));
  const CommandResult refusals = As("carol", {"audit", "--user", "alice"});
  EXPECT_THAT(refusals.out, HasSubstr("not-owner"));
  EXPECT_THAT(refusals.out, HasSubstr("on-behalf-of"));
}

TEST_F(SecurityE2eTest, ASweepCountsAgainstTheQuotasAndIsRefusedWhole) {
  StartWithPolicy(/*tls=*/true, TestPolicy());
  // alice may have 2 experiments queued: 3 points do not fit, and nothing is stored.
  const CommandResult three = As("alice", HangingSweep("1M,2M,4M"));
  EXPECT_EQ(three.exit_code, 4);  // RESOURCE_EXHAUSTED
  EXPECT_THAT(three.err,
              HasSubstr("RESOURCE_EXHAUSTED: quota max_queued_experiments for alice (users "
                        "entry) is 2; in use: 0 queued experiment(s); the sweep would add 3 "
                        "points"));
  EXPECT_THAT(As("alice", {"sweep", "list"}).out, HasSubstr("no sweeps"));
  EXPECT_THAT(As("alice", {"list"}).out, HasSubstr("no experiments"));
  // A point over a per-request limit is named.
  std::vector<std::string> urgent = HangingSweep("1M,2M");
  urgent.insert(urgent.end(), {"--priority", "9"});
  const CommandResult refused = As("alice", urgent);
  EXPECT_EQ(refused.exit_code, 2);  // PERMISSION_DENIED
  EXPECT_THAT(refused.err, HasSubstr("point 0: quota max_priority for alice (users entry) is 5; "
                                     "the request asks for 9"));

  // Two points fit; the admin is not limited.
  std::vector<std::string> two = HangingSweep("1M,2M");
  two.push_back("--json");
  const CommandResult fits = As("alice", two);
  ASSERT_EQ(fits.exit_code, 0) << fits.err;
  const v1::Sweep sweep = ParseSweep(fits);
  std::vector<std::string> big = HangingSweep("1M,2M,4M");
  big.push_back("--json");
  const CommandResult by_carol = As("carol", big);
  ASSERT_EQ(by_carol.exit_code, 0) << by_carol.err;
  const v1::Sweep carols = ParseSweep(by_carol);

  const CommandResult audit = As("carol", {"audit", "--user", "alice"});
  EXPECT_THAT(audit.out, HasSubstr("quota:max_queued_experiments"));
  EXPECT_THAT(audit.out, HasSubstr("quota:max_priority"));
  EXPECT_EQ(As("alice", {"sweep", "cancel", sweep.id()}).exit_code, 0);
  EXPECT_EQ(As("carol", {"sweep", "cancel", carols.id()}).exit_code, 0);
}

TEST_F(SecurityE2eTest, APolicyReloadWithAnErrorKeepsTheOldPolicy) {
  StartWithPolicy(/*tls=*/true, TestPolicy(/*alice_max_priority=*/5));
  std::ofstream(policy_path_) << TestPolicy(9) << "users { user: \"erin\" quota { "
                                                  "max_queued_experiments: -1 } }\n"
                              << kEndOfPolicy;
  daemon_->Hangup();
  ASSERT_TRUE(WaitForLog("policy reload refused")) << daemon_->Log();
  EXPECT_THAT(daemon_->Log(), HasSubstr("users[2].quota.max_queued_experiments: got -1"));
  const CommandResult still = As("alice", {"submit", "collective", "--gpus", "0,1",
                                           "--priority", "9"});
  EXPECT_EQ(still.exit_code, 2);
  EXPECT_THAT(still.err, HasSubstr("quota max_priority for alice (users entry) is 5"));

  std::ofstream(policy_path_) << TestPolicy(9) << kEndOfPolicy;
  daemon_->Hangup();
  ASSERT_TRUE(WaitForLog("policy reloaded from")) << daemon_->Log();
  const CommandResult now =
      As("alice", {"submit", "collective", "--gpus", "0,1", "--priority", "9"});
  EXPECT_EQ(now.exit_code, 0) << now.err;
  const CommandResult audit = As("carol", {"audit"});
  EXPECT_THAT(audit.out, HasSubstr("policy-reload-rejected"));
  EXPECT_THAT(audit.out, HasSubstr("policy-reload "));
}

TEST_F(SecurityE2eTest, CertificatesAndTheCaRotateWithoutARestart) {
  StartWithPolicy(/*tls=*/true, TestPolicy(), {"--tls_reload_interval=1s"});
  ASSERT_EQ(As("alice", {"whoami"}).exit_code, 0);
  // The new server certificate and client CA both come from ca2.
  WriteFile(cert_dir_ + "/client_ca.pem", ReadFile(certs_->Path("ca2", "pem")));
  WriteFile(cert_dir_ + "/server.key", ReadFile(certs_->Path("server2", "key")));
  WriteFile(cert_dir_ + "/server.pem", ReadFile(certs_->Path("server2", "pem")));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  CommandResult mallory;
  while (absl::Now() < deadline) {
    mallory = daemon_->CliAsIs(
        {"--target", tcp_target_, "--tls-ca", certs_->Path("ca2", "pem"), "--tls-cert",
         certs_->Path("mallory", "pem"), "--tls-key", certs_->Path("mallory", "key"), "whoami"});
    if (mallory.exit_code == 0) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(mallory.exit_code, 0) << mallory.err << daemon_->Log();
  EXPECT_THAT(mallory.out, HasSubstr("mallory"));
  // Certificates from the old CA no longer get in.
  EXPECT_EQ(daemon_->CliAsIs({"--target", tcp_target_, "--tls-ca", certs_->Path("ca2", "pem"),
                              "--tls-cert", certs_->Path("alice", "pem"), "--tls-key",
                              certs_->Path("alice", "key"), "whoami"})
                .exit_code,
            3);
}

TEST_F(SecurityE2eTest, CertificatesAndTheCaReloadOnSighup) {
  // Files are not checked for changes within the test: only SIGHUP can bring them in.
  StartWithPolicy(/*tls=*/true, TestPolicy(), {"--tls_reload_interval=1h"});
  ASSERT_EQ(As("alice", {"whoami"}).exit_code, 0);
  WriteFile(cert_dir_ + "/client_ca.pem", ReadFile(certs_->Path("ca2", "pem")));
  WriteFile(cert_dir_ + "/server.key", ReadFile(certs_->Path("server2", "key")));
  WriteFile(cert_dir_ + "/server.pem", ReadFile(certs_->Path("server2", "pem")));
  const std::vector<std::string> as_mallory = {
      "--target", tcp_target_, "--tls-ca", certs_->Path("ca2", "pem"), "--tls-cert",
      certs_->Path("mallory", "pem"), "--tls-key", certs_->Path("mallory", "key"), "whoami"};
  // Before the signal the old files are in use: new clients still need ca1.
  EXPECT_EQ(As("alice", {"whoami"}).exit_code, 0);
  EXPECT_EQ(daemon_->CliAsIs(as_mallory).exit_code, 3);
  daemon_->Hangup();
  ASSERT_TRUE(WaitForLog("SIGHUP: TLS files reloaded")) << daemon_->Log();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  CommandResult mallory;
  while (absl::Now() < deadline) {
    mallory = daemon_->CliAsIs(as_mallory);
    if (mallory.exit_code == 0) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(mallory.exit_code, 0) << mallory.err << daemon_->Log();
  EXPECT_THAT(mallory.out, HasSubstr("mallory"));
  EXPECT_EQ(As("alice", {"whoami"}).exit_code, 3);
  // A second SIGHUP with nothing changed reloads nothing and keeps serving.
  daemon_->Hangup();
  ASSERT_TRUE(WaitForLog("SIGHUP: reloading configuration", 2));
  EXPECT_EQ(daemon_->CliAsIs(as_mallory).exit_code, 0);
}

TEST_F(SecurityE2eTest, APreemptedExperimentIsQueuedAgainAndLaterFinishes) {
  StartWithPolicy(/*tls=*/true, TestPolicy() + R"pb(
preemption { min_preempting_priority: 5 grace_period { seconds: 1 } }
)pb");
  // Bob's experiment holds every GPU for 15 s.
  const std::string bobs = SubmitAs(
      "bob", {"submit", "collective", "--gpus", "0,1,2,3", "--label", "fake.run_ms=15000",
              "--json"});
  ASSERT_EQ(WaitForState(bobs, v1::RUNNING).state(), v1::RUNNING);
  // An admin's urgent experiment needs two of them.
  const std::string urgent = SubmitAs(
      "carol", {"submit", "collective", "--gpus", "0,1", "--priority", "9", "--json"});
  EXPECT_EQ(WaitForState(urgent, v1::FINISHED).state(), v1::FINISHED) << daemon_->Log();
  const v1::Experiment bob_after = WaitForState(bobs, v1::FINISHED);
  EXPECT_EQ(bob_after.state(), v1::FINISHED) << daemon_->Log();

  // Bob's history: run, preempted, queued again, run again from the start, finished.
  const CommandResult history = daemon_->CliAsIs({"watch", bobs, "--json"});
  auto events = ParseEventLines(history.out);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<v1::ExperimentState> states;
  std::string preempted_reason;
  int setups = 0;
  for (const v1::ExperimentEvent& event : *events) {
    if (event.has_state()) states.push_back(event.state().state());
    if (event.has_state() && event.state().state() == v1::PREEMPTED) {
      preempted_reason = event.state().reason();
    }
    if (event.has_progress() && event.rank() == 0) ++setups;
  }
  EXPECT_THAT(states, ::testing::ElementsAre(v1::QUEUED, v1::RUNNING, v1::PREEMPTED, v1::QUEUED,
                                             v1::RUNNING, v1::FINISHED));
  EXPECT_THAT(preempted_reason, HasSubstr(absl::StrCat("preempted by ", urgent, " (priority 9)")));
  EXPECT_EQ(setups, 2);  // rank 0 started twice
  const CommandResult audit = As("carol", {"audit", "--experiment", bobs});
  EXPECT_THAT(audit.out, HasSubstr("preempt"));
}

}  // namespace
}  // namespace gpuprof::testing
