#include "client/sweep_watch_summary.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/render.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::client {

bool SummariseSweepWatch(int total, bool table_format, bool every_event) {
  return table_format && !every_event && total > kMaxPointsShownOneByOne;
}

std::string SweepCountsLine(int total, int finished, int failed, int running,
                            std::optional<absl::Duration> elapsed) {
  const int ended = finished + failed;
  const int queued = std::max(0, total - ended - running);
  std::string line = absl::StrCat(ended, "/", total, " points: ", finished, " finished, ", failed,
                                  " failed, ", running, " running, ", queued, " queued");
  if (elapsed.has_value()) {
    absl::StrAppend(&line, "  elapsed ", FormatElapsed(*elapsed));
    if (ended > 0 && ended < total) {
      absl::StrAppend(&line, "  ETA ", FormatElapsed(*elapsed / ended * (total - ended)));
    }
  }
  return line;
}

SweepWatchSummary::SweepWatchSummary(int total, absl::Time created, Cadence cadence)
    : cadence_(cadence), created_(created), total_(total) {}

std::optional<std::string> SweepWatchSummary::OnEvent(const v1::SweepEvent& event,
                                                      absl::Time now) {
  if (event.points_total() > 0) total_ = event.points_total();
  finished_ = event.points_finished();
  failed_ = event.points_failed();
  running_ = event.points_running();
  if (printed_at_ == absl::Time()) printed_at_ = now;  // the watch starts: nothing shown yet
  const int ended = finished_ + failed_;
  const bool enough_points = ended - printed_ended_ >= cadence_.every_points;
  const bool time_passed = now - printed_at_ >= cadence_.every;
  // The end has a line of its own (FinalLine).
  if (ended >= total_ || !(enough_points || time_passed)) return std::nullopt;
  printed_ended_ = ended;
  printed_at_ = now;
  return Line(now);
}

std::string SweepWatchSummary::FinalLine(absl::Time now) const { return Line(now); }

std::string SweepWatchSummary::Line(absl::Time now) const {
  return SweepCountsLine(total_, finished_, failed_, running_, now - created_);
}

}  // namespace gpuprof::client
