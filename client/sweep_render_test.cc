#include "client/sweep_render.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/text_format.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

v1::Sweep RecordedSweep() {
  v1::Sweep sweep;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    id: "swp-000007" state: SWEEP_RUNNING user: "alice"
    request {
      base { index { vocab_size: 128000 } }
      axes { field: "num_tokens" values: "64" values: "4Ki" }
      axes { field: "dtype" values: "bf16" }
    }
    points {
      index: 0 parameters { key: "num_tokens" value: "64" } parameters { key: "dtype" value: "bf16" }
      experiment_id: "exp-000011" state: FINISHED attempt: 1
      experiment {
        workload: WORKLOAD_INDEX state: FINISHED gpu_ids: 0
        result {
          measurement { bandwidth_gbps: 1454616.25 pct_of_measured_copy_bandwidth: 27.1
                        tflops: 3.5
                        kernel_time { samples: 40 min_us: 1.125 median_us: 1.25 p90_us: 1.5
                                      p99_us: 2.0000001 relative_noise: 0.012 } }
          provenance { gpus { name: "NVIDIA H100 80GB HBM3" } }
        }
      }
    }
    points {
      index: 1 parameters { key: "num_tokens" value: "4096" } parameters { key: "dtype" value: "bf16" }
      experiment_id: "exp-000014" state: QUEUED attempt: 2 earlier_experiment_ids: "exp-000012"
    }
    points_queued: 1 points_finished: 1
  )pb", &sweep));
  return sweep;
}

TEST(SweepRender, FormatsCarryTheSameCells) {
  const v1::Sweep sweep = RecordedSweep();
  // CSV and JSON lines: the same columns, every one in every row, at full precision.
  EXPECT_EQ(RenderSweepPoints(sweep, SweepFormat::kCsv),
            "point,num_tokens,dtype,state,experiment,gpu_ids,gpu,figure,value,unit,noise,samples,"
            "min_us,median_us,p90_us,p99_us,gb_per_s,tflops,pct_of_copy\n"
            "0,64,bf16,finished,exp-000011,0,NVIDIA H100 80GB HBM3,bandwidth,1454616.25,GB/s,"
            "0.012,40,1.125,1.25,1.5,2.0000001,1454616.25,3.5,27.1\n"
            "1,4096,bf16,queued,exp-000014,,,,,,,,,,,,,,\n");
  const std::string markdown = RenderSweepPoints(sweep, SweepFormat::kMarkdown);
  EXPECT_THAT(markdown, HasSubstr("| point | num_tokens | dtype | state |"));
  EXPECT_THAT(markdown, HasSubstr("| 0 | 64 | bf16 | finished | exp-000011 | 1.25 | bandwidth | 1454616 | GB/s | 1.2% | 27.1% |"));
  EXPECT_THAT(markdown, HasSubstr("| 1 | 4096 | bf16 | queued (run 2) |"));
  const std::string jsonl = RenderSweepPoints(sweep, SweepFormat::kJsonLines);
  EXPECT_EQ(jsonl,
            "{\"point\":0,\"num_tokens\":\"64\",\"dtype\":\"bf16\",\"state\":\"finished\","
            "\"experiment\":\"exp-000011\",\"gpu_ids\":\"0\",\"gpu\":\"NVIDIA H100 80GB HBM3\","
            "\"figure\":\"bandwidth\",\"value\":1454616.25,\"unit\":\"GB/s\",\"noise\":0.012,"
            "\"samples\":40,\"min_us\":1.125,\"median_us\":1.25,\"p90_us\":1.5,"
            "\"p99_us\":2.0000001,\"gb_per_s\":1454616.25,\"tflops\":3.5,\"pct_of_copy\":27.1}\n"
            "{\"point\":1,\"num_tokens\":\"4096\",\"dtype\":\"bf16\",\"state\":\"queued\","
            "\"experiment\":\"exp-000014\",\"gpu_ids\":\"\",\"gpu\":\"\",\"figure\":null,"
            "\"value\":null,\"unit\":null,\"noise\":null,\"samples\":null,\"min_us\":null,"
            "\"median_us\":null,\"p90_us\":null,\"p99_us\":null,\"gb_per_s\":null,"
            "\"tflops\":null,\"pct_of_copy\":null}\n");
  const std::string table = RenderSweepPoints(sweep, SweepFormat::kTable);
  EXPECT_THAT(table, HasSubstr("NUM_TOKENS"));
  EXPECT_THAT(table, HasSubstr("GB/s"));
}

TEST(SweepRender, SummaryAndProgress) {
  const std::string summary =
      RenderSweepSummary(RecordedSweep(), absl::FromUnixSeconds(100), absl::UTCTimeZone());
  EXPECT_THAT(summary, HasSubstr("swp-000007  running  2 points: 1 finished, 0 running, 1 queued"));
  EXPECT_THAT(summary, HasSubstr("axis      num_tokens = 64,4Ki"));
  EXPECT_EQ(SweepProgressLine(24, 6, 2, 1, absl::Seconds(30)),
            "[#####---------------] 6/24  2 running  1 failed  elapsed 30.0s  ETA 1m30s");
  EXPECT_EQ(SweepProgressLine(4, 0, 1, 0, absl::Seconds(2)),
            "[--------------------] 0/4  1 running  elapsed 2.0s");
}

TEST(SweepRender, APageOfPointsStillCountsTheWholeSweep) {
  v1::Sweep page = RecordedSweep();
  page.set_points_total(10'000);
  page.set_points_queued(9'999);
  EXPECT_EQ(SweepPointTotal(page), 10'000);
  EXPECT_THAT(RenderSweepSummary(page, absl::FromUnixSeconds(0), absl::UTCTimeZone()),
              HasSubstr("running  10000 points: 1 finished"));
  // A daemon from before paging sends no total: its counts add up to it.
  EXPECT_EQ(SweepPointTotal(RecordedSweep()), 2);
}

TEST(SweepRender, FormatNames) {
  EXPECT_EQ(*ParseSweepFormat("CSV"), SweepFormat::kCsv);
  EXPECT_EQ(*ParseSweepFormat("md"), SweepFormat::kMarkdown);
  EXPECT_THAT(ParseSweepFormat("xml").status().message(),
              HasSubstr("choose table, csv, jsonl or markdown"));
}

// Axis values, a description and a reason carrying terminal controls are shown escaped in the
// table, CSV and Markdown, and JSON stays one valid line.
TEST(SweepRender, ControlCharactersAreShownEscapedInEveryFormat) {
  v1::Sweep sweep = RecordedSweep();
  const std::string hostile =
      "64\x1b]0;owned\x07\n\xc2\x9b"
      "2J";
  (*sweep.mutable_points(0)->mutable_parameters())["num_tokens"] = hostile;
  sweep.mutable_request()->set_description(hostile);
  sweep.set_reason(hostile);
  const std::string shown = "64\\x1b]0;owned\\x07\\n\\u009b2J";
  for (const SweepFormat format :
       {SweepFormat::kTable, SweepFormat::kCsv, SweepFormat::kMarkdown, SweepFormat::kJsonLines}) {
    const std::string text = RenderSweepPoints(sweep, format);
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
    EXPECT_EQ(text.find("\xc2\x9b"), std::string::npos) << text;
    if (format != SweepFormat::kJsonLines) {
      EXPECT_THAT(text, HasSubstr(shown));
    }
    // Still a header (two lines for Markdown) and one line per point.
    const size_t lines = std::count(text.begin(), text.end(), '\n');
    EXPECT_EQ(lines, format == SweepFormat::kMarkdown    ? 4u
                     : format == SweepFormat::kJsonLines ? 2u
                                                         : 3u)
        << text;
  }
  const std::string summary =
      RenderSweepSummary(sweep, absl::FromUnixSeconds(0), absl::UTCTimeZone());
  EXPECT_THAT(summary, HasSubstr(absl::StrCat("  reason    ", shown, "\n")));
  EXPECT_THAT(summary, HasSubstr(absl::StrCat("  about     ", shown, "\n")));
  EXPECT_EQ(summary.find('\x1b'), std::string::npos) << summary;
}

// The workload's headline in every row: decode's bandwidth (not its TFLOP/s) with its % of
// copy, and a radix rate whose noise nothing measured says "unknown", never 0.0%.
TEST(SweepRender, RowsShowTheHeadlineAndUnknownNoise) {
  v1::SweepPoint decode;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    index: 0 state: FINISHED experiment_id: "exp-000021"
    experiment {
      workload: WORKLOAD_ATTENTION
      request { attention { phase: ATTENTION_PHASE_DECODE } }
      result { measurement { bandwidth_gbps: 2854 pct_of_measured_copy_bandwidth: 94.8
                             tflops: 11.4 pct_of_spec_peak_flops: 1.2
                             kernel_time { samples: 40 median_us: 169 relative_noise: 0.004 } } }
    })pb", &decode));
  EXPECT_EQ(absl::StrJoin(SweepPointCells(decode, {}, true), "|"),
            "0|finished|exp-000021|169.0|bandwidth|2854|GB/s|0.4%|94.8%");
  v1::SweepPoint radix;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    index: 1 state: FINISHED experiment_id: "exp-000022"
    experiment {
      workload: WORKLOAD_RADIX
      result { radix { operations { operation: "match_prefix" ops_per_second: 1454616
                                    latency { samples: 300 median_us: 0.6 relative_noise: 0.8 } } } }
    })pb", &radix));
  const std::vector<std::string> cells = SweepPointCells(radix, {}, true);
  EXPECT_EQ(absl::StrJoin(cells, "|"), "1|finished|exp-000022|0.60|match_ops|1454616|op/s|unknown|-");
}

}  // namespace
}  // namespace gpuprof::client
