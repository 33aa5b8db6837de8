// `gpuprof sweep plot`: a sweep's figure against one numeric axis, one line per combination of
// the other axes, drawn by gnuplot (Debian's gnuplot-nox) into an SVG or PNG file.
#ifndef GPUPROF_CLIENT_SWEEP_PLOT_H_
#define GPUPROF_CLIENT_SWEEP_PLOT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::client {

struct PlotOptions {
  // The axis on x; empty: the first axis whose values are all numbers.
  std::string x_axis;
  // y as % of the copy bandwidth measured on the GPU (index, store) instead of the figure.
  bool pct_of_copy = false;
  std::string title;
};

struct PlotSeries {
  std::string name;  // "hidden_dim=4096 dtype=bf16"; empty when there is one series
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct PlotData {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;
  std::vector<PlotSeries> series;
};

// The lines to draw; InvalidArgument when no axis is numeric or no point has a figure.
absl::StatusOr<PlotData> BuildPlotData(const v1::Sweep& sweep, const PlotOptions& options);

// The gnuplot script drawing `data_path` (one block per series, separated by two blank lines,
// as WritePlotDataFile writes it) into `output_path` with `terminal` ("svg", "pngcairo", "png").
std::string GnuplotScript(const PlotData& data, const std::string& terminal,
                          const std::string& data_path, const std::string& output_path);

// Writes the data and script to a temporary directory and runs gnuplot; the terminal follows
// the extension of `output_path` (.svg or .png).
absl::Status WriteSweepPlot(const v1::Sweep& sweep, const PlotOptions& options,
                            const std::string& output_path);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_PLOT_H_
