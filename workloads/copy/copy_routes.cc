#include "workloads/copy/copy_routes.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/gpu_links.h"
#include "gpu/gpu_probe.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;

// The first whitespace-separated word of a sysfs file, as a number; nullopt when unreadable.
std::optional<double> ReadSysfsNumber(const std::string& path) {
  std::ifstream file(path);
  std::string word;
  double value = 0;
  if (!(file >> word) || !absl::SimpleAtod(word, &value) || value <= 0) return std::nullopt;
  return value;
}

std::string HostLabel(v1::HostMemory memory) {
  return memory == v1::HOST_MEMORY_PAGEABLE ? "host (pageable)" : "host (pinned)";
}

class RoutePlanner {
 public:
  RoutePlanner(const v1::CopySpec& spec, absl::Span<const v1::GpuInfo> gpus,
               absl::Span<const v1::GpuLink> links, absl::Span<const LinkPeak> pcie)
      : spec_(spec), gpus_(gpus), links_(links), pcie_(pcie) {}

  CopyRoutes Plan() const {
    CopyRoutes routes;
    const int n = static_cast<int>(gpus_.size());
    if (spec_.direction() == v1::COPY_DIRECTION_PEER) {
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          if (a == b || (spec_.bidirectional() && b < a)) continue;
          std::vector<CopyLeg> legs = {{a, b}};
          if (spec_.bidirectional()) legs.push_back({b, a});
          routes.each.push_back(
              Route(absl::StrCat(Gpu(a), spec_.bidirectional() ? " <-> " : " -> ", Gpu(b)), legs));
        }
      }
      return routes;
    }
    std::vector<CopyLeg> all;
    for (int d = 0; d < n; ++d) {
      std::vector<CopyLeg> legs = GpuLegs(d);
      all.insert(all.end(), legs.begin(), legs.end());
      routes.each.push_back(Route(GpuRouteLabel(d), legs));
    }
    // Pageable copies block the host thread, so GPUs cannot be driven at once.
    if (n > 1 && spec_.host_memory() != v1::HOST_MEMORY_PAGEABLE) {
      std::vector<std::string> indices;
      for (const v1::GpuInfo& gpu : gpus_) indices.push_back(absl::StrCat(gpu.index()));
      routes.together = Route(absl::StrCat("GPUs ", absl::StrJoin(indices, ","), " at once"), all);
    }
    return routes;
  }

 private:
  std::string Gpu(int device) const { return absl::StrCat("GPU ", gpus_[device].index()); }

  std::vector<CopyLeg> GpuLegs(int d) const {
    switch (spec_.direction()) {
      case v1::COPY_DIRECTION_HOST_TO_DEVICE:
      case v1::COPY_DIRECTION_DEVICE_TO_HOST: {
        const bool to_device = spec_.direction() == v1::COPY_DIRECTION_HOST_TO_DEVICE;
        std::vector<CopyLeg> legs = {to_device ? CopyLeg{kHost, d} : CopyLeg{d, kHost}};
        if (spec_.bidirectional())
          legs.push_back(to_device ? CopyLeg{d, kHost} : CopyLeg{kHost, d});
        return legs;
      }
      default:
        return {{d, d}};
    }
  }

  std::string GpuRouteLabel(int d) const {
    const std::string host = HostLabel(spec_.host_memory());
    switch (spec_.direction()) {
      case v1::COPY_DIRECTION_HOST_TO_DEVICE:
        return absl::StrCat(host, spec_.bidirectional() ? " <-> " : " -> ", Gpu(d));
      case v1::COPY_DIRECTION_DEVICE_TO_HOST:
        return absl::StrCat(Gpu(d), spec_.bidirectional() ? " <-> " : " -> ", host);
      default:
        return absl::StrCat(Gpu(d), " (device to device)");
    }
  }

  // A leg's bytes and peak.
  int64_t LegBytes(const CopyLeg& leg) const {
    return leg.source == leg.destination ? 2 * spec_.bytes() : spec_.bytes();
  }

  LinkPeak LegPeak(const CopyLeg& leg) const {
    if (leg.source == leg.destination) {
      return {.gbps = gpus_[leg.source].spec_peak_bandwidth_gbps(), .label = "HBM"};
    }
    if (leg.source == kHost || leg.destination == kHost) return pcie_[leg.device()];
    const v1::GpuInfo& a = gpus_[leg.source];
    const v1::GpuInfo& b = gpus_[leg.destination];
    for (const v1::GpuLink& link : links_) {
      if (link.gpu_a() != a.index() || link.gpu_b() != b.index()) continue;
      if (link.type() == v1::LINK_TYPE_NVLINK && link.nvlink_count() > 0) {
        return {.gbps = NvLinkGbpsPerDirection(
                    link.nvlink_count(),
                    std::min(a.compute_capability_major(), b.compute_capability_major())),
                .label = LinkLabel(link)};
      }
      // Over PCIe the slower of the two GPUs' links sets the pace.
      const LinkPeak& slower = pcie_[leg.source].gbps <= pcie_[leg.destination].gbps
                                   ? pcie_[leg.source]
                                   : pcie_[leg.destination];
      return {.gbps = slower.gbps, .label = absl::StrCat(slower.label, " (", LinkLabel(link), ")")};
    }
    return pcie_[leg.source].gbps <= pcie_[leg.destination].gbps ? pcie_[leg.source]
                                                                 : pcie_[leg.destination];
  }

  CopyRoute Route(std::string label, const std::vector<CopyLeg>& legs) const {
    CopyRoute route{.label = std::move(label), .legs = legs};
    std::set<int> devices;
    std::vector<std::string> link_labels;
    for (const CopyLeg& leg : legs) {
      for (int device : {leg.source, leg.destination}) {
        if (device != kHost) devices.insert(device);
      }
      route.bytes += LegBytes(leg);
      const LinkPeak peak = LegPeak(leg);
      route.peak.gbps += peak.gbps;
      if (std::find(link_labels.begin(), link_labels.end(), peak.label) == link_labels.end()) {
        link_labels.push_back(peak.label);
      }
    }
    for (int device : devices) route.gpu_indices.push_back(gpus_[device].index());
    route.peak.label = absl::StrJoin(link_labels, ", ");
    return route;
  }

  const v1::CopySpec& spec_;
  absl::Span<const v1::GpuInfo> gpus_;
  absl::Span<const v1::GpuLink> links_;
  absl::Span<const LinkPeak> pcie_;
};

}  // namespace

double PcieGbpsPerDirection(double gigatransfers_per_second, int lanes) {
  double efficiency = 128.0 / 130.0;
  if (gigatransfers_per_second <= 5.0) efficiency = 8.0 / 10.0;
  if (gigatransfers_per_second >= 64.0) efficiency = 242.0 / 256.0;
  return gigatransfers_per_second * lanes * efficiency / 8.0;
}

std::string PcieLabel(double gigatransfers_per_second, int lanes) {
  // Generation n runs at 2.5 GT/s x 2^(n-1) from Gen3 on (8 GT/s), Gen2 at 5, Gen1 at 2.5.
  int generation = 1;
  if (gigatransfers_per_second >= 4.9) generation = 2;
  if (gigatransfers_per_second >= 7.9) {
    generation = 3 + static_cast<int>(std::lround(std::log2(gigatransfers_per_second / 8.0)));
  }
  return absl::StrFormat("PCIe Gen%d x%d", generation, lanes);
}

LinkPeak PcieLinkPeak(const v1::GpuInfo& gpu, const std::string& sysfs_pci_devices) {
  if (const auto address = gpu::ParsePciBusId(gpu.pci_bus_id()); address.has_value()) {
    const std::string directory =
        absl::StrCat(sysfs_pci_devices, "/", gpu::SysfsPciName(*address), "/");
    const auto speed = ReadSysfsNumber(directory + "max_link_speed");
    const auto width = ReadSysfsNumber(directory + "max_link_width");
    if (speed.has_value() && width.has_value()) {
      const int lanes = static_cast<int>(*width);
      return {.gbps = PcieGbpsPerDirection(*speed, lanes), .label = PcieLabel(*speed, lanes)};
    }
  }
  const double speed = gpu.compute_capability_major() >= 9   ? 32.0
                       : gpu.compute_capability_major() >= 8 ? 16.0
                                                             : 8.0;
  return {.gbps = PcieGbpsPerDirection(speed, 16),
          .label = absl::StrCat(PcieLabel(speed, 16), " (assumed: no sysfs link speed)")};
}

double NvLinkGbpsPerDirection(int links, int compute_major) {
  return links * (compute_major >= 7 ? 25.0 : 20.0);
}

CopyRoutes PlanCopyRoutes(const v1::CopySpec& spec, absl::Span<const v1::GpuInfo> gpus,
                          absl::Span<const v1::GpuLink> links, absl::Span<const LinkPeak> pcie) {
  return RoutePlanner(spec, gpus, links, pcie).Plan();
}

}  // namespace gpuprof::workloads
