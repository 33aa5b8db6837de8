#include "client/render.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

template <typename Message>
Message ParseText(const std::string& text) {
  Message message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

const absl::TimeZone kUtc = absl::UTCTimeZone();
// 2024-05-01 12:00:00 UTC.
const absl::Time kNow = absl::FromUnixSeconds(1714564800);

TEST(FormatTest, Elapsed) {
  EXPECT_EQ(FormatElapsed(absl::Milliseconds(850)), "850ms");
  EXPECT_EQ(FormatElapsed(absl::Milliseconds(12345)), "12.3s");
  EXPECT_EQ(FormatElapsed(absl::Seconds(245)), "4m05s");
  EXPECT_EQ(FormatElapsed(absl::Minutes(123)), "2h03m");
  EXPECT_EQ(FormatElapsed(-absl::Seconds(1)), "0ms");
}

TEST(FormatTest, BytesAndNumbers) {
  EXPECT_EQ(FormatDecimalBytes(512), "512 B");
  EXPECT_EQ(FormatDecimalBytes(268435456), "268.4 MB");
  EXPECT_EQ(FormatDecimalBytes(1200000000), "1.2 GB");
  EXPECT_EQ(FormatNumber(3.14159), "3.14");
  EXPECT_EQ(FormatNumber(42.46), "42.5");
  EXPECT_EQ(FormatNumber(2512.3), "2512");
}

TEST(FormatTest, NamesAndTimes) {
  EXPECT_EQ(StateName(v1::QUEUED), "queued");
  EXPECT_EQ(StateName(v1::TIMED_OUT), "timed-out");
  EXPECT_EQ(WorkloadName(v1::WORKLOAD_COLLECTIVE), "collective");
  EXPECT_TRUE(IsTerminalState(v1::INTERRUPTED));
  EXPECT_FALSE(IsTerminalState(v1::RUNNING));
  EXPECT_EQ(FormatLocalTime(kNow, kUtc), "2024-05-01 12:00:00");
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(1714564800);
  timestamp.set_nanos(5);
  EXPECT_EQ(ToTime(timestamp), kNow + absl::Nanoseconds(5));
}

TEST(FormatTest, CompactTextAndJson) {
  const auto request = ParseText<v1::ExperimentRequest>(
      "index { num_tokens: 4096 dtype: DATA_TYPE_BF16 } priority: 1");
  EXPECT_EQ(CompactText(request), "index { num_tokens: 4096 dtype: DATA_TYPE_BF16 } priority: 1");
  EXPECT_EQ(JsonLine(request),
            "{\"index\":{\"numTokens\":\"4096\",\"dtype\":\"DATA_TYPE_BF16\"},\"priority\":1}");
}

v1::ListGpusResponse TwoGpuBox() {
  return ParseText<v1::ListGpusResponse>(R"pb(
    host {
      hostname: "gpubox-01"
      driver_version: "550.54.15"
      cuda_runtime_version: "12.4"
      nccl_version: "2.21.5"
      cupti_version: "12.4"
      gpuprof_version: "0.1.0"
      numa_nodes: 2
      jit_cache_dir: "/var/cache/gpuprof/jit"
      jit_cache_entries: 12
      jit_cache_bytes: 3400000
    }
    gpus {
      index: 0
      name: "NVIDIA H100 80GB HBM3"
      total_memory_bytes: 85520809984
      sm_count: 132
      compute_capability_major: 9
      compute_capability_minor: 0
      spec_peak_bandwidth_gbps: 3352.3
      spec_peak_bf16_tflops: 989.4
      numa_node: 0
      measured_copy_bandwidth_gbps: 2890.1
      health: GPU_HEALTH_HEALTHY
    }
    gpus {
      index: 1
      name: "NVIDIA H100 80GB HBM3"
      total_memory_bytes: 85520809984
      sm_count: 132
      compute_capability_major: 9
      compute_capability_minor: 0
      spec_peak_bandwidth_gbps: 3352.3
      spec_peak_bf16_tflops: 989.4
      numa_node: 1
      leased_to_experiment: "exp-000012"
      leased_to_user: "alice"
      health: GPU_HEALTH_UNHEALTHY
      health_reason: "Xid 79 (the GPU has fallen off the bus)"
      last_xid: 79
    }
    links { gpu_a: 0 gpu_b: 1 type: LINK_TYPE_NVLINK nvlink_count: 18 }
    links { gpu_a: 1 gpu_b: 0 type: LINK_TYPE_CROSS_NUMA }
    supported_workloads: [ "index", "radix" ]
  )pb");
}

TEST(RenderGpusTest, HostTableTopologyAndCache) {
  EXPECT_EQ(RenderGpus(TwoGpuBox()),
            "host gpubox-01: driver 550.54.15, CUDA runtime 12.4, NCCL 2.21.5, CUPTI 12.4, "
            "gpuprof 0.1.0, 2 NUMA nodes\n"
            "\n"
            "GPU  NAME                   MEMORY GiB  SMS  CC   PEAK GB/s  PEAK BF16 TFLOP/s  "
            "COPY GB/s  NUMA  HEALTH              LEASE\n"
            "  0  NVIDIA H100 80GB HBM3        79.6  132  9.0       3352                989  "
            "     2890     0  ok                  free\n"
            "  1  NVIDIA H100 80GB HBM3        79.6  132  9.0       3352                989  "
            "        -     1  UNHEALTHY (Xid 79)  exp-000012 (alice)\n"
            "GPU 1 drained: Xid 79 (the GPU has fallen off the bus); an admin returns it with "
            "gpuprof gpu clear 1\n"
            "\n"
            "topology:\n"
            "      GPU0  GPU1  NUMA\n"
            "GPU0  X     NV18  0\n"
            "GPU1  SYS   X     1\n"
            "  X = self, NV# = # NVLinks, PIX = through PCIe switches, PHB = through the CPU's "
            "host bridge,\n"
            "  SYS = across NUMA nodes, ? = unknown\n"
            "\n"
            "workloads:  index, radix\n"
            "jit cache:  /var/cache/gpuprof/jit (12 entries, 3.4 MB)\n");
}

TEST(RenderGpusTest, NoGpusShowsTheProbeError) {
  const auto response = ParseText<v1::ListGpusResponse>(R"pb(
    host { hostname: "laptop" gpuprof_version: "0.1.0" }
    probe_error: "cudaGetDeviceCount: no CUDA-capable device is detected"
    supported_workloads: "radix"
  )pb");
  EXPECT_EQ(RenderGpus(response),
            "host laptop: gpuprof 0.1.0\n"
            "\n"
            "no GPUs: cudaGetDeviceCount: no CUDA-capable device is detected\n"
            "\n"
            "workloads:  radix\n");
}

v1::ExperimentResult IndexResult() {
  return ParseText<v1::ExperimentResult>(R"pb(
    provenance {
      hostname: "gpubox-01"
      gpus { index: 0 name: "NVIDIA H100 80GB HBM3" }
      driver_version: "550.54.15"
      cuda_runtime_version: "12.4"
      gpuprof_version: "0.1.0"
      worker_pid: 4242
      worker_reused: true
    }
    measurement {
      kernel_time {
        samples: 500
        min_us: 10.2
        median_us: 10.5
        mean_us: 10.61
        p90_us: 10.9
        p99_us: 11.3
        max_us: 12
        relative_noise: 0.008
      }
      bytes_moved: 268435456
      bandwidth_gbps: 2512.3
      pct_of_spec_peak_bandwidth: 74.9
      pct_of_measured_copy_bandwidth: 86.9
      used_cuda_graph: true
      l2_mode: L2_MODE_COLD
      throttling: "SM clock 1980 -> 1755 MHz (power)"
      stop_reason: "noise target reached"
    }
    verification { checked: true passed: true method: "CPU gather" mismatches: 0 max_abs_error: 0 }
    jit { kernel: "index_gather<bf16,4>" cache_key: "3fa2c1" cache_hit: true compile_ms: 0 }
    kernel_config { key: "grid" value: "1024" }
    kernel_config { key: "block" value: "256" }
    not_collected: "dram__throughput: no permission for GPU counters"
    dropped_activity_records: 12
  )pb");
}

TEST(RenderResultTest, GpuMeasurement) {
  EXPECT_EQ(RenderResult(IndexResult()),
            "ran on:         NVIDIA H100 80GB HBM3 (GPU 0) on gpubox-01\n"
            "versions:       driver 550.54.15, CUDA 12.4, gpuprof 0.1.0\n"
            "worker:         pid 4242 (reused)\n"
            "kernel time:    500 samples  min 10.2  median 10.5  mean 10.6  p90 10.9  p99 11.3  "
            "max 12.0 µs  noise 0.8%\n"
            "bytes moved:    268.4 MB per launch (bytes moved = bytes read + bytes written)\n"
            "bandwidth:      2512 GB/s  74.9% of spec peak, 86.9% of measured copy bandwidth\n"
            "timing:         L2 cold (flushed before every sample), CUDA graph launches; stopped: "
            "noise target reached\n"
            "WARNING:        clocks throttled while timing: SM clock 1980 -> 1755 MHz (power)\n"
            "verification:   PASSED against CPU gather: 0 mismatches, max abs error 0\n"
            "jit:            cache hit, compile 0.00 ms, kernel index_gather<bf16,4>, key 3fa2c1\n"
            "kernel config:  block=256 grid=1024\n"
            "not collected:  dram__throughput: no permission for GPU counters\n"
            "dropped:        12 activity records (CUPTI buffers were full)\n");
}

TEST(RenderResultTest, OverACopysBandwidthSaysWhy) {
  v1::ExperimentResult result = IndexResult();
  result.mutable_measurement()->set_pct_of_measured_copy_bandwidth(105.3);
  EXPECT_THAT(RenderResult(result),
              HasSubstr("105.3% of measured copy bandwidth (over 100%: a kernel that mostly "
                        "reads outruns a copy)\n"));
  result.mutable_measurement()->set_l2_mode(v1::MeasurementOptions::L2_MODE_HOT);
  EXPECT_THAT(RenderResult(result),
              HasSubstr("105.3% of measured copy bandwidth (over 100%: data kept in L2 between "
                        "launches)\n"));
}

TEST(RenderResultTest, ANsightReportIsNamedWithHowToFetchIt) {
  const auto result = ParseText<v1::ExperimentResult>(R"pb(
    capture_report {
      tool: TOOL_NCU
      file_name: "exp-000001.ncu-rep"
      size_bytes: 101960
      tool_version: "Version 2025.3.1.0"
    }
  )pb");
  EXPECT_EQ(RenderResult(result),
            "nsight report:  exp-000001.ncu-rep, 102.0 KB, ncu Version 2025.3.1.0; fetch it with "
            "gpuprof report ID (docs/nsight.md)\n");
}

TEST(RenderResultTest, ComputeVerificationFailureAndMissingCopyBandwidth) {
  const auto result = ParseText<v1::ExperimentResult>(R"pb(
    measurement {
      bandwidth_gbps: 1000
      pct_of_spec_peak_bandwidth: 30
      flops: 2.5e12
      tflops: 412.5
      pct_of_spec_peak_flops: 41.7
    }
    verification { checked: true passed: false mismatches: 17 max_abs_error: 0.5 message: "row 3" }
  )pb");
  const std::string text = RenderResult(result, "  ");
  EXPECT_THAT(text, HasSubstr("  bandwidth:     1000 GB/s  30.0% of spec peak, copy bandwidth "
                              "not measured\n"));
  EXPECT_THAT(text, HasSubstr("  compute:       412.5 TFLOP/s  41.7% of spec peak (2.5e+12 FLOP "
                              "per launch)\n"));
  EXPECT_THAT(text, HasSubstr("  timing:        L2 hot, stream launches\n"));
  EXPECT_THAT(text, HasSubstr("  verification:  FAILED: 17 mismatches, max abs error 0.5 (row 3)"));
  EXPECT_THAT(text, Not(HasSubstr("kernel time")));
  EXPECT_THAT(text, Not(HasSubstr("dropped")));
}

TEST(RenderResultTest, Radix) {
  const auto result = ParseText<v1::ExperimentResult>(R"pb(
    radix {
      requests: 10000
      request_tokens: 5000000
      matched_tokens: 4160000
      hit_rate: 0.832
      inserts: 10000
      evictions: 120
      evicted_tokens: 45000
      compare_bytes: 1200000000
      compare_gbps: 14.21
      tree_nodes: 4567
      tree_tokens: 890123
      wall_seconds: 2.5
      operations {
        operation: "match"
        count: 10000
        ops_per_second: 812345.6
        ops_per_second_relative_noise: 0.0123
        passes: 5
        latency { min_us: 0.5 median_us: 1.25 p90_us: 2.5 p99_us: 7.75 max_us: 120.5 }
      }
      operations {
        operation: "insert"
        count: 10000
        ops_per_second: 401234
        passes: 5
        latency { min_us: 0.75 median_us: 2 p90_us: 4 p99_us: 9 max_us: 98 }
      }
    }
  )pb");
  EXPECT_EQ(RenderResult(result),
            "requests:       10000 requests, 5000000 tokens, 4160000 matched\n"
            "hit rate:       83.2%\n"
            "cache:          10000 inserts, 120 evictions (45000 tokens), tree 4567 nodes / "
            "890123 tokens\n"
            "token compare:  14.2 GB/s (1.2 GB compared)\n"
            "wall time:      2.5s\n"
            "passes:         5 timed; OPS/S is their median, NOISE their stddev/mean\n"
            "operations:\n"
            "  OPERATION  COUNT   OPS/S    NOISE  MIN µs  MEDIAN µs  P90 µs  P99 µs  MAX µs\n"
            "  match      10000  812346     1.2%    0.50       1.25    2.50    7.75   120.5\n"
            "  insert     10000  401234  unknown    0.75       2.00    4.00    9.00    98.0\n");
}

TEST(RenderResultTest, CpuOnlyProvenance) {
  const auto result = ParseText<v1::ExperimentResult>(
      "provenance { hostname: 'vm' gpuprof_version: '0.1.0' worker_pid: 7 }");
  EXPECT_EQ(RenderResult(result),
            "ran on:    vm (CPU only)\n"
            "versions:  gpuprof 0.1.0\n"
            "worker:    pid 7 (new)\n");
}

TEST(RenderResultTest, Collective) {
  const auto result = ParseText<v1::ExperimentResult>(
      "collective { ranks: 8 algbw_gbps: 123.4 busbw_gbps: 216 correct: true }");
  EXPECT_EQ(RenderResult(result),
            "collective:  8 ranks, algbw 123.4 GB/s, busbw 216.0 GB/s, data correct\n");
}

TEST(RenderResultTest, CollectiveSweepIsATable) {
  const auto result = ParseText<v1::ExperimentResult>(R"pb(
    collective {
      ranks: 2 algbw_gbps: 330 busbw_gbps: 330 correct: true small_message_latency_us: 10.25
      points { bytes: 8 time { median_us: 10.25 } algbw_gbps: 0.0008 busbw_gbps: 0.0008
               rank_median_us: [ 10.25, 10.1 ] correct: true
               nccl_algorithm: 'RING' nccl_protocol: 'LL' }
      points { bytes: 1073741824 time { median_us: 3255 } algbw_gbps: 329.9 busbw_gbps: 329.9
               rank_median_us: [ 3250, 3255 ] correct: false }
    })pb");
  EXPECT_EQ(RenderResult(result),
            "collective:  2 ranks, algbw 330.0 GB/s, busbw 330.0 GB/s, data correct\n"
            "latency:     10.2 us at the smallest size\n"
            "  size  time us  algbw GB/s  busbw GB/s  slowest rank  nccl algo/proto  data\n"
            "   8 B     10.2        0.00        0.00  0             RING/LL          exact\n"
            "1.1 GB     3255       329.9       329.9  1             -                WRONG\n");
}

// A host copy says what crossed the link and against which peak; no "% of measured copy".
TEST(RenderResultTest, CopySaysWhatTheBytesCrossedAndListsItsRoutes) {
  const auto result = ParseText<v1::ExperimentResult>(R"pb(
    measurement {
      bytes_moved: 536870912 bandwidth_gbps: 48.2 pct_of_spec_peak_bandwidth: 76.5
      kernel_time { samples: 10 median_us: 11138 relative_noise: 0.01 }
    }
    copy {
      direction: COPY_DIRECTION_HOST_TO_DEVICE host_memory: HOST_MEMORY_PINNED
      headline: "the slowest of 2 routes" link: "PCIe Gen5 x16" link_peak_gbps: 63
      points { route: "host (pinned) -> GPU 0" link: "PCIe Gen5 x16" link_peak_gbps: 63
               measurement { bandwidth_gbps: 48.2 pct_of_spec_peak_bandwidth: 76.5
                             kernel_time { median_us: 11138 relative_noise: 0.01 } } }
      points { route: "host (pinned) -> GPU 1" link: "PCIe Gen5 x16" link_peak_gbps: 63
               measurement { bandwidth_gbps: 55.2 pct_of_spec_peak_bandwidth: 87.6
                             kernel_time { median_us: 9726 relative_noise: 0.02 } } }
    })pb");
  const std::string text = RenderResult(result);
  EXPECT_THAT(text, HasSubstr("536.9 MB per copy (what crossed the link, every direction)"));
  EXPECT_THAT(text, HasSubstr("48.2 GB/s  76.5% of PCIe Gen5 x16 spec peak (63.0 GB/s)"));
  EXPECT_THAT(text, HasSubstr("the slowest of 2 routes"));
  EXPECT_THAT(text, Not(HasSubstr("measured copy")));
  EXPECT_THAT(text, Not(HasSubstr("read + written")));
  EXPECT_THAT(text, HasSubstr("host (pinned) -> GPU 1  PCIe Gen5 x16  55.2           87.6%       9726   2.0%  -"));

  v1::Experiment experiment;
  experiment.set_workload(v1::WORKLOAD_COPY);
  *experiment.mutable_result() = result;
  EXPECT_EQ(HeadlineFigure(experiment), "48.2 GB/s (76.5% of PCIe Gen5 x16)");
}

// A device copy: read + written, and how one GPU compares with the daemon's own probe.
TEST(RenderResultTest, DeviceCopyComparesWithTheProbe) {
  const auto result = ParseText<v1::ExperimentResult>(R"pb(
    measurement { bytes_moved: 536870912 bandwidth_gbps: 2961 pct_of_spec_peak_bandwidth: 88.3 }
    copy {
      direction: COPY_DIRECTION_DEVICE_TO_DEVICE link: "HBM" link_peak_gbps: 3352
      probe_copy_bandwidth_gbps: 2990 pct_of_probe_copy_bandwidth: 99.0
      points { route: "GPU 0" link: "HBM" measurement { bandwidth_gbps: 2961 } }
    })pb");
  const std::string text = RenderResult(result);
  EXPECT_THAT(text, HasSubstr("per copy (read + written in the GPU's memory)"));
  EXPECT_THAT(text, HasSubstr("one GPU at 99.0% of the daemon's measured copy (2990 GB/s)"));
  // One route: no table.
  EXPECT_THAT(text, Not(HasSubstr("peer access")));
}

TEST(HeadlineFigureTest, PicksTheFigureThatMatters) {
  v1::Experiment experiment;
  EXPECT_EQ(HeadlineFigure(experiment), "");
  experiment.set_workload(v1::WORKLOAD_INDEX);
  *experiment.mutable_result() = IndexResult();
  EXPECT_EQ(HeadlineFigure(experiment), "2512 GB/s (86.9% of copy)");
  experiment.mutable_result()->mutable_measurement()->set_pct_of_measured_copy_bandwidth(0);
  EXPECT_EQ(HeadlineFigure(experiment), "2512 GB/s (74.9% of peak)");

  // Prefill is compute-bound, decode bandwidth-bound: the same measurement reads differently.
  experiment = ParseText<v1::Experiment>(
      "workload: WORKLOAD_ATTENTION request { attention { phase: ATTENTION_PHASE_PREFILL } } "
      "result { measurement { bandwidth_gbps: 900 flops: 1e12 tflops: 412.5 "
      "pct_of_spec_peak_flops: 41.7 pct_of_measured_copy_bandwidth: 30.1 } }");
  EXPECT_EQ(HeadlineFigure(experiment), "412.5 TFLOP/s (41.7% of peak)");
  experiment = ParseText<v1::Experiment>(
      "workload: WORKLOAD_ATTENTION request { attention { phase: ATTENTION_PHASE_DECODE } } "
      "result { measurement { bandwidth_gbps: 2854 tflops: 11.4 pct_of_spec_peak_flops: 1.2 "
      "pct_of_measured_copy_bandwidth: 94.8 } }");
  EXPECT_EQ(HeadlineFigure(experiment), "2854 GB/s (94.8% of copy)");
  // Radix: the match rate, with its noise when repeated passes measured one.
  experiment = ParseText<v1::Experiment>(
      "workload: WORKLOAD_RADIX result { radix { hit_rate: 0.832 operations { operation: "
      "\"match_prefix\" ops_per_second: 1454616 } } }");
  EXPECT_EQ(HeadlineFigure(experiment), "1454616 match op/s (noise unknown)");
  experiment.mutable_result()->mutable_radix()->mutable_operations(0)
      ->set_ops_per_second_relative_noise(0.021);
  EXPECT_EQ(HeadlineFigure(experiment), "1454616 match op/s (noise 2.1%)");
  experiment = ParseText<v1::Experiment>("result { collective { busbw_gbps: 216 } }");
  EXPECT_EQ(HeadlineFigure(experiment), "busbw 216.0 GB/s");
}

TEST(HeadlineFigureTest, EveryBoundHasItsHint) {
  workloads::Headline latency;
  latency.bound = workloads::HeadlineBound::kLatency;
  latency.value = 12.34;
  latency.unit = "us";
  EXPECT_EQ(FormatHeadline(latency), "12.3 µs");
  workloads::Headline bandwidth;
  bandwidth.name = "bandwidth";
  bandwidth.unit = "GB/s";
  bandwidth.value = 2512;
  EXPECT_EQ(FormatHeadline(bandwidth), "2512 GB/s");
  bandwidth.pct_of_bound = 86.9;
  bandwidth.bound_reference = "copy";
  EXPECT_EQ(FormatHeadline(bandwidth), "2512 GB/s (86.9% of copy)");
  EXPECT_EQ(HeadlineDetails(bandwidth), "2512 GB/s (86.9% of copy), bandwidth-bound, noise unknown");
  bandwidth.relative_noise = 0.004;
  bandwidth.samples = 12;
  EXPECT_EQ(HeadlineDetails(bandwidth),
            "2512 GB/s (86.9% of copy), bandwidth-bound, noise 0.4% over 12 samples");
  workloads::Headline rate;
  rate.name = "match_ops";
  rate.unit = "op/s";
  rate.value = 1454616;
  rate.bound = workloads::HeadlineBound::kCpuRate;
  rate.relative_noise = 0.021;
  rate.samples = 5;
  EXPECT_EQ(HeadlineDetails(rate), "1454616 match op/s (noise 2.1%), CPU work over 5 timed passes");
}

TEST(RenderExperimentTableTest, OneRowPerExperiment) {
  google::protobuf::RepeatedPtrField<v1::Experiment> experiments;
  for (const v1::Experiment& experiment : {
           ParseText<v1::Experiment>(R"pb(
             id: "exp-000003"
             user: "bob"
             workload: WORKLOAD_COLLECTIVE
             state: QUEUED
             queue_position: 2
             created { seconds: 1714564790 }
           )pb"),
           ParseText<v1::Experiment>(R"pb(
             id: "exp-000002"
             user: "alice"
             workload: WORKLOAD_ATTENTION
             state: RUNNING
             gpu_ids: [ 0, 1 ]
             created { seconds: 1714564700 }
             started { seconds: 1714564750 }
           )pb"),
           ParseText<v1::Experiment>(R"pb(
             id: "exp-000001"
             user: "alice"
             workload: WORKLOAD_RADIX
             state: FINISHED
             created { seconds: 1714561200 }
             started { seconds: 1714561201 }
             finished { seconds: 1714561204 nanos: 500000000 }
             result {
               radix {
                 hit_rate: 0.5
                 operations {
                   operation: "match_prefix"
                   ops_per_second: 812345.6
                   ops_per_second_relative_noise: 0.012
                   passes: 5
                 }
               }
             }
           )pb"),
       }) {
    *experiments.Add() = experiment;
  }
  EXPECT_EQ(RenderExperimentTable(experiments, kNow, kUtc),
            "ID          USER   WORKLOAD    STATE       GPUS  CREATED           RUN TIME  RESULT\n"
            "exp-000003  bob    collective  queued (2)  -     2024-05-01 11:59         -\n"
            "exp-000002  alice  attention   running     0,1   2024-05-01 11:58     50.0s\n"
            "exp-000001  alice  radix       finished    -     2024-05-01 11:00      3.5s  812346 "
            "match op/s (noise 1.2%)\n");
}

TEST(RenderExperimentTest, FinishedWithResult) {
  auto experiment = ParseText<v1::Experiment>(R"pb(
    id: "exp-000007"
    user: "alice"
    workload: WORKLOAD_COLLECTIVE
    state: FINISHED
    request {
      collective { op: COLLECTIVE_OP_ALL_REDUCE bytes_per_rank: 268435456 }
      gpus { gpu_count: 2 }
      labels { key: "team" value: "serving" }
      user: "alice"
      description: "nvlink pair"
    }
    created { seconds: 1714564700 }
    started { seconds: 1714564701 nanos: 200000000 }
    finished { seconds: 1714564710 }
    gpu_ids: [ 0, 1 ]
    result { collective { ranks: 2 algbw_gbps: 300 busbw_gbps: 300 correct: true } }
  )pb");
  EXPECT_EQ(RenderExperiment(experiment, kNow, kUtc),
            "experiment:   exp-000007\n"
            "workload:     collective\n"
            "user:         alice\n"
            "state:        finished\n"
            "description:  nvlink pair\n"
            "labels:       team=serving\n"
            "request:      collective { op: COLLECTIVE_OP_ALL_REDUCE bytes_per_rank: 268435456 } "
            "gpus { gpu_count: 2 }\n"
            "created:      2024-05-01 11:58:20\n"
            "started:      2024-05-01 11:58:21 (queued 1.2s)\n"
            "finished:     2024-05-01 11:58:30 (ran 8.8s)\n"
            "gpus:         0,1\n"
            "headline:     busbw 300.0 GB/s, bandwidth-bound, noise unknown\n"
            "result:\n"
            "  collective:  2 ranks, algbw 300.0 GB/s, busbw 300.0 GB/s, data correct\n");
}

TEST(RenderExperimentTest, FailedShowsReasonAndStderr) {
  auto experiment = ParseText<v1::Experiment>(R"pb(
    id: "exp-000008"
    workload: WORKLOAD_INDEX
    state: FAILED
    reason: "worker exited with signal 11"
    worker_stderr_tail: "CUDA error: an illegal memory access\nabort\n"
  )pb");
  const std::string text = RenderExperiment(experiment, kNow, kUtc);
  EXPECT_THAT(text, HasSubstr("state:       failed\nreason:      worker exited with signal 11\n"
                              "request:     -\n"));
  EXPECT_THAT(text, HasSubstr("worker stderr (last lines):\n"
                              "  | CUDA error: an illegal memory access\n"
                              "  | abort\n"));
}

TEST(RenderExperimentTest, RunningShowsItsRunTime) {
  auto experiment =
      ParseText<v1::Experiment>("id: 'exp-1' state: RUNNING started { seconds: 1714564790 }");
  EXPECT_THAT(RenderExperiment(experiment, kNow, kUtc), HasSubstr("running for:  10.0s\n"));
}

TEST(RenderFailureTest, StateReasonAndStderr) {
  EXPECT_EQ(RenderFailure(v1::TIMED_OUT, "ran past 10m", "last line\n"),
            "timed-out: ran past 10m\nworker stderr (last lines):\n  | last line\n");
  EXPECT_EQ(RenderFailure(v1::CANCELLED, "", ""), "cancelled\n");
}

// Text another user typed, as an old database or a daemon that echoes it may still hold it:
// an OSC title sequence, a screen clear, a C1 CSI, a bidi override, a forged line.
constexpr char kHostileText[] =
    "\x1b]0;owned\x07\x1b[2J\xc2\x9b"
    "31m\xe2\x80\xae"
    "evil\nstate: finished";

bool HasRawControl(const std::string& text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte == 0x1b || byte == 0x07 || byte == 0x7f || byte == 0x9b) return true;
  }
  return text.find("\xe2\x80\xae") != std::string::npos;
}

TEST(RenderExperimentTest, OtherPeoplesTextIsEscaped) {
  v1::Experiment experiment;
  experiment.set_id("exp-000009");
  experiment.set_user("mallory");
  experiment.set_state(v1::FAILED);
  experiment.set_reason(kHostileText);
  experiment.set_worker_stderr_tail(absl::StrCat("line 1\n", kHostileText, "\roverwritten\n"));
  experiment.mutable_request()->set_description(kHostileText);
  (*experiment.mutable_request()->mutable_labels())["team"] = kHostileText;
  const std::string text = RenderExperiment(experiment, kNow, kUtc);
  EXPECT_FALSE(HasRawControl(text)) << text;
  const std::string shown = "\\x1b]0;owned\\x07\\x1b[2J\\u009b31m\\u202eevil\\nstate: finished";
  EXPECT_THAT(text, HasSubstr(absl::StrCat("description:  ", shown, "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("labels:       team=", shown, "\n")));
  EXPECT_THAT(text, HasSubstr(absl::StrCat("reason:       ", shown, "\n")));
  // The stderr tail keeps its lines; within a line, everything is shown.
  EXPECT_THAT(text, HasSubstr("  | line 1\n  | \\x1b]0;owned\\x07"));
  EXPECT_THAT(text, HasSubstr("\\u202eevil\n  | state: finished\\roverwritten\n"));
}

TEST(RenderExperimentTest, ListAndFailureEscapeToo) {
  google::protobuf::RepeatedPtrField<v1::Experiment> experiments;
  v1::Experiment& experiment = *experiments.Add();
  experiment.set_id("exp-000009");
  experiment.set_user(kHostileText);
  const std::string table = RenderExperimentTable(experiments, kNow, kUtc);
  EXPECT_FALSE(HasRawControl(table)) << table;
  // One header and one row: the newline in the text did not start a line of its own.
  EXPECT_EQ(std::count(table.begin(), table.end(), '\n'), 2);
  const std::string failure = RenderFailure(v1::FAILED, kHostileText, kHostileText);
  EXPECT_FALSE(HasRawControl(failure)) << failure;
  EXPECT_EQ(std::count(failure.begin(), failure.end(), '\n'), 4);
}

TEST(FormatTest, JsonLineEscapesEveryUnsafeCharacter) {
  v1::ExperimentRequest request;
  request.set_description(absl::StrCat(kHostileText, "\xe2\x81\xa6\x7f"));
  const std::string json = JsonLine(request);
  EXPECT_FALSE(HasRawControl(json)) << json;
  EXPECT_EQ(json.find('\n'), std::string::npos);
  // Protobuf leaves U+2066 raw; JsonLine does not.
  EXPECT_THAT(json, HasSubstr("\\u2066"));
  v1::ExperimentRequest parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &parsed).ok()) << json;
  EXPECT_EQ(parsed.description(), request.description());
}

TEST(RenderDamagedRowsTest, ALinePerRowWithWhatToDoAndNothingRaw) {
  google::protobuf::RepeatedPtrField<v1::DamagedRow> rows;
  EXPECT_EQ(RenderDamagedRows(rows), "");
  v1::DamagedRow& row = *rows.Add();
  row.set_table("experiments");
  row.set_id("exp-000004");
  row.set_error("stored experiment exp-000004 does not parse");
  v1::DamagedRow& hostile = *rows.Add();
  hostile.set_id("exp-000005");
  hostile.set_error(kHostileText);
  const std::string lines = RenderDamagedRows(rows);
  EXPECT_EQ(std::count(lines.begin(), lines.end(), '\n'), 2) << lines;
  EXPECT_THAT(lines, HasSubstr("gpuprof: exp-000004 is not listed: its row in the daemon's "
                               "database is damaged (stored experiment exp-000004 does not "
                               "parse)"));
  EXPECT_THAT(lines, HasSubstr("gpuprofd --check-db"));
  EXPECT_THAT(lines, HasSubstr("backup"));
  EXPECT_FALSE(HasRawControl(lines)) << lines;
}

}  // namespace
}  // namespace gpuprof::client
