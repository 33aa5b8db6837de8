// Sweeps the index and store workloads through the worker's own runners (the figures are
// exactly what the daemon would report) and writes one JSON line per configuration. The
// PyTorch peers run beside it in torch_copy_peers.py; run_copy_benchmarks.sh runs both and prints
// one table.
//
//   copy_workloads_benchmark --out=ours.jsonl [--quick] [--tokens=16384,65536]
//   copy_workloads_benchmark --tune [--tune-hidden=1536,2048] [--tune-tokens=4096]
//       [--tune-threads=0,128,512] [--tune-splits=0,1,2,-1] [--tune-cold=0] [--tune-vocab=128256]
// A negative split -k gives each lane k 16-byte vectors of a bf16 row (skipped where it does
// not divide).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "common/data_types.h"
#include "gpu/gpu_probe.h"
#include "google/protobuf/util/time_util.h"
#include "measure/copy_bandwidth.h"
#include "workloads/index/index_runner.h"
#include "workloads/store/store_runner.h"

namespace gpuprof {
namespace {

namespace api = ::gpuprof::v1;
using ::google::protobuf::util::TimeUtil;

// Launches per sample in graph mode; torch_copy_peers.py captures the same number.
constexpr int kGraphLaunches = 20;
constexpr int64_t kVocabSize = 32000;

api::MeasurementOptions Options(bool graph, bool cold = false) {
  api::MeasurementOptions options;
  options.set_warmup_iterations(5);
  options.set_min_iterations(10);
  options.set_max_iterations(200);
  *options.mutable_time_budget() = TimeUtil::MillisecondsToDuration(300);
  options.set_noise_target(0.01);
  options.set_l2_mode(cold ? api::MeasurementOptions::L2_MODE_COLD
                           : api::MeasurementOptions::L2_MODE_HOT);
  options.set_graph_launches_per_sample(graph ? kGraphLaunches : 0);
  return options;
}


std::string JsonLine(const std::string& fields, const api::GpuInfo& gpu,
                     const absl::StatusOr<api::ExperimentResult>& result, bool graph) {
  std::string line = absl::StrCat("{", fields, ",\"device\":\"", gpu.name(),
                                  "\",\"copy_gbps\":", gpu.measured_copy_bandwidth_gbps(),
                                  ",\"spec_gbps\":", gpu.spec_peak_bandwidth_gbps(), ",\"mode\":\"",
                                  graph ? "graph" : "single", "\"");
  if (result.ok()) {
    absl::StrAppend(
        &line, ",\"l2\":\"",
        result->measurement().l2_mode() == api::MeasurementOptions::L2_MODE_COLD ? "cold" : "hot",
        "\"");
  }
  if (!result.ok()) {
    std::string error(result.status().message());
    for (char& c : error) {
      if (c == '"' || c == '\\' || c == '\n') c = ' ';
    }
    return absl::StrCat(line, ",\"error\":\"", error, "\"}");
  }
  const api::GpuMeasurement& m = result->measurement();
  const auto& config = result->kernel_config();
  auto config_value = [&](const char* key) {
    const auto it = config.find(key);
    return it == config.end() ? std::string() : it->second;
  };
  return absl::StrCat(
      line,
      absl::StrFormat(",\"median_us\":%.4f,\"min_us\":%.4f,\"noise\":%.4f,\"samples\":%d",
                      m.kernel_time().median_us(), m.kernel_time().min_us(),
                      m.kernel_time().relative_noise(), m.kernel_time().samples()),
      absl::StrFormat(",\"bytes\":%d,\"gbps\":%.2f,\"pct_copy\":%.2f,\"pct_spec\":%.2f",
                      m.bytes_moved(), m.bandwidth_gbps(), m.pct_of_measured_copy_bandwidth(),
                      m.pct_of_spec_peak_bandwidth()),
      ",\"verified\":", result->verification().passed() ? "true" : "false",
      ",\"jit_hit\":", result->jit().cache_hit() ? "true" : "false",
      absl::StrFormat(",\"compile_ms\":%.1f", result->jit().compile_ms()),
      ",\"splits\":", config_value("num_splits"),
      ",\"vector_bytes\":", config_value("vector_bytes"), ",\"threads\":", config_value("threads"),
      ",\"registers\":\"", config_value("registers_per_thread"), "\",\"throttling\":\"",
      m.throttling(), "\"}");
}

worker_protocol::ExperimentAssignment MakeRun(const api::ExperimentRequest& request,
                                  const api::ListGpusResponse& inventory) {
  worker_protocol::ExperimentAssignment run;
  run.set_experiment_id("benchmark");
  *run.mutable_request() = request;
  *run.add_gpus() = inventory.gpus(0);
  *run.mutable_host() = inventory.host();
  return run;
}

// The workload's runner, as the worker's dispatcher calls it, without tracing.
absl::StatusOr<api::ExperimentResult> RunWorkload(workloads::RunWorkloadFunction run,
                                                  const api::ExperimentRequest& request,
                                                  const api::ListGpusResponse& inventory,
                                                  const measure::PhaseProgress& progress) {
  const worker_protocol::ExperimentAssignment assignment = MakeRun(request, inventory);
  return run(workloads::RunContext{.assignment = assignment, .progress = progress});
}

absl::StatusOr<api::ExperimentResult> RunIndex(const api::ExperimentRequest& request,
                                               const api::ListGpusResponse& inventory,
                                               const measure::PhaseProgress& progress) {
  return RunWorkload(&workloads::RunIndexWorkload, request, inventory, progress);
}

absl::StatusOr<api::ExperimentResult> RunStore(const api::ExperimentRequest& request,
                                               const api::ListGpusResponse& inventory,
                                               const measure::PhaseProgress& progress) {
  return RunWorkload(&workloads::RunStoreWorkload, request, inventory, progress);
}

int Main(int argc, char** argv) {
  std::string out_path = "copy_workloads_benchmark.jsonl";
  bool quick = false;
  bool tune = false;
  std::vector<int64_t> tokens_only;
  // --tune: the shapes and launch choices it tries (0 = the automatic choice).
  std::vector<int64_t> tune_hidden = {4096};
  std::vector<int64_t> tune_tokens = {16384, 65536};
  std::vector<int64_t> tune_threads = {64, 128, 256, 512};
  std::vector<int64_t> tune_splits = {1, 2, 4};
  std::vector<int64_t> tune_cold = {0, 1};
  int64_t tune_vocab = kVocabSize;
  auto parse_list = [&](const char* arg, const char* flag, std::vector<int64_t>& values) {
    const size_t length = std::strlen(flag);
    if (std::strncmp(arg, flag, length) != 0) return true;
    values.clear();
    for (absl::string_view item : absl::StrSplit(arg + length, ',')) {
      int64_t value = 0;
      const bool negative_allowed = std::strcmp(flag, "--tune-splits=") == 0;
      if (!absl::SimpleAtoi(item, &value) || (value < 0 && !negative_allowed)) {
        std::fprintf(stderr, "%s: bad value '%s'; want non-negative integers\n", flag,
                     std::string(item).c_str());
        return false;
      }
      values.push_back(value);
    }
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    if (!parse_list(argv[i], "--tune-hidden=", tune_hidden) ||
        !parse_list(argv[i], "--tune-tokens=", tune_tokens) ||
        !parse_list(argv[i], "--tune-threads=", tune_threads) ||
        !parse_list(argv[i], "--tune-splits=", tune_splits) ||
        !parse_list(argv[i], "--tune-cold=", tune_cold)) {
      return 1;
    }
    if (std::strncmp(argv[i], "--tune-vocab=", 13) == 0 &&
        (!absl::SimpleAtoi(argv[i] + 13, &tune_vocab) || tune_vocab < 1)) {
      std::fprintf(stderr, "--tune-vocab: bad value %s\n", argv[i] + 13);
      return 1;
    }
    // Only these token counts in the sweep (e.g. the >= 16k targets without the small sizes).
    if (std::strncmp(argv[i], "--tokens=", 9) == 0) {
      for (absl::string_view item : absl::StrSplit(argv[i] + 9, ',')) {
        int64_t tokens = 0;
        if (!absl::SimpleAtoi(item, &tokens) || tokens < 1) {
          std::fprintf(stderr, "--tokens: bad count in %s\n", argv[i]);
          return 1;
        }
        tokens_only.push_back(tokens);
      }
    }
    if (std::strncmp(argv[i], "--out=", 6) == 0) out_path = argv[i] + 6;
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    // Only the launch-shape sweep of the index target sizes, hot and cold L2.
    if (std::strcmp(argv[i], "--tune") == 0) tune = true;
  }
  gpu::ProbeOptions probe_options;
  probe_options.gpuprof_version = "benchmark";
  api::ListGpusResponse inventory = gpu::ProbeHost(probe_options);
  measure::FillMeasuredCopyBandwidth(inventory);
  if (inventory.gpus_size() == 0) {
    std::fprintf(stderr, "no GPU: %s\n", inventory.probe_error().c_str());
    return 1;
  }
  const api::GpuInfo& gpu = inventory.gpus(0);
  std::fprintf(stderr, "%s: copy bandwidth %.0f GB/s (read + write), spec %.0f GB/s\n",
               gpu.name().c_str(), gpu.measured_copy_bandwidth_gbps(),
               gpu.spec_peak_bandwidth_gbps());
  std::ofstream out(out_path);
  auto quiet = [](api::Phase, int64_t, int64_t, const std::string&) {};
  int failures = 0;
  auto emit = [&](const std::string& line, bool ok) {
    out << line << "\n";
    out.flush();
    std::fprintf(stderr, "%s\n", line.c_str());
    if (!ok) ++failures;
  };

  if (tune) {
    for (int64_t hidden : tune_hidden) {
      for (int64_t tokens : tune_tokens) {
        for (int64_t cold : tune_cold) {
          for (int64_t threads : tune_threads) {
            for (int64_t splits : tune_splits) {
              // The automatic choice once per shape, not once per pairing with a fixed value.
              if ((threads == 0) != (splits == 0)) continue;
              // -k: as many warps a row as give each lane k 16-byte vectors.
              int64_t row_splits = splits;
              if (splits < 0) {
                const int64_t lane_bytes = 32 * 16 * -splits;
                const int64_t row_bytes = hidden * 2;
                if (row_bytes % lane_bytes != 0) continue;
                row_splits = row_bytes / lane_bytes;
              }
              api::ExperimentRequest request;
              auto& index = *request.mutable_index();
              index.set_num_tokens(tokens);
              index.set_vocab_size(tune_vocab);
              index.set_hidden_dim(hidden);
              index.set_dtype(api::DATA_TYPE_BF16);
              index.set_threads(static_cast<int>(threads));
              index.set_num_splits(static_cast<int>(row_splits));
              index.set_seed(tokens);
              *request.mutable_measurement() = Options(/*graph=*/true, cold != 0);
              const auto result = RunIndex(request, inventory, quiet);
              emit(JsonLine(absl::StrFormat("\"kind\":\"index\",\"tokens\":%d,\"hidden\":%d,"
                                            "\"vocab\":%d,\"dtype\":\"bf16\",\"auto\":%s",
                                            tokens, hidden, tune_vocab,
                                            threads == 0 ? "true" : "false"),
                            gpu, result, true),
                   result.ok() && result->verification().passed());
            }
          }
        }
      }
    }
    return failures == 0 ? 0 : 2;
  }

  const std::vector<int64_t> tokens_sweep =
      !tokens_only.empty() ? tokens_only
      : quick              ? std::vector<int64_t>{64, 16384}
                           : std::vector<int64_t>{1, 64, 512, 4096, 16384, 65536};
  struct IndexShape {
    int64_t hidden;
    api::DataType dtype;
  };
  std::vector<IndexShape> index_shapes = {{1024, api::DATA_TYPE_BF16},
                                          {4096, api::DATA_TYPE_BF16},
                                          {8192, api::DATA_TYPE_BF16},
                                          {4096, api::DATA_TYPE_FP32},
                                          {4096, api::DATA_TYPE_FP16}};
  if (quick) index_shapes.resize(2);
  for (const IndexShape& shape : index_shapes) {
    for (int64_t tokens : tokens_sweep) {
      // Graph mode for the comparison with torch; one launch per sample too where latency is
      // the question (few tokens).
      for (bool graph : {true, false}) {
        if (!graph && tokens > 512) continue;
        api::ExperimentRequest request;
        auto& index = *request.mutable_index();
        index.set_num_tokens(tokens);
        index.set_vocab_size(kVocabSize);
        index.set_hidden_dim(shape.hidden);
        index.set_dtype(shape.dtype);
        index.set_seed(tokens);
        *request.mutable_measurement() = Options(graph);
        const auto result = RunIndex(request, inventory, quiet);
        emit(JsonLine(absl::StrFormat("\"kind\":\"index\",\"tokens\":%d,\"hidden\":%d,"
                                      "\"vocab\":%d,\"dtype\":\"%s\"",
                                      tokens, shape.hidden, kVocabSize, DataTypeName(shape.dtype)),
                      gpu, result, graph),
             result.ok() && result->verification().passed());
      }
    }
  }

  struct StoreShape {
    int64_t kv_heads;
    int64_t head_dim;
    api::DataType dtype;
  };
  std::vector<StoreShape> store_shapes = {{8, 128, api::DATA_TYPE_BF16},
                                          {32, 128, api::DATA_TYPE_BF16}};
  if (quick) store_shapes.resize(1);
  for (const StoreShape& shape : store_shapes) {
    for (int64_t tokens : tokens_sweep) {
      for (api::SlotPattern pattern :
           {api::SLOT_PATTERN_SEQUENTIAL, api::SLOT_PATTERN_RANDOM, api::SLOT_PATTERN_SORTED}) {
        for (api::StoreLaunch launch :
             {api::STORE_LAUNCH_FUSED_KV, api::STORE_LAUNCH_SEPARATE_KV}) {
          api::ExperimentRequest request;
          auto& store = *request.mutable_store();
          store.set_num_tokens(tokens);
          store.set_num_kv_heads(shape.kv_heads);
          store.set_head_dim(shape.head_dim);
          store.set_dtype(shape.dtype);
          store.set_page_size(1);
          store.set_cache_slots(std::max<int64_t>(4 * tokens, 65536));
          store.set_slot_pattern(pattern);
          store.set_launch(launch);
          store.set_seed(tokens);
          *request.mutable_measurement() = Options(/*graph=*/true);
          const auto result = RunStore(request, inventory, quiet);
          const std::string pattern_name =
              pattern == api::SLOT_PATTERN_SEQUENTIAL
                  ? "sequential"
                  : (pattern == api::SLOT_PATTERN_RANDOM ? "random" : "sorted");
          emit(JsonLine(absl::StrFormat(
                            "\"kind\":\"store\",\"tokens\":%d,\"kv_heads\":%d,\"head_dim\":%d,"
                            "\"cache_slots\":%d,\"dtype\":\"%s\",\"pattern\":\"%s\","
                            "\"launch\":\"%s\"",
                            tokens, shape.kv_heads, shape.head_dim, store.cache_slots(),
                            DataTypeName(shape.dtype), pattern_name,
                            launch == api::STORE_LAUNCH_FUSED_KV ? "fused" : "separate"),
                        gpu, result, true),
               result.ok() && result->verification().passed());
        }
      }
    }
  }
  std::fprintf(stderr, "wrote %s; %d failed or unverified\n", out_path.c_str(), failures);
  return failures == 0 ? 0 : 2;
}

}  // namespace
}  // namespace gpuprof

int main(int argc, char** argv) { return gpuprof::Main(argc, argv); }
