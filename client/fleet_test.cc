#include "client/fleet.h"

#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

std::string TempFile(const std::string& name, const std::string& contents) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(FleetTest, ParsesNodesTlsAndTimeout) {
  const std::string pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  const std::string ca = TempFile("ca.pem", pem);
  const std::string cert = TempFile("alice.pem", pem);
  const std::string key = TempFile("alice.key", "-----BEGIN PRIVATE KEY-----\nx\n");
  auto fleet = ParseFleet(
      "node_timeout: \"3s\"\n"
      "node { name: \"gpu-a\" address: \"gpu-a.lab:7070\"\n"
      "  tls { ca_file: \"" + ca + "\" cert_file: \"" + cert + "\" key_file: \"" + key +
          "\" server_name: \"gpuprofd\" } }\n"
          "node { name: \"gpu-b\" address: \"unix:/run/gpuprof/gpuprofd.sock\" }\n",
      "fleet.textproto");
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  ASSERT_EQ(fleet->nodes.size(), 2u);
  EXPECT_EQ(fleet->nodes[0].name, "gpu-a");
  EXPECT_EQ(fleet->nodes[0].address, "gpu-a.lab:7070");
  ASSERT_TRUE(fleet->nodes[0].tls.has_value());
  EXPECT_EQ(fleet->nodes[0].tls->ca_pem, pem);
  EXPECT_EQ(fleet->nodes[0].tls->server_name, "gpuprofd");
  EXPECT_FALSE(fleet->nodes[1].tls.has_value());
  EXPECT_EQ(fleet->node_timeout, absl::Seconds(3));
}

TEST(FleetTest, ErrorsNameTheFieldAndWhatIsAllowed) {
  struct Case {
    std::string text;
    std::string message;
  };
  for (const Case& bad : std::vector<Case>{
           {"node { name: \"a/b\" address: \"x:1\" }", "f: node[0].name \"a/b\": use 1 to 63 of"},
           {"node { name: \"a\" }", "f: node[0].address: empty; give host:port or unix:/path"},
           {"node { name: \"a\" address: \"x:1\" } node { name: \"a\" address: \"y:1\" }",
            "node name \"a\" is used twice"},
           {"node { name: \"a\" address: \"x:1\" tls { cert_file: \"/c\" } }",
            "node[0].tls.cert_file and f: node[0].tls.key_file: give both"},
           {"node { name: \"a\" address: \"x:1\" tls { ca_file: \"/nonexistent.pem\" } }",
            "node[0].tls.ca_file: cannot read \"/nonexistent.pem\""},
           {"node_timeout: \"soon\" node { name: \"a\" address: \"x:1\" }",
            "node_timeout \"soon\": a positive duration"},
           {"", "f: no node { name: ... address: ... } entries"},
           {"nodes { name: \"a\" }", "f: not a fleet textproto: line 1"},
       }) {
    auto fleet = ParseFleet(bad.text, "f");
    ASSERT_FALSE(fleet.ok()) << bad.text;
    EXPECT_THAT(std::string(fleet.status().message()), HasSubstr(bad.message)) << bad.text;
  }
  const std::string not_pem = TempFile("not.pem", "hello");
  auto fleet = ParseFleet("node { name: \"a\" address: \"x:1\" tls { ca_file: \"" + not_pem + "\" } }", "f");
  ASSERT_FALSE(fleet.ok());
  EXPECT_THAT(std::string(fleet.status().message()), HasSubstr("is not a PEM file"));
}

TEST(FleetTest, TargetFlagsNameTheirNodes) {
  auto named = ParseTargetFlag("gpu-a=unix:/tmp/a.sock");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->name, "gpu-a");
  EXPECT_EQ(named->address, "unix:/tmp/a.sock");
  auto bare = ParseTargetFlag("unix:/tmp/x=y.sock");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->address, "unix:/tmp/x=y.sock");
  EXPECT_EQ(bare->name, "unix_tmp_x_y.sock");
  EXPECT_EQ(ParseTargetFlag("10.0.0.7:7070")->name, "10.0.0.7_7070");
  EXPECT_FALSE(ParseTargetFlag("a=").ok());
  EXPECT_FALSE(ParseTargetFlag("").ok());
}

TEST(FleetTest, SelectingNodesKeepsTheFleetOrderAndRejectsUnknownNames) {
  const std::vector<DaemonNode> nodes = {{"a", "x:1", {}}, {"b", "y:1", {}}, {"c", "z:1", {}}};
  auto selected = SelectNodes(nodes, "c,a");
  ASSERT_TRUE(selected.ok());
  ASSERT_EQ(selected->size(), 2u);
  EXPECT_EQ((*selected)[0].name, "a");
  EXPECT_EQ((*selected)[1].name, "c");
  auto unknown = SelectNodes(nodes, "d");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("the fleet has a, b, c"));
}

TEST(FleetTest, QualifiedIds) {
  EXPECT_EQ(SplitQualifiedId("gpu-a/exp-000042").node, "gpu-a");
  EXPECT_EQ(SplitQualifiedId("gpu-a/exp-000042").id, "exp-000042");
  EXPECT_EQ(SplitQualifiedId("exp-000042").node, "");
  EXPECT_EQ(SplitQualifiedId("exp-000042").id, "exp-000042");
}

}  // namespace
}  // namespace gpuprof::client
