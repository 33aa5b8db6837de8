// Text rendering of sweeps: the point table in four formats (terminal table, CSV, JSON lines,
// Markdown), the sweep's header, the live progress line with an ETA, and the sweep list.
// Pure functions of their arguments.
#ifndef GPUPROF_CLIENT_SWEEP_RENDER_H_
#define GPUPROF_CLIENT_SWEEP_RENDER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/record_row.h"
#include "google/protobuf/repeated_field.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::client {

enum class SweepFormat { kTable, kCsv, kJsonLines, kMarkdown };

// "table", "csv", "jsonl" (or "json"), "markdown" (or "md").
absl::StatusOr<SweepFormat> ParseSweepFormat(absl::string_view text);

// "running", "finished", "incomplete", "cancelled".
std::string SweepStateName(v1::SweepState state);

// Every point of the sweep, whichever page of them it carries: points_total, or for a daemon
// from before paging the sum of its counts.
int SweepPointTotal(const v1::Sweep& sweep);

// The axes' field names, in the request's order.
std::vector<std::string> SweepAxisNames(const v1::Sweep& sweep);

// The point table's column names and one point's cells, in the same order: POINT, each axis,
// STATE, EXPERIMENT, MEDIAN_US, FIGURE, VALUE, UNIT, NOISE, PCT_OF_COPY. Numbers are plain
// (machine-readable) in CSV/JSON and rounded for people in the table and Markdown.
std::vector<std::string> SweepColumns(const std::vector<std::string>& axes);
std::vector<std::string> SweepPointCells(const v1::SweepPoint& point,
                                         const std::vector<std::string>& axes, bool for_people);

// A point as a row for CSV and JSON lines (the same columns in both, every column in every
// row, empty where not measured): point, each axis, state, experiment, gpu_ids, gpu, figure,
// value, unit, noise, samples, min_us, median_us, p90_us, p99_us, gb_per_s, tflops,
// pct_of_copy, at full precision.
RecordRow SweepPointRecord(const v1::SweepPoint& point, const std::vector<std::string>& axes);

// Every point the sweep carries in `format` (JSON lines: a SweepPointRecord per line).
std::string RenderSweepPoints(const v1::Sweep& sweep, SweepFormat format);
// One line for a point as it arrives during --follow; the header first (header_line).
std::string SweepHeaderLine(const std::vector<std::string>& axes, SweepFormat format);
std::string SweepPointLine(const v1::SweepPoint& point, const std::vector<std::string>& axes,
                           SweepFormat format);

// Column widths for a live table that is printed row by row: wide enough for every axis value
// of the sweep and for typical figures.
std::vector<size_t> SweepColumnWidths(const v1::Sweep& sweep);
// The cells padded to `widths` (numbers right-aligned past the axes), two spaces apart.
std::string FixedWidthRow(const std::vector<std::string>& cells, const std::vector<size_t>& widths,
                          size_t first_number_column);

// "swp-000003  running  24 points: 12 finished, 2 running, 10 queued, 0 failed" and the
// request, the times and the reason.
std::string RenderSweepSummary(const v1::Sweep& sweep, absl::Time now, absl::TimeZone time_zone);

// "[#########-----------] 12/24  2 running  1 failed  elapsed 1m10s  ETA 1m10s"; the ETA
// extrapolates the time per ended point so far.
std::string SweepProgressLine(int total, int ended, int running, int failed, absl::Duration elapsed);

// `gpuprof sweep list`.
std::string RenderSweepList(const google::protobuf::RepeatedPtrField<v1::Sweep>& sweeps,
                            absl::TimeZone time_zone);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_RENDER_H_
