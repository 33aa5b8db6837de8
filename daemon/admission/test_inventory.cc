#include "daemon/admission/test_inventory.h"

#include <utility>

namespace gpuprof::daemon {

v1::ListGpusResponse TwoNvlinkGpus(std::initializer_list<const char*> workloads) {
  v1::ListGpusResponse inventory;
  for (const char* workload : workloads) inventory.add_supported_workloads(workload);
  for (int i = 0; i < 2; ++i) {
    v1::GpuInfo* gpu = inventory.add_gpus();
    gpu->set_index(i);
    gpu->set_total_memory_bytes(80ll << 30);
    gpu->set_numa_node(0);
  }
  for (auto [a, b] : {std::pair{0, 1}, std::pair{1, 0}}) {
    v1::GpuLink* link = inventory.add_links();
    link->set_gpu_a(a);
    link->set_gpu_b(b);
    link->set_type(v1::LINK_TYPE_NVLINK);
  }
  return inventory;
}

}  // namespace gpuprof::daemon
