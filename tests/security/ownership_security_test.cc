// Ownership of named objects and admin-only calls, attacked by a second local account on a
// shared box: the real gpuprofd (running as the test's uid, an admin by default), the real CLI
// run as two other local accounts over the unix socket (kernel-identified), a real SQLite
// store and the daemon's /metrics over HTTP. The victim names a baseline; the thief, an
// ordinary user, tries to replace and delete it and to make the admin-only calls (the audit
// trail, another user's quota, returning a GPU to service). Every attempt must be refused,
// leave the victim's baseline as it was, and be audited and counted. The runs are radix
// experiments (CPU only). Needs root to make the accounts; skipped with the reason otherwise.
#include <pwd.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/sweep.pb.h"
#include "tests/metrics/daemon_runs.h"
#include "tests/metrics/http_client.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/local_account.h"

namespace gpuprof::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kVictim[] = "gpuprof-victim";
constexpr char kThief[] = "gpuprof-thief";
constexpr char kBaseline[] = "victim-release";

// The daemon's user (the test's): an admin, whose quota the thief asks for.
std::string DaemonUser() {
  const passwd* entry = getpwuid(geteuid());
  return entry == nullptr ? absl::StrCat("uid:", geteuid()) : entry->pw_name;
}

// The value of gpuprof_access_refusals_total{reason=...} in the daemon's /metrics (0 when the
// series does not exist yet).
absl::StatusOr<double> RefusalsCounted(int metrics_port, const std::string& reason) {
  absl::StatusOr<HttpResponse> scraped = HttpGet(metrics_port, "/metrics");
  if (!scraped.ok()) return scraped.status();
  if (scraped->status_code != 200) {
    return absl::UnavailableError(absl::StrCat("/metrics answered ", scraped->status_code));
  }
  const std::string label = absl::StrCat("reason=\"", reason, "\"");
  for (absl::string_view line : absl::StrSplit(scraped->body, '\n')) {
    if (!absl::StartsWith(line, "gpuprof_access_refusals_total{") ||
        !absl::StrContains(line, label)) {
      continue;
    }
    double value = 0;
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      return absl::DataLossError(absl::StrCat("unreadable series: ", line));
    }
    return value;
  }
  return 0.0;
}

class OwnershipSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<LocalAccount> victim = EnsureLocalAccount(kVictim);
    absl::StatusOr<LocalAccount> thief = EnsureLocalAccount(kThief);
    if (!victim.ok() || !thief.ok()) {
      GTEST_SKIP() << "needs two local accounts besides the test's own: "
                   << (victim.ok() ? thief.status() : victim.status());
    }
    victim_ = *victim;
    thief_ = *thief;
    daemon_ =
        std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd-ownership"),
                                        std::vector<std::string>{"--metrics_listen=127.0.0.1:0"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
    absl::StatusOr<int> port = MetricsPortFromLog(daemon_->Log());
    ASSERT_TRUE(port.ok()) << port.status() << daemon_->Log();
    metrics_port_ = *port;
  }

  // A radix run (CPU only) by `account`, followed to the end; returns its id.
  std::string RunRadix(const LocalAccount& account, int requests) {
    const CommandResult run = daemon_->CliAs(
        account, {"submit", "radix", "--requests", absl::StrCat(requests), "--follow", "--json"},
        absl::Seconds(120));
    EXPECT_EQ(run.exit_code, 0) << run.err << daemon_->Log();
    absl::StatusOr<std::vector<v1::ExperimentEvent>> events = ParseEventLines(run.out);
    EXPECT_TRUE(events.ok() && !events->empty()) << run.out;
    return events.ok() && !events->empty() ? events->front().experiment_id() : "";
  }

  // The stored baseline, as anyone lists it.
  v1::Baseline Stored(const std::string& name) {
    const CommandResult listed = daemon_->CliAsIs({"baseline", "list", "--json"});
    EXPECT_EQ(listed.exit_code, 0) << listed.err;
    const auto baselines = ParseJsonLines<v1::Baseline>(listed.out);
    EXPECT_TRUE(baselines.ok()) << baselines.status();
    for (const v1::Baseline& baseline : baselines.value_or(std::vector<v1::Baseline>())) {
      if (baseline.name() == name) return baseline;
    }
    return v1::Baseline();
  }

  // The audit trail as the admin (the daemon's own uid) reads it with the CLI, newest first.
  std::vector<v1::AuditEntry> AuditAsAdmin(const std::string& user) {
    const CommandResult audit =
        daemon_->CliAsIs({"audit", "--user", user, "--limit", "1000", "--json"});
    EXPECT_EQ(audit.exit_code, 0) << audit.err;
    const auto entries = ParseJsonLines<v1::AuditEntry>(audit.out);
    EXPECT_TRUE(entries.ok()) << entries.status();
    return entries.value_or(std::vector<v1::AuditEntry>());
  }

  // The thief's refusals whose detail starts with `reason`, in the audit trail.
  std::vector<v1::AuditEntry> ThiefRefusals(const std::string& reason) {
    std::vector<v1::AuditEntry> refusals;
    for (const v1::AuditEntry& entry : AuditAsAdmin(kThief)) {
      if (entry.actor() == kThief && entry.action() == "refuse" &&
          absl::StartsWith(entry.detail(), reason + ":")) {
        refusals.push_back(entry);
      }
    }
    return refusals;
  }

  double Refusals(const std::string& reason) {
    absl::StatusOr<double> counted = RefusalsCounted(metrics_port_, reason);
    EXPECT_TRUE(counted.ok()) << counted.status();
    return counted.ok() ? *counted : -1;
  }

  LocalAccount victim_;
  LocalAccount thief_;
  std::unique_ptr<DaemonProcess> daemon_;
  int metrics_port_ = 0;
};

TEST_F(OwnershipSecurityTest, AnotherUserCannotReplaceOrDeleteABaseline) {
  const std::string victim_run = RunRadix(victim_, 3000);
  const std::string victim_new_run = RunRadix(victim_, 3000);
  const std::string thief_run = RunRadix(thief_, 300);
  ASSERT_FALSE(victim_run.empty() || victim_new_run.empty() || thief_run.empty());

  const CommandResult saved = daemon_->CliAs(victim_, {"baseline", "save", kBaseline, victim_run});
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  v1::Baseline baseline = Stored(kBaseline);
  EXPECT_EQ(baseline.owner(), kVictim);
  EXPECT_EQ(baseline.target_id(), victim_run);

  // The theft of finding 6: the thief points the victim's baseline at its own run.
  const CommandResult replaced =
      daemon_->CliAs(thief_, {"baseline", "save", kBaseline, thief_run, "--replace"});
  EXPECT_EQ(replaced.exit_code, 2) << replaced.out << replaced.err;  // PERMISSION_DENIED
  EXPECT_THAT(replaced.err,
              AllOf(HasSubstr("PERMISSION_DENIED"), HasSubstr(absl::StrCat("belongs to ", kVictim)),
                    HasSubstr(absl::StrCat("you are ", kThief))));
  // Nor can it undo the victim's baseline to save its own under the name.
  const CommandResult deleted = daemon_->CliAs(thief_, {"baseline", "delete", kBaseline});
  EXPECT_EQ(deleted.exit_code, 2) << deleted.out << deleted.err;
  EXPECT_THAT(deleted.err, HasSubstr(absl::StrCat("belongs to ", kVictim)));

  // Unchanged: the victim's compare still measures against the victim's own run.
  baseline = Stored(kBaseline);
  EXPECT_EQ(baseline.target_id(), victim_run);
  EXPECT_EQ(baseline.owner(), kVictim);
  EXPECT_EQ(baseline.user(), kVictim);
  const CommandResult compared = daemon_->CliAs(victim_, {"compare", kBaseline, victim_new_run});
  EXPECT_EQ(compared.exit_code, 0) << compared.err;
  EXPECT_THAT(
      compared.out + compared.err,
      AllOf(HasSubstr(absl::StrCat(kBaseline, " (", victim_run, ")")), Not(HasSubstr(thief_run))));
  const CommandResult listed = daemon_->CliAs(thief_, {"baseline", "list"});
  EXPECT_THAT(listed.out, AllOf(HasSubstr("OWNER"), HasSubstr(kVictim)));

  // Both attempts audited (read by the admin) with the owner as the one acted against, and
  // counted with the other not-owner refusals.
  const std::vector<v1::AuditEntry> refusals = ThiefRefusals("not-owner");
  ASSERT_EQ(refusals.size(), 2u);
  for (const v1::AuditEntry& refusal : refusals) {
    EXPECT_EQ(refusal.on_behalf_of(), kVictim);
    EXPECT_THAT(refusal.authenticated_by(), HasSubstr("unix peer credentials"));
    EXPECT_THAT(refusal.detail(), HasSubstr(absl::StrCat("baseline \"", kBaseline, "\"")));
  }
  EXPECT_THAT(refusals[0].detail(), HasSubstr("may delete it"));
  EXPECT_THAT(refusals[1].detail(), HasSubstr("may replace it"));
  EXPECT_EQ(Refusals("not-owner"), 2);

  // The owner's own changes go through, audited: a replace, then a delete (the undo).
  const CommandResult own_replace =
      daemon_->CliAs(victim_, {"baseline", "save", kBaseline, victim_new_run, "--replace"});
  EXPECT_EQ(own_replace.exit_code, 0) << own_replace.err;
  EXPECT_EQ(Stored(kBaseline).target_id(), victim_new_run);
  const CommandResult own_delete = daemon_->CliAs(victim_, {"baseline", "delete", kBaseline});
  EXPECT_EQ(own_delete.exit_code, 0) << own_delete.err;
  EXPECT_EQ(Stored(kBaseline).name(), "");
  std::vector<std::string> victim_changes;
  for (const v1::AuditEntry& entry : AuditAsAdmin(kVictim)) {
    if (absl::StartsWith(entry.action(), "baseline-")) {
      victim_changes.push_back(absl::StrCat(entry.action(), " ", entry.experiment_id()));
    }
  }
  EXPECT_THAT(victim_changes,
              ::testing::ElementsAre(absl::StrCat("baseline-delete ", victim_new_run),
                                     absl::StrCat("baseline-replace ", victim_new_run),
                                     absl::StrCat("baseline-save ", victim_run)));
  EXPECT_EQ(Refusals("not-owner"), 2);  // the owner's changes are no refusals
}

TEST_F(OwnershipSecurityTest, AdminOnlyCallsByAnotherUserAreRefusedAuditedAndCounted) {
  const double before = Refusals("not-admin");
  const CommandResult audit = daemon_->CliAs(thief_, {"audit"});
  EXPECT_EQ(audit.exit_code, 2) << audit.out << audit.err;
  EXPECT_THAT(audit.err, HasSubstr("the audit trail is for admins"));
  const CommandResult quota = daemon_->CliAs(thief_, {"quota", "--user", DaemonUser()});
  EXPECT_EQ(quota.exit_code, 2) << quota.out << quota.err;
  EXPECT_THAT(quota.err, HasSubstr("only admins may read another user's quota"));
  // Refused before the index is looked at: this host has no GPU 0, and the thief must not
  // learn that (nor which GPU is drained) from the answer.
  const CommandResult clear = daemon_->CliAs(thief_, {"gpu", "clear", "0"});
  EXPECT_EQ(clear.exit_code, 2) << clear.out << clear.err;
  EXPECT_THAT(clear.err, AllOf(HasSubstr("only admins may return a drained GPU to service"),
                               Not(HasSubstr("gpu_index"))));
  // The thief's own quota is its to read.
  const CommandResult own_quota = daemon_->CliAs(thief_, {"quota"});
  EXPECT_EQ(own_quota.exit_code, 0) << own_quota.err;

  // Each refusal audited: who, how they were authenticated, and which call.
  const std::vector<v1::AuditEntry> refusals = ThiefRefusals("not-admin");
  std::vector<std::string> calls;
  for (const v1::AuditEntry& refusal : refusals) {
    EXPECT_THAT(refusal.authenticated_by(), HasSubstr("unix peer credentials"));
    for (const char* call : {"ListAudit", "GetQuota", "ClearGpuHealth"}) {
      if (absl::StrContains(refusal.detail(), call)) calls.push_back(call);
    }
  }
  EXPECT_THAT(calls, ::testing::ElementsAre("ClearGpuHealth", "GetQuota", "ListAudit"));
  ASSERT_EQ(refusals.size(), 3u);
  EXPECT_EQ(refusals[1].on_behalf_of(), DaemonUser());  // whose quota was asked for
  EXPECT_EQ(Refusals("not-admin"), before + 3);
}

}  // namespace
}  // namespace gpuprof::testing
