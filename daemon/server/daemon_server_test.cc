// DaemonServer's start-up and shutdown order, on real sockets, a real SQLite store in a
// temporary directory and the real worker (the radix workload needs no GPU).
#include "daemon/server/daemon_server.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/state_dir_lock.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::daemon {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Whether something accepts connections at the unix socket `path`.
bool UnixSocketAccepts(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

// Whether something accepts connections on loopback `port`.
bool LoopbackPortAccepts(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const bool connected = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  close(fd);
  return connected;
}

class DaemonServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = fs::path(::testing::TempDir()) /
                 ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(state_dir_);
    // Unix socket paths are limited to 107 bytes; the test's temporary directory can be longer.
    char pattern[] = "/tmp/daemon-server-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    socket_dir_ = pattern;
    tcp_port_ = ::gpuprof::testing::FreeLoopbackPort();
  }
  void TearDown() override { fs::remove_all(socket_dir_); }

  std::string socket_path() const { return socket_dir_ + "/gpuprofd.sock"; }
  std::string db_path() const { return state_dir_ + "/gpuprof.db"; }

  DaemonServer::Options BaseOptions() const {
    DaemonServer::Options options;
    options.state_dir = state_dir_;
    options.listen = {"unix:" + socket_path(), absl::StrCat("127.0.0.1:", tcp_port_)};
    options.worker_binary = ::gpuprof::testing::RunfilePath("worker/gpuprof_worker");
    options.measure_copy_bandwidth = false;
    options.metrics_listen = "";
    options.nvml_library = "libnvidia-ml-absent-in-this-test.so";
    options.enable_test_faults = true;
    return options;
  }

  // Nothing listens where the options say and no database was made.
  void ExpectNothingBound() const {
    EXPECT_FALSE(fs::exists(socket_path()));
    EXPECT_FALSE(LoopbackPortAccepts(tcp_port_));
  }

  std::string state_dir_;
  std::string socket_dir_;
  int tcp_port_ = 0;
};

TEST_F(DaemonServerTest, OptionsThatMakeNoSenseAreRefusedNamingTheFlagBeforeAnythingIsMade) {
  struct Case {
    void (*set)(DaemonServer::Options&);
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](DaemonServer::Options& o) { o.shutdown_timeout = absl::ZeroDuration(); },
       "--shutdown_timeout=0: must be positive (e.g. 20s)"},
      {[](DaemonServer::Options& o) { o.reload_poll_interval = -absl::Seconds(1); },
       "--reload_poll_interval=-1s: must be positive (e.g. 5s)"},
      {[](DaemonServer::Options& o) { o.max_connections = 0; },
       "--max_connections=0: must be at least 1"},
      {[](DaemonServer::Options& o) { o.reserved_local_connections = 1000; },
       "--reserved_local_connections=1000: must be >= 0 and below --max_connections (1000)"},
      {[](DaemonServer::Options& o) { o.worker_nice = 20; },
       "--worker_nice=20: must be in [-20, 19]"},
      {[](DaemonServer::Options& o) { o.rpc_threads = 0; },
       "--rpc_threads must be at least 1, got 0"},
      {[](DaemonServer::Options& o) { o.reload_when_changed = {"/nonexistent/policy.textproto"}; },
       "--reload_when_changed: /nonexistent/policy.textproto does not exist"},
      {[](DaemonServer::Options& o) { o.custom_kernel_max_source_bytes = 0; },
       "--custom_kernel_max_source_bytes=0: must be in [1, 524288] (half of "
       "--max_message_bytes"},
      {[](DaemonServer::Options& o) { o.custom_kernel_max_source_bytes = 600'000; },
       "--custom_kernel_max_source_bytes=600000: must be in [1, 524288]"},
      {[](DaemonServer::Options& o) { o.custom_kernel_compile_timeout = absl::ZeroDuration(); },
       "--custom_kernel_compile_timeout=0: must be positive (e.g. 60s)"},
      {[](DaemonServer::Options& o) { o.custom_kernel_compile_memory = 1 << 20; },
       "--custom_kernel_compile_memory=1048576: must be at least 268435456"},
  };
  for (const Case& c : cases) {
    DaemonServer::Options options = BaseOptions();
    c.set(options);
    EXPECT_THAT(std::string(DaemonServer::ValidateOptions(options).message()), HasSubstr(c.error));
    const auto server = DaemonServer::Start(options);
    ASSERT_FALSE(server.ok()) << c.error;
    EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(server.status().message()), HasSubstr(c.error));
    EXPECT_FALSE(fs::exists(state_dir_)) << c.error;
    ExpectNothingBound();
  }
  EXPECT_TRUE(DaemonServer::ValidateOptions(BaseOptions()).ok());
}

TEST_F(DaemonServerTest, ABadPolicyIsRefusedBeforeTheStoreOpensAndAnythingIsBound) {
  const std::string policy = socket_dir_ + "/policy.textproto";
  std::ofstream(policy) << "admins: [ this is not a policy";
  DaemonServer::Options options = BaseOptions();
  options.policy = policy;
  const auto server = DaemonServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr(policy));
  EXPECT_FALSE(fs::exists(db_path()));
  ExpectNothingBound();
}

TEST_F(DaemonServerTest, AnUnusableStateDirectoryIsRefusedBeforeAnythingIsBound) {
  // Under a regular file no directory can be made, whoever runs the test (root included).
  const std::string file = socket_dir_ + "/a-file";
  std::ofstream(file) << "not a directory";
  DaemonServer::Options options = BaseOptions();
  options.state_dir = file + "/state";
  const auto server = DaemonServer::Start(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(std::string(server.status().message()), HasSubstr("not starting: "));
  ExpectNothingBound();
}

TEST_F(DaemonServerTest, TheSocketExistsOnlyOnceTheStoreIsOpen) {
  // A damaged database is refused, and nothing listens: the addresses are bound after it.
  fs::create_directories(state_dir_);
  std::ofstream(db_path()) << std::string(8192, 'x');
  auto refused = DaemonServer::Start(BaseOptions());
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("not starting: "));
  ExpectNothingBound();

  // With a good one the daemon serves on every address.
  fs::remove(db_path());
  auto server = DaemonServer::Start(BaseOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_TRUE(UnixSocketAccepts(socket_path()));
  EXPECT_TRUE(LoopbackPortAccepts(tcp_port_));
  EXPECT_EQ((*server)->database_path(), db_path());
  (*server)->Stop();
  ExpectNothingBound();
}

TEST_F(DaemonServerTest, ASecondServerOnTheStateDirectoryIsRefusedUntilTheFirstStops) {
  auto first = DaemonServer::Start(BaseOptions());
  ASSERT_TRUE(first.ok()) << first.status();
  // Its own addresses, so only the lock can refuse it; and before it binds anything.
  DaemonServer::Options second_options = BaseOptions();
  const int second_port = ::gpuprof::testing::FreeLoopbackPort();
  const std::string second_socket = socket_dir_ + "/second.sock";
  second_options.listen = {"unix:" + second_socket, absl::StrCat("127.0.0.1:", second_port)};
  const auto second = DaemonServer::Start(second_options);
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(IsHeldByAnotherProcess(second.status()));
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr(absl::StrCat("not starting: another gpuprofd (pid ", getpid(),
                                     ") holds the lock on state directory ", state_dir_)));
  EXPECT_FALSE(fs::exists(second_socket));
  EXPECT_FALSE(LoopbackPortAccepts(second_port));
  EXPECT_TRUE(UnixSocketAccepts(socket_path()));

  // Stop releases it (after the store has closed).
  (*first)->Stop();
  auto third = DaemonServer::Start(second_options);
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST_F(DaemonServerTest, StopClosesTheListenersFirstThenEndsRunningStreamsAndClosesTheStore) {
  absl::Mutex mutex;
  std::vector<std::string> steps;
  bool accepted_when_listeners_closed = true;
  bool stream_open_when_listeners_closed = false;
  bool stream_open_when_sweeps_stopped = false;
  std::atomic<bool> stream_ended{false};
  DaemonServer::Options options = BaseOptions();
  options.on_shutdown_step = [&](absl::string_view step) {
    absl::MutexLock lock(&mutex);
    steps.emplace_back(step);
    if (step == DaemonServer::kListenersClosed) {
      accepted_when_listeners_closed =
          UnixSocketAccepts(socket_path()) || LoopbackPortAccepts(tcp_port_);
      stream_open_when_listeners_closed = !stream_ended.load();
    }
    if (step == DaemonServer::kSweepsStopped) {
      stream_open_when_sweeps_stopped = !stream_ended.load();
    }
  };
  auto server = DaemonServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();

  // A radix experiment whose worker hangs once it runs: it ends only when the daemon stops.
  auto stub = v1::Profiler::NewStub(
      grpc::CreateChannel("unix:" + socket_path(), grpc::InsecureChannelCredentials()));
  v1::ExperimentRequest request;
  request.mutable_radix()->set_num_requests(300);
  (*request.mutable_labels())["gpuprof.fault"] = "hang";
  grpc::ClientContext context;
  auto stream = stub->Submit(&context, request);
  v1::ExperimentEvent event;
  std::string id;
  bool running = false;
  while (!running && stream->Read(&event)) {
    id = event.experiment_id();
    running = event.has_state() && event.state().state() == v1::RUNNING;
  }
  ASSERT_TRUE(running);
  v1::ExperimentEvent last = event;
  std::thread follower([&] {
    while (stream->Read(&event)) last = event;
    stream_ended = true;
  });

  (*server)->Stop();
  follower.join();
  const grpc::Status finished = stream->Finish();

  EXPECT_THAT(steps, ElementsAre(DaemonServer::kListenersClosed, DaemonServer::kSweepsStopped,
                                 DaemonServer::kManagerStopped, DaemonServer::kRpcsEnded,
                                 DaemonServer::kStoreClosed));
  // No newcomer got in while the manager was still running, and the open stream was kept...
  EXPECT_FALSE(accepted_when_listeners_closed);
  EXPECT_TRUE(stream_open_when_listeners_closed);
  EXPECT_TRUE(stream_open_when_sweeps_stopped);
  // ...until the manager ended the experiment and told its watchers.
  EXPECT_TRUE(finished.ok()) << finished.error_message();
  ASSERT_TRUE(last.has_state());
  EXPECT_EQ(last.state().state(), v1::INTERRUPTED);
  ExpectNothingBound();

  // The database was closed cleanly (the last connection empties the write-ahead log into
  // it; the empty file is kept, so that a restart on a full disk can read) and holds the
  // experiment as it ended.
  EXPECT_EQ(fs::file_size(db_path() + "-wal"), 0u);
  EXPECT_TRUE(ExperimentStore::CheckDatabase(db_path()).ok());
  auto store = ExperimentStore::Open(db_path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto stored = (*store)->Get(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::INTERRUPTED);
}

TEST_F(DaemonServerTest, AReloadKeepsAPolicyInForceWhenTheNewFileIsBadAndAuditsBoth) {
  const std::string policy = socket_dir_ + "/policy.textproto";
  std::ofstream(policy) << "policy_version: 1\nend_of_policy: true\n";
  DaemonServer::Options options = BaseOptions();
  options.policy = policy;
  auto server = DaemonServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status();
  (*server)->Reload();
  std::ofstream(policy) << "admins: [ this is not a policy";
  (*server)->Reload();
  (*server)->Stop();

  auto store = ExperimentStore::Open(db_path());
  ASSERT_TRUE(store.ok()) << store.status();
  auto audit = (*store)->ListAudit("", "", 0);
  ASSERT_TRUE(audit.ok()) << audit.status();
  std::vector<std::string> actions;
  for (const v1::AuditEntry& entry : *audit) actions.push_back(entry.action());
  // Newest first.
  EXPECT_THAT(actions, ElementsAre("policy-reload-rejected", "policy-reload"));
}

TEST_F(DaemonServerTest, StopIsIdempotentAndTheDestructorStopsAServerLeftRunning) {
  {
    auto server = DaemonServer::Start(BaseOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    (*server)->Stop();
    (*server)->Stop();
    ExpectNothingBound();
  }
  {
    auto server = DaemonServer::Start(BaseOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_TRUE(UnixSocketAccepts(socket_path()));
  }
  ExpectNothingBound();
  EXPECT_EQ(fs::file_size(db_path() + "-wal"), 0u);
}

}  // namespace
}  // namespace gpuprof::daemon
