// Finding 4: another user filling an experiment's 64 watcher places locked its owner out of
// `watch`. A second local account (gpuprof-mallory) opens a hundred Watch streams on each of two
// queued experiments of other people's, one the daemon user's (root, an admin) and one a
// non-admin's (gpuprof-alice), and holds them; meanwhile each owner's `gpuprof watch` must be
// answered within a second.
#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/daemon_harness.h"
#include "tests/testing/local_account.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// How long a victim's watch may take to show its first event during the flood: a CLI process
// start, a connection and the replay. Sanitizers slow the start.
#if defined(GPUPROF_ASAN_BUILD) || defined(GPUPROF_TSAN_BUILD)
constexpr absl::Duration kAnsweredWithin = absl::Seconds(3);
#else
constexpr absl::Duration kAnsweredWithin = absl::Seconds(1);
#endif

constexpr int kStreamsPerExperiment = 100;

std::string SubmittedId(const CommandResult& result) {
  auto events = ParseEventLines(result.out);
  return events.ok() && !events->empty() ? events->front().experiment_id() : "";
}

// The value of `key=` in the line of `text` that starts with `line_prefix`; -1 if absent.
int FieldOf(const std::string& text, const std::string& line_prefix, const std::string& key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, line_prefix)) continue;
    const size_t at = line.find(" " + key + "=");
    if (at == absl::string_view::npos) return -1;
    absl::string_view value = line.substr(at + key.size() + 2);
    value = value.substr(0, value.find(' '));
    int number = -1;
    return absl::SimpleAtoi(value, &number) ? number : -1;
  }
  return -1;
}

// mallory's watch_flooder in the background, holding its streams for `hold_seconds`.
class WatchFlood {
 public:
  WatchFlood(const LocalAccount& mallory, const std::string& target,
             const std::vector<std::string>& experiments, int hold_seconds)
      : status_file_(absl::StrCat(mallory.home, "/watch-flood-", getpid(), "-", ++floods_)) {
    std::remove(status_file_.c_str());
    thread_ = std::thread([this, mallory, target, experiments, hold_seconds] {
      result_ = RunCommandAs(
          mallory,
          {SharedBinary("tests/security/watch_flooder"), "--target=" + target,
           "--experiments=" + absl::StrJoin(experiments, ","),
           absl::StrCat("--streams=", kStreamsPerExperiment), "--channels=4",
           absl::StrCat("--hold_seconds=", hold_seconds), "--status_file=" + status_file_},
          absl::Seconds(hold_seconds + 120));
    });
  }
  ~WatchFlood() {
    if (thread_.joinable()) thread_.join();
  }
  // The flooder's report once every stream is admitted or refused; empty if it never is.
  std::string WaitHolding() {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (absl::Now() < deadline) {
      std::ifstream file(status_file_);
      std::string report((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
      if (absl::StartsWith(report, "holding")) return report;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return "";
  }
  CommandResult Finish() {
    thread_.join();
    return result_;
  }

 private:
  static inline int floods_ = 0;
  std::string status_file_;
  std::thread thread_;
  CommandResult result_;
};

class WatchFloodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto mallory = EnsureLocalAccount("gpuprof-mallory");
    if (!mallory.ok()) GTEST_SKIP() << "no second local account: " << mallory.status();
    auto alice = EnsureLocalAccount("gpuprof-alice");
    if (!alice.ok()) GTEST_SKIP() << "no second local account: " << alice.status();
    mallory_ = *mallory;
    alice_ = *alice;
  }

  // A daemon whose one CPU slot is held by an experiment of root's that hangs until cancelled,
  // so that root's and alice's experiments stay queued while they are watched.
  void StartDaemon(const std::vector<std::string>& flags) {
    daemon_ = std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd-watch-flood"),
                                              std::vector<std::string>{"--enable_test_faults"});
    daemon_->AddFlags(flags);
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << daemon_->Log();
    const CommandResult blocker = daemon_->CliAsIs(
        {"submit", "radix", "--requests", "100", "--label", "gpuprof.fault=hang", "--json"});
    ASSERT_EQ(blocker.exit_code, 0) << blocker.err;
    const CommandResult roots =
        daemon_->CliAsIs({"submit", "radix", "--requests", "100", "--json"});
    ASSERT_EQ(roots.exit_code, 0) << roots.err;
    root_experiment_ = SubmittedId(roots);
    const CommandResult alices =
        daemon_->CliAs(alice_, {"submit", "radix", "--requests", "100", "--json"});
    ASSERT_EQ(alices.exit_code, 0) << alices.err;
    alice_experiment_ = SubmittedId(alices);
    ASSERT_FALSE(root_experiment_.empty() || alice_experiment_.empty());
  }

  // `watch ID --json` as the owner, stopped after kAnsweredWithin: it must have printed the
  // experiment's first (QUEUED) event by then, and no refusal.
  void ExpectOwnerWatchAnswered(const std::string& who, const std::string& id) {
    const CommandResult watched =
        who == "root" ? daemon_->CliAsIs({"watch", id, "--json"}, kAnsweredWithin)
                      : daemon_->CliAs(alice_, {"watch", id, "--json"}, kAnsweredWithin);
    EXPECT_THAT(watched.err, Not(HasSubstr("RESOURCE_EXHAUSTED"))) << who;
    auto events = ParseEventLines(watched.out);
    ASSERT_TRUE(events.ok()) << who << ": " << events.status() << watched.out;
    ASSERT_FALSE(events->empty()) << who << "'s watch of " << id << " printed nothing within "
                                  << kAnsweredWithin << ": " << watched.err;
    EXPECT_EQ(events->front().experiment_id(), id);
    EXPECT_EQ(events->front().seq(), 1);
    EXPECT_EQ(events->front().state().state(), v1::QUEUED);
    std::printf(
        "%s's `gpuprof watch %s` printed its first event within %s (process start "
        "included) during the flood\n",
        who.c_str(), id.c_str(), absl::FormatDuration(kAnsweredWithin).c_str());
  }

  // The same watch over gRPC as root, timed to its first event.
  void ExpectRootStreamTimed(const std::string& id) {
    auto stub = daemon_->NewStub();
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    v1::WatchRequest request;
    request.set_experiment_id(id);
    const absl::Time start = absl::Now();
    auto reader = stub->Watch(&context, request);
    v1::ExperimentEvent event;
    const bool answered = reader->Read(&event);
    const absl::Duration took = absl::Now() - start;
    EXPECT_TRUE(answered) << "root's Watch of " << id << " was refused";
    EXPECT_LT(took, kAnsweredWithin);
    std::printf("root's Watch stream of %s: first event after %s\n", id.c_str(),
                absl::FormatDuration(took).c_str());
    context.TryCancel();
    reader->Finish();
  }

  LocalAccount mallory_;
  LocalAccount alice_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::string root_experiment_;
  std::string alice_experiment_;
};

// The defaults: one account may hold 8 streams on an experiment, whatever it asks for.
TEST_F(WatchFloodTest, AFloodOfWatchesDoesNotLockTheOwnersOut) {
  StartDaemon({});
  WatchFlood flood(mallory_, daemon_->target(), {root_experiment_, alice_experiment_},
                   /*hold_seconds=*/10);
  const std::string holding = flood.WaitHolding();
  ASSERT_FALSE(holding.empty()) << "the flood never settled";
  std::printf("flood: %s", holding.c_str());
  for (const std::string& id : {root_experiment_, alice_experiment_}) {
    EXPECT_EQ(FieldOf(holding, id, "admitted"), 8) << holding;
    EXPECT_EQ(FieldOf(holding, id, "refused"), kStreamsPerExperiment - 8) << holding;
  }
  EXPECT_THAT(holding, HasSubstr("--max_watchers_per_user_per_experiment=8"));
  // Held while the owners watch: root (the daemon's user, an admin) and alice (no admin).
  ExpectOwnerWatchAnswered("root", root_experiment_);
  ExpectOwnerWatchAnswered("gpuprof-alice", alice_experiment_);
  ExpectRootStreamTimed(root_experiment_);
  const CommandResult flooded = flood.Finish();
  EXPECT_EQ(flooded.exit_code, 0) << flooded.err;
}

// Without the per-user cap, one account fills every place others may take; the owner's room
// stays (the cap keeps min(8, 64/2) = 32 for the owner and admins when the per-user cap is off).
TEST_F(WatchFloodTest, TheOwnersRoomSurvivesOthersFillingTheRest) {
  StartDaemon({"--max_watchers_per_user_per_experiment=0"});
  WatchFlood flood(mallory_, daemon_->target(), {root_experiment_, alice_experiment_},
                   /*hold_seconds=*/10);
  const std::string holding = flood.WaitHolding();
  ASSERT_FALSE(holding.empty()) << "the flood never settled";
  std::printf("flood: %s", holding.c_str());
  for (const std::string& id : {root_experiment_, alice_experiment_}) {
    EXPECT_EQ(FieldOf(holding, id, "admitted"), 32) << holding;
    EXPECT_EQ(FieldOf(holding, id, "refused"), kStreamsPerExperiment - 32) << holding;
  }
  EXPECT_THAT(holding, HasSubstr("of which 32 are kept for the owner and admins"));
  ExpectOwnerWatchAnswered("root", root_experiment_);
  ExpectOwnerWatchAnswered("gpuprof-alice", alice_experiment_);
  // Another user's watch is what the flood refuses, with the cap named.
  const CommandResult bystander =
      daemon_->CliAs(mallory_, {"watch", alice_experiment_, "--json"}, absl::Seconds(30));
  EXPECT_NE(bystander.exit_code, 0);
  EXPECT_THAT(bystander.err, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(bystander.err, HasSubstr("--max_watchers_per_experiment=64"));
  flood.Finish();
}

}  // namespace
}  // namespace gpuprof::testing
