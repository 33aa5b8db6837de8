// The radix tree against a brute-force model, driven by arbitrary bytes: a page size, then a
// sequence of Insert / MatchPrefix / Lock / Unlock / Evict operations on token sequences from a
// tiny vocabulary (so that edges split at every depth). Until the first eviction the tree must
// agree exactly with the model (every whole-page prefix ever inserted); after it, everything the
// tree returns must still be a prefix the model holds, locked paths must survive eviction, and
// the tree's own invariant check must pass after every operation.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <span>
#include <vector>

#include "radix/radix_tree.h"

namespace {

using Tokens = std::vector<int32_t>;

class ByteSource {
 public:
  ByteSource(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return position_ >= size_; }
  uint8_t Next() { return position_ < size_ ? data_[position_++] : 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t position_ = 0;
};

// Every whole-page prefix of every sequence inserted.
class PrefixModel {
 public:
  explicit PrefixModel(size_t page_size) : page_size_(page_size) {}

  void Insert(const Tokens& tokens) {
    for (size_t length = page_size_; length <= tokens.size(); length += page_size_) {
      prefixes_.emplace(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(length));
    }
  }
  size_t LongestPrefix(const Tokens& tokens) const {
    size_t best = 0;
    for (size_t length = page_size_; length <= tokens.size(); length += page_size_) {
      if (!prefixes_.count(Tokens(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(length)))) {
        break;
      }
      best = length;
    }
    return best;
  }
  size_t TotalTokens() const { return prefixes_.size() * page_size_; }

 private:
  size_t page_size_;
  std::set<Tokens> prefixes_;
};

[[noreturn]] void Fail(const char* what, size_t expected, size_t got) {
  std::fprintf(stderr, "radix_tree_fuzzer: %s: model says %zu, tree says %zu\n", what, expected,
               got);
  std::abort();
}

void Check(bool condition, const char* what) {
  if (!condition) Fail(what, 1, 0);
}

struct HeldLock {
  gpuprof::radix::NodeHandle node;
  Tokens path;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ByteSource bytes(data, size);
  const size_t page_size = 1 + bytes.Next() % 4;
  gpuprof::radix::RadixTree tree(page_size);
  PrefixModel model(page_size);
  std::vector<HeldLock> locks;
  bool evicted = false;

  auto next_tokens = [&bytes] {
    Tokens tokens(bytes.Next() % 24);
    for (int32_t& token : tokens) token = bytes.Next() % 4;
    return tokens;
  };

  for (int operations = 0; !bytes.empty() && operations < 4096; ++operations) {
    switch (bytes.Next() % 5) {
      case 0: {  // Insert
        const Tokens tokens = next_tokens();
        const size_t cached = tree.Insert(tokens);
        if (!evicted && cached != model.LongestPrefix(tokens)) {
          Fail("Insert: tokens already cached", model.LongestPrefix(tokens), cached);
        }
        if (cached > model.LongestPrefix(tokens)) Fail("Insert: cached more than inserted", model.LongestPrefix(tokens), cached);
        model.Insert(tokens);
        break;
      }
      case 1:    // MatchPrefix
      case 2: {  // MatchPrefix and Lock the result
        const bool lock = bytes.Next() % 2 == 0;
        const Tokens tokens = next_tokens();
        const auto match = tree.MatchPrefix(tokens);
        const size_t expected = model.LongestPrefix(tokens);
        if (!evicted && match.prefix_length != expected) Fail("MatchPrefix", expected, match.prefix_length);
        if (match.prefix_length > expected) Fail("MatchPrefix beyond the model", expected, match.prefix_length);
        const Tokens path = tree.PathTokens(match.node);
        Check(path == Tokens(tokens.begin(),
                             tokens.begin() + static_cast<std::ptrdiff_t>(match.prefix_length)),
              "MatchPrefix: the node's path is not the matched prefix");
        if (lock) {
          Check(tree.Lock(match.node), "Lock of a node just matched failed");
          // Locking the root is a no-op: there is nothing to unlock later.
          if (match.prefix_length > 0) locks.push_back({match.node, path});
        }
        break;
      }
      case 3: {  // Unlock one held lock
        if (locks.empty()) {
          Check(!tree.Unlock(gpuprof::radix::NodeHandle()), "Unlock of a null handle succeeded");
          break;
        }
        const size_t index = bytes.Next() % locks.size();
        Check(tree.Unlock(locks[index].node), "Unlock of a held lock failed");
        locks.erase(locks.begin() + static_cast<std::ptrdiff_t>(index));
        break;
      }
      case 4: {  // Evict
        const size_t want = bytes.Next() % 32;
        const size_t before = tree.total_tokens();
        const size_t evictable = tree.evictable_tokens();
        const size_t freed = tree.Evict(want);
        evicted = evicted || freed > 0;
        if (tree.total_tokens() != before - freed) Fail("Evict: tokens freed", before - freed, tree.total_tokens());
        if (freed < std::min(want, evictable)) Fail("Evict freed too little", std::min(want, evictable), freed);
        for (const HeldLock& held : locks) {
          Check(tree.Contains(held.node), "Evict removed a locked node");
          Check(tree.PathTokens(held.node) == held.path, "Evict changed a locked path");
        }
        break;
      }
    }
    if (!evicted && tree.total_tokens() != model.TotalTokens()) {
      Fail("total tokens", model.TotalTokens(), tree.total_tokens());
    }
    const std::string problem = tree.CheckInvariants();
    if (!problem.empty()) {
      std::fprintf(stderr, "radix_tree_fuzzer: invariant broken: %s\n", problem.c_str());
      std::abort();
    }
  }
  return 0;
}
