#include "daemon/scheduling/gpu_placement.h"

#include <algorithm>
#include <tuple>

namespace gpuprof::daemon {
namespace {

// Higher is a closer link; self never enters a pair score.
int LinkScore(v1::LinkType type) {
  switch (type) {
    case v1::LINK_TYPE_NVLINK:
      return 3;
    case v1::LINK_TYPE_PCIE_SWITCH:
      return 2;
    case v1::LINK_TYPE_PCIE_HOST_BRIDGE:
      return 1;
    default:
      return 0;
  }
}

// Calls visit(combination) for every k-subset of `items`, in lexicographic order.
template <typename Visit>
void ForEachCombination(const std::vector<int>& items, int k, Visit&& visit) {
  const int n = static_cast<int>(items.size());
  if (k > n || k <= 0) return;
  std::vector<int> index(k);
  for (int i = 0; i < k; ++i) index[i] = i;
  std::vector<int> combination(k);
  while (true) {
    for (int i = 0; i < k; ++i) combination[i] = items[index[i]];
    visit(combination);
    int i = k - 1;
    while (i >= 0 && index[i] == n - k + i) --i;
    if (i < 0) return;
    ++index[i];
    for (int j = i + 1; j < k; ++j) index[j] = index[j - 1] + 1;
  }
}

}  // namespace

GpuTopology::GpuTopology(const v1::ListGpusResponse& inventory) {
  const int n = inventory.gpus_size();
  numa_node_.assign(n, -1);
  links_.assign(n, std::vector<v1::LinkType>(n, v1::LINK_TYPE_UNSPECIFIED));
  for (const auto& gpu : inventory.gpus()) {
    if (gpu.index() >= 0 && gpu.index() < n) numa_node_[gpu.index()] = gpu.numa_node();
  }
  for (int i = 0; i < n; ++i) links_[i][i] = v1::LINK_TYPE_SELF;
  for (const auto& link : inventory.links()) {
    if (link.gpu_a() < 0 || link.gpu_a() >= n || link.gpu_b() < 0 || link.gpu_b() >= n) continue;
    links_[link.gpu_a()][link.gpu_b()] = link.type();
  }
}

v1::LinkType GpuTopology::Link(int a, int b) const { return links_[a][b]; }

bool GpuTopology::AllPairsNvlink(const std::vector<int>& gpus) const {
  for (size_t i = 0; i < gpus.size(); ++i) {
    for (size_t j = i + 1; j < gpus.size(); ++j) {
      if (links_[gpus[i]][gpus[j]] != v1::LINK_TYPE_NVLINK) return false;
    }
  }
  return true;
}

bool GpuTopology::SameNumaNode(const std::vector<int>& gpus) const {
  for (int gpu : gpus) {
    if (numa_node_[gpu] != numa_node_[gpus.front()]) return false;
  }
  return true;
}

std::optional<std::vector<int>> ChooseGpus(const v1::GpuSelection& selection, int gpu_count,
                                           const GpuTopology& topology,
                                           const std::set<int>& free_gpus) {
  if (!selection.gpu_ids().empty()) {
    std::vector<int> ids(selection.gpu_ids().begin(), selection.gpu_ids().end());
    for (int id : ids) {
      if (!free_gpus.contains(id)) return std::nullopt;
    }
    return ids;
  }
  if (gpu_count <= 0) return std::vector<int>{};
  const std::vector<int> candidates(free_gpus.begin(), free_gpus.end());
  const auto placement = selection.placement();

  // Score: (all pairs NVLink, one NUMA node, sum of pair link scores); the first best wins,
  // and combinations come in lexicographic order, so ties go to the lowest indices.
  std::optional<std::vector<int>> best;
  std::tuple<bool, bool, int> best_score{false, false, -1};
  ForEachCombination(candidates, gpu_count, [&](const std::vector<int>& gpus) {
    const bool nvlink = topology.AllPairsNvlink(gpus);
    const bool same_numa = topology.SameNumaNode(gpus);
    if (placement == v1::GpuSelection::PLACEMENT_NVLINK && !nvlink) return;
    if (placement == v1::GpuSelection::PLACEMENT_SAME_NUMA && !same_numa) return;
    if (placement == v1::GpuSelection::PLACEMENT_ANY) {
      if (!best) best = gpus;
      return;
    }
    int pair_score = 0;
    for (size_t i = 0; i < gpus.size(); ++i) {
      for (size_t j = i + 1; j < gpus.size(); ++j) {
        pair_score += LinkScore(topology.Link(gpus[i], gpus[j]));
      }
    }
    const std::tuple<bool, bool, int> score{nvlink, same_numa, pair_score};
    if (!best || score > best_score) {
      best = gpus;
      best_score = score;
    }
  });
  return best;
}

}  // namespace gpuprof::daemon
