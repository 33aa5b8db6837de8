#include "client/event_printer.h"

#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/field_text.h"
#include "client/custom_kernel.h"
#include "client/render.h"
#include "client/terminal_output.h"
#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

// Clear from the cursor to the end of the line (ANSI EL).
constexpr char kClearToEndOfLine[] = "\033[K";

// The first `columns` code points of `text`.
std::string CutToColumns(const std::string& text, int columns) {
  if (columns <= 0) return text;
  int seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool starts_code_point = (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80;
    if (starts_code_point && seen++ == columns) return text.substr(0, i);
  }
  return text;
}

}  // namespace

EventPrinter::EventPrinter(std::ostream& out, Options options)
    : out_(out), options_(std::move(options)) {}

void EventPrinter::Print(const v1::ExperimentEvent& event) {
  if (!event.experiment_id().empty()) experiment_id_ = event.experiment_id();
  const absl::Time time = event.has_time() ? ToTime(event.time()) : options_.now();
  if (!first_event_time_.has_value()) first_event_time_ = time;
  if (event.has_state()) reason_ = event.state().reason();
  if (event.has_result()) result_ = event.result();
  if (options_.json) {
    if (event.has_state()) state_ = event.state().state();
    out_ << JsonLine(event) << "\n" << std::flush;
    return;
  }
  switch (event.payload_case()) {
    case v1::ExperimentEvent::kState:
      PrintState(event.state(), time);
      break;
    case v1::ExperimentEvent::kProgress:
      // An experiment on several ranks: say whose progress each line is, once a rank other
      // than 0 has spoken.
      if (event.rank() > 0) several_ranks_ = true;
      progress_rank_ = event.rank();
      PrintProgress(event.progress(), time);
      break;
    case v1::ExperimentEvent::kActivity:
      for (const v1::ActivityRecord& record : event.activity().records()) {
        if (record.kind() == v1::ActivityRecord::KIND_KERNEL) ++kernel_records_;
      }
      dropped_records_ += event.activity().dropped_records();
      if (options_.live_line) RedrawLiveLine(time);
      break;
    case v1::ExperimentEvent::kResult:
      PrintResult(event.result());
      break;
    case v1::ExperimentEvent::PAYLOAD_NOT_SET:
      break;
  }
  out_ << std::flush;
}

bool EventPrinter::kernel_did_not_compile() const {
  return KernelDidNotCompile(state_, reason_, result_);
}

void EventPrinter::Finish() {
  if (live_line_showing_) out_ << "\n";
  live_line_showing_ = false;
  out_ << std::flush;
}

void EventPrinter::PrintState(const v1::StateChange& change, absl::Time time) {
  state_ = change.state();
  queue_position_ = change.queue_position();
  if (!change.gpu_ids().empty()) gpu_ids_ = FormatGpuIds(change.gpu_ids());
  if (state_ == v1::RUNNING && !running_since_.has_value()) running_since_ = time;

  if (IsTerminalState(state_)) {
    std::string line = absl::StrCat(EscapeForTerminal(experiment_id_), " ");
    if (state_ == v1::FINISHED) {
      absl::StrAppend(&line, "finished");
      if (running_since_.has_value()) {
        absl::StrAppend(&line, " in ", FormatElapsed(time - *running_since_));
      }
      absl::StrAppend(&line, "\n");
    } else if (kernel_did_not_compile()) {
      // The compiler's messages as it wrote them, a line each (file:line first).
      absl::StrAppend(&line, "failed: the kernel did not compile:\n",
                      CompilerMessages(change.reason(), result_));
    } else {
      absl::StrAppend(&line, RenderFailure(state_, change.reason(), change.worker_stderr_tail()));
    }
    WriteLines(line);
    return;
  }
  if (options_.live_line) {
    RedrawLiveLine(time);
    return;
  }
  std::string line = StatusSummary();
  if (state_ == v1::RUNNING && first_event_time_.has_value() && time > *first_event_time_) {
    absl::StrAppend(&line, " after ", FormatElapsed(time - *first_event_time_), " in the queue");
  }
  WriteLines(absl::StrCat(line, "\n"));
}

void EventPrinter::PrintProgress(const v1::Progress& progress, absl::Time time) {
  progress_ = progress;
  if (options_.live_line) {
    RedrawLiveLine(time);
    return;
  }
  // A new phase always gets a line; within a phase, one per interval, plus its last step.
  const bool new_phase = progress.phase() != last_progress_phase_;
  const bool phase_done = progress.total() > 0 && progress.done() >= progress.total();
  const bool interval_passed =
      !last_progress_time_.has_value() || time - *last_progress_time_ >= options_.progress_interval;
  if (!new_phase && !phase_done && !interval_passed) return;
  last_progress_phase_ = progress.phase();
  last_progress_time_ = time;
  std::string line = absl::StrCat("  [", FormatElapsed(Elapsed(time)), "] ",
                                  several_ranks_ ? absl::StrCat("rank ", progress_rank_, " ") : "",
                                  ProgressSummary());
  if (kernel_records_ > 0) absl::StrAppend(&line, " | ", kernel_records_, " kernel records");
  WriteLines(absl::StrCat(line, "\n"));
}

void EventPrinter::PrintResult(const v1::ExperimentResult& result) {
  WriteLines(RenderResult(result));
}

void EventPrinter::WriteLines(const std::string& text) {
  if (live_line_showing_) {
    // Keep the last progress line on screen above what follows.
    out_ << "\n";
    live_line_showing_ = false;
  }
  out_ << text;
}

void EventPrinter::RedrawLiveLine(absl::Time time) {
  std::vector<std::string> parts = {StatusSummary()};
  if (progress_.has_value()) parts.push_back(ProgressSummary());
  if (kernel_records_ > 0) parts.push_back(absl::StrCat(kernel_records_, " kernel records"));
  if (dropped_records_ > 0) parts.push_back(absl::StrCat(dropped_records_, " dropped"));
  parts.push_back(FormatElapsed(Elapsed(time)));
  // One line, whatever the texts in it hold: it is rewritten in place.
  const std::string line =
      CutToColumns(EscapeForTerminal(absl::StrJoin(parts, " | ")),
                   options_.terminal_width > 0 ? options_.terminal_width - 1 : 0);
  WriteTerminalControl(out_, "\r");
  out_ << line;
  WriteTerminalControl(out_, kClearToEndOfLine);
  live_line_showing_ = true;
}

// "exp-000001 running on GPUs 0,1" / "exp-000001 queued (position 2)".
std::string EventPrinter::StatusSummary() const {
  std::string summary = absl::StrCat(EscapeForTerminal(experiment_id_), " ", StateName(state_));
  if (state_ == v1::QUEUED && queue_position_ > 0) {
    absl::StrAppend(&summary, " (position ", queue_position_, ")");
  }
  if (!gpu_ids_.empty()) {
    absl::StrAppend(&summary, " on GPU", absl::StrContains(gpu_ids_, ',') ? "s " : " ", gpu_ids_);
  }
  return summary;
}

// Since the run started, or since the first event while queued.
absl::Duration EventPrinter::Elapsed(absl::Time time) const {
  return time - running_since_.value_or(first_event_time_.value_or(time));
}

// "timed 120/500 (24%): message".
std::string EventPrinter::ProgressSummary() const {
  if (!progress_.has_value()) return "";
  std::string summary = EnumShortName(v1::Phase_descriptor(), progress_->phase());
  if (progress_->total() > 0) {
    absl::StrAppend(&summary, " ", progress_->done(), "/", progress_->total(),
                    absl::StrFormat(" (%d%%)", progress_->done() * 100 / progress_->total()));
  } else if (progress_->done() > 0) {
    absl::StrAppend(&summary, " ", progress_->done());
  }
  if (!progress_->message().empty()) {
    absl::StrAppend(&summary, ": ", EscapeForTerminal(progress_->message()));
  }
  return summary;
}

}  // namespace gpuprof::client
