#include "daemon/admission/access_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// `body` as a complete policy file: the header first, the end marker last.
std::string Whole(const std::string& body) {
  return "policy_version: 1\n" + body + "\nend_of_policy: true\n";
}

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(ParseAccessPolicyTest, AcceptsAFullPolicy) {
  auto policy = ParseAccessPolicy(
      R"pb(
        policy_version: 1
        admins: "alice"
        admin_groups: "wheel"
        daemon_user_is_admin: false
        default_quota {
          max_queued_experiments: 5
          max_timeout { seconds: 600 }
        }
        users {
          user: "bob"
          quota { max_priority: 3 max_concurrent_gpus: 2 }
        }
        groups {
          group: "interns"
          quota { max_gpu_hours_per_day: 1.5 }
        }
        tokens {
          user: "ci"
          sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        }
        end_of_policy: true
      )pb",
      "policy.textproto");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->admins(0), "alice");
  EXPECT_FALSE(policy->daemon_user_is_admin());
  EXPECT_FALSE(policy->tls_subjects_are_local_users());
}

TEST(ParseAccessPolicyTest, UnknownFieldIsNamedWithItsLine) {
  auto policy = ParseAccessPolicy("admins: \"a\"\nadmin: \"b\"\n", "p.textproto");
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(policy.status().message(), AllOf(HasSubstr("p.textproto:2:"), HasSubstr("admin")));
}

TEST(ParseAccessPolicyTest, AnEmptyFileIsNotAPolicy) {
  for (const std::string text : {"", "\n\n", "# nothing but a comment\n"}) {
    auto policy = ParseAccessPolicy(text, "p.textproto");
    ASSERT_FALSE(policy.ok()) << "\"" << text << "\"";
    EXPECT_THAT(policy.status().message(),
                AllOf(HasSubstr("p.textproto: empty"), HasSubstr("\"policy_version: 1\""),
                      HasSubstr("\"end_of_policy: true\"")));
  }
}

// Every way of cutting a policy at a line break leaves text that parses (each field is on one
// line) and is refused all the same, naming the missing end; only the whole file is accepted.
TEST(ParseAccessPolicyTest, APolicyCutAtAnyLineBreakIsRefused) {
  // Not an R"pb" string: clang-format would spread the entries over several lines.
  const std::string whole = R"txt(policy_version: 1
admins: "carol"
default_quota { max_queued_experiments: 20 }
users { user: "alice" quota { max_queued_experiments: 1 max_priority: 3 } }
# a comment
groups { group: "interns" quota { max_concurrent_gpus: 2 } }
end_of_policy: true
)txt";
  ASSERT_TRUE(ParseAccessPolicy(whole, "p").ok()) << ParseAccessPolicy(whole, "p").status();
  int cuts = 0;
  for (size_t at = whole.find('\n'); at + 1 < whole.size(); at = whole.find('\n', at + 1)) {
    const std::string cut = whole.substr(0, at + 1);
    auto policy = ParseAccessPolicy(cut, "p.textproto");
    ASSERT_FALSE(policy.ok()) << cut;
    EXPECT_THAT(policy.status().message(),
                HasSubstr("end_of_policy: missing; a policy's last line is "
                          "\"end_of_policy: true\", and a file without it is taken to be cut "
                          "short"))
        << cut;
    ++cuts;
  }
  EXPECT_EQ(cuts, 6);
}

TEST(ParseAccessPolicyTest, TheHeaderComesFirstWithASupportedVersion) {
  auto missing = ParseAccessPolicy("admins: \"a\"\nend_of_policy: true\n", "p");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(),
              HasSubstr("policy_version: missing; a policy's first line is \"policy_version: 1\""));
  auto future = ParseAccessPolicy("policy_version: 2\nend_of_policy: true\n", "p");
  ASSERT_FALSE(future.ok());
  EXPECT_THAT(future.status().message(),
              HasSubstr("policy_version: got 2; this gpuprofd reads version 1"));
  auto late = ParseAccessPolicy("admins: \"a\"\npolicy_version: 1\nend_of_policy: true\n", "p");
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.status().message(),
              HasSubstr("policy_version: must be the first field; line 1 sets admins before it"));
}

TEST(ParseAccessPolicyTest, TheEndMarkerComesLastAndIsTrue) {
  // A marker written first would let a cut file through: it must close the file.
  auto early = ParseAccessPolicy("policy_version: 1\nend_of_policy: true\nadmins: \"a\"\n", "p");
  ASSERT_FALSE(early.ok());
  EXPECT_THAT(early.status().message(),
              HasSubstr("end_of_policy: must be the last field; line 3 sets admins after it"));
  auto nested_after =
      ParseAccessPolicy("policy_version: 1\nend_of_policy: true\nusers {\n user: \"a\"\n}\n", "p");
  ASSERT_FALSE(nested_after.ok());
  EXPECT_THAT(nested_after.status().message(), HasSubstr("line 3 sets users after it"));
  auto falsely = ParseAccessPolicy("policy_version: 1\nend_of_policy: false\n", "p");
  ASSERT_FALSE(falsely.ok());
  EXPECT_THAT(falsely.status().message(), HasSubstr("end_of_policy: got false; must be true"));
  // Comments and blank lines after the marker are fine; so is everything on one line.
  EXPECT_TRUE(ParseAccessPolicy("policy_version: 1\nend_of_policy: true\n\n# done\n", "p").ok());
  EXPECT_TRUE(ParseAccessPolicy("policy_version: 1 admins: \"a\" end_of_policy: true", "p").ok());
}

// The policies the repository ships are complete ones (paths in the runfiles tree).
TEST(ParseAccessPolicyTest, TheShippedPoliciesAreAccepted) {
  for (const std::string path :
       {"deploy/k8s/base/policy.textproto", "deploy/k8s/overlays/example/policy.textproto"}) {
    const auto policy = LoadAccessPolicyFile(path);
    EXPECT_TRUE(policy.ok()) << policy.status();
  }
}

TEST(ValidateAccessPolicyTest, UserNamesNeverCollideWithTheCatchAll) {
  auto policy = ParseAccessPolicy(
      Whole(R"pb(
        admins: "a(b"
        users { user: "(other)" }
        tokens {
          user: "x)"
          sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        }
      )pb"),
      "p");
  ASSERT_FALSE(policy.ok());
  const std::string message(policy.status().message());
  EXPECT_THAT(message, HasSubstr("admins[0]: got \"a(b\"; a user name has no parentheses "
                                 "(\"(other)\" stands for every user without a users entry)"));
  EXPECT_THAT(message, HasSubstr("users[0].user: got \"(other)\"; a user name has no parentheses"));
  EXPECT_THAT(message, HasSubstr("tokens[0].user: got \"x)\""));
  // A user literally named "other" is an ordinary user now.
  EXPECT_TRUE(ParseAccessPolicy(Whole("users { user: \"other\" }"), "p").ok());
}

TEST(ValidateAccessPolicyTest, CertificateUsersAreNamedWithTheTlsPrefix) {
  auto policy = ParseAccessPolicy(
      Whole(R"pb(
        admins: "tls:carol"
        users {
          user: "tls:alice"
          quota { max_queued_experiments: 1 }
        }
        users {
          user: "alice"
          quota { max_queued_experiments: 5 }
        }
        tokens {
          user: "tls:robot"
          sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
        }
      )pb"),
      "p");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_FALSE(policy->tls_subjects_are_local_users());
  EXPECT_TRUE(DecideAdmin(*policy, "tls:carol", {}, false).admin);
  EXPECT_FALSE(DecideAdmin(*policy, "carol", {}, false).admin);
  EXPECT_EQ(ResolveQuota(*policy, "tls:alice", {}).limits.max_queued_experiments(), 1);
  EXPECT_EQ(ResolveQuota(*policy, "alice", {}).limits.max_queued_experiments(), 5);

  auto empty_subject = ParseAccessPolicy(Whole("admins: \"tls:\""), "p");
  ASSERT_FALSE(empty_subject.ok());
  EXPECT_THAT(empty_subject.status().message(),
              HasSubstr("admins[0]: got \"tls:\"; name the certificate subject after tls:"));
  // When subjects are local users, a tls: name can never match anyone: refused, not ignored.
  auto dead = ParseAccessPolicy(
      Whole("tls_subjects_are_local_users: true\nusers { user: \"tls:alice\" }"), "p");
  ASSERT_FALSE(dead.ok());
  EXPECT_THAT(dead.status().message(),
              HasSubstr("users[0].user: got \"tls:alice\", which names no one: with "
                        "tls_subjects_are_local_users: true a certificate's subject is the "
                        "local user of the same name; write \"alice\""));
  // ...unless a token's user has that name: the entry is the token holder's.
  EXPECT_TRUE(ParseAccessPolicy(Whole(R"txt(tls_subjects_are_local_users: true
users { user: "tls:robot" quota { max_priority: 1 } }
tokens { user: "tls:robot" sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" }
)txt"),
                                "p")
                  .ok());
}

TEST(ValidateAccessPolicyTest, NamesEveryBadField) {
  auto policy = ParseAccessPolicy(Whole(R"pb(
                                    users {
                                      user: "bob"
                                      quota { max_queued_experiments: -1 }
                                    }
                                    users { user: "bob" }
                                    groups { group: "" }
                                    tokens { user: "ci" sha256: "secret-token" }
                                    default_quota {
                                      max_gpu_hours_per_day: -2
                                      max_timeout { seconds: -5 }
                                    }
                                  )pb"),
                                  "p");
  ASSERT_FALSE(policy.ok());
  const std::string message(policy.status().message());
  EXPECT_THAT(message, HasSubstr("users[0].quota.max_queued_experiments: got -1; must be >= 0"));
  EXPECT_THAT(message, HasSubstr("users[1].user: \"bob\" is listed twice (also users[0])"));
  EXPECT_THAT(message, HasSubstr("groups[0].group: must name a group"));
  EXPECT_THAT(message, HasSubstr("tokens[0].sha256: got \"secret-token\""));
  EXPECT_THAT(message, HasSubstr("default_quota.max_gpu_hours_per_day: got -2"));
  EXPECT_THAT(message, HasSubstr("default_quota.max_timeout"));
}

TEST(Sha256HexTest, KnownDigest) {
  EXPECT_EQ(Sha256Hex("hello"), "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
}

TEST(DecideAdminTest, ListsGroupsAndDaemonUser) {
  v1::AccessPolicy policy;
  policy.add_admins("alice");
  policy.add_admin_groups("wheel");
  EXPECT_EQ(DecideAdmin(policy, "alice", {}, false).reason, "listed in admins");
  EXPECT_EQ(DecideAdmin(policy, "bob", {"users", "wheel"}, false).reason, "member of group wheel");
  EXPECT_FALSE(DecideAdmin(policy, "bob", {"users"}, false).admin);
  EXPECT_TRUE(DecideAdmin(policy, "root", {}, true).admin);
  policy.set_daemon_user_is_admin(false);
  EXPECT_FALSE(DecideAdmin(policy, "root", {}, true).admin);
}

TEST(DecideCustomKernelsTest, AdminsOnlyUnlessThePolicyNamesUsersGroupsOrEveryone) {
  v1::AccessPolicy policy;
  // Unset: admins only.
  EXPECT_FALSE(DecideCustomKernels(policy, "bob", {"users"}, /*admin=*/false).allowed);
  EXPECT_EQ(DecideCustomKernels(policy, "root", {}, /*admin=*/true).reason, "admin");
  policy.add_custom_kernel_users("bob");
  policy.add_custom_kernel_groups("kernel-devs");
  EXPECT_EQ(DecideCustomKernels(policy, "bob", {}, false).reason,
            "listed in custom_kernel_users");
  EXPECT_EQ(DecideCustomKernels(policy, "carol", {"users", "kernel-devs"}, false).reason,
            "member of group kernel-devs (custom_kernel_groups)");
  const CustomKernelDecision dave = DecideCustomKernels(policy, "dave", {"users"}, false);
  EXPECT_FALSE(dave.allowed);
  EXPECT_EQ(dave.reason, "");
  policy.set_custom_kernels_for_everyone(true);
  EXPECT_EQ(DecideCustomKernels(policy, "dave", {}, false).reason, "custom_kernels_for_everyone");
}

TEST(DecideCustomKernelsTest, PolicyFieldsAreParsedAndTheirNamesChecked) {
  auto policy = ParseAccessPolicy(Whole("custom_kernel_users: \"alice\"\n"
                                        "custom_kernel_users: \"tls:robot\"\n"
                                        "custom_kernel_groups: \"kernel-devs\"\n"
                                        "custom_kernels_for_everyone: false"),
                                  "policy.textproto");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(DecideCustomKernels(*policy, "tls:robot", {}, false).allowed);
  EXPECT_FALSE(DecideCustomKernels(*policy, "robot", {}, false).allowed);
  auto bad = ParseAccessPolicy(Whole("custom_kernel_users: \"a b\"\n"
                                     "custom_kernel_users: \"(other)\"\n"
                                     "custom_kernel_groups: \"\""),
                               "policy.textproto");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              AllOf(HasSubstr("custom_kernel_users[0]: got \"a b\""),
                    HasSubstr("custom_kernel_users[1]: got \"(other)\"; a user name has no "
                              "parentheses"),
                    HasSubstr("custom_kernel_groups[0]: must name a group")));
}

TEST(ResolveQuotaTest, UserOverGroupOverDefaultFieldByField) {
  v1::AccessPolicy policy;
  policy.mutable_default_quota()->set_max_queued_experiments(10);
  policy.mutable_default_quota()->set_max_priority(0);
  auto* group = policy.add_groups();
  group->set_group("gpu");
  group->mutable_quota()->set_max_concurrent_gpus(4);
  group->mutable_quota()->set_max_priority(5);
  auto* user = policy.add_users();
  user->set_user("bob");
  user->mutable_quota()->set_max_queued_experiments(2);

  ResolvedQuota bob = ResolveQuota(policy, "bob", {"gpu"});
  EXPECT_EQ(bob.source, "users entry");
  EXPECT_EQ(bob.limits.max_queued_experiments(), 2);
  EXPECT_EQ(bob.limits.max_concurrent_gpus(), 4);
  EXPECT_EQ(bob.limits.max_priority(), 5);

  ResolvedQuota carol = ResolveQuota(policy, "carol", {});
  EXPECT_EQ(carol.source, "default_quota");
  EXPECT_EQ(carol.limits.max_queued_experiments(), 10);
  EXPECT_FALSE(carol.limits.has_max_concurrent_gpus());
}

TEST(AccessControlTest, BadReloadKeepsThePolicyInForce) {
  const std::string path = TempPath("policy.textproto");
  std::ofstream(path) << Whole("admins: \"alice\"");
  auto access = AccessControl::Create(path);
  ASSERT_TRUE(access.ok()) << access.status();
  EXPECT_TRUE((*access)->IsAdmin("alice", {}, false).admin);

  std::ofstream(path) << Whole(
      "admins: \"bob\"\nusers { user: \"x\" quota { "
      "max_queued_experiments: -3 } }");
  const absl::Status reloaded = (*access)->Reload();
  EXPECT_FALSE(reloaded.ok());
  EXPECT_THAT(std::string(reloaded.message()), HasSubstr("users[0].quota.max_queued_experiments"));
  EXPECT_TRUE((*access)->IsAdmin("alice", {}, false).admin);
  EXPECT_FALSE((*access)->IsAdmin("bob", {}, false).admin);

  std::ofstream(path) << Whole("admins: \"bob\"");
  EXPECT_TRUE((*access)->Reload().ok());
  EXPECT_TRUE((*access)->IsAdmin("bob", {}, false).admin);
  EXPECT_FALSE((*access)->IsAdmin("alice", {}, false).admin);
}

// What an interrupted write or a `>` redirect leaves: an empty file, then half of the new one.
TEST(AccessControlTest, AnEmptyOrCutFileOnReloadKeepsTheQuotasInForce) {
  const std::string path = TempPath("quota.textproto");
  const std::string whole = Whole(
      "users { user: \"alice\" quota { max_queued_experiments: 1 } }\n"
      "admins: \"carol\"");
  std::ofstream(path) << whole;
  auto access = AccessControl::Create(path);
  ASSERT_TRUE(access.ok()) << access.status();
  ASSERT_EQ((*access)->QuotaFor("alice", {}).limits.max_queued_experiments(), 1);

  std::ofstream(path, std::ios::trunc).flush();
  const absl::Status emptied = (*access)->Reload();
  EXPECT_FALSE(emptied.ok());
  EXPECT_THAT(std::string(emptied.message()), HasSubstr(path + ": empty"));
  EXPECT_EQ((*access)->QuotaFor("alice", {}).limits.max_queued_experiments(), 1);

  // Cut after the header: parses to a policy with no quotas at all.
  std::ofstream(path) << whole.substr(0, whole.find('\n') + 1);
  const absl::Status cut = (*access)->Reload();
  EXPECT_FALSE(cut.ok());
  EXPECT_THAT(std::string(cut.message()), HasSubstr("end_of_policy: missing"));
  EXPECT_EQ((*access)->QuotaFor("alice", {}).limits.max_queued_experiments(), 1);
  EXPECT_TRUE((*access)->IsAdmin("carol", {}, false).admin);
}

TEST(AccessControlTest, ACutPolicyAtStartUpIsRefused) {
  const std::string path = TempPath("cut-at-start.textproto");
  std::ofstream(path) << "policy_version: 1\nusers { user: \"alice\" quota { "
                         "max_queued_experiments: 1 } }\n";
  auto access = AccessControl::Create(path);
  ASSERT_FALSE(access.ok());
  EXPECT_THAT(std::string(access.status().message()),
              AllOf(HasSubstr(path + ": "), HasSubstr("end_of_policy: missing")));
  std::ofstream(path, std::ios::trunc).flush();
  EXPECT_THAT(std::string(AccessControl::Create(path).status().message()),
              HasSubstr(path + ": empty"));
  // Without --policy there is no file to be cut: the built-in policy.
  auto built_in = AccessControl::Create("");
  ASSERT_TRUE(built_in.ok());
  EXPECT_FALSE((*built_in)->TlsSubjectsAreLocalUsers());
}

TEST(AccessControlTest, TlsSubjectsAreLocalUsersFollowsReloads) {
  const std::string path = TempPath("tls-names.textproto");
  std::ofstream(path) << Whole("");
  auto access = AccessControl::Create(path);
  ASSERT_TRUE(access.ok()) << access.status();
  EXPECT_FALSE((*access)->TlsSubjectsAreLocalUsers());
  std::ofstream(path) << Whole("tls_subjects_are_local_users: true");
  ASSERT_TRUE((*access)->Reload().ok());
  EXPECT_TRUE((*access)->TlsSubjectsAreLocalUsers());
  // A refused reload keeps the answer too.
  std::ofstream(path) << "tls_subjects_are_local_users: false\n";
  EXPECT_FALSE((*access)->Reload().ok());
  EXPECT_TRUE((*access)->TlsSubjectsAreLocalUsers());
}

TEST(AccessControlTest, TokensMatchByHash) {
  const std::string path = TempPath("tokens.textproto");
  std::ofstream(path) << Whole(
      absl::StrCat("tokens { user: \"ci\" sha256: \"", Sha256Hex("s3cret"), "\" }"));
  auto access = AccessControl::Create(path);
  ASSERT_TRUE(access.ok()) << access.status();
  EXPECT_EQ((*access)->UserForToken("s3cret"), "ci");
  EXPECT_EQ((*access)->UserForToken("s3cre"), std::nullopt);
  EXPECT_EQ((*access)->UserForToken(""), std::nullopt);
}

}  // namespace
}  // namespace gpuprof::daemon
