#include "client/render.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/kernel_render.h"
#include "client/table.h"
#include "common/field_text.h"
#include "common/gpu_links.h"
#include "common/terminal_text.h"
#include "workloads/spec_table.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/json_util.h"

namespace gpuprof::client {
namespace {

// Key/value lines with the values aligned: "bandwidth:    2512 GB/s".
class KeyValueLines {
 public:
  void Add(std::string key, std::string value) {
    table_.AddRow({absl::StrCat(key, ":"), std::move(value)});
  }
  // A further line for the previous key.
  void AddMore(std::string value) { table_.AddRow({"", std::move(value)}); }
  std::string Render(absl::string_view indent) const { return table_.Render(indent); }

 private:
  TextTable table_;
};

std::string Percent(double percent) { return absl::StrFormat("%.1f%%", percent); }

std::string Micros(double micros) { return FormatNumber(micros); }

// "NVIDIA H100 80GB HBM3 (GPU 0)", "2x NVIDIA A100 (GPUs 0,1)": identical GPUs grouped.
std::string DescribeGpus(const google::protobuf::RepeatedPtrField<v1::GpuInfo>& gpus) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (const v1::GpuInfo& gpu : gpus) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&gpu](const auto& group) { return group.first == gpu.name(); });
    if (it == groups.end()) {
      groups.push_back({gpu.name(), {}});
      it = groups.end() - 1;
    }
    it->second.push_back(gpu.index());
  }
  std::vector<std::string> parts;
  for (const auto& [name, indices] : groups) {
    const std::string label = name.empty() ? "unnamed GPU" : name;
    parts.push_back(indices.size() == 1 ? absl::StrCat(label, " (GPU ", indices[0], ")")
                                        : absl::StrCat(indices.size(), "x ", label, " (GPUs ",
                                                       absl::StrJoin(indices, ","), ")"));
  }
  return absl::StrJoin(parts, ", ");
}

// "driver 550.54, CUDA 12.4, ..." for the versions that are known.
std::string DescribeVersions(const std::vector<std::pair<absl::string_view, std::string>>& named) {
  std::vector<std::string> parts;
  for (const auto& [name, version] : named) {
    if (!version.empty()) parts.push_back(absl::StrCat(name, " ", version));
  }
  return EscapeForTerminal(absl::StrJoin(parts, ", "));
}

std::string DescribeTiming(const v1::TimingStats& stats) {
  return absl::StrCat(stats.samples(), " samples  min ", Micros(stats.min_us()), "  median ",
                      Micros(stats.median_us()), "  mean ", Micros(stats.mean_us()), "  p90 ",
                      Micros(stats.p90_us()), "  p99 ", Micros(stats.p99_us()), "  max ",
                      Micros(stats.max_us()), " µs  noise ", Percent(100 * stats.relative_noise()));
}

void AddMeasurement(const v1::GpuMeasurement& measurement, KeyValueLines& lines) {
  if (measurement.has_kernel_time()) {
    lines.Add("kernel time", DescribeTiming(measurement.kernel_time()));
  }
  if (measurement.bytes_moved() > 0) {
    lines.Add("bytes moved",
              absl::StrCat(FormatDecimalBytes(measurement.bytes_moved()),
                           " per launch (bytes moved = bytes read + bytes written)"));
  }
  if (measurement.bandwidth_gbps() > 0) {
    std::string copy = measurement.pct_of_measured_copy_bandwidth() > 0
                           ? absl::StrCat(Percent(measurement.pct_of_measured_copy_bandwidth()),
                                          " of measured copy bandwidth")
                           : "copy bandwidth not measured";
    // The copy reads and writes every byte at DRAM's turnaround cost; more is no error.
    if (measurement.pct_of_measured_copy_bandwidth() > 100) {
      absl::StrAppend(&copy, measurement.l2_mode() == v1::MeasurementOptions::L2_MODE_COLD
                                 ? " (over 100%: a kernel that mostly reads outruns a copy)"
                                 : " (over 100%: data kept in L2 between launches)");
    }
    lines.Add("bandwidth", absl::StrCat(FormatNumber(measurement.bandwidth_gbps()), " GB/s  ",
                                        Percent(measurement.pct_of_spec_peak_bandwidth()),
                                        " of spec peak, ", copy));
  }
  if (measurement.flops() > 0) {
    lines.Add("compute",
              absl::StrCat(FormatNumber(measurement.tflops()), " TFLOP/s  ",
                           Percent(measurement.pct_of_spec_peak_flops()), " of spec peak (",
                           absl::StrFormat("%.3g", measurement.flops()), " FLOP per launch)"));
  }
  const bool cold = measurement.l2_mode() == v1::MeasurementOptions::L2_MODE_COLD;
  std::string mode =
      absl::StrCat(cold ? "L2 cold (flushed before every sample)" : "L2 hot",
                   measurement.used_cuda_graph() ? ", CUDA graph launches" : ", stream launches");
  if (measurement.launches_per_sample() > 1) {
    absl::StrAppend(&mode, " (", measurement.launches_per_sample(), " a sample, time per launch)");
  }
  if (!measurement.stop_reason().empty()) {
    absl::StrAppend(&mode, "; stopped: ", measurement.stop_reason());
  }
  lines.Add("timing", mode);
  if (!measurement.throttling().empty()) {
    lines.Add("WARNING", absl::StrCat("clocks throttled while timing: ", measurement.throttling()));
  }
}

// A copy's figures say what the bytes crossed and against which peak: the link's (HBM, PCIe,
// NVLink), and for a device copy the probe's copy bandwidth that other workloads' "% of copy"
// divides by. The generic lines (read + written, % of measured copy) would mislead for host
// and peer copies.
void AddCopyHeadline(const v1::CopyResult& copy, const v1::GpuMeasurement& measurement,
                     KeyValueLines& lines) {
  const bool device = copy.direction() == v1::COPY_DIRECTION_DEVICE_TO_DEVICE;
  if (measurement.has_kernel_time())
    lines.Add("copy time", DescribeTiming(measurement.kernel_time()));
  if (measurement.bytes_moved() > 0) {
    lines.Add("bytes moved",
              absl::StrCat(FormatDecimalBytes(measurement.bytes_moved()),
                           device ? " per copy (read + written in the GPU's memory)"
                                  : " per copy (what crossed the link, every direction)"));
  }
  std::string bandwidth =
      absl::StrCat(FormatNumber(measurement.bandwidth_gbps()), " GB/s  ",
                   Percent(measurement.pct_of_spec_peak_bandwidth()), " of ",
                   copy.link().empty() ? "the link" : EscapeForTerminal(copy.link()),
                   " spec peak (", FormatNumber(copy.link_peak_gbps()), " GB/s)");
  if (copy.probe_copy_bandwidth_gbps() > 0) {
    absl::StrAppend(&bandwidth, ", one GPU at ", Percent(copy.pct_of_probe_copy_bandwidth()),
                    " of the daemon's measured copy (",
                    FormatNumber(copy.probe_copy_bandwidth_gbps()), " GB/s)");
  }
  lines.Add("bandwidth", bandwidth);
  if (!copy.headline().empty()) lines.Add("headline", EscapeForTerminal(copy.headline()));
  if (!measurement.throttling().empty()) {
    lines.Add("WARNING", absl::StrCat("clocks throttled while timing: ", measurement.throttling()));
  }
}

// Every route timed, one a row.
std::string RenderCopyRoutes(const v1::CopyResult& copy, absl::string_view indent) {
  TextTable routes(
      {"route", "link", "GB/s", "% of link peak", "median us", "noise", "peer access"});
  for (size_t column = 2; column < 6; ++column) routes.SetAlign(column, TextTable::Align::kRight);
  const bool peer = copy.direction() == v1::COPY_DIRECTION_PEER;
  for (const v1::CopyPoint& point : copy.points()) {
    const v1::GpuMeasurement& measurement = point.measurement();
    routes.AddRow({EscapeForTerminal(point.route()), EscapeForTerminal(point.link()),
                   FormatNumber(measurement.bandwidth_gbps()),
                   Percent(measurement.pct_of_spec_peak_bandwidth()),
                   FormatNumber(measurement.kernel_time().median_us()),
                   Percent(100 * measurement.kernel_time().relative_noise()),
                   !peer                 ? "-"
                   : point.peer_access() ? "yes"
                                         : "no (staged through the host)"});
  }
  return routes.Render(indent);
}

void AddVerification(const v1::Verification& verification, KeyValueLines& lines) {
  std::string text;
  if (!verification.checked()) {
    text = "not checked";
  } else {
    text = absl::StrCat(verification.passed() ? "PASSED" : "FAILED",
                        verification.method().empty() ? "" : " against ", verification.method(),
                        ": ", verification.mismatches(), " mismatches, max abs error ",
                        absl::StrFormat("%g", verification.max_abs_error()));
  }
  if (!verification.message().empty()) absl::StrAppend(&text, " (", verification.message(), ")");
  lines.Add("verification", text);
}

void AddJit(const v1::JitInfo& jit, KeyValueLines& lines) {
  std::vector<std::string> parts = {absl::StrCat(jit.cache_hit() ? "cache hit" : "cache miss",
                                                 ", compile ", FormatNumber(jit.compile_ms()),
                                                 " ms")};
  if (!jit.kernel().empty()) parts.push_back(absl::StrCat("kernel ", jit.kernel()));
  if (!jit.cache_key().empty()) parts.push_back(absl::StrCat("key ", jit.cache_key()));
  lines.Add("jit", absl::StrJoin(parts, ", "));
}

std::string RenderOperations(const google::protobuf::RepeatedPtrField<v1::OperationStats>& ops,
                             absl::string_view indent) {
  TextTable table({"OPERATION", "COUNT", "OPS/S", "NOISE", "MIN µs", "MEDIAN µs", "P90 µs",
                   "P99 µs", "MAX µs"});
  for (size_t column = 1; column < 9; ++column) table.SetAlign(column, TextTable::Align::kRight);
  for (const v1::OperationStats& op : ops) {
    const v1::TimingStats& latency = op.latency();
    // Unset noise is unknown (a single pass, or a result from before passes), never 0%.
    const std::string noise = op.has_ops_per_second_relative_noise()
                                  ? Percent(100 * op.ops_per_second_relative_noise())
                                  : "unknown";
    table.AddRow({op.operation(), absl::StrCat(op.count()), FormatNumber(op.ops_per_second()),
                  noise, Micros(latency.min_us()), Micros(latency.median_us()),
                  Micros(latency.p90_us()), Micros(latency.p99_us()), Micros(latency.max_us())});
  }
  return table.Render(indent);
}

void AddRadix(const v1::RadixResult& radix, KeyValueLines& lines) {
  lines.Add("requests", absl::StrCat(radix.requests(), " requests, ", radix.request_tokens(),
                                     " tokens, ", radix.matched_tokens(), " matched"));
  lines.Add("hit rate", Percent(100 * radix.hit_rate()));
  lines.Add("cache", absl::StrCat(radix.inserts(), " inserts, ", radix.evictions(), " evictions (",
                                  radix.evicted_tokens(), " tokens), tree ", radix.tree_nodes(),
                                  " nodes / ", radix.tree_tokens(), " tokens"));
  lines.Add("token compare", absl::StrCat(FormatNumber(radix.compare_gbps()), " GB/s (",
                                          FormatDecimalBytes(radix.compare_bytes()), " compared)"));
  if (radix.online_cpus() > 0) {
    lines.Add("host CPU", absl::StrFormat("other processes took %.2f of %d CPUs while it ran",
                                          radix.other_cpus(), radix.online_cpus()));
  }
  if (radix.wall_seconds() > 0) {
    lines.Add("wall time", FormatElapsed(absl::Seconds(radix.wall_seconds())));
  }
  if (!radix.operations().empty() && radix.operations(0).passes() > 0) {
    lines.Add("passes", absl::StrCat(radix.operations(0).passes(),
                                     " timed; OPS/S is their median, NOISE their stddev/mean"));
  }
}

std::string RenderTopology(const v1::ListGpusResponse& response) {
  std::vector<std::string> header = {""};
  for (const v1::GpuInfo& gpu : response.gpus()) header.push_back(absl::StrCat("GPU", gpu.index()));
  header.push_back("NUMA");
  std::map<std::pair<int, int>, std::string> labels;
  for (const v1::GpuLink& link : response.links()) {
    labels[{link.gpu_a(), link.gpu_b()}] = LinkLabel(link);
  }
  TextTable table(std::move(header));
  for (const v1::GpuInfo& row_gpu : response.gpus()) {
    std::vector<std::string> row = {absl::StrCat("GPU", row_gpu.index())};
    for (const v1::GpuInfo& column_gpu : response.gpus()) {
      const auto it = labels.find({row_gpu.index(), column_gpu.index()});
      row.push_back(row_gpu.index() == column_gpu.index() ? "X"
                    : it == labels.end()                  ? "?"
                                                          : it->second);
    }
    row.push_back(row_gpu.numa_node() < 0 ? "-" : absl::StrCat(row_gpu.numa_node()));
    table.AddRow(std::move(row));
  }
  return absl::StrCat(
      table.Render(),
      "  X = self, NV# = # NVLinks, PIX = through PCIe switches, PHB = through the CPU's host "
      "bridge,\n  SYS = across NUMA nodes, ? = unknown\n");
}

// The worker's last stderr lines, marked off from our own output. Each line escaped: a workload
// prints what its request told it to, and a carriage return could overwrite the "  | " margin.
std::string RenderStderrTail(absl::string_view tail) {
  std::string out = "worker stderr (last lines):\n";
  for (absl::string_view line : absl::StrSplit(absl::StripTrailingAsciiWhitespace(tail), '\n')) {
    absl::StrAppend(&out, "  | ", EscapeForTerminal(line), "\n");
  }
  return out;
}

}  // namespace

std::string StateName(v1::ExperimentState state) {
  return EnumShortName(v1::ExperimentState_descriptor(), state);
}

std::string WorkloadName(v1::Workload workload) {
  return EnumShortName(v1::Workload_descriptor(), workload);
}

std::string FormatGpuIds(const google::protobuf::RepeatedField<int32_t>& gpu_ids) {
  return gpu_ids.empty() ? "-" : absl::StrJoin(gpu_ids, ",");
}

std::string FormatElapsed(absl::Duration duration) {
  duration = std::max(duration, absl::ZeroDuration());
  if (duration < absl::Seconds(1)) {
    return absl::StrCat(absl::ToInt64Milliseconds(duration), "ms");
  }
  if (duration < absl::Minutes(1)) {
    return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(duration));
  }
  const int64_t seconds = absl::ToInt64Seconds(duration);
  if (duration < absl::Hours(1)) return absl::StrFormat("%dm%02ds", seconds / 60, seconds % 60);
  return absl::StrFormat("%dh%02dm", seconds / 3600, (seconds / 60) % 60);
}

std::string FormatNumber(double value) {
  const double magnitude = std::fabs(value);
  if (magnitude < 10) return absl::StrFormat("%.2f", value);
  if (magnitude < 1000) return absl::StrFormat("%.1f", value);
  return absl::StrFormat("%.0f", value);
}

std::string FormatLocalTime(absl::Time time, absl::TimeZone time_zone) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", time, time_zone);
}

absl::Time ToTime(const google::protobuf::Timestamp& timestamp) {
  return absl::FromUnixSeconds(timestamp.seconds()) + absl::Nanoseconds(timestamp.nanos());
}

absl::Duration ToDuration(const google::protobuf::Duration& duration) {
  return absl::Seconds(duration.seconds()) + absl::Nanoseconds(duration.nanos());
}

std::string CompactText(const google::protobuf::Message& message) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintToString(message, &text);
  return std::string(absl::StripTrailingAsciiWhitespace(text));
}

std::string JsonLine(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = false;
  std::string json;
  const auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    // Only invalid messages (bad UTF-8, say) fail; keep the output a valid JSON line.
    return absl::StrCat("{\"error\":\"cannot convert ", message.GetTypeName(), " to JSON\"}");
  }
  // Protobuf escapes C0, DEL and C1 in strings but leaves the bidi isolates (U+2066-U+2069) raw.
  return EscapeUnsafeInJson(json);
}

namespace {

// "ok", "UNHEALTHY" or "-" (not watched: no NVML), with the last Xid when there was one.
std::string HealthWord(const v1::GpuInfo& gpu) {
  std::string word = gpu.health() == v1::GPU_HEALTH_UNHEALTHY ? "UNHEALTHY"
                     : gpu.health() == v1::GPU_HEALTH_HEALTHY ? "ok"
                                                              : "-";
  if (gpu.last_xid() != 0) absl::StrAppend(&word, " (Xid ", gpu.last_xid(), ")");
  return word;
}

}  // namespace

std::string RenderGpus(const v1::ListGpusResponse& response) {
  const v1::HostInfo& host = response.host();
  std::string out = absl::StrCat(
      "host ", host.hostname().empty() ? "(unnamed)" : EscapeForTerminal(host.hostname()), ": ",
      DescribeVersions({{"driver", host.driver_version()},
                        {"CUDA driver API", host.cuda_driver_version()},
                        {"CUDA runtime", host.cuda_runtime_version()},
                        {"NCCL", host.nccl_version()},
                        {"CUPTI", host.cupti_version()},
                        {"gpuprof", host.gpuprof_version()}}));
  if (host.numa_nodes() > 0) {
    absl::StrAppend(&out, ", ", host.numa_nodes(), " NUMA node", host.numa_nodes() == 1 ? "" : "s");
  }
  absl::StrAppend(&out, "\n");

  if (!response.gpus().empty()) {
    TextTable table({"GPU", "NAME", "MEMORY GiB", "SMS", "CC", "PEAK GB/s", "PEAK BF16 TFLOP/s",
                     "COPY GB/s", "NUMA", "HEALTH", "LEASE"});
    for (size_t column : {0, 2, 3, 5, 6, 7, 8}) table.SetAlign(column, TextTable::Align::kRight);
    for (const v1::GpuInfo& gpu : response.gpus()) {
      std::string lease = "free";
      if (!gpu.leased_to_experiment().empty()) {
        lease = gpu.leased_to_user().empty()
                    ? gpu.leased_to_experiment()
                    : absl::StrCat(gpu.leased_to_experiment(), " (", gpu.leased_to_user(), ")");
      }
      table.AddRow({
          absl::StrCat(gpu.index()),
          gpu.name(),
          absl::StrFormat("%.1f", static_cast<double>(gpu.total_memory_bytes()) / (1 << 30)),
          absl::StrCat(gpu.sm_count()),
          absl::StrCat(gpu.compute_capability_major(), ".", gpu.compute_capability_minor()),
          absl::StrFormat("%.0f", gpu.spec_peak_bandwidth_gbps()),
          absl::StrFormat("%.0f", gpu.spec_peak_bf16_tflops()),
          gpu.measured_copy_bandwidth_gbps() > 0
              ? absl::StrFormat("%.0f", gpu.measured_copy_bandwidth_gbps())
              : "-",
          gpu.numa_node() < 0 ? "-" : absl::StrCat(gpu.numa_node()),
          HealthWord(gpu),
          std::move(lease),
      });
    }
    absl::StrAppend(&out, "\n", table.Render());
    // Why each drained GPU is drained, under the table (a reason is too long for a column).
    for (const v1::GpuInfo& gpu : response.gpus()) {
      if (gpu.health() != v1::GPU_HEALTH_UNHEALTHY) continue;
      absl::StrAppend(&out, "GPU ", gpu.index(),
                      " drained: ", EscapeForTerminal(gpu.health_reason()),
                      "; an admin returns it with gpuprof gpu clear ", gpu.index(), "\n");
    }
  }
  if (response.gpus().size() > 1) {
    absl::StrAppend(&out, "\ntopology:\n", RenderTopology(response));
  }
  if (!response.probe_error().empty()) {
    absl::StrAppend(&out, "\nno GPUs: ", EscapeForTerminal(response.probe_error()), "\n");
  }
  KeyValueLines lines;
  lines.Add("workloads", response.supported_workloads().empty()
                             ? "none"
                             : absl::StrJoin(response.supported_workloads(), ", "));
  if (!host.jit_cache_dir().empty()) {
    lines.Add("jit cache",
              absl::StrCat(host.jit_cache_dir(), " (", host.jit_cache_entries(), " entries, ",
                           FormatDecimalBytes(host.jit_cache_bytes()), ")"));
  }
  absl::StrAppend(&out, "\n", lines.Render(""));
  return out;
}

std::string RenderResult(const v1::ExperimentResult& result, absl::string_view indent) {
  KeyValueLines lines;
  if (result.has_provenance()) {
    const v1::Provenance& provenance = result.provenance();
    const std::string host = provenance.hostname().empty() ? "unnamed host" : provenance.hostname();
    lines.Add("ran on", provenance.gpus().empty()
                            ? absl::StrCat(host, " (CPU only)")
                            : absl::StrCat(DescribeGpus(provenance.gpus()), " on ", host));
    lines.Add("versions", DescribeVersions({{"driver", provenance.driver_version()},
                                            {"CUDA", provenance.cuda_runtime_version()},
                                            {"NCCL", provenance.nccl_version()},
                                            {"CUPTI", provenance.cupti_version()},
                                            {"gpuprof", provenance.gpuprof_version()}}));
    if (provenance.worker_pid() > 0) {
      lines.Add("worker", absl::StrCat("pid ", provenance.worker_pid(),
                                       provenance.worker_reused() ? " (reused)" : " (new)"));
    }
  }
  if (result.has_copy()) {
    AddCopyHeadline(result.copy(), result.measurement(), lines);
  } else if (result.has_measurement()) {
    AddMeasurement(result.measurement(), lines);
  }
  if (result.has_verification()) AddVerification(result.verification(), lines);
  if (result.has_custom_kernel()) lines.Add("kernel", KernelSummary(result.custom_kernel()));
  if (result.has_jit()) AddJit(result.jit(), lines);
  if (!result.kernel_config().empty()) {
    // The map's order is unspecified; sorted keys keep the output stable.
    std::map<std::string, std::string> sorted(result.kernel_config().begin(),
                                              result.kernel_config().end());
    std::vector<std::string> pairs;
    for (const auto& [key, value] : sorted) pairs.push_back(absl::StrCat(key, "=", value));
    lines.Add("kernel config", absl::StrJoin(pairs, " "));
  }
  if (result.has_radix()) AddRadix(result.radix(), lines);
  if (result.has_collective()) {
    const v1::CollectiveResult& collective = result.collective();
    lines.Add(
        "collective",
        absl::StrCat(collective.ranks(), " ranks",
                     collective.path().empty() ? "" : absl::StrCat(" (", collective.path(), ")"),
                     collective.eager() ? ", eager" : "", ", algbw ",
                     FormatNumber(collective.algbw_gbps()), " GB/s, busbw ",
                     FormatNumber(collective.busbw_gbps()), " GB/s, ",
                     collective.correct() ? "data correct" : "DATA INCORRECT"));
    if (collective.small_message_latency_us() > 0) {
      lines.Add("latency", absl::StrCat(FormatNumber(collective.small_message_latency_us()),
                                        " us at the smallest size"));
    }
  }
  for (int i = 0; i < result.not_collected_size(); ++i) {
    if (i == 0) {
      lines.Add("not collected", result.not_collected(i));
    } else {
      lines.AddMore(result.not_collected(i));
    }
  }
  if (result.dropped_activity_records() > 0) {
    lines.Add("dropped", absl::StrCat(result.dropped_activity_records(),
                                      " activity records (CUPTI buffers were full)"));
  }
  if (result.has_capture_report()) {
    const v1::CaptureReport& report = result.capture_report();
    lines.Add("nsight report",
              absl::StrCat(report.file_name(), ", ", FormatDecimalBytes(report.size_bytes()),
                           report.tool() == v1::NsightCapture::TOOL_NSYS ? ", nsys" : ", ncu",
                           report.tool_version().empty() ? "" : " ", report.tool_version(),
                           "; fetch it with gpuprof report ID (docs/nsight.md)"));
  }
  std::string out = lines.Render(indent);
  // A collective's sweep: the whole curve, one size a row, as nccl-tests prints it.
  if (result.has_collective() && result.collective().points_size() > 1) {
    TextTable sweep(
        {"size", "time us", "algbw GB/s", "busbw GB/s", "slowest rank", "nccl algo/proto", "data"});
    for (size_t column = 0; column < 4; ++column) sweep.SetAlign(column, TextTable::Align::kRight);
    for (const v1::CollectivePoint& point : result.collective().points()) {
      int slowest = 0;
      for (int rank = 0; rank < point.rank_median_us_size(); ++rank) {
        if (point.rank_median_us(rank) > point.rank_median_us(slowest)) slowest = rank;
      }
      sweep.AddRow({FormatDecimalBytes(point.bytes()), FormatNumber(point.time().median_us()),
                    FormatNumber(point.algbw_gbps()), FormatNumber(point.busbw_gbps()),
                    absl::StrCat(slowest),
                    point.nccl_algorithm().empty()
                        ? "-"
                        : absl::StrCat(point.nccl_algorithm(), "/", point.nccl_protocol()),
                    point.correct() ? "exact" : "WRONG"});
    }
    absl::StrAppend(&out, sweep.Render(indent));
  }
  if (result.has_copy() && result.copy().points_size() > 1) {
    absl::StrAppend(&out, RenderCopyRoutes(result.copy(), indent));
  }
  if (result.has_radix() && !result.radix().operations().empty()) {
    absl::StrAppend(&out, indent, "operations:\n",
                    RenderOperations(result.radix().operations(), absl::StrCat(indent, "  ")));
  }
  return out;
}

std::string FormatHeadline(const workloads::Headline& headline) {
  const std::string hint =
      headline.pct_of_bound > 0
          ? absl::StrCat(" (", Percent(headline.pct_of_bound), " of ",
                         EscapeForTerminal(headline.bound_reference), ")")
          : "";
  switch (headline.bound) {
    case workloads::HeadlineBound::kBandwidth:
      if (headline.name == "busbw" || headline.name == "algbw") {
        return absl::StrCat(headline.name, " ", FormatNumber(headline.value), " ", headline.unit);
      }
      return absl::StrCat(FormatNumber(headline.value), " ", headline.unit, hint);
    case workloads::HeadlineBound::kCompute:
      return absl::StrCat(FormatNumber(headline.value), " ", headline.unit, hint);
    case workloads::HeadlineBound::kLatency:
      return absl::StrCat(FormatNumber(headline.value), " µs");
    case workloads::HeadlineBound::kCpuRate:
      // A rate on a shared CPU is only as good as its noise: always said, "unknown" included.
      // "match_ops" -> "1454616 match op/s".
      return absl::StrCat(
          FormatNumber(headline.value), " ", absl::StripSuffix(headline.name, "_ops"), " ",
          headline.unit, " (noise ",
          headline.relative_noise.has_value() ? Percent(100 * *headline.relative_noise)
                                              : std::string("unknown"),
          ")");
  }
  return "";
}

std::string HeadlineDetails(const workloads::Headline& headline) {
  std::string text =
      absl::StrCat(FormatHeadline(headline), ", ", workloads::HeadlineBoundName(headline.bound));
  if (headline.bound != workloads::HeadlineBound::kCpuRate) {
    absl::StrAppend(&text, ", noise ",
                    headline.relative_noise.has_value() ? Percent(100 * *headline.relative_noise)
                                                        : std::string("unknown"));
  }
  if (headline.samples > 0) {
    absl::StrAppend(&text, " over ", headline.samples,
                    headline.bound == workloads::HeadlineBound::kCpuRate ? " timed passes"
                                                                          : " samples");
  }
  if (!headline.noise_unknown_because.empty()) {
    absl::StrAppend(&text, " (noise unknown: ", headline.noise_unknown_because, ")");
  }
  return text;
}

std::string HeadlineFigure(const v1::Experiment& experiment) {
  const std::optional<workloads::Headline> headline = workloads::HeadlineOf(experiment);
  return headline.has_value() ? FormatHeadline(*headline) : "";
}

std::string RenderExperimentTable(
    const google::protobuf::RepeatedPtrField<v1::Experiment>& experiments, absl::Time now,
    absl::TimeZone time_zone) {
  TextTable table({"ID", "USER", "WORKLOAD", "STATE", "GPUS", "CREATED", "RUN TIME", "RESULT"});
  table.SetAlign(6, TextTable::Align::kRight);
  for (const v1::Experiment& experiment : experiments) {
    std::string state = StateName(experiment.state());
    if (experiment.state() == v1::QUEUED && experiment.queue_position() > 0) {
      absl::StrAppend(&state, " (", experiment.queue_position(), ")");
    }
    std::string run_time = "-";
    if (experiment.has_started()) {
      const absl::Time end = experiment.has_finished() ? ToTime(experiment.finished()) : now;
      run_time = FormatElapsed(end - ToTime(experiment.started()));
    }
    table.AddRow({experiment.id(), experiment.user(), WorkloadName(experiment.workload()),
                  std::move(state), FormatGpuIds(experiment.gpu_ids()),
                  experiment.has_created()
                      ? absl::FormatTime("%Y-%m-%d %H:%M", ToTime(experiment.created()), time_zone)
                      : "-",
                  std::move(run_time), HeadlineFigure(experiment)});
  }
  return table.Render();
}

std::string RenderExperiment(const v1::Experiment& experiment, absl::Time now,
                             absl::TimeZone time_zone) {
  KeyValueLines lines;
  lines.Add("experiment", experiment.id());
  lines.Add("workload", WorkloadName(experiment.workload()));
  lines.Add("user", experiment.user().empty() ? "-" : experiment.user());
  std::string state = StateName(experiment.state());
  if (experiment.state() == v1::QUEUED && experiment.queue_position() > 0) {
    absl::StrAppend(&state, " (position ", experiment.queue_position(), ")");
  }
  lines.Add("state", state);
  if (!experiment.reason().empty()) lines.Add("reason", experiment.reason());
  const v1::ExperimentRequest& request = experiment.request();
  if (!request.description().empty()) lines.Add("description", request.description());
  if (!request.labels().empty()) {
    std::map<std::string, std::string> sorted(request.labels().begin(), request.labels().end());
    std::vector<std::string> pairs;
    for (const auto& [key, value] : sorted) pairs.push_back(absl::StrCat(key, "=", value));
    lines.Add("labels", absl::StrJoin(pairs, ", "));
  }
  // Description and labels are shown above; the rest of the request as text.
  v1::ExperimentRequest shown = request;
  shown.clear_description();
  shown.clear_labels();
  shown.clear_user();
  // A custom kernel's source is for `get --source`; the kernel block below describes it.
  if (shown.has_custom_kernel()) shown.mutable_custom_kernel()->clear_source();
  const std::string request_text = CompactText(shown);
  lines.Add("request", request_text.empty() ? "-" : request_text);
  if (experiment.has_created()) {
    lines.Add("created", FormatLocalTime(ToTime(experiment.created()), time_zone));
  }
  if (experiment.has_started()) {
    std::string started = FormatLocalTime(ToTime(experiment.started()), time_zone);
    if (experiment.has_created()) {
      absl::StrAppend(&started, " (queued ",
                      FormatElapsed(ToTime(experiment.started()) - ToTime(experiment.created())),
                      ")");
    }
    lines.Add("started", started);
    if (experiment.has_finished()) {
      lines.Add(
          "finished",
          absl::StrCat(FormatLocalTime(ToTime(experiment.finished()), time_zone), " (ran ",
                       FormatElapsed(ToTime(experiment.finished()) - ToTime(experiment.started())),
                       ")"));
    } else if (!IsTerminalState(experiment.state())) {
      lines.Add("running for", FormatElapsed(now - ToTime(experiment.started())));
    }
  } else if (experiment.has_finished()) {
    lines.Add("finished", FormatLocalTime(ToTime(experiment.finished()), time_zone));
  }
  lines.Add("gpus", FormatGpuIds(experiment.gpu_ids()));
  if (const auto headline = workloads::HeadlineOf(experiment); headline.has_value()) {
    lines.Add("headline", HeadlineDetails(*headline));
  }
  std::string out = lines.Render("");
  if (!experiment.worker_stderr_tail().empty()) {
    absl::StrAppend(&out, RenderStderrTail(experiment.worker_stderr_tail()));
  }
  absl::StrAppend(&out, RenderKernelBlock(experiment));
  if (experiment.has_result()) {
    absl::StrAppend(&out, "result:\n", RenderResult(experiment.result(), "  "));
  }
  return out;
}

std::string RenderFailure(v1::ExperimentState state, absl::string_view reason,
                          absl::string_view worker_stderr_tail) {
  std::string out =
      absl::StrCat(StateName(state), reason.empty() ? "" : ": ", EscapeForTerminal(reason), "\n");
  if (!worker_stderr_tail.empty()) {
    absl::StrAppend(&out, RenderStderrTail(worker_stderr_tail));
  }
  return out;
}

std::string RenderDamagedRows(const google::protobuf::RepeatedPtrField<v1::DamagedRow>& rows) {
  std::string out;
  for (const v1::DamagedRow& row : rows) {
    absl::StrAppend(&out, "gpuprof: ", EscapeForTerminal(row.id()),
                    " is not listed: its row in the daemon's database is damaged (",
                    EscapeForTerminal(row.error()),
                    "); the daemon's admin can list every damaged row with `gpuprofd --check-db` "
                    "and restore the database from a backup\n");
  }
  return out;
}

}  // namespace gpuprof::client
