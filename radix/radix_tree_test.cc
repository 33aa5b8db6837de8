#include "radix/radix_tree.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::radix {
namespace {

using Tokens = std::vector<int32_t>;

constexpr size_t kEvictAll = std::numeric_limits<size_t>::max();

// Brute-force model of a cache that never evicts: it keeps every inserted
// sequence and scans all of them for the longest shared prefix.
class ReferenceCache {
 public:
  explicit ReferenceCache(size_t page_size) : page_size_(page_size) {}

  size_t LongestPrefix(std::span<const int32_t> query) const {
    size_t best = 0;
    for (const Tokens& sequence : sequences_) {
      const size_t limit = std::min(sequence.size(), query.size());
      size_t common = 0;
      while (common < limit && sequence[common] == query[common]) ++common;
      best = std::max(best, common - common % page_size_);
    }
    return best;
  }

  void Insert(std::span<const int32_t> tokens) {
    sequences_.emplace_back(tokens.begin(),
                            tokens.end() - static_cast<std::ptrdiff_t>(tokens.size() % page_size_));
  }

  // A compressed trie stores each distinct whole-page prefix's last page
  // exactly once, so its token count is page_size * (distinct prefixes).
  size_t DistinctPrefixTokens() const {
    std::set<Tokens> prefixes;
    for (const Tokens& sequence : sequences_) {
      for (size_t length = page_size_; length <= sequence.size(); length += page_size_) {
        prefixes.emplace(sequence.begin(), sequence.begin() + static_cast<std::ptrdiff_t>(length));
      }
    }
    return prefixes.size() * page_size_;
  }

 private:
  size_t page_size_;
  std::vector<Tokens> sequences_;
};

// Sequences that share prefixes heavily, like real prompts: most start with a
// random prefix of an earlier sequence, and a tiny vocabulary makes the
// random parts collide too, so edges get split at every depth.
class SharedPrefixGenerator {
 public:
  SharedPrefixGenerator(uint64_t seed, int32_t vocab_size, size_t max_length)
      : rng_(seed), vocab_size_(vocab_size), max_length_(max_length) {}

  Tokens Next() {
    Tokens tokens;
    if (!history_.empty() && rng_() % 4 != 0) {
      const Tokens& base = history_[rng_() % history_.size()];
      const size_t keep = rng_() % (base.size() + 1);
      tokens.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(keep));
    }
    const size_t extra = rng_() % (max_length_ / 2 + 1);
    for (size_t i = 0; i < extra && tokens.size() < max_length_; ++i) {
      tokens.push_back(static_cast<int32_t>(rng_() % static_cast<uint64_t>(vocab_size_)));
    }
    history_.push_back(tokens);
    return tokens;
  }

  uint64_t Random() { return rng_(); }

 private:
  std::mt19937_64 rng_;
  int32_t vocab_size_;
  size_t max_length_;
  std::vector<Tokens> history_;
};

Tokens Prefix(const Tokens& tokens, size_t length) {
  return Tokens(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(length));
}

// ---------------------------------------------------------------------------
// Targeted behaviour.

TEST(RadixTreeTest, EmptyTreeMatchesNothing) {
  RadixTree tree;
  const MatchResult match = tree.MatchPrefix(Tokens{1, 2, 3});
  EXPECT_EQ(match.prefix_length, 0u);
  EXPECT_EQ(match.node, tree.root());
  EXPECT_EQ(tree.total_tokens(), 0u);
  EXPECT_EQ(tree.num_nodes(), 0u);
  EXPECT_EQ(tree.Evict(100), 0u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, InsertReturnsAlreadyCachedPrefix) {
  RadixTree tree;
  EXPECT_EQ(tree.Insert(Tokens{1, 2, 3}), 0u);
  EXPECT_EQ(tree.Insert(Tokens{1, 2, 3}), 3u);
  EXPECT_EQ(tree.Insert(Tokens{1, 2, 4}), 2u);  // Splits [1 2 3] into [1 2][3].
  EXPECT_EQ(tree.Insert(Tokens{1, 2, 3, 5}), 3u);
  EXPECT_EQ(tree.Insert(Tokens{}), 0u);
  // Nodes: [1 2] -> {[3] -> {[5]}, [4]}.
  EXPECT_EQ(tree.num_nodes(), 4u);
  EXPECT_EQ(tree.total_tokens(), 5u);
  EXPECT_EQ(tree.evictable_tokens(), 5u);
  EXPECT_EQ(tree.locked_tokens(), 0u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, MatchEndingInsideEdgeSplitsIt) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3, 4, 5});
  ASSERT_EQ(tree.num_nodes(), 1u);

  const MatchResult match = tree.MatchPrefix(Tokens{1, 2, 3, 9});
  EXPECT_EQ(match.prefix_length, 3u);
  EXPECT_EQ(tree.num_nodes(), 2u);
  EXPECT_EQ(tree.total_tokens(), 5u);
  EXPECT_EQ(tree.PathTokens(match.node), (Tokens{1, 2, 3}));
  EXPECT_EQ(tree.CheckInvariants(), "");

  // A query shorter than the edge splits it too.
  const MatchResult shorter = tree.MatchPrefix(Tokens{1, 2});
  EXPECT_EQ(shorter.prefix_length, 2u);
  EXPECT_EQ(tree.PathTokens(shorter.node), (Tokens{1, 2}));
  EXPECT_EQ(tree.num_nodes(), 3u);

  // The full sequence still matches end to end through the split nodes.
  const MatchResult full = tree.MatchPrefix(Tokens{1, 2, 3, 4, 5, 6});
  EXPECT_EQ(full.prefix_length, 5u);
  EXPECT_EQ(tree.PathTokens(full.node), (Tokens{1, 2, 3, 4, 5}));
  EXPECT_EQ(tree.num_nodes(), 3u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, HandleSurvivesSplitAboveIt) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3, 4});
  const MatchResult leaf = tree.MatchPrefix(Tokens{1, 2, 3, 4});
  tree.Insert(Tokens{1, 2, 7});  // Splits the edge above `leaf`.
  EXPECT_TRUE(tree.Contains(leaf.node));
  EXPECT_EQ(tree.PathTokens(leaf.node), (Tokens{1, 2, 3, 4}));
}

TEST(RadixTreeTest, PagedTreeInsertsAndMatchesWholePagesOnly) {
  RadixTree tree(4);
  EXPECT_EQ(tree.page_size(), 4u);
  const Tokens tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(tree.Insert(tokens), 0u);
  EXPECT_EQ(tree.total_tokens(), 8u);  // The partial page [9 10] is dropped.

  EXPECT_EQ(tree.MatchPrefix(tokens).prefix_length, 8u);
  EXPECT_EQ(tree.MatchPrefix(Prefix(tokens, 7)).prefix_length, 4u);
  EXPECT_EQ(tree.MatchPrefix(Prefix(tokens, 3)).prefix_length, 0u);
  // Diverging inside the second page matches only the first.
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2, 3, 4, 5, 6, 0, 8}).prefix_length, 4u);
  EXPECT_EQ(tree.Insert(Tokens{1, 2, 3, 4, 5, 6, 0, 8}), 4u);
  EXPECT_EQ(tree.total_tokens(), 12u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, PagedChildrenAreKeyedByFirstPage) {
  RadixTree tree(4);
  tree.Insert(Tokens{1, 2, 3, 4, 5, 6, 7, 8});
  // Same first token, different first page: a sibling, not a split.
  EXPECT_EQ(tree.Insert(Tokens{1, 2, 3, 5, 5, 6, 7, 8}), 0u);
  EXPECT_EQ(tree.num_nodes(), 2u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2, 3, 9}).prefix_length, 0u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2, 3, 5, 5, 6, 7, 8}).prefix_length, 8u);
  EXPECT_EQ(tree.num_nodes(), 2u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, PageSizeZeroActsAsOne) {
  RadixTree tree(0);
  EXPECT_EQ(tree.page_size(), 1u);
  tree.Insert(Tokens{1, 2, 3});
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2, 9}).prefix_length, 2u);
}

TEST(RadixTreeTest, LockProtectsPathUntilUnlocked) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3, 4});
  const MatchResult match = tree.MatchPrefix(Tokens{1, 2, 3, 4});
  ASSERT_TRUE(tree.Lock(match.node));
  EXPECT_EQ(tree.locked_tokens(), 4u);
  EXPECT_EQ(tree.evictable_tokens(), 0u);
  EXPECT_EQ(tree.Evict(kEvictAll), 0u);
  EXPECT_EQ(tree.total_tokens(), 4u);

  // Locks nest.
  ASSERT_TRUE(tree.Lock(match.node));
  ASSERT_TRUE(tree.Unlock(match.node));
  EXPECT_EQ(tree.locked_tokens(), 4u);
  ASSERT_TRUE(tree.Unlock(match.node));
  EXPECT_EQ(tree.locked_tokens(), 0u);
  EXPECT_EQ(tree.evictable_tokens(), 4u);

  // An unbalanced unlock is refused and changes nothing.
  EXPECT_FALSE(tree.Unlock(match.node));
  EXPECT_EQ(tree.evictable_tokens(), 4u);
  EXPECT_EQ(tree.CheckInvariants(), "");

  EXPECT_EQ(tree.Evict(kEvictAll), 4u);
  EXPECT_FALSE(tree.Contains(match.node));
  EXPECT_FALSE(tree.Lock(match.node));
  EXPECT_FALSE(tree.Unlock(match.node));
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, LockingInnerNodeKeepsOnlyItsPath) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3, 4});
  tree.Insert(Tokens{1, 2, 5, 6});
  const MatchResult inner = tree.MatchPrefix(Tokens{1, 2});
  ASSERT_TRUE(tree.Lock(inner.node));
  EXPECT_EQ(tree.locked_tokens(), 2u);
  EXPECT_EQ(tree.evictable_tokens(), 4u);

  EXPECT_EQ(tree.Evict(kEvictAll), 4u);
  EXPECT_EQ(tree.total_tokens(), 2u);
  EXPECT_EQ(tree.num_nodes(), 1u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2, 3, 4}).prefix_length, 2u);

  ASSERT_TRUE(tree.Unlock(inner.node));
  EXPECT_EQ(tree.Evict(kEvictAll), 2u);
  EXPECT_EQ(tree.num_nodes(), 0u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, SplittingLockedEdgeKeepsBothHalvesLocked) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3, 4});
  const MatchResult leaf = tree.MatchPrefix(Tokens{1, 2, 3, 4});
  ASSERT_TRUE(tree.Lock(leaf.node));
  EXPECT_EQ(tree.Insert(Tokens{1, 2, 9, 9}), 2u);
  EXPECT_EQ(tree.locked_tokens(), 4u);
  EXPECT_EQ(tree.evictable_tokens(), 2u);
  EXPECT_EQ(tree.CheckInvariants(), "");

  EXPECT_EQ(tree.Evict(kEvictAll), 2u);  // Only the new [9 9] leaf.
  ASSERT_TRUE(tree.Unlock(leaf.node));
  EXPECT_EQ(tree.locked_tokens(), 0u);
  EXPECT_EQ(tree.Evict(kEvictAll), 4u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, RootAndNullHandles) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2});
  EXPECT_TRUE(tree.Lock(tree.root()));
  EXPECT_TRUE(tree.Unlock(tree.root()));
  EXPECT_EQ(tree.locked_tokens(), 0u);
  EXPECT_TRUE(tree.PathTokens(tree.root()).empty());

  const NodeHandle null_handle;
  EXPECT_TRUE(null_handle.is_null());
  EXPECT_FALSE(tree.Contains(null_handle));
  EXPECT_FALSE(tree.Lock(null_handle));
  EXPECT_FALSE(tree.Unlock(null_handle));
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, StaleHandleStaysStaleAfterSlotReuse) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2});
  const NodeHandle old_handle = tree.MatchPrefix(Tokens{1, 2}).node;
  ASSERT_EQ(tree.Evict(kEvictAll), 2u);
  tree.Insert(Tokens{3, 4});  // Reuses the freed slot.
  const NodeHandle new_handle = tree.MatchPrefix(Tokens{3, 4}).node;
  EXPECT_NE(old_handle, new_handle);
  EXPECT_FALSE(tree.Contains(old_handle));
  EXPECT_FALSE(tree.Lock(old_handle));
  EXPECT_EQ(tree.locked_tokens(), 0u);
  EXPECT_TRUE(tree.PathTokens(old_handle).empty());
  EXPECT_TRUE(tree.Contains(new_handle));
}

TEST(RadixTreeTest, EvictsLeastRecentlyUsedLeafFirst) {
  RadixTree tree;
  tree.Insert(Tokens{1, 1});
  tree.Insert(Tokens{2, 2});
  tree.Insert(Tokens{3, 3});
  // Access order B, C, A makes B the oldest and A the newest.
  const NodeHandle b = tree.MatchPrefix(Tokens{2, 2}).node;
  const NodeHandle c = tree.MatchPrefix(Tokens{3, 3}).node;
  const NodeHandle a = tree.MatchPrefix(Tokens{1, 1}).node;

  EXPECT_EQ(tree.Evict(1), 2u);  // Whole nodes only.
  EXPECT_FALSE(tree.Contains(b));
  EXPECT_TRUE(tree.Contains(c));
  EXPECT_TRUE(tree.Contains(a));

  EXPECT_EQ(tree.Evict(1), 2u);
  EXPECT_FALSE(tree.Contains(c));
  EXPECT_TRUE(tree.Contains(a));

  EXPECT_EQ(tree.Evict(1), 2u);
  EXPECT_FALSE(tree.Contains(a));
  EXPECT_EQ(tree.Evict(1), 0u);
  EXPECT_EQ(tree.evicted_nodes(), 3u);
}

TEST(RadixTreeTest, InsertRefreshesRecency) {
  RadixTree tree;
  tree.Insert(Tokens{1, 1});
  tree.Insert(Tokens{2, 2});
  tree.Insert(Tokens{1, 1});  // Re-inserting counts as a use.
  EXPECT_EQ(tree.Evict(1), 2u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{2, 2}).prefix_length, 0u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 1}).prefix_length, 2u);
}

TEST(RadixTreeTest, EvictsParentAfterItsChildren) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3, 4});
  tree.Insert(Tokens{1, 2, 5, 6});  // [1 2] -> {[3 4], [5 6]}.
  tree.Insert(Tokens{7, 7});
  tree.MatchPrefix(Tokens{9});  // Advances the clock only.
  ASSERT_EQ(tree.num_nodes(), 4u);

  // Oldest leaf first: [3 4]. Its parent [1 2] still has a child.
  EXPECT_EQ(tree.Evict(1), 2u);
  EXPECT_EQ(tree.num_nodes(), 3u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2, 3, 4}).prefix_length, 2u);
  EXPECT_EQ(tree.CheckInvariants(), "");
  // That match made [1 2] newer than [7 7]; use [7 7] again to make it newest.
  EXPECT_EQ(tree.MatchPrefix(Tokens{7, 7}).prefix_length, 2u);

  // [5 6] goes, then [1 2], now a childless leaf older than [7 7].
  EXPECT_EQ(tree.Evict(3), 4u);
  EXPECT_EQ(tree.num_nodes(), 1u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2}).prefix_length, 0u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{7, 7}).prefix_length, 2u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, ParentBecomingLeafWaitsBehindOlderLeaves) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3});
  tree.Insert(Tokens{1, 2, 4});  // [1 2] -> {[3], [4]}.
  tree.Insert(Tokens{7});
  tree.MatchPrefix(Tokens{1, 2});  // [1 2] is now newer than [7].

  EXPECT_EQ(tree.Evict(2), 2u);  // [3] and [4].
  // [1 2] is a leaf now, but [7] has waited longer.
  EXPECT_EQ(tree.Evict(1), 1u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{7}).prefix_length, 0u);
  EXPECT_EQ(tree.MatchPrefix(Tokens{1, 2}).prefix_length, 2u);
  EXPECT_EQ(tree.CheckInvariants(), "");
}

TEST(RadixTreeTest, CountsCompareBytes) {
  RadixTree tree;
  tree.Insert(Tokens{1, 2, 3, 4, 5, 6, 7, 8});  // Nothing to compare against.
  EXPECT_EQ(tree.compare_bytes(), 0u);
  tree.Insert(Tokens{1, 2, 3, 4, 5, 6, 7, 8});  // 8 equal tokens.
  EXPECT_EQ(tree.compare_bytes(), 32u);
  tree.MatchPrefix(Tokens{1, 2, 3, 9});  // 3 equal plus the mismatch.
  EXPECT_EQ(tree.compare_bytes(), 48u);
}

TEST(RadixTreeTest, DeepChainStaysConsistent) {
  // Inserting every prefix of one long sequence, longest first, splits the
  // edge at each length: a chain as deep as the sequence is long.
  constexpr size_t kLength = 10000;
  Tokens tokens(kLength);
  for (size_t i = 0; i < kLength; ++i) tokens[i] = static_cast<int32_t>(i);
  RadixTree tree;
  tree.Insert(tokens);
  for (size_t length = kLength - 1; length >= 1; --length) {
    ASSERT_EQ(tree.Insert(Prefix(tokens, length)), length);
  }
  EXPECT_EQ(tree.num_nodes(), kLength);
  EXPECT_EQ(tree.total_tokens(), kLength);
  EXPECT_EQ(tree.CheckInvariants(), "");
  // Leaf-first eviction unwinds the chain one node at a time.
  EXPECT_EQ(tree.Evict(kEvictAll), kLength);
  EXPECT_EQ(tree.num_nodes(), 0u);
}

// ---------------------------------------------------------------------------
// Random streams against the brute-force reference.

// Long enough that sequences span several pages at every page size.
size_t MaxTestLength(size_t page_size) { return std::max<size_t>(48, 8 * page_size); }

class RadixTreeRandomTest : public ::testing::TestWithParam<size_t> {};

TEST_P(RadixTreeRandomTest, MatchesBruteForceWithoutEviction) {
  const size_t page_size = GetParam();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    SharedPrefixGenerator generator(seed, /*vocab_size=*/3, MaxTestLength(page_size));
    RadixTree tree(page_size);
    ReferenceCache reference(page_size);
    for (int step = 0; step < 1000; ++step) {
      const Tokens tokens = generator.Next();
      const size_t expected = reference.LongestPrefix(tokens);
      if (generator.Random() % 2 == 0) {
        ASSERT_EQ(tree.Insert(tokens), expected) << "step " << step;
        reference.Insert(tokens);
      } else {
        const MatchResult match = tree.MatchPrefix(tokens);
        ASSERT_EQ(match.prefix_length, expected) << "step " << step;
        ASSERT_EQ(tree.PathTokens(match.node), Prefix(tokens, expected)) << "step " << step;
      }
      if (step % 50 == 0) {
        ASSERT_EQ(tree.CheckInvariants(), "") << "step " << step;
      }
    }
    EXPECT_EQ(tree.total_tokens(), reference.DistinctPrefixTokens());
    EXPECT_EQ(tree.evictable_tokens(), tree.total_tokens());
    EXPECT_EQ(tree.CheckInvariants(), "");
  }
}

TEST_P(RadixTreeRandomTest, StaysConsistentUnderEvictionAndLocks) {
  const size_t page_size = GetParam();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SCOPED_TRACE(testing::Message() << "seed " << seed);
    SharedPrefixGenerator generator(seed + 100, /*vocab_size=*/3, MaxTestLength(page_size));
    RadixTree tree(page_size);
    // Everything ever inserted: the tree must hold a subset of it.
    ReferenceCache ever_inserted(page_size);

    struct Pin {
      NodeHandle node;
      Tokens prefix;
    };
    std::vector<Pin> pins;
    // Coverage counters, so the test cannot pass by never evicting or
    // locking anything.
    size_t total_freed = 0;
    size_t most_pins = 0;
    int evictions_blocked_by_locks = 0;

    for (int step = 0; step < 1500; ++step) {
      const Tokens tokens = generator.Next();
      // Weights: 3 inserts, 3 matches (half of them locking), 1 unlock and
      // 1 evict in 8, so pins accumulate while the cache churns.
      switch (generator.Random() % 8) {
        case 0:
        case 1:
        case 2: {
          const size_t shared = tree.Insert(tokens);
          ASSERT_LE(shared, ever_inserted.LongestPrefix(tokens)) << "step " << step;
          ASSERT_EQ(shared % page_size, 0u);
          ever_inserted.Insert(tokens);
          // Just inserted, so it matches in full.
          ASSERT_EQ(tree.MatchPrefix(tokens).prefix_length,
                    tokens.size() - tokens.size() % page_size);
          break;
        }
        case 3:
        case 4:
        case 5: {
          const MatchResult match = tree.MatchPrefix(tokens);
          ASSERT_LE(match.prefix_length, ever_inserted.LongestPrefix(tokens)) << "step " << step;
          ASSERT_EQ(tree.PathTokens(match.node), Prefix(tokens, match.prefix_length));
          if (generator.Random() % 2 == 0) {
            ASSERT_TRUE(tree.Lock(match.node));
            pins.push_back({match.node, Prefix(tokens, match.prefix_length)});
            most_pins = std::max(most_pins, pins.size());
          }
          break;
        }
        case 6: {
          if (!pins.empty()) {
            const size_t victim = generator.Random() % pins.size();
            ASSERT_TRUE(tree.Unlock(pins[victim].node));
            pins.erase(pins.begin() + static_cast<std::ptrdiff_t>(victim));
          }
          break;
        }
        case 7: {
          const size_t before = tree.total_tokens();
          const size_t evictable_before = tree.evictable_tokens();
          // Now and then ask for everything, which only locks can withstand.
          const size_t request = generator.Random() % 8 == 0 ? kEvictAll : generator.Random() % 64;
          const size_t freed = tree.Evict(request);
          ASSERT_EQ(before - tree.total_tokens(), freed) << "step " << step;
          ASSERT_LE(freed, evictable_before);
          // Either enough was freed or nothing evictable is left.
          ASSERT_TRUE(freed >= request || tree.evictable_tokens() == 0) << "step " << step;
          total_freed += freed;
          if (freed < request && tree.locked_tokens() > 0) ++evictions_blocked_by_locks;
          break;
        }
      }
      ASSERT_EQ(tree.CheckInvariants(), "") << "step " << step;
      for (const Pin& pin : pins) {
        ASSERT_TRUE(tree.Contains(pin.node)) << "step " << step;
        ASSERT_EQ(tree.PathTokens(pin.node), pin.prefix) << "step " << step;
      }
    }

    EXPECT_GT(total_freed, 1000u);
    EXPECT_GE(most_pins, 5u);
    EXPECT_GT(evictions_blocked_by_locks, 0);

    // Pinned prefixes are all still fully cached.
    for (const Pin& pin : pins) {
      EXPECT_EQ(tree.MatchPrefix(pin.prefix).prefix_length, pin.prefix.size());
    }
    // Locked tokens cannot be evicted; once unlocked, everything can.
    tree.Evict(kEvictAll);
    EXPECT_EQ(tree.evictable_tokens(), 0u);
    EXPECT_EQ(tree.total_tokens(), tree.locked_tokens());
    for (const Pin& pin : pins) ASSERT_TRUE(tree.Unlock(pin.node));
    EXPECT_EQ(tree.locked_tokens(), 0u);
    const size_t remaining = tree.total_tokens();
    EXPECT_EQ(tree.Evict(kEvictAll), remaining);
    EXPECT_EQ(tree.total_tokens(), 0u);
    EXPECT_EQ(tree.num_nodes(), 0u);
    EXPECT_EQ(tree.CheckInvariants(), "");
  }
}

INSTANTIATE_TEST_SUITE_P(PageSizes, RadixTreeRandomTest, ::testing::Values(1, 2, 4, 16),
                         [](const ::testing::TestParamInfo<size_t>& param_info) {
                           return "page_size_" + std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace gpuprof::radix
