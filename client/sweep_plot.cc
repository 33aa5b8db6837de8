#include "client/sweep_plot.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "sweep/point_figure.h"

namespace gpuprof::client {
namespace {

std::string Quoted(const std::string& text) {
  return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

// Runs gnuplot on `script`; its stderr goes to `log`.
absl::Status RunGnuplot(const std::string& script, const std::string& log) {
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    FILE* err = freopen(log.c_str(), "w", stderr);
    (void)err;
    execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  std::ifstream log_file(log);
  std::stringstream messages;
  messages << log_file.rdbuf();
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return absl::FailedPreconditionError(
        "gnuplot is not installed (or not on PATH): install Debian's gnuplot-nox");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat("gnuplot failed: ", messages.str()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PlotData> BuildPlotData(const v1::Sweep& sweep, const PlotOptions& options) {
  std::vector<std::string> axes;
  for (const v1::SweepAxis& axis : sweep.request().axes()) axes.push_back(axis.field());
  const auto numeric = [&sweep](const std::string& axis) {
    for (const v1::SweepPoint& point : sweep.points()) {
      double value = 0;
      const auto it = point.parameters().find(axis);
      if (it == point.parameters().end() || !absl::SimpleAtod(it->second, &value)) return false;
    }
    return true;
  };
  std::string x_axis = options.x_axis;
  if (x_axis.empty()) {
    for (const std::string& axis : axes) {
      if (numeric(axis)) {
        x_axis = axis;
        break;
      }
    }
    if (x_axis.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no axis of ", sweep.id(), " has numbers for x (axes: ", absl::StrJoin(axes, ", "), ")"));
    }
  } else if (std::find(axes.begin(), axes.end(), x_axis) == axes.end()) {
    return absl::InvalidArgumentError(absl::StrCat("--x: ", sweep.id(), " has no axis \"", x_axis,
                                                   "\"; its axes: ", absl::StrJoin(axes, ", ")));
  } else if (!numeric(x_axis)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--x: axis \"", x_axis, "\" does not hold numbers"));
  }

  PlotData data;
  data.x_label = x_axis;
  std::map<std::string, PlotSeries> series;
  std::vector<std::string> order;
  std::string unit, figure_name;
  for (const v1::SweepPoint& point : sweep.points()) {
    const auto figure = sweep::FigureOf(point.experiment());
    if (!figure.has_value()) continue;
    if (options.pct_of_copy && figure->pct_of_copy_bandwidth <= 0) continue;
    figure_name = figure->name;
    unit = figure->unit;
    std::vector<std::string> name_parts;
    for (const std::string& axis : axes) {
      if (axis == x_axis) continue;
      name_parts.push_back(absl::StrCat(axis, "=", point.parameters().at(axis)));
    }
    const std::string name = absl::StrJoin(name_parts, " ");
    if (!series.contains(name)) order.push_back(name);
    PlotSeries& line = series[name];
    line.name = name;
    double x = 0;
    (void)absl::SimpleAtod(point.parameters().at(x_axis), &x);
    line.points.emplace_back(x, options.pct_of_copy ? figure->pct_of_copy_bandwidth : figure->value);
  }
  if (series.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        sweep.id(), " has no point with ",
        options.pct_of_copy ? "a % of copy bandwidth" : "a result", " to plot yet"));
  }
  double min_x = 0, max_x = 0;
  bool first = true;
  for (const std::string& name : order) {
    PlotSeries& line = series[name];
    std::sort(line.points.begin(), line.points.end());
    for (const auto& [x, y] : line.points) {
      min_x = first ? x : std::min(min_x, x);
      max_x = first ? x : std::max(max_x, x);
      first = false;
    }
    data.series.push_back(std::move(line));
  }
  data.log_x = min_x > 0 && max_x / min_x >= 16;
  data.y_label = options.pct_of_copy ? "% of measured copy bandwidth"
                                     : absl::StrCat(figure_name, " (", unit, ")");
  data.title = options.title.empty()
                   ? absl::StrCat(sweep.id(), ": ", figure_name, " against ", x_axis)
                   : options.title;
  return data;
}

std::string GnuplotScript(const PlotData& data, const std::string& terminal,
                          const std::string& data_path, const std::string& output_path) {
  std::string script = absl::StrCat(
      "set terminal ", terminal, terminal == "svg" ? " size 960,600 dynamic" : " size 1280,800",
      "\nset output ", Quoted(output_path), "\nset title ", Quoted(data.title),
      " noenhanced\nset xlabel ", Quoted(data.x_label), " noenhanced\nset ylabel ",
      Quoted(data.y_label), " noenhanced\nset grid\nset key outside right top noenhanced\n",
      "set yrange [0:*]\n");
  if (data.log_x) absl::StrAppend(&script, "set logscale x 2\n");
  std::vector<std::string> plots;
  for (size_t i = 0; i < data.series.size(); ++i) {
    const std::string title = data.series[i].name.empty() ? "notitle"
                                                          : absl::StrCat("title ", Quoted(data.series[i].name));
    plots.push_back(absl::StrCat(i == 0 ? Quoted(data_path) : "''", " index ", i,
                                 " using 1:2 with linespoints pointtype 7 ", title));
  }
  absl::StrAppend(&script, "plot ", absl::StrJoin(plots, ", \\\n     "), "\n");
  return script;
}

absl::Status WriteSweepPlot(const v1::Sweep& sweep, const PlotOptions& options,
                            const std::string& output_path) {
  std::vector<std::string> terminals;
  if (absl::EndsWithIgnoreCase(output_path, ".svg")) {
    terminals = {"svg"};
  } else if (absl::EndsWithIgnoreCase(output_path, ".png")) {
    terminals = {"pngcairo", "png"};  // cairo when the build has it, else libgd
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("-o: \"", output_path, "\" must end in .svg or .png"));
  }
  absl::StatusOr<PlotData> data = BuildPlotData(sweep, options);
  if (!data.ok()) return data.status();

  const char* tmp = getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp",
                                     "/gpuprof-plot-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError("could not create a temporary directory for the plot");
  }
  const std::filesystem::path directory(pattern);
  const std::string data_path = (directory / "sweep.dat").string();
  {
    std::ofstream file(data_path);
    for (size_t i = 0; i < data->series.size(); ++i) {
      if (i > 0) file << "\n\n";
      for (const auto& [x, y] : data->series[i].points) file << x << " " << y << "\n";
    }
  }
  absl::Status status;
  for (const std::string& terminal : terminals) {
    const std::string script_path = (directory / "sweep.gp").string();
    std::ofstream(script_path) << GnuplotScript(*data, terminal, data_path, output_path);
    status = RunGnuplot(script_path, (directory / "gnuplot.log").string());
    if (status.ok() || absl::IsFailedPrecondition(status)) break;
  }
  std::error_code ignored;
  std::filesystem::remove_all(directory, ignored);
  if (!status.ok()) return status;
  if (std::filesystem::file_size(output_path, ignored) == 0) {
    return absl::InternalError(absl::StrCat("gnuplot wrote nothing to ", output_path));
  }
  return absl::OkStatus();
}

}  // namespace gpuprof::client
