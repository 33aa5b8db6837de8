// A sweep with a 100 000-event history, watched through the real daemon: every event in order
// and then the live ones, four replays at once in bounded memory that is given back, and a
// client that stops reading cut off with a position it can resume from.
#include <grpcpp/grpcpp.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/daemon_config.h"
#include "daemon/store/sqlite_database.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof {
namespace {

using ::gpuprof::daemon::store::SqliteDatabase;
using ::gpuprof::daemon::store::SqliteTransaction;
using ::gpuprof::testing::CommandResult;
using ::gpuprof::testing::DaemonProcess;
using ::gpuprof::testing::MakeTempDir;
using ::gpuprof::testing::ProcStatusKib;
using ::testing::HasSubstr;

constexpr int64_t kStoredEvents = 100'000;
constexpr absl::Duration kStallTimeout = absl::Seconds(2);

// What one watcher received.
struct Received {
  std::vector<int64_t> seqs;
  grpc::Status status;
  std::string resume_from;  // the kResumeFromSeqTrailer trailer, if any
};

// The seqs are exactly from, from + 1, ..., to.
::testing::AssertionResult Contiguous(const std::vector<int64_t>& seqs, int64_t from, int64_t to) {
  if (seqs.empty() || seqs.front() != from || seqs.back() != to ||
      static_cast<int64_t>(seqs.size()) != to - from + 1) {
    return ::testing::AssertionFailure()
           << seqs.size() << " events, " << (seqs.empty() ? -1 : seqs.front()) << " to "
           << (seqs.empty() ? -1 : seqs.back()) << "; wanted " << from << " to " << to;
  }
  for (size_t i = 1; i < seqs.size(); ++i) {
    if (seqs[i] != seqs[i - 1] + 1) {
      return ::testing::AssertionFailure() << "seq " << seqs[i] << " follows " << seqs[i - 1];
    }
  }
  return ::testing::AssertionSuccess();
}

class LongHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_dir_ = MakeTempDir("gpuprofd");
    ASSERT_FALSE(state_dir_.empty());
    daemon_ = std::make_unique<DaemonProcess>(
        state_dir_,
        std::vector<std::string>{"--enable_test_faults", "--cpu_slots=1",
                                 absl::StrCat("--watch_stall_timeout=",
                                              absl::FormatDuration(kStallTimeout))});
    ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
  }

  v1::Sweep GetSweep() {
    auto stub = daemon_->NewStub();
    grpc::ClientContext context;
    v1::GetSweepRequest request;
    request.set_sweep_id(sweep_id_);
    v1::Sweep sweep;
    const grpc::Status status = stub->GetSweep(&context, request, &sweep);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return sweep;
  }

  // A running two-point sweep whose points hang (one CPU slot: one runs, one waits): it stays
  // live until cancelled.
  void SubmitHangingSweep() {
    const CommandResult submitted =
        daemon_->Cli({"sweep", "radix", "--requests", "300,301", "--label", "gpuprof.fault=hang",
                      "--timeout", "10m", "--json"});
    ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
    v1::Sweep sweep;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(submitted.out, &sweep).ok())
        << submitted.out;
    sweep_id_ = sweep.id();
  }

  // With the daemon stopped: `count` more events after the sweep's last, straight into its
  // table, in one transaction (a day of a big sweep's history in a second).
  void AppendStoredEvents(int64_t count) {
    auto database =
        SqliteDatabase::Open(daemon::DefaultDatabasePath(state_dir_));
    ASSERT_TRUE(database.ok()) << database.status();
    auto transaction = SqliteTransaction::Begin(**database, "appending events");
    ASSERT_TRUE(transaction.ok()) << transaction.status();
    v1::Sweep sweep;
    {
      auto select = (*database)->Prepare("SELECT proto FROM sweeps WHERE id = ?1", "reading");
      ASSERT_TRUE(select.ok());
      ASSERT_TRUE(select->BindText(1, sweep_id_).ok());
      ASSERT_TRUE(*select->Step());
      ASSERT_TRUE(select->ColumnMessage(0, sweep, "the sweep").ok());
    }
    // A point's state change, the commonest event of a sweep.
    v1::SweepEvent event;
    event.set_sweep_id(sweep_id_);
    event.mutable_point()->set_index(0);
    event.mutable_point()->set_state(v1::RUNNING);
    event.mutable_point()->set_experiment_id("exp-000001");
    (*event.mutable_point()->mutable_parameters())["requests"] = "300";
    for (int64_t i = 1; i <= count; ++i) {
      event.set_seq(sweep.last_seq() + i);
      event.mutable_time()->set_seconds(1'700'000'000 + i);
      auto insert = (*database)->Prepare(
          "INSERT INTO sweep_events (sweep_id, seq, proto) VALUES (?1, ?2, ?3)", "appending");
      ASSERT_TRUE(insert.ok()) << insert.status();
      ASSERT_TRUE(insert->BindText(1, sweep_id_).ok());
      ASSERT_TRUE(insert->BindInt64(2, event.seq()).ok());
      ASSERT_TRUE(insert->BindBlob(3, event.SerializeAsString()).ok());
      ASSERT_TRUE(insert->Step().ok());
    }
    sweep.set_last_seq(sweep.last_seq() + count);
    auto update = (*database)->Prepare("UPDATE sweeps SET proto = ?1 WHERE id = ?2", "updating");
    ASSERT_TRUE(update.ok());
    ASSERT_TRUE(update->BindBlob(1, sweep.SerializeAsString()).ok());
    ASSERT_TRUE(update->BindText(2, sweep_id_).ok());
    ASSERT_TRUE(update->Step().ok());
    ASSERT_TRUE(transaction->Commit().ok());
  }

  // Watches the sweep from `from_seq`; `after_each` is called with every seq received and
  // may pause (a slow client). `channel_args` shape the client's flow-control window.
  Received Watch(int64_t from_seq, const std::function<void(int64_t)>& after_each = nullptr,
                 const grpc::ChannelArguments& channel_args = grpc::ChannelArguments()) {
    auto channel = grpc::CreateCustomChannel(daemon_->target(),
                                             grpc::InsecureChannelCredentials(), channel_args);
    auto stub = v1::Profiler::NewStub(channel);
    grpc::ClientContext context;
    v1::WatchSweepRequest request;
    request.set_sweep_id(sweep_id_);
    request.set_from_seq(from_seq);
    auto reader = stub->WatchSweep(&context, request);
    Received received;
    v1::SweepEvent event;
    while (reader->Read(&event)) {
      received.seqs.push_back(event.seq());
      if (after_each) after_each(event.seq());
    }
    received.status = reader->Finish();
    const auto& trailers = context.GetServerTrailingMetadata();
    if (const auto it = trailers.find("gpuprof-resume-from-seq"); it != trailers.end()) {
      received.resume_from = std::string(it->second.data(), it->second.size());
    }
    return received;
  }

  std::string state_dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::string sweep_id_;
};

TEST_F(LongHistoryTest, AHundredThousandEventsReplayInOrderThenLiveInBoundedMemory) {
  SubmitHangingSweep();
  ASSERT_FALSE(sweep_id_.empty());
  ASSERT_EQ(daemon_->Stop(), 0);
  AppendStoredEvents(kStoredEvents);
  ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
  // The resumed sweep's point runs again (and hangs): the sweep is live.
  const v1::Sweep resumed = GetSweep();
  ASSERT_EQ(resumed.state(), v1::SWEEP_RUNNING) << daemon_->Log();
  const int64_t stored_to = resumed.last_seq();
  ASSERT_GT(stored_to, kStoredEvents);

  // Every event from the first, in order, then the live ones: cancelling the sweep once the
  // watcher has the whole history, its last events arrive live and the stream ends.
  absl::Notification has_history;
  std::thread cancel([&] {
    has_history.WaitForNotificationWithTimeout(absl::Minutes(2));
    const CommandResult cancelled = daemon_->Cli({"sweep", "cancel", sweep_id_});
    EXPECT_EQ(cancelled.exit_code, 0) << cancelled.err;
  });
  const absl::Time start = absl::Now();
  Received first = Watch(1, [&](int64_t seq) {
    if (seq == stored_to) has_history.Notify();
  });
  const absl::Duration took = absl::Now() - start;
  cancel.join();
  EXPECT_TRUE(first.status.ok()) << first.status.error_message();
  const v1::Sweep ended = GetSweep();
  EXPECT_EQ(ended.state(), v1::SWEEP_CANCELLED);
  EXPECT_GT(ended.last_seq(), stored_to);
  EXPECT_TRUE(Contiguous(first.seqs, 1, ended.last_seq()));
  std::printf("one watcher: %zu events in %s\n", first.seqs.size(),
              absl::FormatDuration(took).c_str());

  // Four replays of the whole history at once: the daemon's memory grows by a bounded amount
  // (each stream reads a page of at most 256 KiB at a time and queues at most 1 MiB) and is
  // given back when they end.
  const pid_t daemon_pid = daemon_->pid();
  absl::SleepFor(absl::Seconds(2));  // the cancel's trim
  const int64_t baseline_kib = ProcStatusKib(daemon_pid, "VmRSS");
  std::atomic<int64_t> peak_kib{baseline_kib};
  std::atomic<bool> replaying{true};
  std::thread sampler([&] {
    while (replaying.load()) {
      peak_kib.store(std::max(peak_kib.load(), ProcStatusKib(daemon_pid, "VmRSS")));
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  std::vector<Received> replays(4);
  {
    std::vector<std::thread> watchers;
    for (Received& replay : replays) {
      watchers.emplace_back([&] { replay = Watch(1); });
    }
    for (std::thread& watcher : watchers) watcher.join();
  }
  replaying.store(false);
  sampler.join();
  for (const Received& replay : replays) {
    EXPECT_TRUE(replay.status.ok()) << replay.status.error_message();
    EXPECT_TRUE(Contiguous(replay.seqs, 1, ended.last_seq()));
  }
  int64_t after_kib = ProcStatusKib(daemon_pid, "VmRSS");
  for (int i = 0; i < 50 && after_kib - baseline_kib > 8 * 1024; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    after_kib = ProcStatusKib(daemon_pid, "VmRSS");
  }
  std::printf("four replays of %lld events: daemon RSS %lld KiB before, %lld KiB at most, "
              "%lld KiB after\n",
              static_cast<long long>(ended.last_seq()), static_cast<long long>(baseline_kib),
              static_cast<long long>(peak_kib.load()), static_cast<long long>(after_kib));
  if (testing::RunningUnderSanitizer()) {
    // The sanitizers' allocators make every block dearer and keep what is freed (ASan's
    // quarantine holds up to 256 MiB), so only the peak is bounded there, more loosely.
    EXPECT_LT(peak_kib.load() - baseline_kib, 48 * 1024 * 8);
  } else {
    EXPECT_LT(peak_kib.load() - baseline_kib, 48 * 1024);
    EXPECT_LT(after_kib - baseline_kib, 8 * 1024);
  }
}

TEST_F(LongHistoryTest, AClientThatStopsReadingIsCutOffAndResumesFromWhereItWasTold) {
  SubmitHangingSweep();
  ASSERT_FALSE(sweep_id_.empty());
  ASSERT_EQ(daemon_->Stop(), 0);
  AppendStoredEvents(20'000);
  ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();

  // A client with a small window that stops reading after ten events, for longer than the
  // daemon waits for it.
  grpc::ChannelArguments small_window;
  small_window.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  small_window.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 * 1024);
  Received stalled = Watch(
      1,
      [](int64_t seq) {
        if (seq == 10) absl::SleepFor(kStallTimeout * 3);
      },
      small_window);
  ASSERT_EQ(stalled.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << stalled.status.error_message();
  EXPECT_THAT(stalled.status.error_message(), HasSubstr("watch again from seq"));
  int64_t resume_from = 0;
  ASSERT_TRUE(absl::SimpleAtoi(stalled.resume_from, &resume_from)) << stalled.resume_from;
  EXPECT_THAT(stalled.status.error_message(), HasSubstr(absl::StrCat("seq ", resume_from)));
  // It got every event before the position it was given, and none after.
  EXPECT_TRUE(Contiguous(stalled.seqs, 1, resume_from - 1));
  EXPECT_LT(resume_from, 20'000);

  // Resuming there, reading at a normal pace, gets the rest, then the live end.
  absl::Notification has_history;
  const int64_t stored_to = GetSweep().last_seq();
  std::thread cancel([&] {
    has_history.WaitForNotificationWithTimeout(absl::Minutes(2));
    EXPECT_EQ(daemon_->Cli({"sweep", "cancel", sweep_id_}).exit_code, 0);
  });
  Received resumed = Watch(resume_from, [&](int64_t seq) {
    if (seq == stored_to) has_history.Notify();
  });
  cancel.join();
  EXPECT_TRUE(resumed.status.ok()) << resumed.status.error_message();
  EXPECT_TRUE(Contiguous(resumed.seqs, resume_from, GetSweep().last_seq()));
}

TEST_F(LongHistoryTest, TheCliWatchesAgainFromWhereItWasCutOff) {
  SubmitHangingSweep();
  ASSERT_FALSE(sweep_id_.empty());
  ASSERT_EQ(daemon_->Cli({"sweep", "cancel", sweep_id_}).exit_code, 0);
  ASSERT_EQ(daemon_->Stop(), 0);
  AppendStoredEvents(20'000);
  ASSERT_TRUE(daemon_->Start().ok()) << daemon_->Log();
  const int64_t last_seq = GetSweep().last_seq();

  // `sweep watch --json` into a pipe nobody reads for longer than the daemon waits (a paused
  // terminal): the daemon cuts the stream off, and the CLI watches again from where it was.
  const std::string err_path = absl::StrCat(state_dir_, "/watch.err");
  const std::string command = absl::StrCat(
      testing::RunfilePath("client/gpuprof"), " --target=", daemon_->target(),
      " --user=tester sweep watch ", sweep_id_, " --json 2>", err_path);
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out(4096, '\0');
  out.resize(fread(out.data(), 1, out.size(), pipe));
  absl::SleepFor(kStallTimeout * 3);
  char buffer[1 << 16];
  for (size_t got; (got = fread(buffer, 1, sizeof(buffer), pipe)) > 0;) out.append(buffer, got);
  const int status = pclose(pipe);
  std::ifstream err_file(err_path);
  const std::string err((std::istreambuf_iterator<char>(err_file)),
                        std::istreambuf_iterator<char>());
  EXPECT_TRUE(WIFEXITED(status)) << err;
  EXPECT_THAT(err, HasSubstr("watching again from seq"));
  std::vector<int64_t> seqs;
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(out, '\n', absl::SkipEmpty()))) {
    v1::SweepEvent event;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(line, &event).ok()) << line;
    seqs.push_back(event.seq());
  }
  EXPECT_TRUE(Contiguous(seqs, 1, last_seq));
}

}  // namespace
}  // namespace gpuprof
