#include "workloads/headline.h"

#include <string>

#include <gtest/gtest.h>

#include "google/protobuf/text_format.h"
#include "workloads/spec_table.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

v1::Experiment Parse(const std::string& text) {
  v1::Experiment experiment;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &experiment)) << text;
  return experiment;
}

// What a kernel run measures: both rates, the copy and the peak references, 12 samples.
constexpr char kMeasurement[] = R"pb(
  measurement {
    kernel_time { samples: 12 median_us: 169.5 relative_noise: 0.004 }
    bandwidth_gbps: 2854 pct_of_spec_peak_bandwidth: 85.1 pct_of_measured_copy_bandwidth: 94.8
    tflops: 11.4 pct_of_spec_peak_flops: 1.2
  })pb";

v1::Experiment GpuRun(const std::string& workload_and_request) {
  return Parse(workload_and_request + " result { " + kMeasurement + " }");
}

TEST(HeadlineTest, IndexAndStoreAreBandwidthAgainstTheMeasuredCopy) {
  for (const char* workload : {"workload: WORKLOAD_INDEX request { index {} }",
                               "workload: WORKLOAD_STORE request { store {} }"}) {
    SCOPED_TRACE(workload);
    const std::optional<Headline> headline = HeadlineOf(GpuRun(workload));
    ASSERT_TRUE(headline.has_value());
    EXPECT_EQ(headline->name, "bandwidth");
    EXPECT_EQ(headline->unit, "GB/s");
    EXPECT_EQ(headline->value, 2854);
    EXPECT_EQ(headline->bound, HeadlineBound::kBandwidth);
    EXPECT_EQ(headline->pct_of_bound, 94.8);
    EXPECT_EQ(headline->bound_reference, "copy");
    EXPECT_EQ(headline->relative_noise, 0.004);
    EXPECT_EQ(headline->samples, 12);
    EXPECT_EQ(headline->median_us, 169.5);
    EXPECT_EQ(headline->phase, "");
    // Both rates, whichever is the headline.
    EXPECT_EQ(headline->bandwidth_gbps, 2854);
    EXPECT_EQ(headline->tflops, 11.4);
  }
}

TEST(HeadlineTest, WithoutAMeasuredCopyBandwidthIsAgainstTheSpecPeak) {
  v1::Experiment experiment = GpuRun("workload: WORKLOAD_INDEX");
  experiment.mutable_result()->mutable_measurement()->clear_pct_of_measured_copy_bandwidth();
  const std::optional<Headline> headline = HeadlineOf(experiment);
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->pct_of_bound, 85.1);
  EXPECT_EQ(headline->bound_reference, "peak");
  EXPECT_EQ(headline->pct_of_copy_bandwidth, 0);
}

TEST(HeadlineTest, AttentionDecodeIsBandwidthBound) {
  const std::optional<Headline> headline = HeadlineOf(GpuRun(
      "workload: WORKLOAD_ATTENTION request { attention { phase: ATTENTION_PHASE_DECODE } }"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "bandwidth");
  EXPECT_EQ(headline->value, 2854);
  EXPECT_EQ(headline->bound, HeadlineBound::kBandwidth);
  EXPECT_EQ(headline->pct_of_bound, 94.8);
  EXPECT_EQ(headline->bound_reference, "copy");
  EXPECT_EQ(headline->pct_of_copy_bandwidth, 94.8);
  EXPECT_EQ(headline->phase, "decode");
  EXPECT_EQ(headline->tflops, 11.4);
}

TEST(HeadlineTest, AttentionPrefillIsComputeBound) {
  const std::optional<Headline> headline = HeadlineOf(GpuRun(
      "workload: WORKLOAD_ATTENTION request { attention { phase: ATTENTION_PHASE_PREFILL } }"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "tflops");
  EXPECT_EQ(headline->unit, "TFLOP/s");
  EXPECT_EQ(headline->value, 11.4);
  EXPECT_EQ(headline->bound, HeadlineBound::kCompute);
  EXPECT_EQ(headline->pct_of_bound, 1.2);
  EXPECT_EQ(headline->bound_reference, "peak");
  EXPECT_EQ(headline->phase, "prefill");
  EXPECT_EQ(headline->bandwidth_gbps, 2854);
  EXPECT_EQ(headline->relative_noise, 0.004);
}

TEST(HeadlineTest, AttentionWithoutAPhaseIsTheDefaultDecode) {
  const std::optional<Headline> headline =
      HeadlineOf(GpuRun("workload: WORKLOAD_ATTENTION request { attention {} }"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "bandwidth");
  EXPECT_EQ(headline->phase, "decode");
}

TEST(HeadlineTest, CollectiveIsBusBandwidthAtTheLargestSize) {
  const std::optional<Headline> headline = HeadlineOf(Parse(R"pb(
    workload: WORKLOAD_COLLECTIVE
    result {
      collective {
        busbw_gbps: 216
        points { bytes: 1024 busbw_gbps: 1 time { samples: 50 median_us: 9 relative_noise: 0.2 } }
        points {
          bytes: 1073741824
          busbw_gbps: 216
          time { samples: 20 median_us: 8800 relative_noise: 0.003 }
        }
      }
    })pb"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "busbw");
  EXPECT_EQ(headline->unit, "GB/s");
  EXPECT_EQ(headline->value, 216);
  EXPECT_EQ(headline->bound, HeadlineBound::kBandwidth);
  EXPECT_EQ(headline->relative_noise, 0.003);
  EXPECT_EQ(headline->samples, 20);
  EXPECT_EQ(headline->median_us, 8800);
}

// One rank has no bus traffic (busbw 0 by nccl-tests' factor): its figure is the algbw.
TEST(HeadlineTest, ACollectiveOfOneRankIsItsAlgorithmBandwidth) {
  const std::optional<Headline> headline = HeadlineOf(Parse(R"pb(
    workload: WORKLOAD_COLLECTIVE
    result {
      collective {
        ranks: 1
        algbw_gbps: 1436
        busbw_gbps: 0
        points { bytes: 67108864 time { samples: 20 median_us: 46.7 relative_noise: 0.001 } }
      }
    })pb"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "algbw");
  EXPECT_EQ(headline->value, 1436);
  EXPECT_EQ(headline->samples, 20);
  EXPECT_FALSE(HeadlineOf(Parse("result { collective { ranks: 2 busbw_gbps: 0 } }")).has_value());
}

TEST(HeadlineTest, RadixIsTheMatchRateWithTheNoiseOfItsPasses) {
  const std::optional<Headline> headline = HeadlineOf(Parse(R"pb(
    workload: WORKLOAD_RADIX
    result {
      radix {
        hit_rate: 0.8
        operations { operation: "insert" ops_per_second: 5 }
        operations {
          operation: "match_prefix"
          ops_per_second: 1454616
          ops_per_second_relative_noise: 0.021
          passes: 5
          latency { samples: 2000 median_us: 0.6 relative_noise: 0.9 }
        }
      }
    })pb"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "match_ops");
  EXPECT_EQ(headline->unit, "op/s");
  EXPECT_EQ(headline->value, 1454616);
  EXPECT_EQ(headline->bound, HeadlineBound::kCpuRate);
  EXPECT_EQ(headline->relative_noise, 0.021);
  EXPECT_EQ(headline->samples, 5);
  EXPECT_EQ(headline->median_us, 0.6);
}

// Passes slowed alike by another process on the CPU agree with each other: a run that shared
// the CPU has no known noise, whatever its passes' spread, and says why.
TEST(HeadlineTest, RadixOnASharedCpuHasUnknownNoise) {
  v1::Experiment experiment = Parse(R"pb(
    workload: WORKLOAD_RADIX
    result {
      radix {
        operations {
          operation: "match_prefix"
          ops_per_second: 1454616
          ops_per_second_relative_noise: 0.021
          passes: 5
        }
        other_cpus: 1.4
        online_cpus: 2
      }
    })pb");
  std::optional<Headline> headline = HeadlineOf(experiment);
  ASSERT_TRUE(headline.has_value());
  EXPECT_FALSE(headline->relative_noise.has_value());
  EXPECT_EQ(headline->noise_unknown_because, "other processes took 1.4 of 2 CPUs while it ran");
  EXPECT_EQ(headline->samples, 5);
  // A quiet host: the passes' noise stands.
  experiment.mutable_result()->mutable_radix()->set_other_cpus(kSharedCpuOtherCpus / 2);
  headline = HeadlineOf(experiment);
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->relative_noise, 0.021);
  EXPECT_EQ(headline->noise_unknown_because, "");
}

// One pass over the request stream measures no run-to-run noise: it is unknown, not 0, and the
// latencies' spread (requests differ by design) is never taken for it.
TEST(HeadlineTest, RadixWithoutRepeatedPassesHasUnknownNoise) {
  const std::optional<Headline> headline = HeadlineOf(Parse(R"pb(
    workload: WORKLOAD_RADIX
    result {
      radix {
        operations {
          operation: "match_prefix"
          ops_per_second: 1454616
          latency { samples: 2000 median_us: 0.6 relative_noise: 0.9 }
        }
      }
    })pb"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_FALSE(headline->relative_noise.has_value());
  EXPECT_EQ(headline->samples, 0);
  // A measured noise of 0 stays 0.
  v1::Experiment measured = Parse(R"pb(
    workload: WORKLOAD_RADIX
    result {
      radix {
        operations {
          operation: "match_prefix"
          ops_per_second: 10
          ops_per_second_relative_noise: 0
          passes: 3
        }
      }
    })pb");
  ASSERT_TRUE(HeadlineOf(measured).has_value());
  ASSERT_TRUE(HeadlineOf(measured)->relative_noise.has_value());
  EXPECT_EQ(*HeadlineOf(measured)->relative_noise, 0);
}

TEST(HeadlineTest, GpuNoiseIsUnknownBelowTwoSamples) {
  v1::Experiment experiment = GpuRun("workload: WORKLOAD_INDEX");
  v1::TimingStats& time = *experiment.mutable_result()->mutable_measurement()->mutable_kernel_time();
  time.set_samples(1);
  time.set_relative_noise(0);
  EXPECT_FALSE(HeadlineOf(experiment)->relative_noise.has_value());
  time.set_samples(0);
  EXPECT_FALSE(HeadlineOf(experiment)->relative_noise.has_value());
  time.set_samples(2);
  EXPECT_EQ(HeadlineOf(experiment)->relative_noise, 0);
}

TEST(HeadlineTest, CopyIsBandwidthAgainstItsLink) {
  const std::optional<Headline> headline = HeadlineOf(Parse(R"pb(
    workload: WORKLOAD_COPY
    result {
      measurement {
        bandwidth_gbps: 48.2
        pct_of_spec_peak_bandwidth: 76.5
        kernel_time { samples: 10 median_us: 11138 relative_noise: 0.01 }
      }
      copy { link: "PCIe Gen5 x16" link_peak_gbps: 63 }
    })pb"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "bandwidth");
  EXPECT_EQ(headline->pct_of_bound, 76.5);
  EXPECT_EQ(headline->bound_reference, "PCIe Gen5 x16");
}

TEST(HeadlineTest, EveryWorkloadChoosesItsHeadline) {
  for (const WorkloadSpec* spec : WorkloadSpecs()) {
    EXPECT_NE(spec->headline, nullptr) << WorkloadName(spec->request_case);
  }
}

TEST(HeadlineTest, NoResultOrNoFigureHasNoHeadline) {
  EXPECT_FALSE(HeadlineOf(Parse("workload: WORKLOAD_INDEX")).has_value());
  EXPECT_FALSE(HeadlineOf(Parse("workload: WORKLOAD_INDEX result {}")).has_value());
  EXPECT_FALSE(
      HeadlineOf(Parse("workload: WORKLOAD_RADIX result { radix { hit_rate: 0.5 } }")).has_value());
  EXPECT_FALSE(HeadlineOf(Parse("workload: WORKLOAD_ATTENTION request { attention { phase: "
                                "ATTENTION_PHASE_PREFILL } } result { measurement { "
                                "bandwidth_gbps: 10 } }"))
                   .has_value());
}

// A result from a workload this build does not know is judged by its type.
TEST(HeadlineTest, UnknownWorkloadsFallBackToTheResultType) {
  std::optional<Headline> headline =
      HeadlineOf(Parse("result { collective { busbw_gbps: 216 } }"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "busbw");
  EXPECT_FALSE(headline->relative_noise.has_value());
  headline = HeadlineOf(Parse("result { measurement { tflops: 3 } }"));
  ASSERT_TRUE(headline.has_value());
  EXPECT_EQ(headline->name, "tflops");
}

}  // namespace
}  // namespace gpuprof::workloads
