#include "daemon/scheduling/gpu_placement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

using ::testing::ElementsAre;

// The reference box: 7 GPUs, NVLink pairs (0,1) (2,3) (5,6), 0-3 on NUMA node 0 behind PCIe
// switches, 4-6 on NUMA node 1.
v1::ListGpusResponse ReferenceBox() {
  v1::ListGpusResponse inventory;
  for (int i = 0; i < 7; ++i) {
    auto* gpu = inventory.add_gpus();
    gpu->set_index(i);
    gpu->set_numa_node(i < 4 ? 0 : 1);
  }
  auto nvlinked = [](int a, int b) {
    return (a / 2 == b / 2 && a < 4 && b < 4) || (a >= 5 && b >= 5);
  };
  for (int a = 0; a < 7; ++a) {
    for (int b = 0; b < 7; ++b) {
      if (a == b) continue;
      auto* link = inventory.add_links();
      link->set_gpu_a(a);
      link->set_gpu_b(b);
      if (nvlinked(a, b)) {
        link->set_type(v1::LINK_TYPE_NVLINK);
      } else if ((a < 4) == (b < 4)) {
        link->set_type(v1::LINK_TYPE_PCIE_SWITCH);
      } else {
        link->set_type(v1::LINK_TYPE_CROSS_NUMA);
      }
    }
  }
  return inventory;
}

std::set<int> AllOf(int n) {
  std::set<int> gpus;
  for (int i = 0; i < n; ++i) gpus.insert(i);
  return gpus;
}

v1::GpuSelection Count(int n, v1::GpuSelection::Placement placement =
                                  v1::GpuSelection::PLACEMENT_UNSPECIFIED) {
  v1::GpuSelection selection;
  selection.set_gpu_count(n);
  selection.set_placement(placement);
  return selection;
}

TEST(GpuPlacement, PairPrefersNvlink) {
  const GpuTopology topology(ReferenceBox());
  EXPECT_THAT(*ChooseGpus(Count(2), 2, topology, AllOf(7)), ElementsAre(0, 1));
  // With 0 busy, the next NVLink pair is (2, 3), not (1, 2) over PCIe.
  EXPECT_THAT(*ChooseGpus(Count(2), 2, topology, {1, 2, 3, 4, 5, 6}), ElementsAre(2, 3));
  // Only one GPU of each pair free: fall back to the same NUMA node.
  EXPECT_THAT(*ChooseGpus(Count(2), 2, topology, {1, 3, 4, 6}), ElementsAre(1, 3));
}

TEST(GpuPlacement, FourGpusStayOnOneNumaNode) {
  const GpuTopology topology(ReferenceBox());
  EXPECT_THAT(*ChooseGpus(Count(4), 4, topology, AllOf(7)), ElementsAre(0, 1, 2, 3));
}

TEST(GpuPlacement, StrictPreferencesWaitInsteadOfSettling) {
  const GpuTopology topology(ReferenceBox());
  EXPECT_FALSE(ChooseGpus(Count(2, v1::GpuSelection::PLACEMENT_NVLINK), 2, topology, {1, 3, 4, 6})
                   .has_value());
  EXPECT_FALSE(
      ChooseGpus(Count(4, v1::GpuSelection::PLACEMENT_NVLINK), 4, topology, AllOf(7)).has_value());
  EXPECT_FALSE(ChooseGpus(Count(2, v1::GpuSelection::PLACEMENT_SAME_NUMA), 2, topology, {3, 4})
                   .has_value());
  EXPECT_THAT(*ChooseGpus(Count(2, v1::GpuSelection::PLACEMENT_ANY), 2, topology, {3, 4, 5}),
              ElementsAre(3, 4));
}

TEST(GpuPlacement, ExplicitIdsWaitUntilAllAreFree) {
  const GpuTopology topology(ReferenceBox());
  v1::GpuSelection selection;
  selection.add_gpu_ids(4);
  selection.add_gpu_ids(0);
  EXPECT_THAT(*ChooseGpus(selection, 2, topology, AllOf(7)), ElementsAre(4, 0));
  EXPECT_FALSE(ChooseGpus(selection, 2, topology, {1, 2, 3, 4}).has_value());
}

TEST(GpuPlacement, NotEnoughFreeGpusWaits) {
  const GpuTopology topology(ReferenceBox());
  EXPECT_FALSE(ChooseGpus(Count(3), 3, topology, {5, 6}).has_value());
  EXPECT_TRUE(ChooseGpus(Count(0), 0, topology, {}).has_value());
}

}  // namespace
}  // namespace gpuprof::daemon
