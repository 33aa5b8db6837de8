// A compressed radix tree over int32 token sequences: the prefix cache an LLM
// serving engine keeps so requests sharing a prompt prefix reuse its KV cache.
// Only the token structure is modelled (no KV indices), which is what prefix
// matching, insertion and eviction cost on the CPU.

#ifndef GPUPROF_RADIX_RADIX_TREE_H_
#define GPUPROF_RADIX_RADIX_TREE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace gpuprof::radix {

// Names one tree node. Handles are cheap to copy and safe to keep: once the
// node is evicted, the tree reports the handle as stale instead of touching
// freed memory. A node keeps its handle when an edge above it is split, and
// always covers the same token prefix from the root.
class NodeHandle {
 public:
  NodeHandle() = default;

  // True for a default-constructed handle, which names no node.
  bool is_null() const { return generation_ == 0; }

  friend bool operator==(const NodeHandle&, const NodeHandle&) = default;

 private:
  friend class RadixTree;
  NodeHandle(uint32_t index, uint32_t generation) : index_(index), generation_(generation) {}

  uint32_t index_ = 0;
  // Bumped every time the slot is reused; 0 never names a live node.
  uint32_t generation_ = 0;
};

struct MatchResult {
  // Length of the longest cached prefix, a multiple of the page size.
  size_t prefix_length = 0;
  // The node whose root path is exactly that prefix (the root when
  // prefix_length is 0).
  NodeHandle node;
};

// Not thread-safe: callers serialize access, as a serving engine's scheduler
// does.
class RadixTree {
 public:
  // `page_size` is the granularity of cached KV blocks: sequences are inserted
  // and matched in whole pages only. Values below 1 are treated as 1.
  explicit RadixTree(size_t page_size = 1);
  ~RadixTree();

  // Neither copyable nor movable: handles and the eviction queue refer to
  // node slots of this particular tree.
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  // Caches `tokens` (truncated to whole pages), splitting an edge where the
  // sequence diverges from it. Returns how many leading tokens were already
  // cached. Refreshes the LRU time of the whole path.
  size_t Insert(std::span<const int32_t> tokens);

  // Finds the longest cached prefix of `tokens`, in whole pages. When the
  // match ends inside an edge, the edge is split so the returned node covers
  // exactly the matched prefix (and can be locked on its own). Refreshes the
  // LRU time of the matched path.
  MatchResult MatchPrefix(std::span<const int32_t> tokens);

  // Pins the path from `node` to the root against eviction, as an in-flight
  // request does with the prefix it reuses. Locks nest. Returns false, and
  // changes nothing, if the handle is null or its node was evicted. Locking
  // the root is a no-op that succeeds.
  bool Lock(NodeHandle node);

  // Releases one Lock. Returns false, and changes nothing, if the handle is
  // stale or null, or the path holds no lock to release (an unbalanced
  // Unlock, which is a caller bug).
  bool Unlock(NodeHandle node);

  // Evicts least-recently-used unlocked leaves (a parent left childless
  // becomes a leaf and a candidate in turn) until at least `num_tokens` have
  // been freed or nothing evictable remains. Whole nodes are evicted, so more
  // than `num_tokens` may be freed. Returns the number of tokens freed.
  size_t Evict(size_t num_tokens);

  // True if `node` names a live node.
  bool Contains(NodeHandle node) const;

  // The token prefix `node` covers, from the root; empty for the root or a
  // stale handle.
  std::vector<int32_t> PathTokens(NodeHandle node) const;

  NodeHandle root() const;
  size_t page_size() const { return page_size_; }

  // Tokens held by all nodes.
  size_t total_tokens() const { return evictable_tokens_ + locked_tokens_; }
  // Tokens in nodes no lock covers.
  size_t evictable_tokens() const { return evictable_tokens_; }
  // Tokens in nodes on a locked path.
  size_t locked_tokens() const { return locked_tokens_; }
  // Nodes other than the root.
  size_t num_nodes() const { return num_nodes_; }

  // Bytes of token data compared along edges by Insert and MatchPrefix so far
  // (tokens examined * 4), for reporting compare throughput.
  uint64_t compare_bytes() const { return compare_bytes_; }
  // Nodes freed by Evict so far.
  uint64_t evicted_nodes() const { return evicted_nodes_; }

  // Walks the whole tree and cross-checks structure, lock counts, token
  // totals, LRU order and the eviction queue. Returns an empty string when
  // consistent, else a description of the first problem found. O(nodes).
  std::string CheckInvariants() const;

 private:
  struct Node;

  Node* Resolve(NodeHandle handle) const;
  NodeHandle HandleOf(const Node* node) const;
  Node* NewNode(Node* parent, std::vector<int32_t> key);
  void FreeNode(Node* node);

  // Walks from the root along `tokens` (already truncated to whole pages),
  // splitting the last edge if the match ends inside it and stamping every
  // node on the path with `now`. Returns the deepest node and matched length.
  std::pair<Node*, size_t> Descend(std::span<const int32_t> tokens, uint64_t now);
  // Compares an edge with the query and rounds the result down to whole pages.
  size_t MatchEdge(const Node& child, const int32_t* tokens, size_t available);
  // Splits `child`'s edge after `prefix_length` tokens and returns the new
  // node that takes the prefix; `child` keeps the suffix and its identity.
  Node* SplitEdge(Node* child, size_t prefix_length);
  void AddLeaf(Node* parent, std::span<const int32_t> tokens, uint64_t now);
  void Touch(Node* node, uint64_t now);
  // Puts `node` in, or takes it out of, the eviction queue so the queue holds
  // exactly the unlocked non-root leaves.
  void UpdateEvictability(Node* node);
  static bool IsEvictable(const Node& node);

  size_t page_size_;
  // Slot map: nodes_[i] owns the node with index i (null when free), and
  // generations_[i] tells a live handle from a stale one.
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<uint32_t> generations_;
  std::vector<uint32_t> free_slots_;
  Node* root_ = nullptr;

  // Unlocked leaves ordered by (last access time, node index): the first
  // entry is the next eviction victim; the index breaks ties
  // deterministically.
  std::set<std::pair<uint64_t, uint32_t>> eviction_queue_;

  // Logical LRU clock, advanced once per Insert or MatchPrefix, so eviction
  // order is deterministic and independent of wall time.
  uint64_t clock_ = 0;
  size_t evictable_tokens_ = 0;
  size_t locked_tokens_ = 0;
  size_t num_nodes_ = 0;
  uint64_t compare_bytes_ = 0;
  uint64_t evicted_nodes_ = 0;
};

}  // namespace gpuprof::radix

#endif  // GPUPROF_RADIX_RADIX_TREE_H_
