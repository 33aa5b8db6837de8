#include "client/node_fanout.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"

namespace gpuprof::client {
namespace {

using ::testing::ElementsAre;

// Each node's daemon: WhoAmI answers with the node's name once every node has been asked,
// so a fan-out that called the nodes one after another would never get its first answer.
class GatheringProfiler final : public v1::Profiler::Service {
 public:
  GatheringProfiler(std::string name, int* arrived, int expected, std::mutex* mutex,
                    std::condition_variable* all_arrived)
      : name_(std::move(name)),
        arrived_(arrived),
        expected_(expected),
        mutex_(mutex),
        all_arrived_(all_arrived) {}

  grpc::Status WhoAmI(grpc::ServerContext*, const v1::WhoAmIRequest*,
                      v1::CallerInfo* response) override {
    std::unique_lock<std::mutex> lock(*mutex_);
    ++*arrived_;
    all_arrived_->notify_all();
    if (!all_arrived_->wait_for(lock, std::chrono::seconds(20),
                                [this] { return *arrived_ >= expected_; })) {
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the other nodes never called");
    }
    response->set_user(name_);
    return grpc::Status::OK;
  }

 private:
  std::string name_;
  int* arrived_;
  int expected_;
  std::mutex* mutex_;
  std::condition_variable* all_arrived_;
};

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const std::string name : {"gpu-a", "gpu-b", "gpu-c"}) {
      services_.push_back(
          std::make_unique<GatheringProfiler>(name, &arrived_, 3, &mutex_, &all_arrived_));
      grpc::ServerBuilder builder;
      builder.RegisterService(services_.back().get());
      servers_.push_back(builder.BuildAndStart());
      ASSERT_NE(servers_.back(), nullptr);
      nodes_.push_back({.name = name, .address = "unix:/run/" + name + ".sock"});
    }
    env_.out = &out_;
    env_.err = &err_;
    env_.local_user = "alice";
    env_.connect = [](const ConnectionOptions&) -> DaemonStubs {
      ADD_FAILURE() << "a node connects through connect_node";
      return {};
    };
    env_.connect_node = [this](const DaemonNode& node, const ConnectionOptions& options) {
      EXPECT_EQ(options.target, node.address);
      EXPECT_EQ(options.token, "shared-token");
      size_t i = 0;
      while (nodes_[i].name != node.name) ++i;
      auto channel = servers_[i]->InProcessChannel(grpc::ChannelArguments());
      return DaemonStubs{v1::Profiler::NewStub(channel),
                         grpc::health::v1::Health::NewStub(channel)};
    };
  }
  void TearDown() override {
    for (auto& server : servers_) server->Shutdown();
  }

  Fleet MakeFleet() {
    return Fleet(env_, nodes_, absl::Seconds(3), {.target = "ignored", .token = "shared-token"},
                 "bob");
  }

  std::mutex mutex_;
  std::condition_variable all_arrived_;
  int arrived_ = 0;
  std::vector<std::unique_ptr<GatheringProfiler>> services_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::vector<DaemonNode> nodes_;
  ClientEnvironment env_;
  std::ostringstream out_, err_;
};

TEST_F(FleetTest, EveryNodeIsCalledAtOnceThroughItsOwnSession) {
  Fleet fleet = MakeFleet();
  std::vector<std::string> users(fleet.size());
  const std::vector<grpc::Status> statuses = fleet.OnEveryNode([&](Session& session, size_t i) {
    v1::CallerInfo caller;
    const grpc::Status status =
        session.Call(&v1::Profiler::StubInterface::WhoAmI, {}, caller, absl::Seconds(30));
    users[i] = caller.user();
    return status;
  });
  for (const grpc::Status& status : statuses) EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(users, ElementsAre("gpu-a", "gpu-b", "gpu-c"));
}

TEST_F(FleetTest, WholeCommandsKeepEachNodesOutputApart) {
  Fleet fleet = MakeFleet();
  const std::vector<NodeOutcome> outcomes = fleet.RunOnEveryNode([](Session& session, size_t i) {
    return session.CallAndPrint(&v1::Profiler::StubInterface::WhoAmI, {}, /*json=*/false,
                                [&session, i](const v1::CallerInfo& caller) {
                                  session.out() << caller.user() << "\n";
                                  if (i == 1) session.err() << "error: odd one\n";
                                  return i == 1 ? kExitUnavailable : kExitOk;
                                });
  });
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[0].out, "gpu-a\n");
  EXPECT_EQ(outcomes[1].out, "gpu-b\n");
  EXPECT_EQ(outcomes[1].err, "error: odd one\n");
  EXPECT_EQ(outcomes[1].exit_code, kExitUnavailable);
  EXPECT_EQ(outcomes[2].out, "gpu-c\n");
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(fleet.ExitCode(outcomes), kExitPartial);
  EXPECT_EQ(err_.str(), "partial: no answer from gpu-b (odd one)\n");
}

TEST_F(FleetTest, NodeSessionsUseTheNodeTimeoutAndAddress) {
  Fleet fleet = MakeFleet();
  EXPECT_EQ(fleet.session(1).env().unary_rpc_deadline, absl::Seconds(3));
  EXPECT_EQ(fleet.session(1).connection().target, "unix:/run/gpu-b.sock");
  EXPECT_EQ(fleet.session(1).explicit_user(), "bob");
  EXPECT_EQ(fleet.IndexOf("gpu-c"), 2u);
  EXPECT_EQ(fleet.IndexOf("gpu-z"), std::nullopt);
  EXPECT_EQ(fleet.Names(), "gpu-a, gpu-b, gpu-c");
}

TEST_F(FleetTest, ExitCodeWhenNoNodeOrSomeNodesAnswer) {
  Fleet fleet = MakeFleet();
  std::vector<NodeOutcome> outcomes(3);
  EXPECT_EQ(fleet.ExitCode(outcomes), kExitOk);
  EXPECT_EQ(err_.str(), "");
  for (NodeOutcome& outcome : outcomes) outcome.exit_code = kExitOtherError;
  outcomes[0].exit_code = kExitUnavailable;
  outcomes[0].err = "error: UNAVAILABLE: down\n";
  EXPECT_EQ(fleet.ExitCode(outcomes), kExitUnavailable);
  EXPECT_EQ(err_.str(),
            "error: no node answered: gpu-a (UNAVAILABLE: down); gpu-b (exit code 4); "
            "gpu-c (exit code 4)\n");
  // A floor of 1 counts a node that answered "not finished" as missing too.
  err_.str("");
  std::vector<NodeOutcome> mixed(3);
  mixed[2].exit_code = kExitNotFinished;
  EXPECT_EQ(fleet.ExitCode(mixed), kExitOk);
  EXPECT_EQ(fleet.ExitCode(mixed, kExitNotFinished), kExitPartial);
}

TEST_F(FleetTest, WithPartialTurnsSuccessIntoPartialButKeepsFailures) {
  Fleet fleet = MakeFleet();
  EXPECT_EQ(fleet.WithPartial({}, kExitNotFinished), kExitNotFinished);
  EXPECT_EQ(err_.str(), "");
  EXPECT_EQ(fleet.WithPartial({"gpu-b (UNAVAILABLE: down)"}, kExitOk), kExitPartial);
  EXPECT_EQ(err_.str(), "partial: no answer from gpu-b (UNAVAILABLE: down)\n");
  EXPECT_EQ(fleet.WithPartial({"gpu-b (x)"}, kExitNotFinished), kExitPartial);
  EXPECT_EQ(fleet.WithPartial({"gpu-b (x)"}, kExitUsage), kExitUsage);
}

}  // namespace
}  // namespace gpuprof::client
