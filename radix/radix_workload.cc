#include "radix/radix_workload.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "radix/latency_stats.h"
#include "radix/radix_tree.h"
#include "radix/request_stream.h"

namespace gpuprof::radix {
namespace {

using Clock = std::chrono::steady_clock;

int64_t NanosecondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
}

double OpsPerSecond(const LatencyStats& stats) {
  if (stats.total_ns <= 0) return 0.0;
  return static_cast<double>(stats.samples) * 1e9 / static_cast<double>(stats.total_ns);
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
  return OutOfRangeMessage("progress_interval", config.progress_interval, 1, kMaxRequests);
}

RadixWorkloadReport RunRadixWorkload(const RadixWorkloadConfig& config,
                                     const ProgressCallback& progress) {
  RadixWorkloadReport report;
  report.error = ValidateRadixWorkloadConfig(config);
  if (!report.error.empty()) return report;

  const Clock::time_point run_start = Clock::now();
  const auto page_size = static_cast<size_t>(config.page_size);
  const auto budget = static_cast<size_t>(config.cache_token_budget);
  const int64_t total_requests = config.stream.num_requests;

  RadixTree tree(page_size);
  RequestStream stream(config.stream);
  Request request;
  // Oldest first; each holds one lock on its request's matched prefix.
  std::deque<NodeHandle> in_flight;

  std::vector<int64_t> match_ns;
  std::vector<int64_t> insert_ns;
  std::vector<int64_t> evict_ns;
  match_ns.reserve(static_cast<size_t>(total_requests));
  insert_ns.reserve(static_cast<size_t>(total_requests));

  while (stream.Next(&request)) {
    const std::span<const int32_t> tokens(request.tokens);

    Clock::time_point start = Clock::now();
    const MatchResult match = tree.MatchPrefix(tokens);
    match_ns.push_back(NanosecondsBetween(start, Clock::now()));
    report.request_tokens += static_cast<int64_t>(tokens.size());
    report.matched_tokens += static_cast<int64_t>(match.prefix_length);

    if (config.lock_in_flight) {
      // A fresh match handle is live, and every queued handle holds a lock,
      // so these only fail if the tree itself is broken.
      if (!tree.Lock(match.node)) {
        report.error = "internal error: could not lock a matched prefix";
        return report;
      }
      in_flight.push_back(match.node);
      if (static_cast<int64_t>(in_flight.size()) > config.in_flight_requests) {
        if (!tree.Unlock(in_flight.front())) {
          report.error = "internal error: could not unlock a finished request";
          return report;
        }
        in_flight.pop_front();
      }
      // Measured once the window is back to in_flight_requests.
      report.peak_locked_tokens =
          std::max(report.peak_locked_tokens, static_cast<int64_t>(tree.locked_tokens()));
    }

    start = Clock::now();
    const size_t already_cached = tree.Insert(tokens);
    insert_ns.push_back(NanosecondsBetween(start, Clock::now()));
    ++report.inserts;
    const size_t whole_page_tokens = tokens.size() - tokens.size() % page_size;
    report.inserted_tokens += static_cast<int64_t>(whole_page_tokens - already_cached);

    if (tree.total_tokens() > budget) {
      const uint64_t evicted_nodes_before = tree.evicted_nodes();
      start = Clock::now();
      const size_t freed = tree.Evict(tree.total_tokens() - budget);
      evict_ns.push_back(NanosecondsBetween(start, Clock::now()));
      ++report.evictions;
      report.evicted_tokens += static_cast<int64_t>(freed);
      report.evicted_nodes += static_cast<int64_t>(tree.evicted_nodes() - evicted_nodes_before);
    }

    ++report.requests;
    if (progress && report.requests % config.progress_interval == 0) {
      progress(report.requests, total_requests);
    }
  }
  if (progress && report.requests % config.progress_interval != 0) {
    progress(report.requests, total_requests);
  }

  while (!in_flight.empty()) {
    if (!tree.Unlock(in_flight.front())) {
      report.error = "internal error: could not unlock a finished request";
      return report;
    }
    in_flight.pop_front();
  }

  report.hit_rate = report.request_tokens > 0 ? static_cast<double>(report.matched_tokens) /
                                                    static_cast<double>(report.request_tokens)
                                              : 0.0;
  report.match_latency = Summarize(std::move(match_ns));
  report.insert_latency = Summarize(std::move(insert_ns));
  report.evict_latency = Summarize(std::move(evict_ns));
  report.match_ops_per_second = OpsPerSecond(report.match_latency);
  report.insert_ops_per_second = OpsPerSecond(report.insert_latency);
  report.evict_ops_per_second = OpsPerSecond(report.evict_latency);

  report.compare_bytes = static_cast<int64_t>(tree.compare_bytes());
  const int64_t compare_ns = report.match_latency.total_ns + report.insert_latency.total_ns;
  // Bytes per nanosecond is GB/s.
  report.compare_gb_per_second =
      compare_ns > 0 ? static_cast<double>(report.compare_bytes) / static_cast<double>(compare_ns)
                     : 0.0;

  report.final_nodes = static_cast<int64_t>(tree.num_nodes());
  report.final_tokens = static_cast<int64_t>(tree.total_tokens());
  report.wall_seconds = static_cast<double>(NanosecondsBetween(run_start, Clock::now())) / 1e9;
  return report;
}

}  // namespace gpuprof::radix
