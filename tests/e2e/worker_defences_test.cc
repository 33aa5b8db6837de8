// A worker that misbehaves on its report pipe, against the real gpuprofd and the real worker
// (its test faults): one that floods the daemon with well-formed reports and one that writes
// bytes that are not a report. Each is killed, only its experiment fails, with the reason, and
// the daemon's memory stays bounded while it happens.
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

// A field of /proc/PID/status in kB ("VmHWM", "VmRSS"); -1 if unreadable.
int64_t ProcStatusKb(pid_t pid, const std::string& field) {
  const CommandResult status = RunCommand({"/bin/cat", "/proc/" + std::to_string(pid) + "/status"});
  for (absl::string_view line : absl::StrSplit(status.out, '\n')) {
    if (!absl::ConsumePrefix(&line, field + ":")) continue;
    line = absl::StripAsciiWhitespace(line);
    absl::ConsumeSuffix(&line, " kB");
    int64_t kb = 0;
    if (absl::SimpleAtoi(line, &kb)) return kb;
  }
  return -1;
}

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
  const int64_t rss_before_kb = ProcStatusKb(daemon_->pid(), "VmRSS");
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
  const int64_t peak_kb = ProcStatusKb(daemon_->pid(), "VmHWM");
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

}  // namespace
}  // namespace gpuprof::testing
