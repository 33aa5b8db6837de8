// The "radix" workload: replays a synthetic request stream against a radix
// prefix cache, as an LLM serving engine's scheduler does on the CPU, and
// reports hit rate and the cost of each cache operation.

#ifndef GPUPROF_RADIX_RADIX_WORKLOAD_H_
#define GPUPROF_RADIX_RADIX_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <string>

#include "radix/latency_stats.h"
#include "radix/request_stream.h"

namespace gpuprof::radix {

// Limits enforced by ValidateRadixWorkloadConfig, beyond the stream's own.
inline constexpr int64_t kMaxPageSize = 4096;
// 1 GiB of cached int32 tokens.
inline constexpr int64_t kMaxCacheTokenBudget = int64_t{1} << 28;
inline constexpr int64_t kMaxInFlightRequests = 65'536;

struct RadixWorkloadConfig {
  RequestStreamConfig stream;
  // Tokens per KV page; the cache matches and stores whole pages only.
  int64_t page_size = 1;
  // After each insert, least-recently-used entries are evicted until the
  // cache holds at most this many tokens (or only locked ones remain).
  int64_t cache_token_budget = 262'144;
  // When true, each request locks its matched prefix while it is "in
  // flight": the last `in_flight_requests` requests hold their locks, and the
  // oldest is unlocked as a new one arrives. Locked prefixes are never
  // evicted.
  bool lock_in_flight = true;
  int64_t in_flight_requests = 32;
  // The progress callback runs after every this many requests.
  int64_t progress_interval = 1000;
};

struct RadixWorkloadReport {
  // Non-empty if the config was invalid (then nothing ran and the rest is
  // zero), or if a lock bookkeeping check failed mid-run ("internal error: ...").
  std::string error;

  int64_t requests = 0;
  int64_t request_tokens = 0;
  // Tokens of each request found in the cache before it was inserted.
  int64_t matched_tokens = 0;
  // matched_tokens / request_tokens.
  double hit_rate = 0.0;

  int64_t inserts = 0;
  // Tokens added to the cache by inserts (not already cached).
  int64_t inserted_tokens = 0;
  // Evict calls made because the cache exceeded its budget.
  int64_t evictions = 0;
  int64_t evicted_nodes = 0;
  int64_t evicted_tokens = 0;

  // Latency of each MatchPrefix, Insert and Evict call, timed one by one.
  LatencyStats match_latency;
  LatencyStats insert_latency;
  LatencyStats evict_latency;
  // Calls per second of time spent inside that operation.
  double match_ops_per_second = 0.0;
  double insert_ops_per_second = 0.0;
  double evict_ops_per_second = 0.0;

  // Token bytes compared along edges by matches and inserts, and that volume
  // per second of match plus insert time, in GB/s (1e9 bytes).
  int64_t compare_bytes = 0;
  double compare_gb_per_second = 0.0;

  // Most tokens pinned by in-flight requests at once (0 without locking).
  int64_t peak_locked_tokens = 0;

  // Cache size after the run, with all in-flight locks released.
  int64_t final_nodes = 0;
  int64_t final_tokens = 0;
  // Wall time of the whole run, request generation included.
  double wall_seconds = 0.0;
};

// Called with (requests done, requests in total).
using ProgressCallback = std::function<void(int64_t done, int64_t total)>;

// Returns an empty string if `config` is valid, else a message naming the
// first bad field, its value and the allowed range, e.g.
// "page_size: got 0; must be in [1, 4096]". Stream fields are named
// "stream.<field>".
std::string ValidateRadixWorkloadConfig(const RadixWorkloadConfig& config);

// Runs the workload. `progress` may be empty; otherwise it is called every
// config.progress_interval requests and once more at the end if the last
// call did not already report completion. An invalid config yields a report
// whose `error` says why.
RadixWorkloadReport RunRadixWorkload(const RadixWorkloadConfig& config,
                                     const ProgressCallback& progress = {});

}  // namespace gpuprof::radix

#endif  // GPUPROF_RADIX_RADIX_WORKLOAD_H_
