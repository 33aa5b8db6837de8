#include "sweep/compare.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::sweep {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A finished index point as the daemon records it.
v1::Experiment IndexPoint(int64_t tokens, int64_t hidden, double gbps, double noise) {
  v1::Experiment experiment;
  experiment.set_workload(v1::WORKLOAD_INDEX);
  experiment.set_state(v1::FINISHED);
  experiment.mutable_request()->mutable_index()->set_num_tokens(tokens);
  experiment.mutable_request()->mutable_index()->set_hidden_dim(hidden);
  auto* measurement = experiment.mutable_result()->mutable_measurement();
  measurement->set_bandwidth_gbps(gbps);
  measurement->set_pct_of_measured_copy_bandwidth(gbps / 30);
  measurement->mutable_kernel_time()->set_relative_noise(noise);
  measurement->mutable_kernel_time()->set_median_us(100);
  measurement->mutable_kernel_time()->set_samples(500);
  return experiment;
}

// A finished radix point: match_prefix op/s, with the noise of its timed passes when measured.
v1::Experiment RadixPoint(int64_t seed, double ops_per_second, std::optional<double> noise) {
  v1::Experiment experiment;
  experiment.set_workload(v1::WORKLOAD_RADIX);
  experiment.set_state(v1::FINISHED);
  experiment.mutable_request()->mutable_radix()->set_seed(seed);
  v1::OperationStats& match = *experiment.mutable_result()->mutable_radix()->add_operations();
  match.set_operation("match_prefix");
  match.set_ops_per_second(ops_per_second);
  // Per-operation latencies spread widely by design: never the throughput's noise.
  match.mutable_latency()->set_samples(300);
  match.mutable_latency()->set_relative_noise(0.8);
  if (noise.has_value()) {
    match.set_ops_per_second_relative_noise(*noise);
    match.set_passes(5);
  }
  return experiment;
}

CompareSide Side(std::string id, std::vector<v1::Experiment> points,
                 std::vector<std::string> axes = {"num_tokens", "hidden_dim"}) {
  CompareSide side;
  side.id = std::move(id);
  side.axes = std::move(axes);
  side.points = std::move(points);
  return side;
}

TEST(Compare, MatchesPointsByParametersWhateverTheirOrder) {
  const Comparison comparison =
      Compare(Side("a", {IndexPoint(64, 4096, 1000, 0.01), IndexPoint(4096, 4096, 2000, 0.01),
                         IndexPoint(1, 4096, 10, 0.01)}),
              Side("b", {IndexPoint(4096, 4096, 2000, 0.01), IndexPoint(64, 4096, 1000, 0.01),
                         IndexPoint(64, 8192, 1500, 0.01)}),
              {});
  ASSERT_EQ(comparison.points.size(), 2u);
  EXPECT_EQ(comparison.points[0].parameters, "num_tokens=64 hidden_dim=4096");
  EXPECT_EQ(comparison.points[1].parameters, "num_tokens=4096 hidden_dim=4096");
  EXPECT_THAT(comparison.only_in_a, ElementsAre("num_tokens=1 hidden_dim=4096"));
  EXPECT_THAT(comparison.only_in_b, ElementsAre("num_tokens=64 hidden_dim=8192"));
  EXPECT_DOUBLE_EQ(comparison.geomean_ratio, 1.0);
  EXPECT_EQ(comparison.regressions + comparison.improvements, 0);
}

TEST(Compare, DifferencesWithinTheMeasuredNoiseAreNotSignificant) {
  // 500 samples of 1% noise on each side: chance moves the ratio by up to 2 x 1.4% x 1.05.
  const Comparison quiet = Compare(Side("a", {IndexPoint(64, 4096, 1000, 0.01)}),
                                   Side("b", {IndexPoint(64, 4096, 960, 0.01)}), {});
  ASSERT_EQ(quiet.points.size(), 1u);
  EXPECT_EQ(quiet.points[0].verdict, Verdict::kRegression);
  ASSERT_TRUE(quiet.points[0].noise.has_value());
  EXPECT_NEAR(*quiet.points[0].noise, 2 * std::sqrt(2) * 0.01 * NoiseUpperBoundFactor(500), 1e-12);
  EXPECT_NEAR(quiet.worst_regression_pct, 4.0, 1e-9);
  const Comparison within = Compare(Side("a", {IndexPoint(64, 4096, 1000, 0.01)}),
                                    Side("b", {IndexPoint(64, 4096, 975, 0.01)}), {});
  EXPECT_EQ(within.points[0].verdict, Verdict::kSame);

  const Comparison noisy = Compare(Side("a", {IndexPoint(64, 4096, 1000, 0.05)}),
                                   Side("b", {IndexPoint(64, 4096, 950, 0.01)}), {});
  EXPECT_EQ(noisy.points[0].verdict, Verdict::kSame);
  EXPECT_EQ(noisy.regressions, 0);

  // Noise on one side only counts too.
  const Comparison one_noisy = Compare(Side("a", {IndexPoint(64, 4096, 1000, 0.0)}),
                                       Side("b", {IndexPoint(64, 4096, 1080, 0.04)}), {});
  EXPECT_EQ(one_noisy.points[0].verdict, Verdict::kSame);
}

// A stddev from few samples may be well below the true one: the bound widens with fewer.
TEST(Compare, NoiseFromFewSamplesCountsForMore) {
  EXPECT_NEAR(NoiseUpperBoundFactor(5), 2.37, 0.05);   // chi2_0.05(4) = 0.711
  EXPECT_NEAR(NoiseUpperBoundFactor(10), 1.65, 0.02);  // chi2_0.05(9) = 3.325
  EXPECT_NEAR(NoiseUpperBoundFactor(500), 1.05, 0.01);
  EXPECT_EQ(NoiseUpperBoundFactor(1), 10);
  EXPECT_EQ(NoiseUpperBoundFactor(0), 10);
  EXPECT_GT(NoiseUpperBoundFactor(2), NoiseUpperBoundFactor(3));
}

// Two identical radix sweeps on an idle H100 VM (16 cores, 2026-11-26): 5 passes each, the
// figures 16% and 31% apart with the passes' noise at 4-47%; another pair came out 2x apart with
// 11-15%. A CPU rate's passes do not bound another run: such points are not judged, unless a
// run-to-run noise is given, which then counts as each side's noise at least.
TEST(Compare, IdenticalCpuSweepsOnAVirtualMachineAreNotFlagged) {
  const std::vector<std::string> axes = {"seed"};
  const CompareSide a =
      Side("a", {RadixPoint(1, 1340342, 0.139), RadixPoint(2, 815779, 0.110)}, axes);
  const CompareSide b =
      Side("b", {RadixPoint(1, 1125090, 0.044), RadixPoint(2, 398572, 0.149)}, axes);
  const Comparison comparison = Compare(a, b, {});
  ASSERT_EQ(comparison.points.size(), 2u);
  EXPECT_EQ(comparison.noise_unknown, 2);
  EXPECT_EQ(comparison.regressions, 0);
  EXPECT_FALSE(RegressionBeyond(comparison, 3));
  EXPECT_EQ(UnjudgedWorseThan(comparison, 3), 2);

  const Comparison assumed = Compare(a, b, {.cpu_run_noise = 0.25});
  EXPECT_EQ(assumed.noise_unknown, 0);
  EXPECT_EQ(assumed.regressions, 0);
  ASSERT_TRUE(assumed.points[1].noise.has_value());
  // Point 2: 0.149 x 2.4 = 0.36 is above the assumed 0.25, so it counts as measured.
  EXPECT_NEAR(*assumed.points[1].noise,
              2 * std::hypot(std::max(0.25, 0.110 * NoiseUpperBoundFactor(5)),
                             std::max(0.25, 0.149 * NoiseUpperBoundFactor(5))),
              1e-12);
}

TEST(Compare, ZeroNoiseStillNeedsTheMinimumChange) {
  const Comparison tiny = Compare(Side("a", {IndexPoint(64, 4096, 1000, 0)}),
                                  Side("b", {IndexPoint(64, 4096, 995, 0)}), {});
  EXPECT_EQ(tiny.points[0].verdict, Verdict::kSame);
  const Comparison strict =
      Compare(Side("a", {IndexPoint(64, 4096, 1000, 0)}), Side("b", {IndexPoint(64, 4096, 995, 0)}),
              {.min_change = 0.001});
  EXPECT_EQ(strict.points[0].verdict, Verdict::kRegression);
}

// Swapping A and B swaps better and worse, also where the noise is large: a run 26x faster at
// 101% noise is "within noise" both ways round (it was "better" one way, "same" the other).
TEST(Compare, SwappingTheSidesSwapsTheVerdict) {
  const auto verdicts = [](double a_gbps, double b_gbps, double noise) {
    const Verdict forward = Compare(Side("a", {IndexPoint(64, 4096, a_gbps, noise)}),
                                    Side("b", {IndexPoint(64, 4096, b_gbps, noise)}), {})
                                .points[0]
                                .verdict;
    const Verdict backward = Compare(Side("b", {IndexPoint(64, 4096, b_gbps, noise)}),
                                     Side("a", {IndexPoint(64, 4096, a_gbps, noise)}), {})
                                 .points[0]
                                 .verdict;
    return std::make_pair(forward, backward);
  };
  EXPECT_EQ(verdicts(1000, 1300, 0.05),
            std::make_pair(Verdict::kImprovement, Verdict::kRegression));
  EXPECT_EQ(verdicts(1000, 1010, 0.05), std::make_pair(Verdict::kSame, Verdict::kSame));
  EXPECT_EQ(verdicts(1000, 26000, 0.4), std::make_pair(Verdict::kSame, Verdict::kSame));
  // Near the threshold from both sides: each ratio is judged as its inverse is.
  for (double b_gbps = 1100; b_gbps < 1300; b_gbps += 7) {
    const auto [forward, backward] = verdicts(1000, b_gbps, 0.05);
    EXPECT_EQ(forward == Verdict::kImprovement, backward == Verdict::kRegression) << b_gbps;
    EXPECT_EQ(forward == Verdict::kSame, backward == Verdict::kSame) << b_gbps;
  }
}

TEST(Compare, SummaryAndRegressionGate) {
  const Comparison comparison =
      Compare(Side("a", {IndexPoint(1, 4096, 100, 0.005), IndexPoint(2, 4096, 100, 0.005),
                         IndexPoint(3, 4096, 100, 0.005)}),
              Side("b", {IndexPoint(1, 4096, 120, 0.005), IndexPoint(2, 4096, 92, 0.005),
                         IndexPoint(3, 4096, 100.2, 0.005)}),
              {});
  EXPECT_EQ(comparison.improvements, 1);
  EXPECT_EQ(comparison.regressions, 1);
  EXPECT_NEAR(comparison.geomean_ratio, std::cbrt(1.2 * 0.92 * 1.002), 1e-12);
  EXPECT_NEAR(comparison.worst_regression_pct, 8.0, 1e-9);
  EXPECT_TRUE(RegressionBeyond(comparison, 5));
  EXPECT_FALSE(RegressionBeyond(comparison, 8.5));
}

// Two runs of the same radix sweep on the same build, as the issue saw them: one pass each, no
// measured noise, figures +192% and -19% apart. Nothing may be flagged and no gate may fail,
// however often it is run.
TEST(Compare, UnknownNoiseIsNeverFlaggedNorGated) {
  const std::vector<std::string> axes = {"seed"};
  for (int repeat = 0; repeat < 20; ++repeat) {
    const double a1 = 1e5 * (1 + repeat), a2 = 3e5;
    const Comparison identical = Compare(
        Side("a", {RadixPoint(1, a1, std::nullopt), RadixPoint(2, a2, std::nullopt)}, axes),
        Side("b", {RadixPoint(1, a1, std::nullopt), RadixPoint(2, a2, std::nullopt)}, axes), {});
    ASSERT_EQ(identical.points.size(), 2u);
    for (const ComparedPoint& point : identical.points) {
      EXPECT_EQ(point.verdict, Verdict::kNoiseUnknown);
      EXPECT_FALSE(point.noise.has_value());
      EXPECT_FALSE(point.a.relative_noise.has_value());
    }
    EXPECT_EQ(identical.regressions, 0);
    EXPECT_EQ(identical.improvements, 0);
    EXPECT_EQ(identical.noise_unknown, 2);
    EXPECT_FALSE(RegressionBeyond(identical, 0));
    EXPECT_FALSE(RegressionBeyond(identical, 3));
    EXPECT_EQ(UnjudgedWorseThan(identical, 0), 0);
  }
  const Comparison apart = Compare(
      Side("a", {RadixPoint(1, 1e5, std::nullopt), RadixPoint(2, 1e5, std::nullopt)}, axes),
      Side("b", {RadixPoint(1, 2.924e5, std::nullopt), RadixPoint(2, 0.807e5, std::nullopt)}, axes),
      {});
  EXPECT_EQ(apart.regressions, 0);
  EXPECT_EQ(apart.improvements, 0);
  EXPECT_EQ(apart.noise_unknown, 2);
  EXPECT_EQ(apart.worst_regression_pct, 0);
  EXPECT_FALSE(RegressionBeyond(apart, 3));
  // What the gate did not judge is reported, not hidden.
  EXPECT_EQ(UnjudgedWorseThan(apart, 3), 1);
  EXPECT_EQ(VerdictName(Verdict::kNoiseUnknown), "unknown");
}

// Noise known on one side only is still unknown for the ratio.
TEST(Compare, NoiseUnknownOnOneSideIsUnknown) {
  const Comparison comparison =
      Compare(Side("a", {RadixPoint(1, 1e5, 0.01)}, {"seed"}),
              Side("b", {RadixPoint(1, 5e4, std::nullopt)}, {"seed"}), {});
  ASSERT_EQ(comparison.points.size(), 1u);
  EXPECT_EQ(comparison.points[0].verdict, Verdict::kNoiseUnknown);
  EXPECT_FALSE(RegressionBeyond(comparison, 3));
}

// With measured passes and a run-to-run noise to assume, radix is judged like any figure.
TEST(Compare, RadixWithMeasuredNoiseIsJudgedWithARunToRunNoise) {
  const Comparison unjudged = Compare(Side("a", {RadixPoint(1, 1e5, 0.01)}, {"seed"}),
                                      Side("b", {RadixPoint(1, 5e4, 0.02)}, {"seed"}), {});
  EXPECT_EQ(unjudged.points[0].verdict, Verdict::kNoiseUnknown);
  const Comparison comparison =
      Compare(Side("a", {RadixPoint(1, 1e5, 0.01)}, {"seed"}),
              Side("b", {RadixPoint(1, 5e4, 0.02)}, {"seed"}), {.cpu_run_noise = 0.05});
  ASSERT_EQ(comparison.points.size(), 1u);
  EXPECT_EQ(comparison.points[0].verdict, Verdict::kRegression);
  EXPECT_TRUE(RegressionBeyond(comparison, 20));
  const Comparison same =
      Compare(Side("a", {RadixPoint(1, 1e5, 0.03)}, {"seed"}),
              Side("b", {RadixPoint(1, 1.02e5, 0.03)}, {"seed"}), {.cpu_run_noise = 0.05});
  EXPECT_EQ(same.points[0].verdict, Verdict::kSame);
}

TEST(Compare, AnExperimentMatchesTheSweepPointWithItsParameters) {
  const Comparison comparison =
      Compare(Side("swp", {IndexPoint(64, 4096, 1000, 0.01), IndexPoint(64, 8192, 1200, 0.01)}),
              Side("exp", {IndexPoint(64, 8192, 1300, 0.01)}, {}), {});
  ASSERT_EQ(comparison.points.size(), 1u);
  EXPECT_EQ(comparison.points[0].parameters, "num_tokens=64 hidden_dim=8192");
  EXPECT_EQ(comparison.points[0].verdict, Verdict::kImprovement);
  EXPECT_THAT(comparison.only_in_a, ElementsAre("num_tokens=64 hidden_dim=4096"));
}

TEST(Compare, PointsWithoutResultsAreListedNotCompared) {
  v1::Experiment failed = IndexPoint(64, 4096, 0, 0);
  failed.set_state(v1::FAILED);
  failed.clear_result();
  const Comparison comparison =
      Compare(Side("a", {IndexPoint(64, 4096, 1000, 0.01)}), Side("b", {failed}), {});
  EXPECT_THAT(comparison.points, IsEmpty());
  EXPECT_THAT(comparison.without_result, ElementsAre("num_tokens=64 hidden_dim=4096"));
}

TEST(Compare, StatesWhereTheProvenanceDiffers) {
  CompareSide a = Side("a", {IndexPoint(64, 4096, 1000, 0.01)});
  CompareSide b = Side("b", {IndexPoint(64, 4096, 1000, 0.01)});
  a.provenance.add_gpus()->set_name("NVIDIA H100 80GB HBM3");
  b.provenance.add_gpus()->set_name("NVIDIA H200");
  a.provenance.set_driver_version("550.54");
  b.provenance.set_driver_version("550.54");
  a.provenance.set_gpuprof_version("0.4.0");
  b.provenance.set_gpuprof_version("0.5.0");
  const Comparison comparison = Compare(a, b, {});
  EXPECT_THAT(comparison.provenance_differences,
              ElementsAre("GPU: NVIDIA H100 80GB HBM3 vs NVIDIA H200", "gpuprof: 0.4.0 vs 0.5.0"));
}

TEST(Compare, AcrossNodesSaysWhichPairOfNodesDiffersInWhat) {
  // A fleet sweep spread over gpu-a and gpu-b, against one run on gpu-c.
  CompareSide a =
      Side("fsw-1", {IndexPoint(64, 4096, 1000, 0.01), IndexPoint(64, 8192, 1000, 0.01)});
  a.point_nodes = {"gpu-a", "gpu-b"};
  a.node_provenance["gpu-a"].set_driver_version("550.54");
  a.node_provenance["gpu-b"].set_driver_version("560.28");
  CompareSide b = Side("gpu-c/swp-000002",
                       {IndexPoint(64, 8192, 1000, 0.01), IndexPoint(64, 4096, 1000, 0.01)});
  b.point_nodes = {"gpu-c", "gpu-c"};
  b.node_provenance["gpu-c"].set_driver_version("550.54");
  const Comparison comparison = Compare(a, b, {});
  ASSERT_EQ(comparison.points.size(), 2u);
  EXPECT_EQ(comparison.points[0].node_a, "gpu-a");
  EXPECT_EQ(comparison.points[0].node_b, "gpu-c");
  EXPECT_EQ(comparison.points[1].node_a, "gpu-b");
  EXPECT_EQ(comparison.points[1].node_b, "gpu-c");
  EXPECT_THAT(comparison.provenance_differences,
              ElementsAre("gpu-b vs gpu-c: driver: 560.28 vs 550.54"));
}

}  // namespace
}  // namespace gpuprof::sweep
