// Prefill and decode attention at serving shapes (GQA 32/8, head_dim 128, bf16, page size 16),
// side by side in one run with the two ceilings of this GPU: its dense bf16 tensor peak (spec
// sheet, by name) and a device-to-device copy bandwidth measured here (bytes read + written).
//
// Timing: CUDA events around each launch, queued with its flush behind a blocking kernel and
// released together (launch latency is not timed); the L2 flushed before every timed launch
// (a read of twice its size, leaving clean lines; --flush=write: a memset, as nvbench and
// Triton flush, whose dirty lines the timed launch then writes back); warm-up launches
// excluded; the median is printed (min and p90 too).
// Bytes = Q + K + V (each KV row once per KV head) + O; FLOPs = 4 * heads * pairs * head_dim
// with causal q == kv counted as half (attention_params.h).
//
//   attention_benchmark [--quick] [--only=prefill|decode] [--table=PATH]
//       [--prefill-shapes=LEN:causal|full:HEAD_DIM,...]   (instead of the built-in prefill list)
//   attention_benchmark --decode-grid [--groups=1,2,..] [--batches=..] [--kv-lens=..]
//       [--page-sizes=16,..] [--head-dims=128,..] [--kv-heads=8,..] [--max-kv-gib=N]
//       [--csv=PATH]
//   attention_benchmark --fp8-prefill [--table=PATH]
// --decode-grid: decode at KV heads x GQA group (query heads = KV heads x group) x batch x KV
// length x page size x head_dim (8 KV heads, page 16 and head_dim 128 unless given),
// the tuned kernel (what the daemon runs) beside the measured copy, a plain read of as many bytes
// and a read of its K and V through its page table (paged_kv_read.h); --csv writes the rows that
// torch_attention_peers.py --decode-grid --ours reads to print PyTorch's backends beside them.
// --fp8-prefill: the fp8 (e4m3) prefill beside bf16 (ours and cuDNN's) at the same shapes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/statistics.h"
#include "common/status_macros.h"
#include "gpu/datasheet_peaks.h"
#include "kernels/attention/attention_params.h"
#include "kernels/attention/cudnn_attention.h"
#include "kernels/attention/decode.h"
#include "kernels/attention/decode_tuning.h"
#include "kernels/attention/device_attention_problem.h"
#include "kernels/attention/paged_kv_read.h"
#include "kernels/attention/prefill.h"
#include "measure/flushed_timer.h"
#include "measure/l2_flush.h"

namespace gpuprof::attention {
namespace {

// Per-launch times of a candidate, in microseconds.
using Timing = SampleSummary;

class Bench {
 public:
  static absl::StatusOr<Bench> Create(measure::L2FlushMode flush_mode) {
    ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
    ASSIGN_OR_RETURN(measure::FlushedTimer timer,
                     measure::FlushedTimer::Create({.flush_mode = flush_mode}));
    return Bench(std::move(stream), std::move(timer));
  }

  cudaStream_t stream() const { return stream_.get(); }

  // Runs `launch` `warmup` times, then `samples` times each after an L2 flush, timed by events
  // with the host's launch work off the clock (measure::FlushedTimer).
  absl::StatusOr<Timing> Time(const std::function<absl::Status()>& launch, int warmup,
                              int samples) {
    return timer_.Time(stream_.get(), launch, warmup, samples);
  }

 private:
  Bench(CudaStream stream, measure::FlushedTimer timer)
      : stream_(std::move(stream)), timer_(std::move(timer)) {}

  CudaStream stream_;
  measure::FlushedTimer timer_;
};

AttentionShape ServingShape(bool causal) {
  return AttentionShape{.num_qo_heads = 32,
                        .num_kv_heads = 8,
                        .head_dim = 128,
                        .page_size = 16,
                        .dtype = AttentionDtype::kBf16,
                        .causal = causal};
}

struct Row {
  std::string kind, shape, config;
  Timing timing;
  double flops = 0, bytes = 0;
  int splits = 0;
};

// cuDNN's fused attention on the same problem, as one more row; a shape cuDNN has no engine
// for is printed with cuDNN's reason instead.
absl::Status AddCudnnRow(Bench& bench, const DeviceAttentionProblem& d, const std::string& kind,
                         const std::string& shape_name, int warmup, int samples,
                         std::vector<Row>& rows) {
  auto cudnn = CudnnAttention::Create(d.problem, d.layout);
  if (!cudnn.ok()) {
    std::printf("  cudnn %s %s: %s\n", kind.c_str(), shape_name.c_str(),
                cudnn.status().ToString().c_str());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(Timing t,
                   bench.Time([&] { return (*cudnn)->Run(bench.stream()); }, warmup, samples));
  rows.push_back(Row{.kind = "cudnn " + kind,
                     .shape = shape_name,
                     .config = (*cudnn)->info().ToString(),
                     .timing = t,
                     .flops = AttentionFlops(d.problem.shape, d.problem.lengths),
                     .bytes = AttentionBytes(d.problem.shape, d.problem.lengths)});
  return absl::OkStatus();
}

// Copy ceiling: 1 GiB device-to-device, bytes read + written, in GB/s.
absl::StatusOr<double> MeasureCopyGbs(Bench& bench) {
  const size_t bytes = size_t{1} << 30;
  ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Allocate(bytes));
  CUDA_RETURN_IF_ERROR(cudaMemset(src.data(), 1, bytes));
  ASSIGN_OR_RETURN(
      Timing t, bench.Time(
                    [&]() -> absl::Status {
                      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
                          dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, bench.stream()));
                      return absl::OkStatus();
                    },
                    3, 20));
  return 2.0 * bytes / (t.median * 1e-6) / 1e9;
}

// One streaming pass that reads `bytes` (the flush's own read, over a buffer of that size),
// timed like the kernel it is set beside: the time the GPU needs to read that many bytes after
// the same flush, launch and ramp included. A decode's "% read" is this time over its own.
absl::StatusOr<Timing> TimeReadOfBytes(Bench& bench, int64_t bytes) {
  ASSIGN_OR_RETURN(const measure::DeviceReadPass pass, measure::DeviceReadPass::Create(bytes));
  return bench.Time([&] { return pass.Enqueue(bench.stream()); }, 2, 10);
}

struct DecodeGrid {
  std::vector<int> groups = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<int> batches = {1, 32, 64, 128, 256};
  std::vector<int> kv_lens = {1024, 4096, 16384, 32768};
  std::vector<int> page_sizes = {16};
  std::vector<int> head_dims = {128};
  std::vector<int> kv_heads = {8};
  double max_kv_gib = 32;  // shapes whose K + V exceed this are skipped (and said so)
  std::string csv_path;
  // The page table's order: shuffled (as a serving engine's cache after churn) or in order
  // (each sequence's pages contiguous), to tell the cost of scattered pages from the kernel's.
  bool pages_in_order = false;
};

// One batch x KV length x page size x head_dim of the decode grid (its GQA groups are the
// inner loop, so that a group's shapes sit together in the table).
struct DecodeGridPoint {
  int head_dim, page_size, kv_heads, kv, batch;
};

std::vector<DecodeGridPoint> DecodeGridPoints(const DecodeGrid& grid) {
  std::vector<DecodeGridPoint> points;
  for (int head_dim : grid.head_dims) {
    for (int page_size : grid.page_sizes) {
      for (int kv_heads : grid.kv_heads) {
        for (int kv : grid.kv_lens) {
          for (int batch : grid.batches) {
            points.push_back({head_dim, page_size, kv_heads, kv, batch});
          }
        }
      }
    }
  }
  return points;
}

// Tunes and times one shape (as the daemon runs it) and appends its table row and CSV line.
absl::Status TimeDecodeGridShape(Bench& bench, const DecodeGrid& grid,
                                 const DecodeGridPoint& point, int group, double copy_gbs,
                                 std::string& table, std::string& csv) {
  AttentionShape shape = ServingShape(false);
  shape.num_kv_heads = point.kv_heads;
  shape.num_qo_heads = point.kv_heads * group;
  shape.head_dim = point.head_dim;
  shape.page_size = point.page_size;
  SequenceLengths lengths{.q_lens = std::vector<int32_t>(point.batch, 1),
                          .kv_lens = std::vector<int32_t>(point.batch, point.kv)};
  ASSIGN_OR_RETURN(DeviceAttentionProblem d,
                   MakeDeviceAttentionProblem(shape, lengths, grid.pages_in_order ? 0 : 11));
  const size_t workspace_bytes = DecodeWorkspaceBytes(shape, d.problem.lengths, kMaxDecodeSplits);
  ASSIGN_OR_RETURN(DeviceBuffer workspace,
                   DeviceBuffer::Allocate(std::max<size_t>(workspace_bytes, 16)));
  const DecodeOptions options{.workspace = workspace.data(), .workspace_bytes = workspace.bytes()};
  ASSIGN_OR_RETURN(const DecodeTuning tuning,
                   TuneDecodeKernel(d.problem, options, bench.stream(), 3));
  DecodeOptions tuned = tuning.Apply(options);
  DecodeLaunchInfo info;
  auto time_tuned = [&]() {
    return bench.Time(
        [&]() -> absl::Status {
          ASSIGN_OR_RETURN(info, LaunchDecode(d.problem, tuned, bench.stream()));
          return absl::OkStatus();
        },
        2, 10);
  };
  // With the merge launched after the split kernel instead of overlapping its tail.
  std::optional<Timing> merge_after;
  if (tuned.num_splits > 1) {
    tuned.overlap_merge = false;
    ASSIGN_OR_RETURN(merge_after, time_tuned());
    tuned.overlap_merge = true;
  }
  ASSIGN_OR_RETURN(const Timing t, time_tuned());
  const double bytes = AttentionBytes(shape, d.problem.lengths);
  const double gbs = bytes / (t.median * 1e-6) / 1e9;
  // The same K and V through the same page table with nothing done to them, a KV head a block
  // as the decode reads them and each slot row whole: the paged cache's own read rate. Timed
  // before the plain read, whose buffer's allocation and release left the next dozen launches
  // on this cache up to 16% slower on an H200
  // (docs/gpu-runs/attention-decode-read-ceilings-h200.md).
  ASSIGN_OR_RETURN(DeviceBuffer sink, DeviceBuffer::Allocate(16));
  auto time_paged_read = [&](PagedKvReadOrder order) {
    return bench.Time(
        [&] { return LaunchPagedKvRead(d.problem, order, sink.data(), bench.stream()); }, 2, 10);
  };
  ASSIGN_OR_RETURN(const Timing head_read, time_paged_read(PagedKvReadOrder::kPerKvHead));
  ASSIGN_OR_RETURN(const Timing slot_read, time_paged_read(PagedKvReadOrder::kWholeSlots));
  ASSIGN_OR_RETURN(const Timing read, TimeReadOfBytes(bench, static_cast<int64_t>(bytes)));
  const double pct_read = 100.0 * read.median / t.median;
  const std::string after_us = merge_after ? absl::StrFormat("%.1f", merge_after->median) : "-";
  table += absl::StrFormat(
      "| %d | %d | %d | %d | %d | %d | %.1f | %s | %.0f | %.1f%% | %.1f | %.1f%% | %s | %s | "
      "%.1f | %.1f%% | %.1f |\n",
      point.head_dim, point.page_size, point.kv_heads, group, point.batch, point.kv, t.median,
      after_us, gbs, 100.0 * gbs / copy_gbs, read.median, pct_read, tuning.ToString(),
      info.ToString(), head_read.median, 100.0 * head_read.median / t.median, slot_read.median);
  csv += absl::StrFormat("%d,%d,%d,%.2f,%.0f,%.1f,%s,%.2f,%.1f,%d,%s,%d,%d,%d,%.2f,%.2f,%d\n",
                         group, point.batch, point.kv, t.median, gbs, 100.0 * gbs / copy_gbs,
                         DecodeKernelChoiceName(tuning.fastest.kernel), read.median, pct_read,
                         tuning.fastest.num_splits, after_us, point.page_size, point.head_dim,
                         point.kv_heads, head_read.median, slot_read.median,
                         tuning.fastest.halving_splits ? 1 : 0);
  return absl::OkStatus();
}

// Decode over the grid: bf16, q_len 1, 8 KV heads, head_dim 128 and page 16 unless the grid
// names others; per shape the tuned kernel (TuneDecodeKernel, as the daemon runs it) timed over
// L2-flushed launches.
absl::Status RunDecodeGrid(const DecodeGrid& grid, measure::L2FlushMode flush) {
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp props;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device));
  ASSIGN_OR_RETURN(Bench bench, Bench::Create(flush));
  ASSIGN_OR_RETURN(const double copy_gbs, MeasureCopyGbs(bench));
  std::printf("device: %s, %d SMs; copy %.0f GB/s (measured)\n", props.name,
              props.multiProcessorCount, copy_gbs);
  const char* flush_name = flush == measure::L2FlushMode::kRead ? "read" : "write";
  std::string table = absl::StrFormat(
      "\n%s, %d SMs; copy %.0f GB/s (measured); decode, bf16 (%s), "
      "q_len 1; tuned kernel, median of 10 launches, the L2 flushed by a %s before each; "
      "read: one pass over as many bytes as the decode reads, timed the same way; paged read: "
      "only its K and V, through its page table, a KV head a block (as the decode reads them) "
      "or each slot row whole\n\n"
      "| d | page | KV heads | group | batch | kv | us | us, merge after | GB/s | %% copy | "
      "read us | %% read | tuning (kernel, splits:us each) | launch | paged read us, a KV head "
      "a block | %% paged read | paged read us, whole slots |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      props.name, props.multiProcessorCount, copy_gbs,
      grid.pages_in_order ? "pages in order" : "pages shuffled", flush_name);
  std::string csv = absl::StrFormat(
      "copy_gbs,%.1f\nflush,%s\n"
      "group,batch,kv,us,gbs,pct_copy,kernel,read_us,pct_read,splits,us_merge_after,page_size,"
      "head_dim,kv_heads,paged_read_us,slot_read_us,halving_splits\n",
      copy_gbs, flush_name);
  for (const DecodeGridPoint& point : DecodeGridPoints(grid)) {
    const double kv_gib =
        2.0 * point.batch * point.kv * point.kv_heads * point.head_dim * 2 / double(1 << 30);
    if (kv_gib > grid.max_kv_gib) {
      std::printf(
          "  skipped d%d page %d %d KV heads b%d kv=%d: K+V %.1f GiB > --max-kv-gib %.1f\n",
          point.head_dim, point.page_size, point.kv_heads, point.batch, point.kv, kv_gib,
          grid.max_kv_gib);
      continue;
    }
    for (int group : grid.groups) {
      RETURN_IF_ERROR(TimeDecodeGridShape(bench, grid, point, group, copy_gbs, table, csv));
    }
    std::printf("  done d%d page %d %d KV heads b%d kv=%d\n", point.head_dim, point.page_size,
                point.kv_heads, point.batch, point.kv);
    std::fflush(stdout);
  }
  std::fputs(table.c_str(), stdout);
  if (!grid.csv_path.empty()) std::ofstream(grid.csv_path) << csv;
  return absl::OkStatus();
}

// fp8 (e4m3) prefill beside bf16 at the same shapes (GQA 32/8 at head_dim 64 and 128, 16/8 at
// 256; page 16, batch 1): ours in fp8, ours in bf16 (the Hopper kernel both), and cuDNN's bf16
// fused attention on the same paged problem; TFLOP/s against the dense bf16 peak and the dense
// fp8 peak (twice it on Hopper).
absl::Status RunFp8Prefill(const std::string& table_path, measure::L2FlushMode flush) {
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp props;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device));
  const double bf16_peak = gpu::DatasheetBf16DenseTflops(props.name).value_or(0.0);
  const double fp8_peak = 2.0 * bf16_peak;  // Hopper's fp8 tensor rate is twice its bf16 rate
  ASSIGN_OR_RETURN(Bench bench, Bench::Create(flush));
  constexpr int kSamples = 30;
  std::string table = absl::StrFormat(
      "\n%s, %d SMs; dense peaks (spec): bf16 %.1f, fp8 %.1f TFLOP/s\n"
      "GQA 32/8, head_dim 128 (where the shape names no other), page 16, batch 1; median of %d "
      "L2-flushed launches; fp8: Q, K, V "
      "e4m3 with a scale each, O bf16\n\n"
      "| shape | kernel | median us | TFLOP/s | %% bf16 peak | %% fp8 peak | fp8 speed-up | "
      "config |\n|---|---|---|---|---|---|---|---|\n",
      props.name, props.multiProcessorCount, bf16_peak, fp8_peak, kSamples);
  struct Case {
    int len;
    bool causal;
    int head_dim = 128;
  };
  for (const Case& c : {Case{4096, true}, Case{8192, true}, Case{16384, true}, Case{2048, false},
                        Case{4096, false}, Case{16384, false}, Case{4096, true, 64},
                        Case{4096, false, 64}, Case{4096, true, 256}, Case{4096, false, 256}}) {
    AttentionShape shape = ServingShape(c.causal);
    if (c.head_dim == 256) {
      shape.head_dim = 256;
      shape.num_qo_heads = 16;  // a head_dim 256 model's heads (16/8, as Gemma 2 9B)
    }
    shape.head_dim = c.head_dim;
    const std::string shape_name = absl::StrFormat(
        "q=kv=%d %s%s", c.len, c.causal ? "causal" : "full",
        c.head_dim == 128
            ? ""
            : absl::StrFormat(" d%d %d/%d", c.head_dim, shape.num_qo_heads, shape.num_kv_heads));
    const SequenceLengths lengths{.q_lens = {c.len}, .kv_lens = {c.len}};
    ASSIGN_OR_RETURN(DeviceAttentionProblem bf16, MakeDeviceAttentionProblem(shape, lengths, 7));
    shape.dtype = AttentionDtype::kFp8E4m3;
    ASSIGN_OR_RETURN(DeviceAttentionProblem fp8, MakeDeviceAttentionProblem(shape, lengths, 7));
    const double flops = AttentionFlops(shape, bf16.problem.lengths);
    auto time_ours = [&](const DeviceAttentionProblem& d, PrefillLaunchInfo& info) {
      return bench.Time(
          [&]() -> absl::Status {
            ASSIGN_OR_RETURN(info, LaunchPrefill(d.problem, bench.stream(), PrefillVariant::kAuto,
                                                 d.PrefillScratch()));
            return absl::OkStatus();
          },
          2, kSamples);
    };
    PrefillLaunchInfo fp8_info, bf16_info;
    ASSIGN_OR_RETURN(const Timing fp8_time, time_ours(fp8, fp8_info));
    ASSIGN_OR_RETURN(const Timing bf16_time, time_ours(bf16, bf16_info));
    // cuDNN on the same paged problem, and on one whose pages are in order (which cuDNN reads
    // in place, without the page table: its fastest form).
    auto time_cudnn = [&](const DeviceAttentionProblem& d,
                          std::string& config) -> absl::StatusOr<std::optional<Timing>> {
      auto cudnn = CudnnAttention::Create(d.problem, d.layout);
      if (!cudnn.ok()) {
        config = std::string(cudnn.status().message());
        return std::nullopt;
      }
      config = (*cudnn)->info().ToString();
      return bench.Time([&] { return (*cudnn)->Run(bench.stream()); }, 2, kSamples);
    };
    std::string cudnn_config, in_order_config;
    ASSIGN_OR_RETURN(const std::optional<Timing> cudnn_time, time_cudnn(bf16, cudnn_config));
    shape.dtype = AttentionDtype::kBf16;
    ASSIGN_OR_RETURN(DeviceAttentionProblem in_order,
                     MakeDeviceAttentionProblem(shape, lengths, 0));
    ASSIGN_OR_RETURN(const std::optional<Timing> in_order_time,
                     time_cudnn(in_order, in_order_config));
    auto add_row = [&](const char* kernel, std::optional<Timing> t, const std::string& config) {
      if (!t) {
        table +=
            absl::StrFormat("| %s | %s | - | - | - | - | - | %s |\n", shape_name, kernel, config);
        return;
      }
      const double tflops = flops / (t->median * 1e-6) / 1e12;
      table += absl::StrFormat(
          "| %s | %s | %.1f | %.1f | %.1f%% | %.1f%% | %.2fx | %s |\n", shape_name, kernel,
          t->median, tflops, bf16_peak > 0 ? 100.0 * tflops / bf16_peak : 0.0,
          fp8_peak > 0 ? 100.0 * tflops / fp8_peak : 0.0, t->median / fp8_time.median, config);
    };
    add_row("ours fp8", fp8_time, fp8_info.ToString());
    add_row("ours bf16", bf16_time, bf16_info.ToString());
    add_row("cuDNN bf16", cudnn_time, cudnn_config);
    add_row("cuDNN bf16, pages in order", in_order_time, in_order_config);
    std::printf("  done fp8 prefill %s\n", shape_name.c_str());
    std::fflush(stdout);
  }
  table += "\nfp8 speed-up: the row's time over ours fp8 at the same shape.\n";
  std::fputs(table.c_str(), stdout);
  if (!table_path.empty()) std::ofstream(table_path) << table;
  return absl::OkStatus();
}

// One prefill shape of the benchmark: batch 1, q = kv = len, GQA 32/8 (16/8 at head_dim 256).
struct PrefillCase {
  int len;
  bool causal;
  int head_dim = 128;
};

// "4096:full:128,16384:causal:256" -> cases; false on anything else. Lets a profiler run one
// shape (Nsight Compute's launch filters count launches, not shapes).
bool ParsePrefillCases(absl::string_view text, std::vector<PrefillCase>& out) {
  out.clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> fields = absl::StrSplit(part, ':');
    PrefillCase c;
    if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &c.len) || c.len <= 0 ||
        !absl::SimpleAtoi(fields[2], &c.head_dim) ||
        (c.head_dim != 64 && c.head_dim != 128 && c.head_dim != 256) ||
        (fields[1] != "causal" && fields[1] != "full")) {
      return false;
    }
    c.causal = fields[1] == "causal";
    out.push_back(c);
  }
  return !out.empty();
}

absl::Status Run(bool quick, const std::string& only, const std::string& table_path,
                 measure::L2FlushMode flush, const std::vector<PrefillCase>& chosen_prefill) {
  int device = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  cudaDeviceProp props;
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&props, device));
  int driver = 0, runtime = 0;
  CUDA_RETURN_IF_ERROR(cudaDriverGetVersion(&driver));
  CUDA_RETURN_IF_ERROR(cudaRuntimeGetVersion(&runtime));
  const double peak_tflops = gpu::DatasheetBf16DenseTflops(props.name).value_or(0.0);
  ASSIGN_OR_RETURN(Bench bench, Bench::Create(flush));
  const int samples = quick ? 10 : 30;

  ASSIGN_OR_RETURN(const double copy_gbs, MeasureCopyGbs(bench));
  std::printf("device: %s, %d SMs, CC %d.%d, driver %d, runtime %d\n", props.name,
              props.multiProcessorCount, props.major, props.minor, driver, runtime);
  std::printf(
      "ceilings: bf16 dense peak %.1f TFLOP/s (spec), copy %.0f GB/s (measured, "
      "cudaMemcpy D2D 1 GiB, read+write)\n",
      peak_tflops, copy_gbs);
  std::fflush(stdout);

  std::vector<Row> rows;
  // Prefill: batch 1, causal (and 4k and 16k non-causal), GQA 32/8, d128, bf16; at 4k also
  // head_dim 64 (32/8, where the exponentials rival the matrix multiplies) and a head_dim 256
  // model's heads (16/8, as Gemma 2 9B), causal and full, and that model at 16k full (at 16k
  // every KV head's K and V together outgrow the L2).
  std::vector<PrefillCase> prefill_cases = {
      {4096, true},       {8192, true},       {16384, true},     {4096, false},
      {16384, false},     {4096, true, 64},   {4096, false, 64}, {4096, true, 256},
      {4096, false, 256}, {16384, false, 256}};
  if (quick) prefill_cases = {{4096, true}, {4096, true, 256}};
  if (!chosen_prefill.empty()) prefill_cases = chosen_prefill;
  if (only == "decode") prefill_cases.clear();
  for (const PrefillCase& c : prefill_cases) {
    AttentionShape shape = ServingShape(c.causal);
    if (c.head_dim != shape.head_dim) {
      shape.head_dim = c.head_dim;
      if (c.head_dim == 256) shape.num_qo_heads = 16;
    }
    ASSIGN_OR_RETURN(DeviceAttentionProblem d,
                     MakeDeviceAttentionProblem(
                         shape, SequenceLengths{.q_lens = {c.len}, .kv_lens = {c.len}}, 7));
    for (PrefillVariant variant : ConcretePrefillVariants()) {
      if (!PrefillVariantRunsHere(variant) || !PrefillVariantTakesHeadDim(variant, c.head_dim)) {
        continue;
      }
      PrefillLaunchInfo info;
      ASSIGN_OR_RETURN(Timing t, bench.Time(
                                     [&]() -> absl::Status {
                                       ASSIGN_OR_RETURN(
                                           info, LaunchPrefill(d.problem, bench.stream(), variant,
                                                               d.PrefillScratch()));
                                       return absl::OkStatus();
                                     },
                                     2, samples));
      rows.push_back(Row{
          .kind = "prefill",
          .shape = absl::StrFormat("b1 q=kv=%d %s%s", c.len, c.causal ? "causal" : "full",
                                   c.head_dim == 128
                                       ? ""
                                       : absl::StrFormat(" d%d %d/%d", c.head_dim,
                                                         shape.num_qo_heads, shape.num_kv_heads)),
          .config = info.ToString(),
          .timing = t,
          .flops = AttentionFlops(shape, d.problem.lengths),
          .bytes = AttentionBytes(shape, d.problem.lengths)});
    }
    const std::string shape_name = rows.back().shape;
    RETURN_IF_ERROR(AddCudnnRow(bench, d, "prefill", shape_name, 2, samples, rows));
    // The same problem with its pages in order, which cuDNN reads in place (no page table).
    ASSIGN_OR_RETURN(DeviceAttentionProblem in_order,
                     MakeDeviceAttentionProblem(
                         shape, SequenceLengths{.q_lens = {c.len}, .kv_lens = {c.len}}, 0));
    RETURN_IF_ERROR(AddCudnnRow(bench, in_order, "prefill in-order", shape_name, 2, samples, rows));
    std::printf("  done %s %s\n", rows.back().kind.c_str(), rows.back().shape.c_str());
    std::fflush(stdout);
  }

  // Decode: q_len 1, unsplit vs the heuristic's splits. Two probes read the same bytes as
  // b32 x 4k at 32/8: 4/1 heads, where each page's rows of a KV head are contiguous (one KV head
  // per token; at 32/8 a head's 256-byte row pieces lie 2 KB apart), isolates what the paged
  // cache's interleaved heads cost; 16/8 heads halves the arithmetic per byte (2 query heads a
  // KV head instead of 4), isolating what the CUDA-core math costs.
  struct DecodeCase {
    int batch, kv;
    int num_qo_heads = 32, num_kv_heads = 8;
  };
  std::vector<DecodeCase> decode_cases = {
      {32, 4096}, {64, 4096}, {128, 4096}, {256, 4096, 4, 1}, {32, 4096, 16, 8},
      {1, 8192},  {4, 8192},  {8, 8192},   {1, 16384},        {4, 16384},
      {8, 16384}, {1, 32768}, {4, 32768},  {8, 32768}};
  if (quick) decode_cases = {{32, 4096}, {256, 4096, 4, 1}, {32, 4096, 16, 8}, {1, 32768}};
  if (only == "prefill") decode_cases.clear();
  for (const DecodeCase& c : decode_cases) {
    AttentionShape shape = ServingShape(false);
    shape.num_qo_heads = c.num_qo_heads;
    shape.num_kv_heads = c.num_kv_heads;
    const std::string heads_note = c.num_qo_heads == 32 && c.num_kv_heads == 8
                                       ? ""
                                       : absl::StrFormat(" %d/%d", c.num_qo_heads, c.num_kv_heads);
    SequenceLengths lengths{.q_lens = std::vector<int32_t>(c.batch, 1),
                            .kv_lens = std::vector<int32_t>(c.batch, c.kv)};
    ASSIGN_OR_RETURN(DeviceAttentionProblem d, MakeDeviceAttentionProblem(shape, lengths, 11));
    const size_t workspace_bytes = DecodeWorkspaceBytes(shape, d.problem.lengths, kMaxDecodeSplits);
    ASSIGN_OR_RETURN(DeviceBuffer workspace,
                     DeviceBuffer::Allocate(std::max<size_t>(workspace_bytes, 16)));
    // Unsplit and the plan's choice; then the plan's splits with each kernel forced, so that
    // the choice between the plain and the prefetching kernel is checked in the same run.
    struct DecodeVariant {
      const char* kind;
      int splits;
      DecodeKernelChoice kernel;
    };
    for (const DecodeVariant& variant :
         {DecodeVariant{"decode unsplit", 1, DecodeKernelChoice::kAuto},
          DecodeVariant{"decode split", 0, DecodeKernelChoice::kAuto},
          DecodeVariant{"decode split, plain kernel", 0, DecodeKernelChoice::kPlain},
          DecodeVariant{"decode split, prefetching kernel", 0, DecodeKernelChoice::kPrefetch},
          DecodeVariant{"decode split, tensor-core kernel", 0, DecodeKernelChoice::kTensorCores}}) {
      DecodeLaunchInfo info;
      ASSIGN_OR_RETURN(Timing t, bench.Time(
                                     [&]() -> absl::Status {
                                       ASSIGN_OR_RETURN(
                                           info, LaunchDecode(d.problem,
                                                              {.num_splits = variant.splits,
                                                               .workspace = workspace.data(),
                                                               .workspace_bytes = workspace.bytes(),
                                                               .kernel = variant.kernel},
                                                              bench.stream()));
                                       return absl::OkStatus();
                                     },
                                     3, quick ? 20 : 50));
      rows.push_back(Row{.kind = variant.kind,
                         .shape = absl::StrFormat("b%d kv=%d%s", c.batch, c.kv, heads_note),
                         .config = info.ToString(),
                         .timing = t,
                         .flops = AttentionFlops(shape, d.problem.lengths),
                         .bytes = AttentionBytes(shape, d.problem.lengths),
                         .splits = info.plan.num_splits});
    }
    // The kernel a tuning pass picks on this GPU (what the daemon runs), timed like the others.
    {
      const DecodeOptions options{.workspace = workspace.data(),
                                  .workspace_bytes = workspace.bytes()};
      ASSIGN_OR_RETURN(const DecodeTuning tuning,
                       TuneDecodeKernel(d.problem, options, bench.stream()));
      const DecodeOptions tuned = tuning.Apply(options);
      DecodeLaunchInfo info;
      ASSIGN_OR_RETURN(Timing t, bench.Time(
                                     [&]() -> absl::Status {
                                       ASSIGN_OR_RETURN(
                                           info, LaunchDecode(d.problem, tuned, bench.stream()));
                                       return absl::OkStatus();
                                     },
                                     3, quick ? 20 : 50));
      rows.push_back(
          Row{.kind = "decode tuned",
              .shape = rows.back().shape,
              .config = absl::StrCat("tuning: ", tuning.ToString(), "; ", info.ToString()),
              .timing = t,
              .flops = AttentionFlops(shape, d.problem.lengths),
              .bytes = AttentionBytes(shape, d.problem.lengths),
              .splits = info.plan.num_splits});
    }
    const std::string shape_name = rows.back().shape;
    RETURN_IF_ERROR(AddCudnnRow(bench, d, "decode", shape_name, 3, quick ? 20 : 50, rows));
    {
      ASSIGN_OR_RETURN(DeviceAttentionProblem in_order,
                       MakeDeviceAttentionProblem(shape, lengths, 0));
      RETURN_IF_ERROR(
          AddCudnnRow(bench, in_order, "decode in-order", shape_name, 3, quick ? 20 : 50, rows));
    }
    std::printf("  done decode %s\n", rows.back().shape.c_str());
    std::fflush(stdout);
  }

  std::string table = absl::StrFormat(
      "\n%s, %d SMs; bf16 dense peak %.1f TFLOP/s (spec); copy %.0f GB/s (measured)\n"
      "GQA 32/8, head_dim 128 (where the shape names no other), bf16, page 16; median of %d "
      "(decode 50) L2-flushed launches\n\n",
      props.name, props.multiProcessorCount, peak_tflops, copy_gbs, samples);
  table +=
      "| kernel | shape | splits | median us | min us | p90 us | TFLOP/s | % bf16 peak | "
      "GB/s | % copy | config |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Row& r : rows) {
    const double seconds = r.timing.median * 1e-6;
    const double tflops = r.flops / seconds / 1e12;
    const double gbs = r.bytes / seconds / 1e9;
    table += absl::StrFormat(
        "| %s | %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f%% | %.0f | %.1f%% | %s |\n", r.kind,
        r.shape, r.splits > 0 ? absl::StrFormat("%d", r.splits) : "-", r.timing.median,
        r.timing.min, r.timing.p90, tflops, peak_tflops > 0 ? 100.0 * tflops / peak_tflops : 0.0,
        gbs, 100.0 * gbs / copy_gbs, r.config);
  }
  // Split-K gain at small batch.
  table += "\nsplit vs unsplit (decode, same shape): ";
  for (size_t i = 0; i + 1 < rows.size(); ++i) {
    if (rows[i].kind == "decode unsplit" && rows[i + 1].kind == "decode split") {
      table += absl::StrFormat("%s %.2fx; ", rows[i].shape,
                               rows[i].timing.median / rows[i + 1].timing.median);
    }
  }
  table += "\n";
  std::fputs(table.c_str(), stdout);
  if (!table_path.empty()) std::ofstream(table_path) << table;
  return absl::OkStatus();
}

}  // namespace
}  // namespace gpuprof::attention

// "1,2,3" -> {1, 2, 3}; false on anything else.
bool ParseInts(const char* text, std::vector<int>& out) {
  out.clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value <= 0) return false;
    out.push_back(value);
  }
  return !out.empty();
}

int main(int argc, char** argv) {
  bool quick = false, decode_grid = false, fp8_prefill = false;
  gpuprof::attention::DecodeGrid grid;
  gpuprof::measure::L2FlushMode flush = gpuprof::measure::L2FlushMode::kRead;
  std::string table_path, only;
  std::vector<gpuprof::attention::PrefillCase> prefill_shapes;
  for (int i = 1; i < argc; ++i) {
    bool ok = true;
    if (std::strcmp(argv[i], "--decode-grid") == 0) {
      decode_grid = true;
    } else if (std::strcmp(argv[i], "--fp8-prefill") == 0) {
      fp8_prefill = true;
    } else if (std::strncmp(argv[i], "--groups=", 9) == 0) {
      ok = ParseInts(argv[i] + 9, grid.groups);
    } else if (std::strncmp(argv[i], "--batches=", 10) == 0) {
      ok = ParseInts(argv[i] + 10, grid.batches);
    } else if (std::strncmp(argv[i], "--kv-lens=", 10) == 0) {
      ok = ParseInts(argv[i] + 10, grid.kv_lens);
    } else if (std::strncmp(argv[i], "--page-sizes=", 13) == 0) {
      ok = ParseInts(argv[i] + 13, grid.page_sizes);
    } else if (std::strncmp(argv[i], "--head-dims=", 12) == 0) {
      ok = ParseInts(argv[i] + 12, grid.head_dims);
    } else if (std::strncmp(argv[i], "--kv-heads=", 11) == 0) {
      ok = ParseInts(argv[i] + 11, grid.kv_heads);
    } else if (std::strncmp(argv[i], "--max-kv-gib=", 13) == 0) {
      ok = absl::SimpleAtod(argv[i] + 13, &grid.max_kv_gib);
    } else if (std::strcmp(argv[i], "--page-order=in-order") == 0) {
      grid.pages_in_order = true;
    } else if (std::strcmp(argv[i], "--page-order=shuffled") == 0) {
      grid.pages_in_order = false;
    } else if (std::strcmp(argv[i], "--flush=read") == 0) {
      flush = gpuprof::measure::L2FlushMode::kRead;
    } else if (std::strcmp(argv[i], "--flush=write") == 0) {
      flush = gpuprof::measure::L2FlushMode::kWrite;
    } else if (std::strncmp(argv[i], "--csv=", 6) == 0) {
      grid.csv_path = argv[i] + 6;
    } else if (std::strncmp(argv[i], "--prefill-shapes=", 17) == 0) {
      ok = gpuprof::attention::ParsePrefillCases(argv[i] + 17, prefill_shapes);
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--only=prefill") == 0 ||
               std::strcmp(argv[i], "--only=decode") == 0) {
      only = argv[i] + 7;
    } else if (std::strncmp(argv[i], "--table=", 8) == 0) {
      table_path = argv[i] + 8;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(
          stderr,
          "usage: %s [--quick] [--only=prefill|decode] [--table=PATH] "
          "[--flush=read|write]\n"
          "           [--prefill-shapes=LEN:causal|full:64|128|256,...]\n"
          "       %s --decode-grid [--groups=1,2,..] [--batches=..] [--kv-lens=..] "
          "[--page-sizes=..] [--head-dims=..] [--kv-heads=..] [--max-kv-gib=N] "
          "[--page-order=shuffled|in-order] [--csv=PATH] [--flush=read|write]\n"
          "       %s --fp8-prefill [--table=PATH] [--flush=read|write]\n",
          argv[0], argv[0], argv[0]);
      return 2;
    }
  }
  const absl::Status status =
      decode_grid   ? gpuprof::attention::RunDecodeGrid(grid, flush)
      : fp8_prefill ? gpuprof::attention::RunFp8Prefill(table_path, flush)
                    : gpuprof::attention::Run(quick, only, table_path, flush, prefill_shapes);
  if (!status.ok()) {
    gpuprof::LogStatusToStderr(status);
    return 1;
  }
  return 0;
}
