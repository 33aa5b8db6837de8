// What the copy workload times, decided on the CPU before any GPU work: the routes (a GPU, a
// pair, every GPU at once), their legs (one copy each, run at once on their own streams), the
// bytes a unit of work moves and the spec peak of the links it crosses (HBM, PCIe, NVLink).
#ifndef GPUPROF_WORKLOADS_COPY_COPY_ROUTES_H_
#define GPUPROF_WORKLOADS_COPY_COPY_ROUTES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "gpuprof/v1/gpus.pb.h"
#include "gpuprof/v1/workloads.pb.h"

namespace gpuprof::workloads {

// A leg's end that is host memory rather than a GPU.
inline constexpr int kHost = -1;

// One copy: from `source` to `destination`, each a leased GPU (CUDA device 0..n-1) or kHost.
struct CopyLeg {
  int source = kHost;
  int destination = kHost;

  // The device whose stream (and copy engine) runs it: the source GPU, else the destination.
  int device() const { return source != kHost ? source : destination; }
  bool operator==(const CopyLeg&) const = default;
};

// A spec peak and what it is of: "HBM", "PCIe Gen5 x16", "NV18".
struct LinkPeak {
  double gbps = 0;  // per direction for links; read + write for HBM
  std::string label;
};

struct CopyRoute {
  std::string label;  // "host (pinned) -> GPU 0", "GPU 0 <-> GPU 1", "GPUs 0,1 at once"
  std::vector<CopyLeg> legs;
  // Host indices of the GPUs it runs on.
  std::vector<int> gpu_indices;
  // Read + written for a copy within a GPU (as the daemon's probe counts), else the bytes that
  // cross the link; summed over the legs.
  int64_t bytes = 0;
  // The legs' peaks summed (directions and GPUs that run at once add up).
  LinkPeak peak;
};

struct CopyRoutes {
  // Each GPU, direction pair or GPU pair on its own.
  std::vector<CopyRoute> each;
  // Every leased GPU at once (device-to-device and pinned host copies on several GPUs).
  std::optional<CopyRoute> together;
};

// PCIe's usable bytes per second in one direction: GT/s x lanes x line-code efficiency / 8
// (8b/10b up to 5 GT/s, 128b/130b for 8 to 32 GT/s, FLIT mode's 242/256 at 64 GT/s).
double PcieGbpsPerDirection(double gigatransfers_per_second, int lanes);

// "PCIe Gen5 x16" for 32 GT/s and 16 lanes.
std::string PcieLabel(double gigatransfers_per_second, int lanes);

// The GPU's PCIe link from sysfs (max_link_speed, max_link_width of its PCI device under
// `sysfs_pci_devices`); where that is unreadable, the generation its architecture ships with
// (Hopper Gen5, Ampere Gen4, older Gen3) at x16, labelled as assumed.
LinkPeak PcieLinkPeak(const gpuprof::v1::GpuInfo& gpu,
                      const std::string& sysfs_pci_devices = "/sys/bus/pci/devices");

// NVLink per direction: 25 GB/s a link from NVLink 2 (Volta) on, 20 GB/s for NVLink 1.
double NvLinkGbpsPerDirection(int links, int compute_major);

// The routes of a spec over the leased GPUs (`gpus` in lease order, CUDA device i = gpus[i]).
// `links` are the host's links between them (host indices); `pcie` is each leased GPU's PCIe
// peak (PcieLinkPeak), in lease order.
CopyRoutes PlanCopyRoutes(const gpuprof::v1::CopySpec& spec,
                          absl::Span<const gpuprof::v1::GpuInfo> gpus,
                          absl::Span<const gpuprof::v1::GpuLink> links,
                          absl::Span<const LinkPeak> pcie);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_COPY_COPY_ROUTES_H_
