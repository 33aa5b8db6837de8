#include "client/sweep_render.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "client/render.h"
#include "client/table.h"
#include "common/enum_names.h"
#include "common/terminal_text.h"
#include "sweep/point_figure.h"

namespace gpuprof::client {
namespace {

std::string MarkdownRow(const std::vector<std::string>& cells) {
  std::vector<std::string> escaped;
  for (const std::string& cell : cells) escaped.push_back(absl::StrReplaceAll(cell, {{"|", "\\|"}}));
  return absl::StrCat("| ", absl::StrJoin(escaped, " | "), " |\n");
}

std::string PlainNumber(double value) { return RoundTripNumber(value); }

}  // namespace

absl::StatusOr<SweepFormat> ParseSweepFormat(absl::string_view text) {
  const std::string name = absl::AsciiStrToLower(text);
  if (name == "table") return SweepFormat::kTable;
  if (name == "csv") return SweepFormat::kCsv;
  if (name == "jsonl" || name == "json") return SweepFormat::kJsonLines;
  if (name == "markdown" || name == "md") return SweepFormat::kMarkdown;
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not an output format; choose table, csv, jsonl or markdown"));
}

std::string SweepStateName(v1::SweepState state) {
  if (state == v1::SWEEP_STATE_UNSPECIFIED) return "unknown";
  return EnumShortName(state);
}

int SweepPointTotal(const v1::Sweep& sweep) {
  if (sweep.points_total() > 0) return sweep.points_total();
  return sweep.points_queued() + sweep.points_running() + sweep.points_finished() +
         sweep.points_failed();
}

std::vector<std::string> SweepAxisNames(const v1::Sweep& sweep) {
  std::vector<std::string> names;
  for (const v1::SweepAxis& axis : sweep.request().axes()) names.push_back(axis.field());
  return names;
}

std::vector<std::string> SweepColumns(const std::vector<std::string>& axes) {
  std::vector<std::string> columns = {"point"};
  for (const std::string& axis : axes) columns.push_back(EscapeForTerminal(axis));
  for (const char* name : {"state", "experiment", "median_us", "figure", "value", "unit", "noise",
                           "pct_of_copy"}) {
    columns.push_back(name);
  }
  return columns;
}

std::vector<std::string> SweepPointCells(const v1::SweepPoint& point,
                                         const std::vector<std::string>& axes, bool for_people) {
  std::vector<std::string> cells = {absl::StrCat(point.index())};
  for (const std::string& axis : axes) {
    const auto it = point.parameters().find(axis);
    // Values as the submitter typed them: shown, never acted on, in every format.
    cells.push_back(it == point.parameters().end() ? "" : EscapeForTerminal(it->second));
  }
  std::string state = StateName(point.state());
  if (for_people && point.attempt() > 1) absl::StrAppend(&state, " (run ", point.attempt(), ")");
  cells.push_back(state);
  cells.push_back(EscapeForTerminal(point.experiment_id()));
  const auto figure = sweep::FigureOf(point.experiment());
  if (!figure.has_value()) {
    for (int i = 0; i < 6; ++i) cells.push_back(for_people ? "-" : "");
    return cells;
  }
  const auto number = [for_people](double value) {
    return for_people ? FormatNumber(value) : PlainNumber(value);
  };
  cells.push_back(figure->median_us > 0 ? number(figure->median_us) : (for_people ? "-" : ""));
  cells.push_back(figure->name);
  cells.push_back(number(figure->value));
  cells.push_back(figure->unit);
  // A noise nothing measured is "unknown", never 0.
  if (!figure->relative_noise.has_value()) {
    cells.push_back(for_people ? "unknown" : "");
  } else {
    cells.push_back(for_people ? absl::StrFormat("%.1f%%", 100 * *figure->relative_noise)
                               : PlainNumber(*figure->relative_noise));
  }
  if (figure->pct_of_copy_bandwidth > 0) {
    cells.push_back(for_people ? absl::StrFormat("%.1f%%", figure->pct_of_copy_bandwidth)
                               : PlainNumber(figure->pct_of_copy_bandwidth));
  } else {
    cells.push_back(for_people ? "-" : "");
  }
  return cells;
}

RecordRow SweepPointRecord(const v1::SweepPoint& point, const std::vector<std::string>& axes) {
  RecordRow row;
  row.AddInteger("point", point.index());
  for (const std::string& axis : axes) {
    const auto it = point.parameters().find(axis);
    if (it == point.parameters().end()) {
      row.AddEmpty(axis);
    } else {
      row.AddText(axis, it->second);
    }
  }
  row.AddText("state", StateName(point.state()));
  row.AddText("experiment", point.experiment_id());
  const v1::Experiment& experiment = point.experiment();
  row.AddText("gpu_ids", absl::StrJoin(experiment.gpu_ids(), ","));
  const v1::ExperimentResult& result = experiment.result();
  row.AddText("gpu", result.provenance().gpus().empty() ? ""
                                                        : result.provenance().gpus(0).name());
  const auto figure = sweep::FigureOf(experiment);
  const auto positive = [](double value) {
    return value > 0 ? std::optional<double>(value) : std::nullopt;
  };
  if (figure.has_value()) {
    row.AddText("figure", figure->name);
    row.AddNumber("value", figure->value);
    row.AddText("unit", figure->unit);
    row.AddOptionalNumber("noise", figure->relative_noise);  // empty: not measured
  } else {
    for (const char* name : {"figure", "value", "unit", "noise"}) row.AddEmpty(name);
  }
  const bool timed = result.has_measurement() && result.measurement().has_kernel_time();
  const v1::TimingStats& time = result.measurement().kernel_time();
  const auto timing = [timed](double value) {
    return timed ? std::optional<double>(value) : std::nullopt;
  };
  const int64_t samples =
      figure.has_value() && figure->samples > 0 ? figure->samples : (timed ? time.samples() : 0);
  if (samples > 0) {
    row.AddInteger("samples", samples);
  } else {
    row.AddEmpty("samples");
  }
  row.AddOptionalNumber("min_us", timing(time.min_us()));
  row.AddOptionalNumber("median_us", timing(time.median_us()));
  row.AddOptionalNumber("p90_us", timing(time.p90_us()));
  row.AddOptionalNumber("p99_us", timing(time.p99_us()));
  // Both rates where the run measured them: a figure of one does not hide the other.
  const v1::GpuMeasurement& measured = result.measurement();
  row.AddOptionalNumber("gb_per_s", positive(figure.has_value() && figure->bandwidth_gbps > 0
                                                 ? figure->bandwidth_gbps
                                                 : measured.bandwidth_gbps()));
  row.AddOptionalNumber("tflops", positive(figure.has_value() && figure->tflops > 0
                                               ? figure->tflops
                                               : measured.tflops()));
  row.AddOptionalNumber("pct_of_copy",
                        positive(figure.has_value() ? figure->pct_of_copy_bandwidth : 0));
  return row;
}

std::string SweepHeaderLine(const std::vector<std::string>& axes, SweepFormat format) {
  const std::vector<std::string> columns = SweepColumns(axes);
  switch (format) {
    case SweepFormat::kCsv:
      return SweepPointRecord(v1::SweepPoint(), axes).CsvHeader();
    case SweepFormat::kMarkdown:
      return absl::StrCat(MarkdownRow(columns),
                          MarkdownRow(std::vector<std::string>(columns.size(), "---")));
    case SweepFormat::kJsonLines:
      return "";
    case SweepFormat::kTable: {
      std::vector<std::string> upper;
      for (const std::string& column : columns) upper.push_back(absl::AsciiStrToUpper(column));
      return absl::StrCat(absl::StrJoin(upper, "  "), "\n");
    }
  }
  return "";
}

std::string SweepPointLine(const v1::SweepPoint& point, const std::vector<std::string>& axes,
                           SweepFormat format) {
  switch (format) {
    case SweepFormat::kJsonLines:
      return SweepPointRecord(point, axes).Json();
    case SweepFormat::kCsv:
      return SweepPointRecord(point, axes).Csv();
    case SweepFormat::kMarkdown:
      return MarkdownRow(SweepPointCells(point, axes, true));
    case SweepFormat::kTable:
      return absl::StrCat(absl::StrJoin(SweepPointCells(point, axes, true), "  "), "\n");
  }
  return "";
}

std::string RenderSweepPoints(const v1::Sweep& sweep, SweepFormat format) {
  const std::vector<std::string> axes = SweepAxisNames(sweep);
  if (format == SweepFormat::kTable) {
    std::vector<std::string> header;
    for (const std::string& column : SweepColumns(axes)) {
      header.push_back(absl::AsciiStrToUpper(column));
    }
    TextTable table(header);
    for (size_t column = 0; column < header.size(); ++column) {
      if (column == 0 || column >= axes.size() + 3) table.SetAlign(column, TextTable::Align::kRight);
    }
    for (const v1::SweepPoint& point : sweep.points()) {
      table.AddRow(SweepPointCells(point, axes, true));
    }
    return table.Render();
  }
  std::string text = SweepHeaderLine(axes, format);
  for (const v1::SweepPoint& point : sweep.points()) {
    absl::StrAppend(&text, SweepPointLine(point, axes, format));
  }
  return text;
}

std::vector<size_t> SweepColumnWidths(const v1::Sweep& sweep) {
  const std::vector<std::string> axes = SweepAxisNames(sweep);
  std::vector<size_t> widths = {5};
  for (const std::string& axis : axes) {
    size_t width = axis.size();
    for (const v1::SweepPoint& point : sweep.points()) {
      const auto it = point.parameters().find(axis);
      if (it != point.parameters().end()) {
        width = std::max(width, DisplayWidth(EscapeForTerminal(it->second)));
      }
    }
    widths.push_back(width);
  }
  for (size_t width : {16, 10, 9, 9, 9, 7, 6, 11}) widths.push_back(width);
  return widths;
}

std::string FixedWidthRow(const std::vector<std::string>& cells, const std::vector<size_t>& widths,
                          size_t first_number_column) {
  std::string line;
  for (size_t i = 0; i < cells.size(); ++i) {
    const size_t width = i < widths.size() ? widths[i] : 0;
    const size_t shown = DisplayWidth(cells[i]);
    const std::string padding(width > shown ? width - shown : 0, ' ');
    if (i > 0) line += "  ";
    const bool right = i == 0 || i >= first_number_column;
    line += right ? padding + cells[i] : cells[i] + (i + 1 < cells.size() ? padding : "");
  }
  return line + "\n";
}

std::string RenderSweepSummary(const v1::Sweep& sweep, absl::Time now, absl::TimeZone time_zone) {
  std::string text = absl::StrCat(
      EscapeForTerminal(sweep.id()), "  ", SweepStateName(sweep.state()), "  ", SweepPointTotal(sweep),
      " points: ", sweep.points_finished(), " finished, ", sweep.points_running(), " running, ",
      sweep.points_queued(), " queued, ", sweep.points_failed(), " failed\n");
  absl::StrAppend(&text, "  user      ", EscapeForTerminal(sweep.user()), "\n");
  const v1::ExperimentRequest& base = sweep.request().base();
  absl::StrAppend(&text, "  base      ", CompactText(base), "\n");
  for (const v1::SweepAxis& axis : sweep.request().axes()) {
    std::string values;
    if (axis.values_size() > 0) {
      values = absl::StrJoin(axis.values(), ",");
    } else if (axis.has_range()) {
      values = absl::StrCat(axis.range().start(), "..", axis.range().end(), " step ",
                            axis.range().step() == 0 ? 1 : axis.range().step());
    } else {
      values = absl::StrCat("powers of two in [", axis.powers_of_two().min(), ", ",
                            axis.powers_of_two().max(), "]");
    }
    absl::StrAppend(&text, "  axis      ", EscapeForTerminal(axis.field()), " = ",
                    EscapeForTerminal(values), "\n");
  }
  if (sweep.request().combination() == v1::SweepRequest::ZIPPED) {
    absl::StrAppend(&text, "  axes      zipped\n");
  }
  if (sweep.request().max_concurrent_gpus() > 0) {
    absl::StrAppend(&text, "  max GPUs  ", sweep.request().max_concurrent_gpus(), "\n");
  }
  if (sweep.has_created()) {
    absl::StrAppend(&text, "  created   ", FormatLocalTime(ToTime(sweep.created()), time_zone));
    const absl::Time end = sweep.has_finished() ? ToTime(sweep.finished()) : now;
    absl::StrAppend(&text, " (", sweep.has_finished() ? "took " : "running for ",
                    FormatElapsed(end - ToTime(sweep.created())), ")\n");
  }
  if (!sweep.reason().empty()) {
    absl::StrAppend(&text, "  reason    ", EscapeForTerminal(sweep.reason()), "\n");
  }
  if (!sweep.request().description().empty()) {
    absl::StrAppend(&text, "  about     ", EscapeForTerminal(sweep.request().description()), "\n");
  }
  return text;
}

std::string SweepProgressLine(int total, int ended, int running, int failed,
                              absl::Duration elapsed) {
  constexpr int kBarWidth = 20;
  const int filled = total > 0 ? std::min(kBarWidth, ended * kBarWidth / total) : 0;
  std::string line = absl::StrCat("[", std::string(filled, '#'),
                                  std::string(kBarWidth - filled, '-'), "] ", ended, "/", total);
  if (running > 0) absl::StrAppend(&line, "  ", running, " running");
  if (failed > 0) absl::StrAppend(&line, "  ", failed, " failed");
  absl::StrAppend(&line, "  elapsed ", FormatElapsed(elapsed));
  if (ended > 0 && ended < total) {
    absl::StrAppend(&line, "  ETA ", FormatElapsed(elapsed / ended * (total - ended)));
  }
  return line;
}

std::string RenderSweepList(const google::protobuf::RepeatedPtrField<v1::Sweep>& sweeps,
                            absl::TimeZone time_zone) {
  TextTable table({"ID", "USER", "WORKLOAD", "STATE", "POINTS", "DONE", "FAILED", "CREATED",
                   "AXES"});
  for (int column : {4, 5, 6}) table.SetAlign(column, TextTable::Align::kRight);
  for (const v1::Sweep& sweep : sweeps) {
    const v1::ExperimentRequest& base = sweep.request().base();
    const auto* workload = base.GetReflection()->GetOneofFieldDescriptor(
        base, base.GetDescriptor()->FindOneofByName("workload"));
    table.AddRow({sweep.id(), sweep.user(), workload == nullptr ? "-" : workload->name(),
                  SweepStateName(sweep.state()), absl::StrCat(SweepPointTotal(sweep)),
                  absl::StrCat(sweep.points_finished()), absl::StrCat(sweep.points_failed()),
                  sweep.has_created()
                      ? absl::FormatTime("%Y-%m-%d %H:%M", ToTime(sweep.created()), time_zone)
                      : "-",
                  absl::StrJoin(SweepAxisNames(sweep), ",")});
  }
  return table.Render();
}

}  // namespace gpuprof::client
