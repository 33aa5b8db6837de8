// Topology-aware choice of GPUs for a multi-GPU experiment: prefer sets whose every pair is
// NVLink-connected, then sets on one NUMA node, then the tightest PCIe paths.
#ifndef GPUPROF_DAEMON_SCHEDULING_GPU_PLACEMENT_H_
#define GPUPROF_DAEMON_SCHEDULING_GPU_PLACEMENT_H_

#include <optional>
#include <set>
#include <vector>

#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

// Link types between every pair of GPUs on the host, from the probe's inventory.
class GpuTopology {
 public:
  explicit GpuTopology(const v1::ListGpusResponse& inventory);

  int gpu_count() const { return static_cast<int>(numa_node_.size()); }
  v1::LinkType Link(int a, int b) const;
  int NumaNode(int gpu) const { return numa_node_[gpu]; }
  bool AllPairsNvlink(const std::vector<int>& gpus) const;
  bool SameNumaNode(const std::vector<int>& gpus) const;

 private:
  std::vector<int> numa_node_;
  std::vector<std::vector<v1::LinkType>> links_;  // [a][b]
};

// The GPUs to lease from `free_gpus` for `selection`, or nullopt when the request has to wait.
// Explicit ids are taken as they are; a count is placed by the selection's preference. Ties go
// to the lowest indices, so choices are deterministic.
std::optional<std::vector<int>> ChooseGpus(const v1::GpuSelection& selection, int gpu_count,
                                           const GpuTopology& topology,
                                           const std::set<int>& free_gpus);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SCHEDULING_GPU_PLACEMENT_H_
