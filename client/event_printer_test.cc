#include "client/event_printer.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/terminal_output.h"
#include "google/protobuf/text_format.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// 2024-05-01 12:00:00 UTC.
constexpr int64_t kStartSeconds = 1714564800;

// An event at kStartSeconds + `millis` ms, from its text-format payload.
v1::ExperimentEvent Event(int64_t seq, int64_t millis, const std::string& payload) {
  v1::ExperimentEvent event;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(payload, &event)) << payload;
  event.set_experiment_id("exp-000001");
  event.set_seq(seq);
  event.mutable_time()->set_seconds(kStartSeconds + millis / 1000);
  event.mutable_time()->set_nanos(static_cast<int32_t>(millis % 1000) * 1000000);
  return event;
}

std::vector<v1::ExperimentEvent> FinishedRun() {
  return {
      Event(1, 0, "state { state: QUEUED queue_position: 1 }"),
      Event(2, 1000, "state { state: RUNNING gpu_ids: [0, 1] }"),
      Event(3, 1100, "progress { phase: PHASE_JIT }"),
      Event(4, 1500, "progress { phase: PHASE_WARMUP done: 10 total: 10 }"),
      Event(5, 1600,
            "activity { records { kind: KIND_KERNEL } records { kind: KIND_MEMCPY } "
            "records { kind: KIND_KERNEL } }"),
      Event(6, 1700, "progress { phase: PHASE_TIMED done: 100 total: 500 }"),
      Event(7, 2000, "progress { phase: PHASE_TIMED done: 200 total: 500 }"),
      Event(8, 2800, "progress { phase: PHASE_TIMED done: 400 total: 500 }"),
      Event(9, 3000, "progress { phase: PHASE_TIMED done: 500 total: 500 }"),
      Event(10, 3100,
            "result { collective { ranks: 2 algbw_gbps: 300 busbw_gbps: 300 "
            "correct: true } }"),
      Event(11, 3200, "state { state: FINISHED gpu_ids: [0, 1] }"),
  };
}

TEST(EventPrinterTest, LogLinesThrottleProgressWithinAPhase) {
  std::ostringstream out;
  EventPrinter printer(out, {});
  for (const auto& event : FinishedRun()) printer.Print(event);
  printer.Finish();
  EXPECT_EQ(out.str(),
            "exp-000001 queued (position 1)\n"
            "exp-000001 running on GPUs 0,1 after 1.0s in the queue\n"
            "  [100ms] jit\n"
            "  [500ms] warmup 10/10 (100%)\n"
            "  [700ms] timed 100/500 (20%) | 2 kernel records\n"
            // 200/500 comes 300ms after 100/500: throttled.
            "  [1.8s] timed 400/500 (80%) | 2 kernel records\n"
            "  [2.0s] timed 500/500 (100%) | 2 kernel records\n"
            "collective:  2 ranks, algbw 300.0 GB/s, busbw 300.0 GB/s, data correct\n"
            "exp-000001 finished in 2.2s\n");
  EXPECT_EQ(printer.state(), v1::FINISHED);
  EXPECT_EQ(printer.experiment_id(), "exp-000001");
}

TEST(EventPrinterTest, ProgressOfSeveralRanksSaysWhoseItIs) {
  std::ostringstream out;
  EventPrinter printer(out, {});
  printer.Print(Event(1, 0, "state { state: RUNNING gpu_ids: [0, 1] }"));
  printer.Print(Event(2, 100, "progress { phase: PHASE_SETUP message: 'joining' }"));
  printer.Print(Event(3, 200, "rank: 1 progress { phase: PHASE_WARMUP }"));
  printer.Print(Event(4, 300, "progress { phase: PHASE_TIMED }"));
  printer.Finish();
  EXPECT_EQ(out.str(),
            "exp-000001 running on GPUs 0,1\n"
            "  [100ms] setup: joining\n"
            "  [200ms] rank 1 warmup\n"
            "  [300ms] rank 0 timed\n");
}

TEST(EventPrinterTest, LiveLineIsRewrittenInPlace) {
  std::ostringstream out;
  EventPrinter printer(out, {.live_line = true});
  const auto events = FinishedRun();
  printer.Print(events[0]);
  EXPECT_EQ(out.str(), "\rexp-000001 queued (position 1) | 0ms\033[K");
  printer.Print(events[1]);
  printer.Print(events[5]);
  printer.Print(events[4]);
  EXPECT_THAT(out.str(),
              testing::EndsWith("\rexp-000001 running on GPUs 0,1 | timed 100/500 (20%) | 2 "
                                "kernel records | 600ms\033[K"));
  out.str("");
  printer.Print(events[9]);
  // The last live line stays; the result starts on a fresh line.
  EXPECT_THAT(out.str(), StartsWith("\ncollective:  2 ranks"));
  printer.Print(events[10]);
  printer.Finish();
  EXPECT_THAT(out.str(), testing::EndsWith("data correct\nexp-000001 finished in 2.2s\n"));
}

TEST(EventPrinterTest, LiveLineIsCutToTheTerminalWidth) {
  std::ostringstream out;
  EventPrinter printer(out, {.live_line = true, .terminal_width = 21});
  printer.Print(Event(1, 0, "state { state: QUEUED queue_position: 1 }"));
  EXPECT_EQ(out.str(), "\rexp-000001 queued (p\033[K");
  printer.Finish();
  EXPECT_EQ(out.str(), "\rexp-000001 queued (p\033[K\n");
}

TEST(EventPrinterTest, FailureShowsReasonAndStderr) {
  std::ostringstream out;
  EventPrinter printer(out, {.live_line = true});
  printer.Print(Event(1, 0, "state { state: RUNNING gpu_ids: 3 }"));
  printer.Print(Event(2, 500,
                      "state { state: FAILED reason: 'worker killed by signal 11' "
                      "worker_stderr_tail: 'illegal address\\n' }"));
  printer.Finish();
  EXPECT_EQ(out.str(),
            "\rexp-000001 running on GPU 3 | 0ms\033[K\n"
            "exp-000001 failed: worker killed by signal 11\n"
            "worker stderr (last lines):\n"
            "  | illegal address\n");
  EXPECT_EQ(printer.state(), v1::FAILED);
}

// A workload's progress message and a failure reason that carry terminal controls: the live
// line stays one line with only the printer's own carriage return and clear-to-end-of-line,
// even through the CLI's output filter.
TEST(EventPrinterTest, ControlCharactersInEventTextAreShownEscaped) {
  std::ostringstream terminal;
  TerminalSafeStreambuf filter(terminal.rdbuf());
  std::ostream out(&filter);
  EventPrinter printer(out, {.live_line = true});
  printer.Print(Event(1, 0, "state { state: RUNNING }"));
  terminal.str("");
  v1::ExperimentEvent progress = Event(2, 0, "progress { phase: PHASE_TIMED done: 1 total: 2 }");
  progress.mutable_progress()->set_message("\x1b]0;owned\x07\x1b[2J\rforged\n");
  printer.Print(progress);
  EXPECT_EQ(terminal.str(),
            "\rexp-000001 running | timed 1/2 (50%): "
            "\\x1b]0;owned\\x07\\x1b[2J\\rforged\\n | 0ms\033[K");
  terminal.str("");
  v1::ExperimentEvent failed = Event(3, 10, "state { state: FAILED }");
  failed.mutable_state()->set_reason(
      "\xc2\x9b"
      "2J\x1b[H");
  printer.Print(failed);
  printer.Finish();
  EXPECT_EQ(terminal.str(), "\nexp-000001 failed: \\u009b2J\\x1b[H\n");
}

TEST(EventPrinterTest, JsonIsOneEventPerLine) {
  std::ostringstream out;
  EventPrinter printer(out, {.json = true, .live_line = true});
  printer.Print(Event(1, 0, "state { state: QUEUED queue_position: 1 }"));
  printer.Print(Event(2, 0, "state { state: CANCELLED reason: 'by alice' }"));
  printer.Finish();
  EXPECT_EQ(out.str(),
            "{\"experimentId\":\"exp-000001\",\"seq\":\"1\",\"time\":\"2024-05-01T12:00:00Z\","
            "\"state\":{\"state\":\"QUEUED\",\"queuePosition\":1}}\n"
            "{\"experimentId\":\"exp-000001\",\"seq\":\"2\",\"time\":\"2024-05-01T12:00:00Z\","
            "\"state\":{\"state\":\"CANCELLED\",\"reason\":\"by alice\"}}\n");
  EXPECT_EQ(printer.state(), v1::CANCELLED);
}

TEST(EventPrinterTest, EventsWithoutTimeUseTheClock) {
  std::ostringstream out;
  absl::Time now = absl::FromUnixSeconds(kStartSeconds);
  EventPrinter printer(out, {.now = [&now] { return now; }});
  v1::ExperimentEvent event;
  event.set_experiment_id("exp-000002");
  event.mutable_state()->set_state(v1::QUEUED);
  printer.Print(event);
  now += absl::Seconds(3);
  event.mutable_state()->set_state(v1::RUNNING);
  printer.Print(event);
  event.mutable_state()->set_state(v1::INTERRUPTED);
  event.mutable_state()->set_reason("daemon restarted");
  now += absl::Seconds(1);
  printer.Print(event);
  EXPECT_EQ(out.str(),
            "exp-000002 queued\n"
            "exp-000002 running after 3.0s in the queue\n"
            "exp-000002 interrupted: daemon restarted\n");
}

TEST(EventPrinterTest, DroppedRecordsShowOnTheLiveLine) {
  std::ostringstream out;
  EventPrinter printer(out, {.live_line = true});
  printer.Print(Event(1, 0, "activity { records { kind: KIND_KERNEL } dropped_records: 7 }"));
  EXPECT_THAT(out.str(), HasSubstr("| 1 kernel records | 7 dropped | 0ms"));
}

}  // namespace
}  // namespace gpuprof::client
