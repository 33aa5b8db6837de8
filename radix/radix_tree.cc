#include "radix/radix_tree.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "radix/token_compare.h"

namespace gpuprof::radix {
namespace {

// A child's first page, viewed in place. The map's keys point into the
// child's own edge storage, and lookups point into the query, so finding a
// child never allocates.
struct PageKey {
  const int32_t* tokens;
  size_t size;
};

struct PageKeyHash {
  size_t operator()(const PageKey& key) const {
    // FNV-1a over 32-bit words, then the splitmix64 finalizer so that
    // consecutive token ids spread over the buckets.
    uint64_t hash = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < key.size; ++i) {
      hash ^= static_cast<uint32_t>(key.tokens[i]);
      hash *= 0x100000001b3ull;
    }
    hash ^= hash >> 30;
    hash *= 0xbf58476d1ce4e5b9ull;
    hash ^= hash >> 27;
    hash *= 0x94d049bb133111ebull;
    hash ^= hash >> 31;
    return static_cast<size_t>(hash);
  }
};

struct PageKeyEqual {
  bool operator()(const PageKey& a, const PageKey& b) const {
    return a.size == b.size && std::equal(a.tokens, a.tokens + a.size, b.tokens);
  }
};

}  // namespace

struct RadixTree::Node {
  // Tokens on the edge from the parent; empty only for the root. Always a
  // whole number of pages.
  std::vector<int32_t> key;
  Node* parent = nullptr;
  // Keyed by each child's first page; children are owned by the slot map.
  std::unordered_map<PageKey, Node*, PageKeyHash, PageKeyEqual> children;
  uint32_t index = 0;
  // Locks held on this node or any descendant.
  int64_t lock_count = 0;
  uint64_t last_access = 0;
  bool in_eviction_queue = false;
};

RadixTree::RadixTree(size_t page_size) : page_size_(std::max<size_t>(1, page_size)) {
  root_ = NewNode(nullptr, {});
  num_nodes_ = 0;  // The root is not counted.
}

RadixTree::~RadixTree() = default;

RadixTree::Node* RadixTree::Resolve(NodeHandle handle) const {
  if (handle.is_null() || handle.index_ >= nodes_.size()) return nullptr;
  if (generations_[handle.index_] != handle.generation_) return nullptr;
  return nodes_[handle.index_].get();
}

NodeHandle RadixTree::HandleOf(const Node* node) const {
  return NodeHandle(node->index, generations_[node->index]);
}

RadixTree::Node* RadixTree::NewNode(Node* parent, std::vector<int32_t> key) {
  uint32_t index;
  if (!free_slots_.empty()) {
    index = free_slots_.back();
    free_slots_.pop_back();
  } else {
    index = static_cast<uint32_t>(nodes_.size());
    nodes_.emplace_back();
    generations_.push_back(1);
  }
  auto node = std::make_unique<Node>();
  node->key = std::move(key);
  node->parent = parent;
  node->index = index;
  Node* raw = node.get();
  nodes_[index] = std::move(node);
  ++num_nodes_;
  return raw;
}

void RadixTree::FreeNode(Node* node) {
  const uint32_t index = node->index;
  nodes_[index].reset();
  // Invalidate outstanding handles; skip 0, which means "null handle".
  uint32_t& generation = generations_[index];
  generation = generation == std::numeric_limits<uint32_t>::max() ? 1 : generation + 1;
  free_slots_.push_back(index);
  --num_nodes_;
}

bool RadixTree::Contains(NodeHandle node) const { return Resolve(node) != nullptr; }

NodeHandle RadixTree::root() const { return HandleOf(root_); }

std::vector<int32_t> RadixTree::PathTokens(NodeHandle handle) const {
  std::vector<const Node*> path;
  for (const Node* node = Resolve(handle); node != nullptr && node != root_; node = node->parent) {
    path.push_back(node);
  }
  std::vector<int32_t> tokens;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    tokens.insert(tokens.end(), (*it)->key.begin(), (*it)->key.end());
  }
  return tokens;
}

bool RadixTree::IsEvictable(const Node& node) {
  return node.parent != nullptr && node.lock_count == 0 && node.children.empty();
}

void RadixTree::UpdateEvictability(Node* node) {
  const bool evictable = IsEvictable(*node);
  if (evictable == node->in_eviction_queue) return;
  if (evictable) {
    eviction_queue_.emplace(node->last_access, node->index);
  } else {
    eviction_queue_.erase({node->last_access, node->index});
  }
  node->in_eviction_queue = evictable;
}

void RadixTree::Touch(Node* node, uint64_t now) {
  if (node->in_eviction_queue) {
    // The queue is ordered by access time, so re-key the entry.
    eviction_queue_.erase({node->last_access, node->index});
    eviction_queue_.emplace(now, node->index);
  }
  node->last_access = now;
}

size_t RadixTree::MatchEdge(const Node& child, const int32_t* tokens, size_t available) {
  const size_t limit = std::min(child.key.size(), available);
  const size_t common = CommonPrefixLength(child.key.data(), tokens, limit);
  // The compare examined every equal token plus the mismatching one, if any.
  const size_t examined = common < limit ? common + 1 : common;
  compare_bytes_ += examined * sizeof(int32_t);
  return common - common % page_size_;
}

RadixTree::Node* RadixTree::SplitEdge(Node* child, size_t prefix_length) {
  Node* parent = child->parent;
  // Unlink first: the map key points into child->key, which is about to
  // change.
  parent->children.erase(PageKey{child->key.data(), page_size_});

  const auto split_at = child->key.begin() + static_cast<std::ptrdiff_t>(prefix_length);
  Node* middle = NewNode(parent, std::vector<int32_t>(child->key.begin(), split_at));
  child->key.erase(child->key.begin(), split_at);
  child->parent = middle;

  // The middle node lies on every path through `child`, so it inherits its
  // locks and recency. Token totals are unchanged.
  middle->lock_count = child->lock_count;
  middle->last_access = child->last_access;
  middle->children.emplace(PageKey{child->key.data(), page_size_}, child);
  parent->children.emplace(PageKey{middle->key.data(), page_size_}, middle);
  return middle;
}

void RadixTree::AddLeaf(Node* parent, std::span<const int32_t> tokens, uint64_t now) {
  Node* leaf = NewNode(parent, std::vector<int32_t>(tokens.begin(), tokens.end()));
  leaf->last_access = now;
  parent->children.emplace(PageKey{leaf->key.data(), page_size_}, leaf);
  evictable_tokens_ += tokens.size();
  UpdateEvictability(parent);  // No longer a leaf.
  UpdateEvictability(leaf);
}

std::pair<RadixTree::Node*, size_t> RadixTree::Descend(std::span<const int32_t> tokens,
                                                       uint64_t now) {
  Node* node = root_;
  size_t matched = 0;
  while (matched < tokens.size()) {
    const int32_t* rest = tokens.data() + matched;
    const auto it = node->children.find(PageKey{rest, page_size_});
    if (it == node->children.end()) break;
    Node* child = it->second;
    // At least the first page matches, because the map lookup compared it.
    const size_t common = MatchEdge(*child, rest, tokens.size() - matched);
    const bool ends_inside_edge = common < child->key.size();
    if (ends_inside_edge) child = SplitEdge(child, common);
    Touch(child, now);
    node = child;
    matched += common;
    if (ends_inside_edge) break;
  }
  return {node, matched};
}

size_t RadixTree::Insert(std::span<const int32_t> tokens) {
  const uint64_t now = ++clock_;
  tokens = tokens.first(tokens.size() - tokens.size() % page_size_);
  const auto [node, matched] = Descend(tokens, now);
  if (matched < tokens.size()) AddLeaf(node, tokens.subspan(matched), now);
  return matched;
}

MatchResult RadixTree::MatchPrefix(std::span<const int32_t> tokens) {
  const uint64_t now = ++clock_;
  tokens = tokens.first(tokens.size() - tokens.size() % page_size_);
  const auto [node, matched] = Descend(tokens, now);
  return MatchResult{.prefix_length = matched, .node = HandleOf(node)};
}

bool RadixTree::Lock(NodeHandle handle) {
  Node* const start = Resolve(handle);
  if (start == nullptr) return false;
  for (Node* node = start; node != root_; node = node->parent) {
    if (node->lock_count == 0) {
      evictable_tokens_ -= node->key.size();
      locked_tokens_ += node->key.size();
    }
    ++node->lock_count;
    UpdateEvictability(node);
  }
  return true;
}

bool RadixTree::Unlock(NodeHandle handle) {
  Node* const start = Resolve(handle);
  if (start == nullptr) return false;
  // Check the whole path before changing anything so a bad call leaves the
  // tree as it was. (Ancestors hold at least the node's count, so checking
  // `start` would do; checking all of it also catches corruption.)
  for (const Node* node = start; node != root_; node = node->parent) {
    if (node->lock_count <= 0) return false;
  }
  for (Node* node = start; node != root_; node = node->parent) {
    --node->lock_count;
    if (node->lock_count == 0) {
      locked_tokens_ -= node->key.size();
      evictable_tokens_ += node->key.size();
    }
    UpdateEvictability(node);
  }
  return true;
}

size_t RadixTree::Evict(size_t num_tokens) {
  size_t freed = 0;
  while (freed < num_tokens && !eviction_queue_.empty()) {
    const uint32_t victim_index = eviction_queue_.begin()->second;
    eviction_queue_.erase(eviction_queue_.begin());
    Node* victim = nodes_[victim_index].get();
    victim->in_eviction_queue = false;

    Node* parent = victim->parent;
    parent->children.erase(PageKey{victim->key.data(), page_size_});
    freed += victim->key.size();
    evictable_tokens_ -= victim->key.size();
    ++evicted_nodes_;
    FreeNode(victim);
    // The parent may now be an unlocked leaf. Its access time is at least
    // its children's, so it never jumps ahead of older leaves.
    UpdateEvictability(parent);
  }
  return freed;
}

std::string RadixTree::CheckInvariants() const {
  const auto describe = [](const Node* node) { return "node " + std::to_string(node->index); };
  if (root_ == nullptr || nodes_.empty() || nodes_[0].get() != root_) {
    return "root is not slot 0";
  }
  if (!root_->key.empty() || root_->parent != nullptr) {
    return "root has a key or a parent";
  }

  size_t visited = 0;
  size_t total = 0;
  size_t locked = 0;
  size_t queue_entries = 0;
  // Iterative walk: with page size 1 a tree can be as deep as its longest
  // sequence, too deep for recursion.
  std::vector<const Node*> stack = {root_};
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    // More visits than slots means a node is reachable twice (a cycle or a
    // shared child); stop before looping forever.
    if (++visited > nodes_.size()) return "a node is reachable along more than one path";
    if (node->index >= nodes_.size() || nodes_[node->index].get() != node) {
      return describe(node) + " is not owned by its slot";
    }
    if (generations_[node->index] == 0) return describe(node) + " has generation 0";
    if (node->lock_count < 0) return describe(node) + " has a negative lock count";

    if (node != root_) {
      if (node->key.empty()) return describe(node) + " has an empty edge";
      if (node->key.size() % page_size_ != 0) {
        return describe(node) + " has an edge of " + std::to_string(node->key.size()) +
               " tokens, not a whole number of pages";
      }
      if (node->parent != root_ && node->last_access > node->parent->last_access) {
        return describe(node) + " was accessed after its parent";
      }
      total += node->key.size();
      if (node->lock_count > 0) locked += node->key.size();
    }

    int64_t child_locks = 0;
    for (const auto& [key, child] : node->children) {
      if (child == nullptr || child->parent != node) {
        return describe(node) + " has a child whose parent link is wrong";
      }
      if (key.size != page_size_ || key.tokens != child->key.data()) {
        return describe(node) + " keys a child by something other than its first page";
      }
      child_locks += child->lock_count;
      stack.push_back(child);
    }
    if (node != root_ && node->lock_count < child_locks) {
      return describe(node) + " holds fewer locks than its children";
    }

    const bool queued = eviction_queue_.count({node->last_access, node->index}) > 0;
    if (node->in_eviction_queue != queued) {
      return describe(node) + " eviction queue flag disagrees with the queue";
    }
    if (queued != IsEvictable(*node)) {
      return describe(node) + (queued ? " is queued for eviction but is not an unlocked leaf"
                                      : " is an unlocked leaf missing from the eviction queue");
    }
    if (queued) ++queue_entries;
  }

  if (visited != num_nodes_ + 1) {
    return "reached " + std::to_string(visited - 1) + " nodes but num_nodes is " +
           std::to_string(num_nodes_);
  }
  const size_t live_slots = static_cast<size_t>(std::count_if(
      nodes_.begin(), nodes_.end(), [](const auto& slot) { return slot != nullptr; }));
  if (live_slots != visited || live_slots + free_slots_.size() != nodes_.size()) {
    return "slot map holds " + std::to_string(live_slots) + " live nodes, tree has " +
           std::to_string(visited);
  }
  if (queue_entries != eviction_queue_.size()) {
    return "eviction queue holds entries for nodes not in the tree";
  }
  if (total != total_tokens()) {
    return "nodes hold " + std::to_string(total) + " tokens but total_tokens is " +
           std::to_string(total_tokens());
  }
  if (locked != locked_tokens_) {
    return "locked nodes hold " + std::to_string(locked) + " tokens but locked_tokens is " +
           std::to_string(locked_tokens_);
  }
  return "";
}

}  // namespace gpuprof::radix
