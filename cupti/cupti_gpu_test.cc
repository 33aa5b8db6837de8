// CUPTI on a real GPU: activity records of a copy kernel, its hardware metrics, its warp
// stalls. Metrics and PC sampling need counter permission; without it the tests check that
// the failure is the clear PERMISSION_DENIED the result reports, and say so.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <map>
#include <numeric>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "cupti/activity_tracer.h"
#include "cupti/kernel_metrics.h"
#include "cupti/metric_names.h"
#include "cupti/pc_sampling.h"
#include "cupti/testing/copy_kernel.h"

namespace gpuprof::cupti {
namespace {

namespace api = ::gpuprof::v1;
using ::testing::HasSubstr;

constexpr size_t kCopyBytes = size_t{64} << 20;
constexpr int kBlocks = 1024;

class CuptiGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
    ASSERT_GT(devices, 0);
    ASSERT_EQ(cudaMalloc(&source_, kCopyBytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&destination_, kCopyBytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(source_, 1, kCopyBytes), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  void TearDown() override {
    cudaFree(source_);
    cudaFree(destination_);
  }

  absl::Status LaunchCopies(int count) {
    for (int i = 0; i < count; ++i) {
      if (testing::LaunchCopyKernel(source_, destination_, kCopyBytes, kBlocks, nullptr) !=
          cudaSuccess) {
        return absl::InternalError("launch failed");
      }
    }
    return cudaDeviceSynchronize() == cudaSuccess ? absl::OkStatus()
                                                  : absl::InternalError("sync failed");
  }

  void* source_ = nullptr;
  void* destination_ = nullptr;
};

// The launches between BeginScaffolding and EndScaffolding, and only those, come out flagged.
TEST_F(CuptiGpuTest, ActivityTracerFlagsScaffoldingLaunches) {
  absl::StatusOr<ActivityTracer> tracer = ActivityTracer::Start({});
  ASSERT_TRUE(tracer.ok()) << tracer.status();
  for (const std::string& note : tracer->notes()) std::printf("note: %s\n", note.c_str());
  tracer->SetPhase(api::PHASE_TIMED);
  tracer->BeginScaffolding();
  ASSERT_EQ(cudaMemsetAsync(destination_, 1, 4096, nullptr), cudaSuccess);
  ASSERT_EQ(testing::LaunchCopyKernel(source_, destination_, kCopyBytes, kBlocks, nullptr),
            cudaSuccess);
  tracer->EndScaffolding();
  ASSERT_TRUE(LaunchCopies(2).ok());
  ASSERT_TRUE(tracer->Stop().ok());
  const api::ActivityBatch batch = tracer->TakeBatch();
  int flagged_kernels = 0, flagged_memsets = 0, workload_kernels = 0;
  for (const api::ActivityRecord& record : batch.records()) {
    if (record.kind() == api::ActivityRecord::KIND_KERNEL) {
      (record.scaffolding() ? flagged_kernels : workload_kernels)++;
    }
    if (record.kind() == api::ActivityRecord::KIND_MEMSET && record.scaffolding()) {
      ++flagged_memsets;
    }
  }
  std::printf("scaffolding tags: %lld learnt, %zu unmatched\n",
              static_cast<long long>(tracer->scaffolding_tags_learnt()),
              tracer->scaffolding_tags_pending());
  EXPECT_EQ(flagged_kernels, 1);
  EXPECT_EQ(flagged_memsets, 1);
  EXPECT_EQ(workload_kernels, 2);
}

TEST_F(CuptiGpuTest, ActivityTracerRecordsKernelsCopiesAndPhases) {
  absl::StatusOr<ActivityTracer> tracer = ActivityTracer::Start({.gpu_id_by_device = {5}});
  ASSERT_TRUE(tracer.ok()) << tracer.status();
  EXPECT_EQ(ActivityTracer::Start({}).status().code(), absl::StatusCode::kFailedPrecondition)
      << "CUPTI state is per process: one tracer at a time";

  tracer->SetPhase(api::PHASE_ALLOCATION);
  std::vector<char> host(1 << 20, 7);
  ASSERT_EQ(cudaMemcpy(source_, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(destination_, 0, 4096), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  tracer->SetPhase(api::PHASE_TIMED);
  ASSERT_TRUE(LaunchCopies(10).ok());
  tracer->SetPhase(api::PHASE_VERIFICATION);
  ASSERT_TRUE(tracer->Stop().ok());
  const api::ActivityBatch batch = tracer->TakeBatch();

  int kernels = 0, copies = 0, memsets = 0, syncs = 0;
  std::vector<std::string> phases;
  // Launch calls by correlation id: each GPU record's launch is among them.
  std::map<uint32_t, std::string> launch_names;
  for (const api::ActivityRecord& record : batch.records()) {
    if (record.kind() == api::ActivityRecord::KIND_LAUNCH) {
      launch_names[record.correlation_id()] = record.name();
    }
  }
  // The GPU work each launch call started (a synchronous cudaMemcpy's correlation id is also
  // carried by records that are not GPU work, so only kernels, copies and memsets count).
  std::map<std::string, int> launched_by;
  for (const api::ActivityRecord& record : batch.records()) {
    if (const auto launch = launch_names.find(record.correlation_id());
        launch != launch_names.end() && (record.kind() == api::ActivityRecord::KIND_KERNEL ||
                                         record.kind() == api::ActivityRecord::KIND_MEMCPY ||
                                         record.kind() == api::ActivityRecord::KIND_MEMSET)) {
      ++launched_by[launch->second];
    }
    switch (record.kind()) {
      case api::ActivityRecord::KIND_KERNEL:
        ++kernels;
        EXPECT_THAT(record.name(), HasSubstr("CopyKernel("));  // demangled
        EXPECT_EQ(record.grid(0), static_cast<uint32_t>(kBlocks));
        EXPECT_EQ(record.block(0), static_cast<uint32_t>(testing::kCopyThreadsPerBlock));
        EXPECT_GT(record.registers_per_thread(), 0);
        EXPECT_GT(record.end_ns(), record.start_ns());
        EXPECT_EQ(record.gpu_id(), 5);
        EXPECT_EQ(record.phase(), api::PHASE_TIMED);
        break;
      case api::ActivityRecord::KIND_MEMCPY:
        ++copies;
        EXPECT_EQ(record.copy_kind(), "htod");
        EXPECT_EQ(record.bytes(), 1 << 20);
        EXPECT_EQ(record.phase(), api::PHASE_ALLOCATION);
        break;
      case api::ActivityRecord::KIND_MEMSET:
        ++memsets;
        EXPECT_EQ(record.phase(), api::PHASE_ALLOCATION);
        break;
      case api::ActivityRecord::KIND_SYNCHRONIZATION:
        ++syncs;
        break;
      case api::ActivityRecord::KIND_PHASE:
        phases.push_back(record.name());
        EXPECT_LE(record.start_ns(), record.end_ns());
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(kernels, 10);
  EXPECT_EQ(copies, 1);
  EXPECT_EQ(memsets, 1);
  EXPECT_GE(syncs, 1);
  EXPECT_EQ(phases, (std::vector<std::string>{"allocation", "timed", "verification"}));
  EXPECT_EQ(batch.dropped_records(), 0);
  EXPECT_EQ(launched_by["cudaLaunchKernel"], 10);
  EXPECT_EQ(launched_by["cudaMemcpy"], 1);
  EXPECT_EQ(launched_by["cudaMemset"], 1);
  std::printf("activity: %d records, %d kernels, %d syncs, %zu launch calls, %d notes\n",
              batch.records_size(), kernels, syncs, launch_names.size(),
              static_cast<int>(tracer->notes().size()));
  for (const std::string& note : tracer->notes()) std::printf("note: %s\n", note.c_str());
}

TEST_F(CuptiGpuTest, SmallBuffersDropRecordsAndCountThem) {
  // One buffer of 1 KiB for thousands of records: CUPTI must drop, and the drops are counted.
  absl::StatusOr<ActivityTracer> tracer =
      ActivityTracer::Start({.buffer_bytes = 1024, .max_buffers = 1});
  ASSERT_TRUE(tracer.ok()) << tracer.status();
  ASSERT_TRUE(LaunchCopies(2000).ok());
  ASSERT_TRUE(tracer->Stop().ok());
  const api::ActivityBatch batch = tracer->TakeBatch();
  int kernels = 0;
  for (const api::ActivityRecord& record : batch.records()) {
    if (record.kind() == api::ActivityRecord::KIND_KERNEL) ++kernels;
  }
  std::printf("tiny buffers: %d kernel records delivered, %lld dropped, %zu refused requests\n",
              kernels, static_cast<long long>(batch.dropped_records()),
              tracer->refused_buffer_requests());
  EXPECT_LT(kernels, 2000);
  EXPECT_GT(batch.dropped_records() + static_cast<int64_t>(tracer->refused_buffer_requests()), 0);
}

TEST_F(CuptiGpuTest, KernelMetricsOfACopyAreInRange) {
  absl::StatusOr<KernelMetricsReport> report = CollectKernelMetrics(
      {.metric_names = KernelMetricNames({"gpu__time_duration.sum", "no__such_metric.sum"})},
      [&] { return LaunchCopies(2); });
  if (!report.ok()) {
    std::printf("hardware metrics: %s\n", NotCollectedLine("hardware metrics", report.status()).c_str());
    ASSERT_EQ(report.status().code(), absl::StatusCode::kPermissionDenied) << report.status();
    GTEST_SKIP() << "no counter permission on this machine: " << report.status();
  }
  std::printf("%s\n", report->replay_description.c_str());
  ASSERT_EQ(report->kernels.size(), 2u);
  ASSERT_EQ(report->unsupported_metrics.size(), 1u);
  EXPECT_THAT(report->unsupported_metrics[0], HasSubstr("no__such_metric.sum"));
  EXPECT_GE(report->passes, 1u);
  for (const ProfiledKernel& kernel : report->kernels) {
    std::printf("range '%s':", kernel.range_name.c_str());
    for (const auto& [name, value] : kernel.values) std::printf(" %s=%.2f", name.c_str(), value);
    std::printf("\n");
    for (absl::string_view pct : kDefaultKernelMetrics) {
      const double value = kernel.values.at(std::string(pct));
      EXPECT_GE(value, 0) << pct;
      EXPECT_LE(value, 101) << pct;
    }
    // A 64 MiB copy keeps DRAM far busier than the SMs.
    EXPECT_GT(kernel.values.at(std::string(kDramThroughputPct)), 50);
    EXPECT_GT(kernel.values.at(std::string(kDramThroughputPct)),
              kernel.values.at(std::string(kSmThroughputPct)));
    EXPECT_GT(kernel.values.at("gpu__time_duration.sum"), 0);
  }
}

TEST_F(CuptiGpuTest, StallBreakdownSumsToAHundredPercent) {
  absl::StatusOr<std::vector<StallBreakdown>> stalls =
      CollectStallBreakdown({}, [&] { return LaunchCopies(3); });
  if (!stalls.ok()) {
    std::printf("warp stalls: %s\n", NotCollectedLine("warp stalls", stalls.status()).c_str());
    ASSERT_EQ(stalls.status().code(), absl::StatusCode::kPermissionDenied) << stalls.status();
    GTEST_SKIP() << "no counter permission on this machine: " << stalls.status();
  }
  ASSERT_FALSE(stalls->empty());
  const StallBreakdown& copy = stalls->front();
  EXPECT_THAT(copy.function_name, HasSubstr("CopyKernel"));
  EXPECT_GT(copy.samples, 100u);
  double total = 0;
  std::printf("stalls of %s (%llu samples):", copy.function_name.c_str(),
              static_cast<unsigned long long>(copy.samples));
  for (const auto& [reason, percent] : copy.percent_by_reason) {
    total += percent;
    std::printf(" %s=%.1f%%", reason.c_str(), percent);
  }
  std::printf("\n");
  EXPECT_NEAR(total, 100, 0.5);
  for (size_t i = 1; i < copy.percent_by_reason.size(); ++i) {
    EXPECT_GE(copy.percent_by_reason[i - 1].second, copy.percent_by_reason[i].second);
  }
}

}  // namespace
}  // namespace gpuprof::cupti
