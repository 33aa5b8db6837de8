// A worker that misbehaves on its report pipe, against the real gpuprofd and the real worker
// (its test faults): one that floods the daemon with well-formed reports and one that writes
// bytes that are not a report. Each is killed, only its experiment fails, with the reason, and
// the daemon's memory stays bounded while it happens.
#include <grpcpp/grpcpp.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

class WorkerDefencesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(
        MakeTempDir("gpuprofd"),
        std::vector<std::string>{"--enable_test_faults", "--max_report_bytes_per_experiment=8388608"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  // Submits a radix run with the given fault and follows it; returns its final event.
  v1::ExperimentEvent RunWithFault(const std::string& fault) {
    const CommandResult result = daemon_->Cli({"submit", "radix", "--num-requests", "300",
                                               "--label", "gpuprof.fault=" + fault, "--timeout",
                                               "10m", "--follow", "--json"});
    EXPECT_EQ(result.exit_code, 1) << result.err;
    auto events = ParseEventLines(result.out);
    EXPECT_TRUE(events.ok()) << events.status();
    if (!events.ok() || events->empty()) return {};
    return events->back();
  }

  // The daemon still runs experiments after the faulty one.
  void ExpectStillServing() {
    const CommandResult result =
        daemon_->Cli({"submit", "radix", "--num-requests", "300", "--follow"});
    EXPECT_EQ(result.exit_code, 0) << result.err << daemon_->Log();
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(WorkerDefencesTest, FloodingWorkerIsKilledAndMemoryStaysBounded) {
  const int64_t rss_before_kb = ProcStatusKib(daemon_->pid(), "VmRSS");
  ASSERT_GT(rss_before_kb, 0);
  const absl::Time start = absl::Now();
  const v1::ExperimentEvent last = RunWithFault("flood");
  EXPECT_EQ(last.state().state(), v1::FAILED);
  EXPECT_THAT(last.state().reason(), HasSubstr("flooded its report pipe"));
  EXPECT_THAT(last.state().reason(), HasSubstr("8388608 bytes"));
  // Ended by the limit, long before its ten-minute timeout.
  EXPECT_LT(absl::Now() - start, absl::Minutes(5));
  // The peak while the flood lasted: one report at a time is held, never the whole stream.
  // (Generous for sanitizer builds, whose allocators keep freed memory in quarantine.)
  const int64_t peak_kb = ProcStatusKib(daemon_->pid(), "VmHWM");
  EXPECT_LT(peak_kb - rss_before_kb, 512 * 1024) << "peak " << peak_kb << " kB, before "
                                                 << rss_before_kb << " kB";
  ExpectStillServing();
}

TEST_F(WorkerDefencesTest, WorkerSendingMalformedFramesIsKilled) {
  const absl::Time start = absl::Now();
  const v1::ExperimentEvent last = RunWithFault("garbage");
  EXPECT_EQ(last.state().state(), v1::FAILED);
  EXPECT_THAT(last.state().reason(), HasSubstr("malformed report"));
  EXPECT_THAT(last.state().reason(), HasSubstr("killed"));
  // The worker would have hung: it was killed at once, not at its timeout.
  EXPECT_LT(absl::Now() - start, absl::Minutes(5));
  ExpectStillServing();
}

TEST_F(WorkerDefencesTest, StalledWatchersOfAFloodingWorkerHoldBoundedMemoryThatIsGivenBack) {
  // A flood of 512 reports of 64 KiB, watched by four clients that stop reading after the
  // first event: each watcher queues at most 1 MiB (the rest stays in the store), and each is
  // cut off two seconds after it stopped reading.
  ASSERT_EQ(daemon_->Stop(), 0);
  daemon_ = std::make_unique<DaemonProcess>(
      MakeTempDir("gpuprofd"),
      std::vector<std::string>{"--enable_test_faults", "--max_report_bytes_per_experiment=33554432",
                               "--watch_stall_timeout=2s"});
  ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
  const pid_t daemon_pid = daemon_->pid();
  const int64_t rss_before_kb = ProcStatusKib(daemon_pid, "VmRSS");
  const CommandResult submitted =
      daemon_->Cli({"submit", "radix", "--num-requests", "300", "--label",
                    "gpuprof.fault=flood", "--timeout", "10m", "--json"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  auto queued = ParseEventLines(submitted.out);
  ASSERT_TRUE(queued.ok() && !queued->empty()) << submitted.out;
  const std::string id = queued->front().experiment_id();

  absl::Notification read_again;
  struct Watched {
    int64_t events = 0;
    int64_t last_seq = 0;
    grpc::Status status;
    std::string resume_from;
  };
  std::vector<Watched> watched(4);
  std::vector<std::thread> watchers;
  for (Watched& result : watched) {
    watchers.emplace_back([&] {
      grpc::ChannelArguments small_window;
      small_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      small_window.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
      auto stub = v1::Profiler::NewStub(grpc::CreateCustomChannel(
          daemon_->target(), grpc::InsecureChannelCredentials(), small_window));
      grpc::ClientContext context;
      v1::WatchRequest request;
      request.set_experiment_id(id);
      auto reader = stub->Watch(&context, request);
      v1::ExperimentEvent event;
      while (reader->Read(&event)) {
        ++result.events;
        result.last_seq = event.seq();
        if (result.events == 1) read_again.WaitForNotification();
      }
      result.status = reader->Finish();
      const auto& trailers = context.GetServerTrailingMetadata();
      if (auto it = trailers.find("gpuprof-resume-from-seq"); it != trailers.end()) {
        result.resume_from = std::string(it->second.data(), it->second.size());
      }
    });
  }
  // The flood ends at its limit while the four do not read.
  v1::Experiment ended;
  for (int i = 0; i < 600; ++i) {
    const CommandResult got = daemon_->Cli({"get", id, "--json"});
    auto parsed = ParseExperiment(got.out);
    if (parsed.ok() && parsed->state() == v1::FAILED) {
      ended = *parsed;
      break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(ended.state(), v1::FAILED) << daemon_->Log();
  EXPECT_THAT(ended.reason(), HasSubstr("flooded its report pipe"));
  const int64_t peak_kb = ProcStatusKib(daemon_pid, "VmHWM");
  absl::SleepFor(absl::Seconds(3));  // past the stall timeout
  read_again.Notify();
  for (std::thread& watcher : watchers) watcher.join();
  for (const Watched& result : watched) {
    // Cut off, told where to resume: right after the last event it got.
    EXPECT_EQ(result.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << result.status.error_message();
    EXPECT_EQ(result.resume_from, std::to_string(result.last_seq + 1));
  }
  // What the streams held is given back once they are gone.
  int64_t rss_after_kb = ProcStatusKib(daemon_pid, "VmRSS");
  for (int i = 0; i < 50 && rss_after_kb - rss_before_kb > 16 * 1024; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    rss_after_kb = ProcStatusKib(daemon_pid, "VmRSS");
  }
  std::printf("flood of 32 MiB with four stalled watchers: daemon RSS %lld kB before, peak %lld "
              "kB, %lld kB after\n",
              static_cast<long long>(rss_before_kb), static_cast<long long>(peak_kb),
              static_cast<long long>(rss_after_kb));
  if (RunningUnderSanitizer()) {
    // The sanitizers' allocators make every block dearer and keep what is freed (ASan's
    // quarantine holds up to 256 MiB), so only the peak is bounded there, more loosely.
    EXPECT_LT(peak_kb - rss_before_kb, 64 * 1024 * 8);
  } else {
    EXPECT_LT(peak_kb - rss_before_kb, 64 * 1024);
    EXPECT_LT(rss_after_kb - rss_before_kb, 16 * 1024);
  }
  // A watcher reading at a normal pace gets the whole history from the store.
  const CommandResult replay = daemon_->Cli({"watch", id, "--json"});
  auto events = ParseEventLines(replay.out);
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_FALSE(events->empty());
  EXPECT_EQ(events->back().seq(), ended.last_seq());
  EXPECT_EQ(static_cast<int64_t>(events->size()), ended.last_seq());
}

}  // namespace
}  // namespace gpuprof::testing
