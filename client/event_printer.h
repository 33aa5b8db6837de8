// Renders a stream of ExperimentEvents (submit --follow, watch) as it arrives: a live progress
// line on a terminal, one line per step otherwise, or NDJSON.
#ifndef GPUPROF_CLIENT_EVENT_PRINTER_H_
#define GPUPROF_CLIENT_EVENT_PRINTER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::client {

class EventPrinter {
 public:
  struct Options {
    // One JSON object per event and line, nothing else.
    bool json = false;
    // Rewrite a single progress line in place ("\r" + clear to end of line): stdout is a
    // terminal. Otherwise state changes and progress steps each get a line, for logs.
    bool live_line = false;
    // The live line is cut to this many columns so that it never wraps; 0 means no limit.
    int terminal_width = 0;
    // Without a live line, progress lines within a phase come at most this often (by event
    // time), so a log is not flooded.
    absl::Duration progress_interval = absl::Seconds(1);
    // For events without a time.
    std::function<absl::Time()> now = [] { return absl::Now(); };
  };

  EventPrinter(std::ostream& out, Options options);

  void Print(const v1::ExperimentEvent& event);
  // Ends the live line; call when the stream has ended.
  void Finish();

  // The last state seen; UNSPECIFIED before any.
  v1::ExperimentState state() const { return state_; }
  const std::string& experiment_id() const { return experiment_id_; }
  // The experiment failed because its custom kernel did not compile (exit code 2).
  bool kernel_did_not_compile() const;

 private:
  void PrintState(const v1::StateChange& change, absl::Time time);
  void PrintProgress(const v1::Progress& progress, absl::Time time);
  void PrintResult(const v1::ExperimentResult& result);
  // Writes a permanent line (or lines), first ending the live line if it is showing.
  void WriteLines(const std::string& text);
  void RedrawLiveLine(absl::Time time);
  std::string StatusSummary() const;
  absl::Duration Elapsed(absl::Time time) const;
  std::string ProgressSummary() const;

  std::ostream& out_;
  Options options_;

  std::string experiment_id_;
  v1::ExperimentState state_ = v1::EXPERIMENT_STATE_UNSPECIFIED;
  // The terminal state's reason and the last result, to tell a kernel that did not compile.
  std::string reason_;
  v1::ExperimentResult result_;
  int32_t queue_position_ = 0;
  std::string gpu_ids_;
  std::optional<absl::Time> first_event_time_;
  std::optional<absl::Time> running_since_;
  std::optional<v1::Progress> progress_;
  int progress_rank_ = 0;
  bool several_ranks_ = false;
  int64_t kernel_records_ = 0;
  int64_t dropped_records_ = 0;
  bool live_line_showing_ = false;
  // Non-live throttling: the phase and time of the last progress line written.
  v1::Phase last_progress_phase_ = v1::PHASE_UNSPECIFIED;
  std::optional<absl::Time> last_progress_time_;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_EVENT_PRINTER_H_
