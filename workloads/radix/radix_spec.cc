#include "workloads/radix/radix_spec.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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

void AddOperation(const std::string& name, const radix::LatencyStats& stats,
                  double ops_per_second, v1::RadixResult& result) {
  auto* operation = result.add_operations();
  operation->set_operation(name);
  operation->set_count(stats.samples);
  operation->set_ops_per_second(ops_per_second);
  *operation->mutable_latency() = ToTimingStats(stats);
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
  AddOperation("match_prefix", report.match_latency, report.match_ops_per_second, result);
  AddOperation("insert", report.insert_latency, report.insert_ops_per_second, result);
  AddOperation("evict", report.evict_latency, report.evict_ops_per_second, result);
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
    .validate = [](const v1::ExperimentRequest& request,
                   const HostLimits&) { return ValidateRadixSpec(request.radix()); },
    .headline = &MatchRateHeadline,
};

}  // namespace gpuprof::workloads
