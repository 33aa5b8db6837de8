// The "radix" workload: replays a synthetic request stream against a radix
// prefix cache, as an LLM serving engine's scheduler does on the CPU, and
// reports hit rate and the cost of each cache operation.
//
// The stream is replayed in passes, a warm-up first, each pass from an empty
// cache; an operation's rate is the median over the timed passes, and its
// noise the passes' spread, so two runs can be compared.

#ifndef GPUPROF_RADIX_RADIX_WORKLOAD_H_
#define GPUPROF_RADIX_RADIX_WORKLOAD_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "radix/latency_stats.h"
#include "radix/request_stream.h"

namespace gpuprof::radix {

// Limits enforced by ValidateRadixWorkloadConfig, beyond the stream's own.
inline constexpr int64_t kMaxPageSize = 4096;
// 1 GiB of cached int32 tokens.
inline constexpr int64_t kMaxCacheTokenBudget = int64_t{1} << 28;
inline constexpr int64_t kMaxInFlightRequests = 65'536;
inline constexpr int64_t kMaxWarmupPasses = 100'000;
inline constexpr int64_t kMaxPasses = 1'000'000;
inline constexpr double kMaxPassSeconds = 600.0;
inline constexpr int64_t kMaxReplaysPerPass = 10'000;

// How many times the stream is replayed. Every pass starts from an empty cache
// and the same stream, so every pass does the same matches, inserts and
// evictions: their rates differ only by the machine's noise. (Keeping the
// cache warm across passes would make the first pass the only one that misses
// and the later ones measure another workload.)
struct PassConfig {
  // Untimed passes first: caches, branch predictors, the allocator's pools.
  int64_t warmup_passes = 1;
  // The floor: timed passes go on until there are at least `min_passes` of
  // them lasting at least `min_seconds` together (wall time of the passes). Five
  // passes are the fewest whose median ignores two outliers; 50 ms gives short
  // streams more passes (a 300-request pass lasts about a millisecond).
  int64_t min_passes = 5;
  double min_seconds = 0.05;
  // A timed pass replays the stream (each replay from an empty cache) as many
  // times as it takes to last this long, judged by the last warm-up pass, so
  // that a short stream's pass rate does not rest on a fraction of a
  // millisecond of calls. The default 2000-request stream (about 14 ms on a
  // 2-core VM) takes one.
  double min_pass_seconds = 0.01;
  // Past the floor: 0 stops there; otherwise passes go on until the relative
  // noise (stddev / mean) of the per-pass match_prefix rates is at most this.
  double noise_target = 0.0;
  // Either ends the run, the floor reached or not (after one timed pass).
  int64_t max_passes = 1000;
  double time_budget_seconds = 2.0;
};

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
  // The progress callback runs after every this many requests of a replay,
  // but at most once per progress_min_seconds (the first call of the warm-up
  // and of the timed passes always runs): each call may become an event that
  // the daemon stores, and a short stream is replayed tens of times.
  int64_t progress_interval = 1000;
  double progress_min_seconds = 0.25;
  PassConfig passes;
};

// One operation's rate: calls per second of time spent inside it, per timed
// pass.
struct OperationRate {
  // In pass order.
  std::vector<double> per_pass;
  double median = 0.0;
  // stddev / mean of per_pass; unset with fewer than two passes or a zero mean
  // (an operation that never ran).
  std::optional<double> relative_noise;
};

struct RadixWorkloadReport {
  // Non-empty if the config was invalid (then nothing ran and the rest is
  // zero), or if a lock bookkeeping check failed mid-run or two passes did
  // different work ("internal error: ...").
  std::string error;

  // Timed passes, replays of the stream in each, and why they stopped: "floor
  // reached", "noise target reached", "max passes" or "time budget".
  int64_t passes = 0;
  int64_t replays_per_pass = 1;
  std::string stop_reason;

  // The counts below are one replay's (every replay does the same work).

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

  // Latency of each MatchPrefix, Insert and Evict call, timed one by one, over
  // every timed pass (samples = calls x replays_per_pass x passes).
  LatencyStats match_latency;
  LatencyStats insert_latency;
  LatencyStats evict_latency;
  OperationRate match_rate;
  OperationRate insert_rate;
  OperationRate evict_rate;

  // Token bytes compared along edges by matches and inserts in one replay, and
  // that volume per second of match plus insert time over the timed passes, in
  // GB/s (1e9 bytes).
  int64_t compare_bytes = 0;
  double compare_gb_per_second = 0.0;

  // Most tokens pinned by in-flight requests at once (0 without locking).
  int64_t peak_locked_tokens = 0;

  // Cache size after the run, with all in-flight locks released.
  int64_t final_nodes = 0;
  int64_t final_tokens = 0;
  // Wall time of the whole run, warm-up and request generation included.
  double wall_seconds = 0.0;
};

struct PassProgress {
  bool warmup = false;
  // 1-based among the warm-up passes, or among the timed ones.
  int64_t pass = 0;
  // Requests of the replay under way (a timed pass may replay the stream
  // several times).
  int64_t done = 0;
  int64_t total = 0;
};
using ProgressCallback = std::function<void(const PassProgress& progress)>;

// Returns an empty string if `config` is valid, else a message naming the
// first bad field, its value and the allowed range, e.g.
// "page_size: got 0; must be in [1, 4096]". Stream fields are named
// "stream.<field>".
std::string ValidateRadixWorkloadConfig(const RadixWorkloadConfig& config);

// Runs the workload. `progress` may be empty; otherwise it is called every
// config.progress_interval requests of each pass and once more at the end of
// a pass if the last call did not already report its completion. An invalid
// config yields a report whose `error` says why.
RadixWorkloadReport RunRadixWorkload(const RadixWorkloadConfig& config,
                                     const ProgressCallback& progress = {});

}  // namespace gpuprof::radix

#endif  // GPUPROF_RADIX_RADIX_WORKLOAD_H_
