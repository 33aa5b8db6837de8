#include "radix/radix_workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/statistics.h"
#include "radix/latency_stats.h"
#include "radix/radix_tree.h"
#include "radix/request_stream.h"

namespace gpuprof::radix {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NanosecondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
}

double OpsPerSecond(int64_t calls, int64_t total_ns) {
  if (total_ns <= 0) return 0.0;
  return static_cast<double>(calls) * 1e9 / static_cast<double>(total_ns);
}

// A call this many times slower than the pass's median call of the same operation was not
// running all along: the thread was descheduled (a time slice is milliseconds, a call about a
// microsecond). Legitimately slow calls (long prompts) stay within a few times the median.
constexpr int64_t kDescheduledFactor = 100;

// One pass's rate of an operation: calls per second of time spent in it, each descheduled
// call counted at the pass's median instead. On a shared machine one 4 ms time slice inside
// a pass's 3 ms of matching would otherwise halve that pass's rate; the latency percentiles
// keep every sample as measured.
double PassOpsPerSecond(const std::vector<int64_t>& latencies_ns) {
  if (latencies_ns.empty()) return 0.0;
  std::vector<int64_t> sorted = latencies_ns;
  const auto middle = sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2);
  std::nth_element(sorted.begin(), middle, sorted.end());
  const int64_t median = *middle;
  int64_t total = 0;
  for (const int64_t latency : latencies_ns) {
    total += latency > kDescheduledFactor * median ? median : latency;
  }
  return OpsPerSecond(static_cast<int64_t>(latencies_ns.size()), total);
}

std::string OutOfRangeSeconds(std::string_view field, double value, double min, double max) {
  if (value >= min && value <= max) return "";
  std::ostringstream message;
  message << field << ": got " << value << "; must be in [" << min << ", " << max << "]";
  return message.str();
}

// What one replay of the stream did and how long each call took.
struct PassOutcome {
  std::string error;
  int64_t requests = 0;
  int64_t request_tokens = 0;
  int64_t matched_tokens = 0;
  int64_t inserts = 0;
  int64_t inserted_tokens = 0;
  int64_t evictions = 0;
  int64_t evicted_nodes = 0;
  int64_t evicted_tokens = 0;
  int64_t peak_locked_tokens = 0;
  int64_t compare_bytes = 0;
  int64_t final_nodes = 0;
  int64_t final_tokens = 0;
  std::vector<int64_t> match_ns;
  std::vector<int64_t> insert_ns;
  std::vector<int64_t> evict_ns;
};

bool SameWork(const PassOutcome& a, const PassOutcome& b) {
  return a.requests == b.requests && a.matched_tokens == b.matched_tokens &&
         a.inserted_tokens == b.inserted_tokens && a.evictions == b.evictions &&
         a.evicted_tokens == b.evicted_tokens && a.compare_bytes == b.compare_bytes &&
         a.final_tokens == b.final_tokens;
}

// Replays the whole stream once against a new, empty tree.
PassOutcome RunPass(const RadixWorkloadConfig& config,
                    const std::function<void(int64_t done)>& progress) {
  PassOutcome pass;
  const auto page_size = static_cast<size_t>(config.page_size);
  const auto budget = static_cast<size_t>(config.cache_token_budget);

  RadixTree tree(page_size);
  RequestStream stream(config.stream);
  Request request;
  // Oldest first; each holds one lock on its request's matched prefix.
  std::deque<NodeHandle> in_flight;

  pass.match_ns.reserve(static_cast<size_t>(config.stream.num_requests));
  pass.insert_ns.reserve(static_cast<size_t>(config.stream.num_requests));

  while (stream.Next(&request)) {
    const std::span<const int32_t> tokens(request.tokens);

    Clock::time_point start = Clock::now();
    const MatchResult match = tree.MatchPrefix(tokens);
    pass.match_ns.push_back(NanosecondsBetween(start, Clock::now()));
    pass.request_tokens += static_cast<int64_t>(tokens.size());
    pass.matched_tokens += static_cast<int64_t>(match.prefix_length);

    if (config.lock_in_flight) {
      // A fresh match handle is live, and every queued handle holds a lock,
      // so these only fail if the tree itself is broken.
      if (!tree.Lock(match.node)) {
        pass.error = "internal error: could not lock a matched prefix";
        return pass;
      }
      in_flight.push_back(match.node);
      if (static_cast<int64_t>(in_flight.size()) > config.in_flight_requests) {
        if (!tree.Unlock(in_flight.front())) {
          pass.error = "internal error: could not unlock a finished request";
          return pass;
        }
        in_flight.pop_front();
      }
      // Measured once the window is back to in_flight_requests.
      pass.peak_locked_tokens =
          std::max(pass.peak_locked_tokens, static_cast<int64_t>(tree.locked_tokens()));
    }

    start = Clock::now();
    const size_t already_cached = tree.Insert(tokens);
    pass.insert_ns.push_back(NanosecondsBetween(start, Clock::now()));
    ++pass.inserts;
    const size_t whole_page_tokens = tokens.size() - tokens.size() % page_size;
    pass.inserted_tokens += static_cast<int64_t>(whole_page_tokens - already_cached);

    if (tree.total_tokens() > budget) {
      const uint64_t evicted_nodes_before = tree.evicted_nodes();
      start = Clock::now();
      const size_t freed = tree.Evict(tree.total_tokens() - budget);
      pass.evict_ns.push_back(NanosecondsBetween(start, Clock::now()));
      ++pass.evictions;
      pass.evicted_tokens += static_cast<int64_t>(freed);
      pass.evicted_nodes += static_cast<int64_t>(tree.evicted_nodes() - evicted_nodes_before);
    }

    ++pass.requests;
    if (progress && pass.requests % config.progress_interval == 0) progress(pass.requests);
  }
  if (progress && pass.requests % config.progress_interval != 0) progress(pass.requests);

  while (!in_flight.empty()) {
    if (!tree.Unlock(in_flight.front())) {
      pass.error = "internal error: could not unlock a finished request";
      return pass;
    }
    in_flight.pop_front();
  }
  pass.compare_bytes = static_cast<int64_t>(tree.compare_bytes());
  pass.final_nodes = static_cast<int64_t>(tree.num_nodes());
  pass.final_tokens = static_cast<int64_t>(tree.total_tokens());
  return pass;
}

OperationRate SummarizeRate(std::vector<double> per_pass) {
  OperationRate rate;
  const SampleSummary summary = ::gpuprof::Summarize(per_pass);
  rate.median = summary.median;
  if (summary.samples >= 2 && summary.mean > 0) rate.relative_noise = summary.relative_noise;
  rate.per_pass = std::move(per_pass);
  return rate;
}

void Append(std::vector<int64_t> from, std::vector<int64_t>& to) {
  if (to.empty()) {
    to = std::move(from);
    return;
  }
  to.insert(to.end(), from.begin(), from.end());
}

// Replays of the stream per timed pass: enough for a pass to last min_pass_seconds, judged
// by the last warm-up replay (one without a warm-up, or for a stream that long already).
int64_t ReplaysPerPass(const PassConfig& config, double warmup_seconds) {
  if (warmup_seconds <= 0 || config.min_pass_seconds <= warmup_seconds) return 1;
  const double replays = std::ceil(config.min_pass_seconds / warmup_seconds);
  return std::min(kMaxReplaysPerPass, static_cast<int64_t>(replays));
}

// The first rule that ends the timed passes, or "" to go on. The floor comes
// first; the budget and the pass limit bound it.
std::string PassStopReason(const PassConfig& config, int64_t passes, double timed_seconds,
                           const RunningNoise& match_rates) {
  if (passes >= config.max_passes) return "max passes";
  const bool floor_reached = passes >= config.min_passes && timed_seconds >= config.min_seconds;
  if (floor_reached && config.noise_target <= 0) return "floor reached";
  if (floor_reached && passes >= 2 && match_rates.relative_noise() <= config.noise_target) {
    return "noise target reached";
  }
  if (timed_seconds >= config.time_budget_seconds) return "time budget";
  return "";
}

}  // namespace

std::string ValidateRadixWorkloadConfig(const RadixWorkloadConfig& config) {
  if (std::string error = ValidateRequestStreamConfig(config.stream, "stream."); !error.empty()) {
    return error;
  }
  if (std::string error = OutOfRangeMessage("page_size", config.page_size, 1, kMaxPageSize);
      !error.empty()) {
    return error;
  }
  if (std::string error = OutOfRangeMessage("cache_token_budget", config.cache_token_budget, 1,
                                            kMaxCacheTokenBudget);
      !error.empty()) {
    return error;
  }
  // Checked even when locking is off so a config stays valid when it is
  // switched on.
  if (std::string error = OutOfRangeMessage("in_flight_requests", config.in_flight_requests, 1,
                                            kMaxInFlightRequests);
      !error.empty()) {
    return error;
  }
  if (std::string error =
          OutOfRangeMessage("progress_interval", config.progress_interval, 1, kMaxRequests);
      !error.empty()) {
    return error;
  }
  if (std::string error = OutOfRangeSeconds("progress_min_seconds", config.progress_min_seconds,
                                            0, kMaxPassSeconds);
      !error.empty()) {
    return error;
  }
  const PassConfig& passes = config.passes;
  if (std::string error =
          OutOfRangeMessage("passes.warmup_passes", passes.warmup_passes, 0, kMaxWarmupPasses);
      !error.empty()) {
    return error;
  }
  if (std::string error = OutOfRangeMessage("passes.min_passes", passes.min_passes, 1, kMaxPasses);
      !error.empty()) {
    return error;
  }
  if (std::string error =
          OutOfRangeMessage("passes.max_passes", passes.max_passes, passes.min_passes, kMaxPasses);
      !error.empty()) {
    return error;
  }
  if (std::string error =
          OutOfRangeSeconds("passes.min_seconds", passes.min_seconds, 0, kMaxPassSeconds);
      !error.empty()) {
    return error;
  }
  if (std::string error = OutOfRangeSeconds("passes.time_budget_seconds",
                                            passes.time_budget_seconds, 0, kMaxPassSeconds);
      !error.empty()) {
    return error;
  }
  if (std::string error = OutOfRangeSeconds("passes.min_pass_seconds", passes.min_pass_seconds,
                                            0, kMaxPassSeconds);
      !error.empty()) {
    return error;
  }
  return OutOfRangeSeconds("passes.noise_target", passes.noise_target, 0, 1);
}

RadixWorkloadReport RunRadixWorkload(const RadixWorkloadConfig& config,
                                     const ProgressCallback& progress) {
  RadixWorkloadReport report;
  report.error = ValidateRadixWorkloadConfig(config);
  if (!report.error.empty()) return report;

  const Clock::time_point run_start = Clock::now();
  const int64_t total_requests = config.stream.num_requests;
  std::optional<bool> last_progress_warmup;
  Clock::time_point last_progress;
  const auto throttled_progress = [&](const PassProgress& pass) {
    const Clock::time_point now = Clock::now();
    if (last_progress_warmup == pass.warmup &&
        static_cast<double>(NanosecondsBetween(last_progress, now)) / 1e9 <
            config.progress_min_seconds) {
      return;
    }
    last_progress_warmup = pass.warmup;
    last_progress = now;
    progress(pass);
  };
  const auto pass_progress = [&](bool warmup, int64_t pass) -> std::function<void(int64_t)> {
    if (!progress) return {};
    return [&throttled_progress, warmup, pass, total_requests](int64_t done) {
      throttled_progress({.warmup = warmup, .pass = pass, .done = done, .total = total_requests});
    };
  };

  double last_warmup_seconds = 0.0;
  for (int64_t pass = 1; pass <= config.passes.warmup_passes; ++pass) {
    const Clock::time_point warmup_start = Clock::now();
    const PassOutcome warmup = RunPass(config, pass_progress(true, pass));
    last_warmup_seconds =
        static_cast<double>(NanosecondsBetween(warmup_start, Clock::now())) / 1e9;
    if (!warmup.error.empty()) {
      report.error = warmup.error;
      return report;
    }
  }
  report.replays_per_pass = ReplaysPerPass(config.passes, last_warmup_seconds);

  PassOutcome first;
  bool have_first = false;
  std::vector<int64_t> match_ns;
  std::vector<int64_t> insert_ns;
  std::vector<int64_t> evict_ns;
  std::vector<double> match_rates;
  std::vector<double> insert_rates;
  std::vector<double> evict_rates;
  RunningNoise match_noise;
  double timed_seconds = 0.0;
  while (report.stop_reason.empty()) {
    const Clock::time_point pass_start = Clock::now();
    std::vector<int64_t> pass_match_ns;
    std::vector<int64_t> pass_insert_ns;
    std::vector<int64_t> pass_evict_ns;
    for (int64_t replay = 0; replay < report.replays_per_pass; ++replay) {
      PassOutcome outcome = RunPass(config, pass_progress(false, report.passes + 1));
      if (!outcome.error.empty()) {
        report.error = outcome.error;
        return report;
      }
      if (have_first && !SameWork(first, outcome)) {
        // Same stream, same empty tree: anything else is a bug, and would make the passes'
        // rates incomparable.
        report.error = "internal error: a replay did different work from the first";
        return report;
      }
      Append(std::move(outcome.match_ns), pass_match_ns);
      Append(std::move(outcome.insert_ns), pass_insert_ns);
      Append(std::move(outcome.evict_ns), pass_evict_ns);
      if (!have_first) {
        // Its counts stand for every replay.
        first = std::move(outcome);
        have_first = true;
      }
    }
    timed_seconds += static_cast<double>(NanosecondsBetween(pass_start, Clock::now())) / 1e9;
    ++report.passes;
    match_rates.push_back(PassOpsPerSecond(pass_match_ns));
    insert_rates.push_back(PassOpsPerSecond(pass_insert_ns));
    evict_rates.push_back(PassOpsPerSecond(pass_evict_ns));
    match_noise.Add(match_rates.back());
    Append(std::move(pass_match_ns), match_ns);
    Append(std::move(pass_insert_ns), insert_ns);
    Append(std::move(pass_evict_ns), evict_ns);
    report.stop_reason = PassStopReason(config.passes, report.passes, timed_seconds, match_noise);
  }

  report.requests = first.requests;
  report.request_tokens = first.request_tokens;
  report.matched_tokens = first.matched_tokens;
  report.hit_rate = report.request_tokens > 0 ? static_cast<double>(report.matched_tokens) /
                                                    static_cast<double>(report.request_tokens)
                                              : 0.0;
  report.inserts = first.inserts;
  report.inserted_tokens = first.inserted_tokens;
  report.evictions = first.evictions;
  report.evicted_nodes = first.evicted_nodes;
  report.evicted_tokens = first.evicted_tokens;
  report.peak_locked_tokens = first.peak_locked_tokens;
  report.final_nodes = first.final_nodes;
  report.final_tokens = first.final_tokens;

  report.match_latency = Summarize(std::move(match_ns));
  report.insert_latency = Summarize(std::move(insert_ns));
  report.evict_latency = Summarize(std::move(evict_ns));
  report.match_rate = SummarizeRate(std::move(match_rates));
  report.insert_rate = SummarizeRate(std::move(insert_rates));
  report.evict_rate = SummarizeRate(std::move(evict_rates));

  report.compare_bytes = first.compare_bytes;
  const int64_t compare_ns = report.match_latency.total_ns + report.insert_latency.total_ns;
  // Every replay compared the same bytes; bytes per nanosecond is GB/s.
  const double replays = static_cast<double>(report.passes * report.replays_per_pass);
  report.compare_gb_per_second =
      compare_ns > 0 ? static_cast<double>(report.compare_bytes) * replays /
                           static_cast<double>(compare_ns)
                     : 0.0;
  report.wall_seconds = static_cast<double>(NanosecondsBetween(run_start, Clock::now())) / 1e9;
  return report;
}

}  // namespace gpuprof::radix
