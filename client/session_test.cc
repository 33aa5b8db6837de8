#include "client/session.h"

#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

// Answers WhoAmI, or refuses it, and keeps the deadline each call arrived with.
class DeadlineProfiler final : public v1::Profiler::Service {
 public:
  grpc::Status WhoAmI(grpc::ServerContext* context, const v1::WhoAmIRequest*,
                      v1::CallerInfo* response) override {
    absl::MutexLock lock(&mutex_);
    deadlines.push_back(absl::FromChrono(context->deadline()));
    if (!refusal.ok()) return refusal;
    response->set_user("alice");
    return grpc::Status::OK;
  }

  absl::Mutex mutex_;
  std::vector<absl::Time> deadlines;
  grpc::Status refusal;
};

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&profiler_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    env_.out = &out_;
    env_.err = &err_;
    env_.local_user = "alice";
    env_.stdout_is_terminal = true;
    env_.connect = [this](const ConnectionOptions& options) {
      connected_to_.push_back(options.target);
      auto channel = server_->InProcessChannel(grpc::ChannelArguments());
      return DaemonStubs{v1::Profiler::NewStub(channel),
                         grpc::health::v1::Health::NewStub(channel)};
    };
  }
  void TearDown() override { server_->Shutdown(); }

  Session MakeSession() { return Session(env_, {.target = "unix:/tmp/d.sock"}, std::nullopt); }

  DeadlineProfiler profiler_;
  std::unique_ptr<grpc::Server> server_;
  ClientEnvironment env_;
  std::ostringstream out_, err_;
  std::vector<std::string> connected_to_;
};

TEST_F(SessionTest, EveryUnaryCallGetsTheDeadline) {
  env_.unary_rpc_deadline = absl::Seconds(7);
  Session session = MakeSession();
  v1::CallerInfo caller;
  const absl::Time before = absl::Now();
  ASSERT_TRUE(session.Call(&v1::Profiler::StubInterface::WhoAmI, {}, caller).ok());
  ASSERT_TRUE(
      session.Call(&v1::Profiler::StubInterface::WhoAmI, {}, caller, absl::Minutes(5)).ok());
  const absl::Time after = absl::Now();
  ASSERT_EQ(profiler_.deadlines.size(), 2u);
  EXPECT_GE(profiler_.deadlines[0], before + absl::Seconds(7) - absl::Milliseconds(50));
  // The deadline crosses gRPC's own clock: allow it a few milliseconds either way.
  EXPECT_LE(profiler_.deadlines[0], after + absl::Seconds(7) + absl::Milliseconds(50));
  EXPECT_GE(profiler_.deadlines[1], before + absl::Minutes(5) - absl::Milliseconds(50));
  EXPECT_EQ(caller.user(), "alice");
  // One connection for both calls, to the session's target.
  EXPECT_THAT(connected_to_, ::testing::ElementsAre("unix:/tmp/d.sock"));
}

TEST_F(SessionTest, CallAndPrintRendersOrPrintsJson) {
  Session session = MakeSession();
  const auto render = [&session](const v1::CallerInfo& caller) {
    session.out() << "user " << caller.user() << "\n";
    return kExitNotFinished;
  };
  EXPECT_EQ(session.CallAndPrint(&v1::Profiler::StubInterface::WhoAmI, {}, false, render),
            kExitNotFinished);
  EXPECT_EQ(out_.str(), "user alice\n");
  out_.str("");
  EXPECT_EQ(session.CallAndPrint(&v1::Profiler::StubInterface::WhoAmI, {}, true, render), kExitOk);
  EXPECT_EQ(out_.str(), "{\"user\":\"alice\"}\n");
}

TEST_F(SessionTest, AFailedCallIsReportedOnceWithItsExitCode) {
  profiler_.refusal = grpc::Status(grpc::StatusCode::NOT_FOUND, "no such \x1b]0;title\x07 thing");
  Session session = MakeSession();
  bool rendered = false;
  const int code = session.CallAndPrint(&v1::Profiler::StubInterface::WhoAmI, {}, false,
                                        [&rendered](const v1::CallerInfo&) {
                                          rendered = true;
                                          return kExitOk;
                                        });
  EXPECT_EQ(code, kExitUsage);
  EXPECT_FALSE(rendered);
  EXPECT_EQ(out_.str(), "");
  // The daemon's text reaches the terminal with its control characters made visible.
  EXPECT_THAT(err_.str(), HasSubstr("error: NOT_FOUND: no such "));
  EXPECT_THAT(err_.str(), ::testing::Not(HasSubstr("\x1b")));
  profiler_.refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE, "down");
  v1::CallerInfo caller;
  EXPECT_EQ(session.CallOrReport(&v1::Profiler::StubInterface::WhoAmI, {}, caller),
            kExitUnavailable);
  EXPECT_THAT(err_.str(), HasSubstr("cannot reach gpuprofd at unix:/tmp/d.sock"));
}

TEST_F(SessionTest, WithOutputSharesTheConnectionAndKeepsItsOutputApart) {
  Session session = MakeSession();
  std::ostringstream out, err;
  Session apart = session.WithOutput(&out, &err);
  EXPECT_FALSE(apart.env().stdout_is_terminal);
  EXPECT_EQ(apart.CallAndPrint(&v1::Profiler::StubInterface::WhoAmI, {}, true,
                               [](const v1::CallerInfo&) { return kExitOk; }),
            kExitOk);
  v1::CallerInfo caller;
  ASSERT_TRUE(session.Call(&v1::Profiler::StubInterface::WhoAmI, {}, caller).ok());
  EXPECT_EQ(out.str(), "{\"user\":\"alice\"}\n");
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(connected_to_.size(), 1u);
}

TEST_F(SessionTest, ANodeConnectsWithItsOwnTlsMaterial) {
  std::vector<std::string> nodes;
  env_.connect_node = [this, &nodes](const DaemonNode& node, const ConnectionOptions& options) {
    nodes.push_back(node.name + "@" + options.target);
    return env_.connect(options);
  };
  Session session(env_, {.target = "gpu-a.lab:7070"}, "bob",
                  DaemonNode{.name = "gpu-a", .address = "gpu-a.lab:7070"});
  v1::CallerInfo caller;
  ASSERT_TRUE(session.Call(&v1::Profiler::StubInterface::WhoAmI, {}, caller).ok());
  EXPECT_THAT(nodes, ::testing::ElementsAre("gpu-a@gpu-a.lab:7070"));
  EXPECT_EQ(session.user(), "bob");
  EXPECT_EQ(session.explicit_user(), "bob");
}

TEST(ReportUsageErrorTest, EscapesTheMessageAndNamesTheHelp) {
  std::ostringstream err;
  ClientEnvironment env;
  env.err = &err;
  EXPECT_EQ(ReportUsageError(env, "bad \x1b[2J value", "sweep get"), kExitUsage);
  EXPECT_THAT(err.str(), ::testing::StartsWith("error: bad "));
  EXPECT_THAT(err.str(), ::testing::EndsWith("value\n(see gpuprof sweep get --help)\n"));
  EXPECT_THAT(err.str(), ::testing::Not(HasSubstr("\x1b")));
  err.str("");
  ReportUsageError(env, "no help", "");
  EXPECT_EQ(err.str(), "error: no help\n");
}

TEST(StatusTextTest, NamesTheCodeAndEscapesTheMessage) {
  EXPECT_EQ(StatusText(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "slow")),
            "DEADLINE_EXCEEDED: slow");
  EXPECT_THAT(StatusText(grpc::Status(grpc::StatusCode::INTERNAL, "a\x1b]0;x\x07")),
              ::testing::Not(HasSubstr("\x1b")));
}

}  // namespace
}  // namespace gpuprof::client
