#include "client/invocation.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << text;
  return path;
}

class InvocationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_.out = &out_;
    env_.err = &err_;
    env_.local_user = "alice";
  }

  ParsedArgs WithTarget(const std::string& target) {
    ParsedArgs args;
    args.flags.push_back({.name = "target", .typed_name = "target", .value = target});
    return args;
  }

  ClientEnvironment env_;
  std::ostringstream out_, err_;
};

TEST_F(InvocationTest, OneDaemonWithoutFleetOptions) {
  Invocation invocation{.env = env_};
  ASSERT_TRUE(invocation.ResolveNodes().ok());
  EXPECT_TRUE(invocation.nodes.empty());
  EXPECT_FALSE(invocation.SpreadsOverFleet());
  absl::StatusOr<Session> session = invocation.MakeSession(ParsedArgs());
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->connection().target, kDefaultTarget);
  EXPECT_EQ(session->connection().claimed_user, "alice");
}

TEST_F(InvocationTest, SeveralTargetsMakeAFleetThatNodeNarrowsToOne) {
  Invocation invocation{.env = env_};
  invocation.globals.targets = {"gpu-a=unix:/run/a.sock", "gpu-b=unix:/run/b.sock"};
  ASSERT_TRUE(invocation.ResolveNodes().ok());
  ASSERT_EQ(invocation.nodes.size(), 2u);
  EXPECT_EQ(invocation.node_timeout, kDefaultNodeTimeout);
  EXPECT_TRUE(invocation.SpreadsOverFleet());
  absl::StatusOr<Fleet> fleet = invocation.MakeFleet();
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  EXPECT_EQ(fleet->session(1).connection().target, "unix:/run/b.sock");

  invocation.globals.node = "gpu-b";
  invocation.globals.node_timeout = "3s";
  ASSERT_TRUE(invocation.ResolveNodes().ok());
  ASSERT_EQ(invocation.nodes.size(), 1u);
  EXPECT_EQ(invocation.node_timeout, absl::Seconds(3));
  // --target NAME=ADDR picked by --node is one daemon, not a fleet to spread over.
  EXPECT_FALSE(invocation.SpreadsOverFleet());
  absl::StatusOr<Session> session = invocation.MakeSession(ParsedArgs());
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->connection().target, "unix:/run/b.sock");
  // A command's own --target names another daemon.
  session = invocation.MakeSession(WithTarget("unix:/run/other.sock"));
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(session->connection().target, "unix:/run/other.sock");
}

TEST_F(InvocationTest, AFleetFilesOneNodeStillSpreadsUnlessNodePickedIt) {
  const std::string path =
      WriteFile("one.textproto",
                "node { name: \"gpu-a\" address: \"unix:/run/a.sock\" }\nnode_timeout: \"4s\"\n");
  Invocation invocation{.env = env_};
  invocation.globals.fleet = path;
  ASSERT_TRUE(invocation.ResolveNodes().ok());
  ASSERT_EQ(invocation.nodes.size(), 1u);
  EXPECT_EQ(invocation.node_timeout, absl::Seconds(4));
  EXPECT_TRUE(invocation.SpreadsOverFleet());
  invocation.globals.node = "gpu-a";
  ASSERT_TRUE(invocation.ResolveNodes().ok());
  EXPECT_FALSE(invocation.SpreadsOverFleet());
}

TEST_F(InvocationTest, ContradictoryFleetOptionsAreRefused) {
  Invocation both{.env = env_};
  both.globals.targets = {"a=unix:/a"};
  both.globals.fleet = "";
  EXPECT_EQ(both.ResolveNodes().message(), "give --fleet or --target, not both");

  Invocation node_alone{.env = env_};
  node_alone.globals.node = "gpu-a";
  EXPECT_THAT(node_alone.ResolveNodes().message(), HasSubstr("--node picks from a fleet"));

  Invocation bad_timeout{.env = env_};
  bad_timeout.globals.targets = {"a=unix:/a", "b=unix:/b"};
  bad_timeout.globals.node_timeout = "0s";
  EXPECT_EQ(bad_timeout.ResolveNodes().message(),
            "--node-timeout \"0s\": a positive duration such as 10s");
}

TEST_F(InvocationTest, AUserNameGrpcCannotSendIsRefusedBeforeConnecting) {
  Invocation invocation{.env = env_};
  invocation.globals.user = "bad\nname";
  absl::StatusOr<Session> session = invocation.MakeSession(ParsedArgs());
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(), HasSubstr("--user"));
}

}  // namespace
}  // namespace gpuprof::client
