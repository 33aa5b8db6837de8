#include "daemon/access_policy.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(ParseAccessPolicyTest, AcceptsAFullPolicy) {
  auto policy = ParseAccessPolicy(R"pb(
    admins: "alice"
    admin_groups: "wheel"
    daemon_user_is_admin: false
    default_quota { max_queued_experiments: 5 max_timeout { seconds: 600 } }
    users { user: "bob" quota { max_priority: 3 max_concurrent_gpus: 2 } }
    groups { group: "interns" quota { max_gpu_hours_per_day: 1.5 } }
    tokens { user: "ci" sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" }
  )pb", "policy.textproto");
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->admins(0), "alice");
  EXPECT_FALSE(policy->daemon_user_is_admin());
}

TEST(ParseAccessPolicyTest, UnknownFieldIsNamedWithItsLine) {
  auto policy = ParseAccessPolicy("admins: \"a\"\nadmin: \"b\"\n", "p.textproto");
  ASSERT_FALSE(policy.ok());
  EXPECT_THAT(policy.status().message(), AllOf(HasSubstr("p.textproto:2:"), HasSubstr("admin")));
}

TEST(ValidateAccessPolicyTest, NamesEveryBadField) {
  auto policy = ParseAccessPolicy(R"pb(
    users { user: "bob" quota { max_queued_experiments: -1 } }
    users { user: "bob" }
    groups { group: "" }
    tokens { user: "ci" sha256: "secret-token" }
    default_quota { max_gpu_hours_per_day: -2 max_timeout { seconds: -5 } }
  )pb", "p");
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
  EXPECT_EQ(Sha256Hex("hello"),
            "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
}

TEST(DecideAdminTest, ListsGroupsAndDaemonUser) {
  v1::AccessPolicy policy;
  policy.add_admins("alice");
  policy.add_admin_groups("wheel");
  EXPECT_EQ(DecideAdmin(policy, "alice", {}, false).reason, "listed in admins");
  EXPECT_EQ(DecideAdmin(policy, "bob", {"users", "wheel"}, false).reason,
            "member of group wheel");
  EXPECT_FALSE(DecideAdmin(policy, "bob", {"users"}, false).admin);
  EXPECT_TRUE(DecideAdmin(policy, "root", {}, true).admin);
  policy.set_daemon_user_is_admin(false);
  EXPECT_FALSE(DecideAdmin(policy, "root", {}, true).admin);
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
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/policy.textproto";
  std::ofstream(path) << "admins: \"alice\"\n";
  auto access = AccessControl::Create(path);
  ASSERT_TRUE(access.ok()) << access.status();
  EXPECT_TRUE((*access)->IsAdmin("alice", {}, false).admin);

  std::ofstream(path) << "admins: \"bob\"\nusers { user: \"x\" quota { "
                         "max_queued_experiments: -3 } }\n";
  const absl::Status reloaded = (*access)->Reload();
  EXPECT_FALSE(reloaded.ok());
  EXPECT_THAT(std::string(reloaded.message()),
              HasSubstr("users[0].quota.max_queued_experiments"));
  EXPECT_TRUE((*access)->IsAdmin("alice", {}, false).admin);
  EXPECT_FALSE((*access)->IsAdmin("bob", {}, false).admin);

  std::ofstream(path) << "admins: \"bob\"\n";
  EXPECT_TRUE((*access)->Reload().ok());
  EXPECT_TRUE((*access)->IsAdmin("bob", {}, false).admin);
  EXPECT_FALSE((*access)->IsAdmin("alice", {}, false).admin);
}

TEST(AccessControlTest, TokensMatchByHash) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/tokens.textproto";
  std::ofstream(path) << "tokens { user: \"ci\" sha256: \"" << Sha256Hex("s3cret") << "\" }\n";
  auto access = AccessControl::Create(path);
  ASSERT_TRUE(access.ok()) << access.status();
  EXPECT_EQ((*access)->UserForToken("s3cret"), "ci");
  EXPECT_EQ((*access)->UserForToken("s3cre"), std::nullopt);
  EXPECT_EQ((*access)->UserForToken(""), std::nullopt);
}

}  // namespace
}  // namespace gpuprof::daemon
