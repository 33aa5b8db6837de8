// The copy workload on this machine's GPUs, every direction, with the daemon's probe figure
// beside device-to-device: prints the table that docs/benchmarks/RESULTS.md ("copy") records.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gpu/gpu_probe.h"
#include "gtest/gtest.h"
#include "measure/copy_bandwidth.h"
#include "workloads/copy/copy_runner.h"
#include "workloads/copy/copy_spec.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

class CopyRunnerGpuTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    inventory_ = new v1::ListGpusResponse(gpu::ProbeHost({.gpuprof_version = "test"}));
    measure::FillMeasuredCopyBandwidth(*inventory_);
  }
  static void TearDownTestSuite() { delete inventory_; }

  void SetUp() override {
    if (inventory_->gpus_size() == 0) GTEST_SKIP() << "no GPU: " << inventory_->probe_error();
  }

  // Runs `spec` on the first `gpus` GPUs with the spec's defaults and validation, as the
  // daemon would, and prints every route's figure.
  absl::StatusOr<v1::ExperimentResult> Run(const v1::CopySpec& spec, int gpus = 1) {
    v1::ExperimentRequest request;
    *request.mutable_copy() = spec;
    if (gpus > 1) request.mutable_gpus()->set_gpu_count(gpus);
    kCopySpec.apply_defaults(*inventory_, request);
    auto& measurement = *request.mutable_measurement();
    measurement.set_warmup_iterations(3);
    measurement.set_min_iterations(10);
    measurement.set_max_iterations(200);
    measurement.mutable_time_budget()->set_seconds(1);
    measurement.set_noise_target(0.01);
    const absl::Status valid = kCopySpec.validate(request, HostLimitsOf(*inventory_));
    if (!valid.ok()) return valid;
    worker_protocol::ExperimentAssignment assignment;
    *assignment.mutable_request() = request;
    for (int i = 0; i < gpus; ++i) *assignment.add_gpus() = inventory_->gpus(i);
    for (const v1::GpuLink& link : inventory_->links()) {
      if (link.gpu_a() < gpus && link.gpu_b() < gpus) *assignment.add_links() = link;
    }
    *assignment.mutable_host() = inventory_->host();
    assignment.set_world_size(1);
    const RunContext context{.assignment = assignment,
                             .progress = [](v1::Phase, int64_t, int64_t, const std::string&) {}};
    absl::StatusOr<v1::ExperimentResult> result = RunCopyWorkload(context);
    if (result.ok()) Print(*result);
    return result;
  }

  static void Print(const v1::ExperimentResult& result) {
    const v1::CopyResult& copy = result.copy();
    for (const v1::CopyPoint& point : copy.points()) {
      std::printf(
          "copy  %-32s %9.1f GB/s  %5.1f%% of %s %.1f GB/s  (median %.1f us, noise %.2f%%)\n",
          point.route().c_str(), point.measurement().bandwidth_gbps(),
          point.measurement().pct_of_spec_peak_bandwidth(), point.link().c_str(),
          point.link_peak_gbps(), point.measurement().kernel_time().median_us(),
          100 * point.measurement().kernel_time().relative_noise());
    }
    if (copy.probe_copy_bandwidth_gbps() > 0) {
      std::printf("copy  probe's device-to-device copy %.1f GB/s; this run %.1f%% of it\n",
                  copy.probe_copy_bandwidth_gbps(), copy.pct_of_probe_copy_bandwidth());
    }
  }

  static void ExpectVerifiedAndBelowPeak(const v1::ExperimentResult& result) {
    EXPECT_TRUE(result.verification().checked());
    EXPECT_TRUE(result.verification().passed()) << result.verification().message();
    ASSERT_GT(result.copy().points_size(), 0);
    for (const v1::CopyPoint& point : result.copy().points()) {
      EXPECT_GT(point.measurement().bandwidth_gbps(), 0) << point.route();
      // A figure above the link's spec peak would mean the bytes or the peak are wrong.
      EXPECT_LT(point.measurement().pct_of_spec_peak_bandwidth(), 105) << point.route();
    }
    // The headline is one of the points.
    bool headline_is_a_point = false;
    for (const v1::CopyPoint& point : result.copy().points()) {
      headline_is_a_point |=
          point.measurement().bandwidth_gbps() == result.measurement().bandwidth_gbps();
    }
    EXPECT_TRUE(headline_is_a_point) << result.copy().headline();
  }

  static v1::CopySpec Spec(v1::CopyDirection direction, bool bidirectional = false,
                           v1::HostMemory memory = v1::HOST_MEMORY_UNSPECIFIED) {
    v1::CopySpec spec;
    spec.set_direction(direction);
    spec.set_bidirectional(bidirectional);
    spec.set_host_memory(memory);
    return spec;
  }

  static v1::ListGpusResponse* inventory_;
};

v1::ListGpusResponse* CopyRunnerGpuTest::inventory_ = nullptr;

TEST_F(CopyRunnerGpuTest, DeviceToDeviceMatchesTheProbesCopy) {
  absl::StatusOr<v1::ExperimentResult> result = Run(Spec(v1::COPY_DIRECTION_DEVICE_TO_DEVICE));
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectVerifiedAndBelowPeak(*result);
  EXPECT_EQ(result->measurement().bytes_moved(), 2 * (int64_t{256} << 20));
  EXPECT_EQ(result->copy().link(), "HBM");
  // The same copy the probe times (its buffers are larger): within a tenth of it.
  if (result->copy().probe_copy_bandwidth_gbps() > 0) {
    EXPECT_NEAR(result->copy().pct_of_probe_copy_bandwidth(), 100, 10);
  }
}

TEST_F(CopyRunnerGpuTest, HostCopiesPinnedPageableAndBothWays) {
  for (const v1::CopySpec& spec :
       {Spec(v1::COPY_DIRECTION_HOST_TO_DEVICE), Spec(v1::COPY_DIRECTION_DEVICE_TO_HOST),
        Spec(v1::COPY_DIRECTION_HOST_TO_DEVICE, true),
        Spec(v1::COPY_DIRECTION_HOST_TO_DEVICE, false, v1::HOST_MEMORY_PAGEABLE),
        Spec(v1::COPY_DIRECTION_DEVICE_TO_HOST, false, v1::HOST_MEMORY_PAGEABLE)}) {
    absl::StatusOr<v1::ExperimentResult> result = Run(spec);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectVerifiedAndBelowPeak(*result);
    EXPECT_NE(result->copy().link().find("PCIe"), std::string::npos) << result->copy().link();
  }
}

TEST_F(CopyRunnerGpuTest, PinnedBeatsPageable) {
  absl::StatusOr<v1::ExperimentResult> pinned = Run(Spec(v1::COPY_DIRECTION_HOST_TO_DEVICE));
  absl::StatusOr<v1::ExperimentResult> pageable =
      Run(Spec(v1::COPY_DIRECTION_HOST_TO_DEVICE, false, v1::HOST_MEMORY_PAGEABLE));
  ASSERT_TRUE(pinned.ok() && pageable.ok());
  EXPECT_GT(pinned->measurement().bandwidth_gbps(), pageable->measurement().bandwidth_gbps());
}

TEST_F(CopyRunnerGpuTest, PeerCopiesBetweenTwoGpus) {
  if (inventory_->gpus_size() < 2) GTEST_SKIP() << "one GPU: no peer copies";
  for (const bool bidirectional : {false, true}) {
    absl::StatusOr<v1::ExperimentResult> result =
        Run(Spec(v1::COPY_DIRECTION_PEER, bidirectional), 2);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectVerifiedAndBelowPeak(*result);
    EXPECT_EQ(result->copy().points_size(), bidirectional ? 1 : 2);
  }
  absl::StatusOr<v1::ExperimentResult> together = Run(Spec(v1::COPY_DIRECTION_DEVICE_TO_DEVICE), 2);
  ASSERT_TRUE(together.ok()) << together.status();
  ExpectVerifiedAndBelowPeak(*together);
  EXPECT_EQ(together->copy().headline(), "every leased GPU at once");
}

}  // namespace
}  // namespace gpuprof::workloads
