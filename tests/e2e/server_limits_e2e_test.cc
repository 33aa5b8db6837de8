// gpuprofd's server limits, each shown working against the real daemon over real sockets:
// watchers per experiment, per-user submit rate, concurrent streams per connection, the
// handshake timeout, and keepalive enforcement (a ping flood gets GOAWAY).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

class ServerLimitsTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags) {
    state_dir_ = MakeTempDir("gpuprofd-limits");
    port_ = FreeLoopbackPort();
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_, std::vector<std::string>{
                        "--enable_test_faults",
                        "--worker_binary=" + RunfilePath("tests/ranks/fake_rank_worker")});
    daemon_->AddFlags({absl::StrCat("--listen=", daemon_->target(), ",127.0.0.1:", port_)});
    daemon_->AddFlags(flags);
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // An experiment that runs until cancelled.
  std::string SubmitHanging() {
    const CommandResult result = daemon_->CliAsIs({"submit", "collective", "--gpus", "0,1",
                                                   "--label", "gpuprof.fault=hang", "--json"});
    EXPECT_EQ(result.exit_code, 0) << result.err;
    auto events = ParseEventLines(result.out);
    return events.ok() && !events->empty() ? events->front().experiment_id() : "";
  }

  // A Watch stream that has delivered its first event (so it is registered).
  struct OpenWatch {
    std::unique_ptr<grpc::ClientContext> context = std::make_unique<grpc::ClientContext>();
    std::unique_ptr<grpc::ClientReader<v1::ExperimentEvent>> reader;
    bool first_event = false;
  };
  OpenWatch Watch(v1::Profiler::Stub& stub, const std::string& id,
                  absl::Duration deadline = absl::Seconds(60)) {
    OpenWatch watch;
    watch.context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    v1::WatchRequest request;
    request.set_experiment_id(id);
    watch.reader = stub.Watch(watch.context.get(), request);
    v1::ExperimentEvent event;
    watch.first_event = watch.reader->Read(&event);
    return watch;
  }

  std::string state_dir_;
  int port_ = 0;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(ServerLimitsTest, WatchersPerExperimentAreCapped) {
  Start({"--max_watchers_per_experiment=2"});
  const std::string id = SubmitHanging();
  auto stub = daemon_->NewStub();
  OpenWatch first = Watch(*stub, id);
  OpenWatch second = Watch(*stub, id);
  ASSERT_TRUE(first.first_event && second.first_event);
  // The third replays the stored events, then is refused.
  OpenWatch third = Watch(*stub, id);
  v1::ExperimentEvent event;
  while (third.reader->Read(&event)) {
  }
  const grpc::Status refused = third.reader->Finish();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max_watchers_per_experiment"));
  // Detaching one makes room.
  first.context->TryCancel();
  first.reader->Finish();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  bool admitted = false;
  while (!admitted && absl::Now() < deadline) {
    OpenWatch again = Watch(*stub, id, absl::Seconds(2));
    while (again.reader->Read(&event)) {
    }
    const grpc::Status status = again.reader->Finish();
    // Still open at its deadline: it was admitted and waiting for live events.
    admitted = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  }
  EXPECT_TRUE(admitted);
}

TEST_F(ServerLimitsTest, SubmitsPerUserAreRateLimited) {
  // The daemon's own user is an admin, and admins are exempt: make it an ordinary user.
  const std::string policy = MakeTempDir("policy") + "/policy.textproto";
  std::ofstream(policy) << "daemon_user_is_admin: false\n";
  Start({"--submits_per_minute_per_user=3", "--policy=" + policy});
  for (int i = 0; i < 3; ++i) {
    const CommandResult submitted =
        daemon_->CliAsIs({"submit", "collective", "--gpus", "0,1"});
    EXPECT_EQ(submitted.exit_code, 0) << submitted.err;
  }
  const CommandResult fourth = daemon_->CliAsIs({"submit", "collective", "--gpus", "0,1"});
  EXPECT_EQ(fourth.exit_code, 4);  // RESOURCE_EXHAUSTED
  EXPECT_THAT(fourth.err, HasSubstr("RESOURCE_EXHAUSTED: submit rate limit for"));
  EXPECT_THAT(fourth.err, HasSubstr("is 3 per minute"));
}

TEST_F(ServerLimitsTest, StreamsPerConnectionAreCapped) {
  Start({"--max_concurrent_streams=2"});
  const std::string id = SubmitHanging();
  // One connection (one channel) to the unix socket.
  auto stub = daemon_->NewStub();
  OpenWatch first = Watch(*stub, id);
  OpenWatch second = Watch(*stub, id);
  ASSERT_TRUE(first.first_event && second.first_event);
  // A third stream on the same connection waits for a free slot.
  OpenWatch third = Watch(*stub, id, absl::Seconds(3));
  EXPECT_FALSE(third.first_event);
  EXPECT_EQ(third.reader->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // Another connection is not held up (a channel of its own: channels with the same settings
  // would share one connection).
  grpc::ChannelArguments separate;
  separate.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto other = v1::Profiler::NewStub(grpc::CreateCustomChannel(
      daemon_->target(), grpc::InsecureChannelCredentials(), separate));
  OpenWatch elsewhere = Watch(*other, id);
  EXPECT_TRUE(elsewhere.first_event);
}

TEST_F(ServerLimitsTest, SilentTcpClientsAreDisconnectedAtTheHandshakeTimeout) {
  Start({"--handshake_timeout=1s"});
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port_);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  // Say nothing: the server must hang up on its own.
  const absl::Time start = absl::Now();
  pollfd wait{fd, POLLIN, 0};
  ASSERT_EQ(poll(&wait, 1, 30'000), 1);
  char byte;
  ssize_t n;
  // The server writes its HTTP/2 settings first on plaintext; read until the close.
  while ((n = read(fd, &byte, 1)) > 0) {
  }
  EXPECT_EQ(n, 0);
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  close(fd);
}

TEST_F(ServerLimitsTest, APingFloodGetsGoaway) {
  Start({"--keepalive_min_ping_interval=10s", "--keepalive_max_ping_strikes=2"});
  const std::string id = SubmitHanging();
  grpc::ChannelArguments flood;
  flood.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 50);
  flood.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  flood.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  flood.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  flood.SetInt(GRPC_ARG_HTTP2_MIN_SENT_PING_INTERVAL_WITHOUT_DATA_MS, 0);
  auto flooder = v1::Profiler::NewStub(grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials(), flood));
  auto polite = v1::Profiler::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_),
                                                          grpc::InsecureChannelCredentials()));
  OpenWatch flooding = Watch(*flooder, id);
  OpenWatch calm = Watch(*polite, id);
  ASSERT_TRUE(flooding.first_event && calm.first_event);
  v1::ExperimentEvent event;
  while (flooding.reader->Read(&event)) {
  }
  const grpc::Status closed = flooding.reader->Finish();
  EXPECT_EQ(closed.error_code(), grpc::StatusCode::UNAVAILABLE) << closed.error_message();
  // The polite client's stream is still open: a cancel ends it with the experiment's end.
  ASSERT_EQ(daemon_->CliAsIs({"cancel", id}).exit_code, 0);
  while (calm.reader->Read(&event)) {
  }
  EXPECT_TRUE(calm.reader->Finish().ok());
}

}  // namespace
}  // namespace gpuprof::testing
