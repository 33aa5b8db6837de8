#include "client/sweep_plot.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

// A finished index sweep over tokens x hidden, as the daemon records it.
v1::Sweep RecordedSweep() {
  v1::Sweep sweep;
  sweep.set_id("swp-000003");
  auto* request = sweep.mutable_request();
  request->mutable_base()->mutable_index();
  request->add_axes()->set_field("num_tokens");
  request->add_axes()->set_field("hidden_dim");
  int index = 0;
  for (int hidden : {4096, 8192}) {
    for (int tokens : {1, 64, 512, 4096, 65536}) {
      v1::SweepPoint& point = *sweep.add_points();
      point.set_index(index++);
      (*point.mutable_parameters())["num_tokens"] = absl::StrCat(tokens);
      (*point.mutable_parameters())["hidden_dim"] = absl::StrCat(hidden);
      point.set_state(v1::FINISHED);
      v1::Experiment& experiment = *point.mutable_experiment();
      experiment.set_workload(v1::WORKLOAD_INDEX);
      auto* measurement = experiment.mutable_result()->mutable_measurement();
      const double gbps = 3000.0 * tokens / (tokens + 300.0) * (hidden == 8192 ? 1.05 : 1.0);
      measurement->set_bandwidth_gbps(gbps);
      measurement->set_pct_of_measured_copy_bandwidth(gbps / 32);
    }
  }
  return sweep;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

TEST(SweepPlot, DataHasOneLinePerCombinationOfTheOtherAxes) {
  auto data = BuildPlotData(RecordedSweep(), {});
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(data->x_label, "num_tokens");
  EXPECT_EQ(data->y_label, "bandwidth (GB/s)");
  EXPECT_TRUE(data->log_x);
  ASSERT_EQ(data->series.size(), 2u);
  EXPECT_EQ(data->series[0].name, "hidden_dim=4096");
  ASSERT_EQ(data->series[0].points.size(), 5u);
  EXPECT_EQ(data->series[0].points.back().first, 65536);

  auto by_hidden = BuildPlotData(RecordedSweep(), {.x_axis = "hidden_dim", .pct_of_copy = true});
  ASSERT_TRUE(by_hidden.ok());
  EXPECT_EQ(by_hidden->series.size(), 5u);
  EXPECT_EQ(by_hidden->y_label, "% of measured copy bandwidth");
  EXPECT_THAT(BuildPlotData(RecordedSweep(), {.x_axis = "dtype"}).status().message(),
              HasSubstr("has no axis \"dtype\""));
}

// An attention sweep over kv_len in both phases: decode draws GB/s and its % of copy (it is
// bandwidth-bound), prefill TFLOP/s; `--y pct-of-copy` draws the decode points.
v1::Sweep AttentionSweep(v1::AttentionPhase phase) {
  v1::Sweep sweep;
  sweep.set_id("swp-000004");
  sweep.mutable_request()->mutable_base()->mutable_attention()->set_phase(phase);
  sweep.mutable_request()->add_axes()->set_field("kv_len");
  int index = 0;
  for (int kv_len : {1024, 4096, 16384}) {
    v1::SweepPoint& point = *sweep.add_points();
    point.set_index(index++);
    (*point.mutable_parameters())["kv_len"] = absl::StrCat(kv_len);
    point.set_state(v1::FINISHED);
    v1::Experiment& experiment = *point.mutable_experiment();
    experiment.set_workload(v1::WORKLOAD_ATTENTION);
    experiment.mutable_request()->mutable_attention()->set_phase(phase);
    experiment.mutable_request()->mutable_attention()->set_kv_len(kv_len);
    auto* measurement = experiment.mutable_result()->mutable_measurement();
    measurement->set_bandwidth_gbps(2000 + kv_len / 16);
    measurement->set_pct_of_measured_copy_bandwidth(60 + kv_len / 1024);
    measurement->set_tflops(10 + kv_len / 1024);
  }
  return sweep;
}

TEST(SweepPlot, AttentionDecodePlotsItsBandwidthAndPercentOfCopy) {
  auto decode = BuildPlotData(AttentionSweep(v1::ATTENTION_PHASE_DECODE), {});
  ASSERT_TRUE(decode.ok()) << decode.status();
  EXPECT_EQ(decode->y_label, "bandwidth (GB/s)");
  ASSERT_EQ(decode->series.size(), 1u);
  EXPECT_EQ(decode->series[0].points.back().second, 2000 + 16384 / 16);
  auto pct = BuildPlotData(AttentionSweep(v1::ATTENTION_PHASE_DECODE), {.pct_of_copy = true});
  ASSERT_TRUE(pct.ok()) << pct.status();
  ASSERT_EQ(pct->series.size(), 1u);
  ASSERT_EQ(pct->series[0].points.size(), 3u);
  EXPECT_EQ(pct->series[0].points.back().second, 60 + 16);

  auto prefill = BuildPlotData(AttentionSweep(v1::ATTENTION_PHASE_PREFILL), {});
  ASSERT_TRUE(prefill.ok()) << prefill.status();
  EXPECT_EQ(prefill->y_label, "tflops (TFLOP/s)");
  EXPECT_EQ(prefill->series[0].points.back().second, 10 + 16);
}

TEST(SweepPlot, GnuplotWritesAValidSvgAndPng) {
  const std::string dir = ::testing::TempDir();
  const std::string svg = dir + "/sweep.svg";
  const absl::Status svg_written = WriteSweepPlot(RecordedSweep(), {}, svg);
  ASSERT_TRUE(svg_written.ok()) << svg_written;
  const std::string svg_text = ReadFile(svg);
  EXPECT_THAT(svg_text, HasSubstr("<svg"));
  EXPECT_THAT(svg_text, HasSubstr("</svg>"));
  EXPECT_THAT(svg_text, HasSubstr("hidden_dim=8192"));
  EXPECT_THAT(svg_text, HasSubstr("bandwidth (GB/s)"));
  // One polyline per series, with its five points.
  EXPECT_GE(std::count(svg_text.begin(), svg_text.end(), 'M'), 2);

  const std::string png = dir + "/sweep.png";
  const absl::Status png_written = WriteSweepPlot(RecordedSweep(), {.pct_of_copy = true}, png);
  ASSERT_TRUE(png_written.ok()) << png_written;
  const std::string png_bytes = ReadFile(png);
  ASSERT_GT(png_bytes.size(), 1000u);
  EXPECT_EQ(png_bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png_bytes.substr(12, 4), "IHDR");
  EXPECT_EQ(std::filesystem::exists(dir + "/sweep.dat"), false);
}

TEST(SweepPlot, RefusesOtherExtensions) {
  EXPECT_TRUE(absl::IsInvalidArgument(WriteSweepPlot(RecordedSweep(), {}, "/tmp/x.pdf")));
}

}  // namespace
}  // namespace gpuprof::client
