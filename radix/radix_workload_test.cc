#include "radix/radix_workload.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "radix/latency_stats.h"
#include "radix/request_stream.h"

namespace gpuprof::radix {
namespace {

RadixWorkloadConfig SmallConfig() {
  RadixWorkloadConfig config;
  config.stream.seed = 11;
  config.stream.num_requests = 300;
  config.stream.num_system_prompts = 3;
  config.stream.system_prompt_tokens = 64;
  config.stream.num_users = 8;
  config.stream.min_tail_tokens = 4;
  config.stream.max_tail_tokens = 32;
  config.stream.max_history_tokens = 256;
  // A small vocabulary makes random tails collide, so matches also end
  // inside tails, not only at turn boundaries.
  config.stream.vocab_size = 4;
  config.cache_token_budget = kMaxCacheTokenBudget;  // No eviction.
  config.lock_in_flight = false;
  config.progress_interval = 50;
  return config;
}

using Tokens = std::vector<int32_t>;

size_t CommonPrefix(const Tokens& a, const Tokens& b) {
  const size_t limit = std::min(a.size(), b.size());
  size_t common = 0;
  while (common < limit && a[common] == b[common]) ++common;
  return common;
}

// For each request, the longest whole-page prefix it shares with any earlier
// request, found by scanning every earlier request: what a cache that never
// evicts must match.
std::vector<Tokens> BruteForceMatchedPrefixes(const RadixWorkloadConfig& config) {
  RequestStream stream(config.stream);
  const auto page_size = static_cast<size_t>(config.page_size);
  std::vector<Tokens> seen;
  std::vector<Tokens> matched_prefixes;
  Request request;
  while (stream.Next(&request)) {
    size_t best = 0;
    for (const Tokens& earlier : seen) {
      const size_t common = CommonPrefix(earlier, request.tokens);
      best = std::max(best, common - common % page_size);
    }
    matched_prefixes.emplace_back(request.tokens.begin(),
                                  request.tokens.begin() + static_cast<std::ptrdiff_t>(best));
    seen.push_back(request.tokens);
  }
  return matched_prefixes;
}

int64_t BruteForceMatchedTokens(const RadixWorkloadConfig& config) {
  int64_t matched = 0;
  for (const Tokens& prefix : BruteForceMatchedPrefixes(config)) {
    matched += static_cast<int64_t>(prefix.size());
  }
  return matched;
}

// Tokens in a trie holding `sequences`: their total length minus what each
// shares with its predecessor in sorted order.
int64_t TrieTokens(std::vector<Tokens> sequences) {
  std::sort(sequences.begin(), sequences.end());
  int64_t tokens = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    tokens += static_cast<int64_t>(sequences[i].size());
    if (i > 0) tokens -= static_cast<int64_t>(CommonPrefix(sequences[i - 1], sequences[i]));
  }
  return tokens;
}

void ExpectOrdered(const LatencyStats& stats) {
  EXPECT_LE(stats.min_ns, stats.median_ns);
  EXPECT_LE(stats.median_ns, stats.p90_ns);
  EXPECT_LE(stats.p90_ns, stats.p99_ns);
  EXPECT_LE(stats.p99_ns, stats.max_ns);
  EXPECT_LE(static_cast<double>(stats.min_ns), stats.mean_ns);
  EXPECT_GE(static_cast<double>(stats.max_ns), stats.mean_ns);
}

TEST(RadixWorkloadValidationTest, DefaultsAreValid) {
  EXPECT_EQ(ValidateRadixWorkloadConfig(RadixWorkloadConfig{}), "");
}

TEST(RadixWorkloadValidationTest, NamesFieldValueAndRange) {
  RadixWorkloadConfig config;
  config.page_size = 0;
  EXPECT_EQ(ValidateRadixWorkloadConfig(config), "page_size: got 0; must be in [1, 4096]");

  config = RadixWorkloadConfig{};
  config.stream.num_requests = 0;
  EXPECT_EQ(ValidateRadixWorkloadConfig(config),
            "stream.num_requests: got 0; must be in [1, 10000000]");

  config = RadixWorkloadConfig{};
  config.cache_token_budget = -1;
  EXPECT_EQ(ValidateRadixWorkloadConfig(config),
            "cache_token_budget: got -1; must be in [1, 268435456]");

  config = RadixWorkloadConfig{};
  config.in_flight_requests = 0;
  config.lock_in_flight = false;  // Still checked.
  EXPECT_EQ(ValidateRadixWorkloadConfig(config),
            "in_flight_requests: got 0; must be in [1, 65536]");

  config = RadixWorkloadConfig{};
  config.progress_interval = 0;
  EXPECT_EQ(ValidateRadixWorkloadConfig(config),
            "progress_interval: got 0; must be in [1, 10000000]");
}

TEST(RadixWorkloadTest, InvalidConfigRunsNothing) {
  RadixWorkloadConfig config;
  config.page_size = 5000;
  int progress_calls = 0;
  const RadixWorkloadReport report =
      RunRadixWorkload(config, [&](int64_t, int64_t) { ++progress_calls; });
  EXPECT_EQ(report.error, "page_size: got 5000; must be in [1, 4096]");
  EXPECT_EQ(report.requests, 0);
  EXPECT_EQ(progress_calls, 0);
}

TEST(RadixWorkloadTest, MatchesBruteForceWithoutEviction) {
  for (const int64_t page_size : {1, 4}) {
    SCOPED_TRACE(testing::Message() << "page_size " << page_size);
    RadixWorkloadConfig config = SmallConfig();
    config.page_size = page_size;
    const RadixWorkloadReport report = RunRadixWorkload(config);
    ASSERT_EQ(report.error, "");
    EXPECT_EQ(report.requests, 300);
    EXPECT_EQ(report.inserts, 300);
    EXPECT_EQ(report.matched_tokens, BruteForceMatchedTokens(config));
    EXPECT_GT(report.matched_tokens, 0);
    EXPECT_DOUBLE_EQ(report.hit_rate, static_cast<double>(report.matched_tokens) /
                                          static_cast<double>(report.request_tokens));
    EXPECT_EQ(report.evictions, 0);
    EXPECT_EQ(report.evicted_tokens, 0);
    // Without eviction, everything inserted is still there.
    EXPECT_EQ(report.final_tokens, report.inserted_tokens);
    EXPECT_GT(report.final_nodes, 0);
  }
}

TEST(RadixWorkloadTest, RequestTokensMatchTheStream) {
  const RadixWorkloadConfig config = SmallConfig();
  RequestStream stream(config.stream);
  Request request;
  int64_t tokens = 0;
  while (stream.Next(&request)) tokens += static_cast<int64_t>(request.tokens.size());
  EXPECT_EQ(RunRadixWorkload(config).request_tokens, tokens);
}

TEST(RadixWorkloadTest, EvictionKeepsCacheWithinBudget) {
  RadixWorkloadConfig config = SmallConfig();
  config.cache_token_budget = 1000;
  const RadixWorkloadReport report = RunRadixWorkload(config);
  ASSERT_EQ(report.error, "");
  EXPECT_GT(report.evictions, 0);
  EXPECT_GT(report.evicted_nodes, 0);
  EXPECT_LE(report.final_tokens, 1000);
  // Tokens in equal tokens out, with what remains.
  EXPECT_EQ(report.inserted_tokens - report.evicted_tokens, report.final_tokens);
  // A small cache hits less than an unbounded one.
  EXPECT_LT(report.matched_tokens, RunRadixWorkload(SmallConfig()).matched_tokens);
}

TEST(RadixWorkloadTest, InFlightLocksAreReleasedAndAccounted) {
  RadixWorkloadConfig config = SmallConfig();
  config.cache_token_budget = 500;
  config.lock_in_flight = true;
  config.in_flight_requests = 4;
  const RadixWorkloadReport report = RunRadixWorkload(config);
  ASSERT_EQ(report.error, "");
  EXPECT_GT(report.evictions, 0);
  EXPECT_EQ(report.inserted_tokens - report.evicted_tokens, report.final_tokens);
  EXPECT_EQ(report.evict_latency.samples, report.evictions);
  // Four in-flight requests pin at most four requests' worth of tokens:
  // 64 (system prompt) + 256 (history) + 32 (tail) each.
  EXPECT_GT(report.peak_locked_tokens, 0);
  EXPECT_LE(report.peak_locked_tokens, 4 * (64 + 256 + 32));

  // Pinning reduces what eviction may take, so more of each request hits.
  config.lock_in_flight = false;
  const RadixWorkloadReport unlocked = RunRadixWorkload(config);
  EXPECT_EQ(unlocked.peak_locked_tokens, 0);
  EXPECT_NE(unlocked.matched_tokens, report.matched_tokens);
}

TEST(RadixWorkloadTest, PeakLockedTokensCoverTheInFlightWindow) {
  // Without eviction the matched prefixes are known exactly, so the locked
  // set after each request is the trie of the last `in_flight_requests`
  // matched prefixes.
  RadixWorkloadConfig config = SmallConfig();
  config.lock_in_flight = true;
  config.in_flight_requests = 3;
  std::vector<Tokens> window;
  int64_t expected_peak = 0;
  for (Tokens& prefix : BruteForceMatchedPrefixes(config)) {
    window.push_back(std::move(prefix));
    if (window.size() > 3) window.erase(window.begin());
    expected_peak = std::max(expected_peak, TrieTokens(window));
  }
  const RadixWorkloadReport report = RunRadixWorkload(config);
  ASSERT_EQ(report.error, "");
  EXPECT_GT(expected_peak, 0);
  EXPECT_EQ(report.peak_locked_tokens, expected_peak);
}

TEST(RadixWorkloadTest, ReportsLatencyAndThroughput) {
  RadixWorkloadConfig config = SmallConfig();
  config.cache_token_budget = 2000;
  const RadixWorkloadReport report = RunRadixWorkload(config);
  ASSERT_EQ(report.error, "");
  EXPECT_EQ(report.match_latency.samples, 300);
  EXPECT_EQ(report.insert_latency.samples, 300);
  EXPECT_EQ(report.evict_latency.samples, report.evictions);
  ExpectOrdered(report.match_latency);
  ExpectOrdered(report.insert_latency);
  ExpectOrdered(report.evict_latency);
  EXPECT_GT(report.match_ops_per_second, 0.0);
  EXPECT_GT(report.insert_ops_per_second, 0.0);
  EXPECT_GT(report.evict_ops_per_second, 0.0);
  EXPECT_GT(report.compare_bytes, 0);
  EXPECT_EQ(report.compare_bytes % 4, 0);
  EXPECT_GT(report.compare_gb_per_second, 0.0);
  EXPECT_GT(report.wall_seconds, 0.0);
}

TEST(RadixWorkloadTest, DeterministicApartFromTiming) {
  RadixWorkloadConfig config = SmallConfig();
  config.cache_token_budget = 1500;
  config.lock_in_flight = true;
  const RadixWorkloadReport first = RunRadixWorkload(config);
  const RadixWorkloadReport second = RunRadixWorkload(config);
  EXPECT_EQ(first.matched_tokens, second.matched_tokens);
  EXPECT_EQ(first.inserted_tokens, second.inserted_tokens);
  EXPECT_EQ(first.evictions, second.evictions);
  EXPECT_EQ(first.evicted_tokens, second.evicted_tokens);
  EXPECT_EQ(first.compare_bytes, second.compare_bytes);
  EXPECT_EQ(first.final_nodes, second.final_nodes);
}

TEST(RadixWorkloadTest, ProgressEveryIntervalAndAtTheEnd) {
  RadixWorkloadConfig config = SmallConfig();
  config.stream.num_requests = 50;
  config.progress_interval = 7;
  std::vector<std::pair<int64_t, int64_t>> calls;
  RunRadixWorkload(config, [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  const std::vector<std::pair<int64_t, int64_t>> expected = {
      {7, 50}, {14, 50}, {21, 50}, {28, 50}, {35, 50}, {42, 50}, {49, 50}, {50, 50}};
  EXPECT_EQ(calls, expected);

  // No duplicate final call when the interval divides the count.
  config.progress_interval = 25;
  calls.clear();
  RunRadixWorkload(config, [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{25, 50}, {50, 50}}));
}

TEST(RadixWorkloadTest, DefaultConfigSharesSystemPromptsAndHistory) {
  // Defaults: 2000 requests from 64 users over 8 system prompts. Every
  // request after a user's first repeats at least its 512-token system
  // prompt, so the hit rate is high, and a 256Ki-token budget forces
  // eviction.
  const RadixWorkloadReport report = RunRadixWorkload(RadixWorkloadConfig{});
  ASSERT_EQ(report.error, "");
  EXPECT_EQ(report.requests, 2000);
  EXPECT_GT(report.hit_rate, 0.8);
  EXPECT_LT(report.hit_rate, 1.0);
  EXPECT_GT(report.evictions, 0);
}

}  // namespace
}  // namespace gpuprof::radix
