#include "workloads/radix/radix_spec.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "google/protobuf/duration.pb.h"

namespace gpuprof::workloads {
namespace {

v1::TimingStats ToTimingStats(const radix::LatencyStats& stats) {
  v1::TimingStats timing;
  timing.set_samples(stats.samples);
  timing.set_min_us(stats.min_ns / 1e3);
  timing.set_median_us(stats.median_ns / 1e3);
  timing.set_mean_us(stats.mean_ns / 1e3);
  timing.set_p90_us(stats.p90_ns / 1e3);
  timing.set_p99_us(stats.p99_ns / 1e3);
  timing.set_max_us(stats.max_ns / 1e3);
  return timing;
}

// `count` is one pass's calls; `stats` pools every timed pass's.
void AddOperation(const std::string& name, int64_t count, const radix::LatencyStats& stats,
                  const radix::OperationRate& rate, int64_t passes, v1::RadixResult& result) {
  auto* operation = result.add_operations();
  operation->set_operation(name);
  operation->set_count(count);
  operation->set_ops_per_second(rate.median);
  if (rate.relative_noise.has_value()) {
    operation->set_ops_per_second_relative_noise(*rate.relative_noise);
  }
  operation->set_passes(static_cast<int32_t>(passes));
  *operation->mutable_latency() = ToTimingStats(stats);
}

double Seconds(const google::protobuf::Duration& duration) {
  return static_cast<double>(duration.seconds()) + duration.nanos() / 1e9;
}

}  // namespace

void ApplyRadixDefaults(v1::RadixSpec& spec) {
  const radix::RadixWorkloadConfig defaults;
  const radix::RequestStreamConfig& stream = defaults.stream;
  if (spec.num_requests() == 0) spec.set_num_requests(stream.num_requests);
  if (spec.num_system_prompts() == 0) spec.set_num_system_prompts(stream.num_system_prompts);
  if (!spec.has_system_prompt_tokens()) spec.set_system_prompt_tokens(stream.system_prompt_tokens);
  if (spec.num_users() == 0) spec.set_num_users(stream.num_users);
  if (!spec.has_min_tail_tokens()) spec.set_min_tail_tokens(stream.min_tail_tokens);
  if (spec.max_tail_tokens() == 0) spec.set_max_tail_tokens(stream.max_tail_tokens);
  if (!spec.has_history_growth_probability()) {
    spec.set_history_growth_probability(stream.history_growth_probability);
  }
  if (spec.max_history_tokens() == 0) spec.set_max_history_tokens(stream.max_history_tokens);
  if (spec.vocab_size() == 0) spec.set_vocab_size(stream.vocab_size);
  if (spec.page_size() == 0) spec.set_page_size(defaults.page_size);
  if (spec.cache_token_budget() == 0) spec.set_cache_token_budget(defaults.cache_token_budget);
  if (!spec.has_in_flight_requests()) {
    spec.set_in_flight_requests(defaults.lock_in_flight ? defaults.in_flight_requests : 0);
  }
  if (spec.seed() == 0) spec.set_seed(stream.seed);
}

radix::RadixWorkloadConfig RadixConfigFromSpec(const v1::RadixSpec& spec) {
  radix::RadixWorkloadConfig config;
  radix::RequestStreamConfig& stream = config.stream;
  stream.seed = spec.seed();
  stream.num_requests = spec.num_requests();
  stream.num_system_prompts = spec.num_system_prompts();
  stream.system_prompt_tokens = spec.system_prompt_tokens();
  stream.num_users = spec.num_users();
  stream.min_tail_tokens = spec.min_tail_tokens();
  stream.max_tail_tokens = spec.max_tail_tokens();
  stream.history_growth_probability = spec.history_growth_probability();
  stream.max_history_tokens = spec.max_history_tokens();
  stream.vocab_size = spec.vocab_size();
  config.page_size = spec.page_size();
  config.cache_token_budget = spec.cache_token_budget();
  config.lock_in_flight = spec.in_flight_requests() > 0;
  config.in_flight_requests = spec.in_flight_requests() > 0 ? spec.in_flight_requests() : 1;
  // About a hundred progress events per run, whatever its length.
  config.progress_interval = std::max<int64_t>(1, spec.num_requests() / 100);
  return config;
}

radix::PassConfig RadixPassConfigFromOptions(const v1::MeasurementOptions& options) {
  // Zero (unset) takes radix's own default, as GPU workloads take theirs at admission; these
  // are applied here so that a CPU request stays free of options it did not set.
  radix::PassConfig passes;
  // An explicit 0 warm-up passes is honoured (the first timed pass then starts cold).
  if (options.has_warmup_iterations()) passes.warmup_passes = options.warmup_iterations();
  if (options.min_iterations() > 0) passes.min_passes = options.min_iterations();
  passes.max_passes = options.max_iterations() > 0
                          ? options.max_iterations()
                          : std::max<int64_t>(passes.max_passes, passes.min_passes);
  // An explicit 0 min_time is honoured (no time floor).
  if (options.has_min_time()) passes.min_seconds = Seconds(options.min_time());
  if (options.has_time_budget() && Seconds(options.time_budget()) > 0) {
    passes.time_budget_seconds = Seconds(options.time_budget());
  }
  passes.noise_target = options.noise_target();
  return passes;
}

absl::Status ValidateRadixMeasurement(const v1::MeasurementOptions& options) {
  // The ranges of every option are checked for every workload at admission; here, the options
  // that only mean something on a GPU, so that a radix run never silently ignores one.
  const auto refuse = [](absl::string_view field) {
    return absl::InvalidArgumentError(absl::StrCat(
        "measurement.", field, ": radix runs on the CPU, where it means nothing; leave it unset"));
  };
  if (options.l2_mode() != v1::MeasurementOptions::L2_MODE_UNSPECIFIED) return refuse("l2_mode");
  if (options.graph_launches_per_sample() != 0) return refuse("graph_launches_per_sample");
  if (options.eager_launches_per_sample() != 0) return refuse("eager_launches_per_sample");
  if (options.host_inputs()) return refuse("host_inputs");
  // What the worker would refuse, refused here, before anything runs: fewer timed passes at
  // most than at least (radix's floor is 5 passes when --min-iters is not given).
  const radix::PassConfig passes = RadixPassConfigFromOptions(options);
  if (options.max_iterations() > 0 && passes.max_passes < passes.min_passes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "measurement.max_iterations: got ", options.max_iterations(), "; radix times at least ",
        passes.min_passes, " passes (measurement.min_iterations",
        options.min_iterations() > 0 ? "" : ", unset: 5", "), so it must be at least that"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRadixSpec(const v1::RadixSpec& spec) {
  if (spec.in_flight_requests() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("radix.in_flight_requests: got ",
                                                   spec.in_flight_requests(), "; must be >= 0"));
  }
  const std::string error = radix::ValidateRadixWorkloadConfig(RadixConfigFromSpec(spec));
  if (error.empty()) return absl::OkStatus();
  // The library names stream fields "stream.<field>"; the API has them flat.
  absl::string_view message = error;
  absl::ConsumePrefix(&message, "stream.");
  return absl::InvalidArgumentError(absl::StrCat("radix.", message));
}

v1::RadixResult RadixResultFromReport(const radix::RadixWorkloadReport& report) {
  v1::RadixResult result;
  result.set_requests(report.requests);
  result.set_request_tokens(report.request_tokens);
  result.set_matched_tokens(report.matched_tokens);
  result.set_hit_rate(report.hit_rate);
  result.set_inserts(report.inserts);
  result.set_evictions(report.evictions);
  result.set_evicted_tokens(report.evicted_tokens);
  AddOperation("match_prefix", report.requests, report.match_latency, report.match_rate,
               report.passes, result);
  AddOperation("insert", report.inserts, report.insert_latency, report.insert_rate,
               report.passes, result);
  AddOperation("evict", report.evictions, report.evict_latency, report.evict_rate, report.passes,
               result);
  result.set_compare_bytes(report.compare_bytes);
  result.set_compare_gbps(report.compare_gb_per_second);
  result.set_tree_nodes(report.final_nodes);
  result.set_tree_tokens(report.final_tokens);
  result.set_wall_seconds(report.wall_seconds);
  return result;
}

const WorkloadSpec kRadixSpec = {
    .request_case = v1::ExperimentRequest::kRadix,
    .workload = v1::WORKLOAD_RADIX,
    .uses_gpu = false,
    .apply_defaults = [](const v1::ListGpusResponse&,
                         v1::ExperimentRequest& request) { ApplyRadixDefaults(*request.mutable_radix()); },
    .validate =
        [](const v1::ExperimentRequest& request, const HostLimits&) {
          if (absl::Status status = ValidateRadixMeasurement(request.measurement()); !status.ok()) {
            return status;
          }
          return ValidateRadixSpec(request.radix());
        },
    .headline = &MatchRateHeadline,
};

}  // namespace gpuprof::workloads
