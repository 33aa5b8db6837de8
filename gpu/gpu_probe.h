// The GPU inventory of this host: what each GPU is, its spec peaks, how the GPUs are linked,
// and the versions of the libraries the worker runs with. Runs in the worker (it creates CUDA
// contexts when it measures), never in the daemon.
#ifndef GPUPROF_GPU_GPU_PROBE_H_
#define GPUPROF_GPU_GPU_PROBE_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/nvml_loader.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::gpu {

struct ProbeOptions {
  // Reported as HostInfo.gpuprof_version.
  std::string gpuprof_version;
};

// Never fails: without a driver or a GPU the answer lists no GPU and probe_error says why.
// Fills everything but supported_workloads, the lease fields and the measured copy bandwidth
// (measure/copy_bandwidth.h times that with the workloads' own loop). GPU indices are this process's
// CUDA ordinals; run the worker with CUDA_DEVICE_ORDER=PCI_BUS_ID so that they follow
// nvidia-smi's order (CUDA's default puts the fastest GPU first).
gpuprof::v1::ListGpusResponse ProbeHost(const ProbeOptions& options);

// ---- The pieces of the probe, exposed for tests. ----

// cudaDeviceProp::uuid as nvidia-smi prints it: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx".
std::string FormatGpuUuid(std::span<const uint8_t, 16> bytes);

// 13000 -> "13.0", 12080 -> "12.8"; "" for 0 (no driver).
std::string FormatCudaVersion(int version);

// ncclGetVersion's code: 22803 -> "2.28.3" (and the pre-2.9 scheme, 2708 -> "2.7.8").
std::string FormatNcclVersion(int version_code);

struct PciAddress {
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t function = 0;

  bool operator==(const PciAddress&) const = default;
};

// Parses "0000:1B:00.0" (CUDA) or "00000000:1b:00.0" (NVML); hex, any case.
std::optional<PciAddress> ParsePciBusId(std::string_view bus_id);

// "0000:1b:00.0": the name of the device's directory under /sys/bus/pci/devices.
std::string SysfsPciName(const PciAddress& address);

// The NUMA node of a PCI device from sysfs, -1 when unknown.
int ReadPciNumaNode(const PciAddress& address,
                    const std::string& sysfs_pci_devices = "/sys/bus/pci/devices");

// Number of NUMA nodes (node<N> entries), 0 when unknown.
int CountNumaNodes(const std::string& sysfs_nodes = "/sys/devices/system/node");

// Per-SM throughput of an architecture.
struct ArchitecturePeaks {
  // Dense (no sparsity) tensor-core FLOP per clock per SM for FP16/BF16 inputs.
  int dense_16bit_tensor_flops_per_clock = 0;
  // FP32 lanes per SM; each does one FMA (2 FLOP) per clock.
  int fp32_lanes = 0;
};

// Known architectures only; std::nullopt otherwise.
std::optional<ArchitecturePeaks> PeaksForComputeCapability(int major, int minor);

// 2 (DDR) * memory clock * bus width / 8, in GB/s (1e9 bytes/s).
double SpecPeakBandwidthGbps(int memory_clock_mhz, int memory_bus_width_bits);

// At `sm_clock_mhz`; 0 for an unknown architecture.
double SpecPeakBf16Tflops(int sm_count, int sm_clock_mhz, int major, int minor);
double SpecPeakFp32Tflops(int sm_count, int sm_clock_mhz, int major, int minor);

// How two GPUs without NVLink between them reach each other, from NVML's topology.
gpuprof::v1::LinkType LinkTypeFromTopologyLevel(nvml::TopologyLevel level);

// Without NVML: the NUMA nodes of the two GPUs' PCI devices are all that is known.
gpuprof::v1::LinkType LinkTypeFromNumaNodes(int numa_node_a, int numa_node_b);

// The far end of one active NVLink of a GPU.
struct NvLinkEnd {
  enum class Kind { kGpu, kSwitch, kOther };
  Kind kind = Kind::kOther;
  PciAddress remote;  // meaningful for kGpu
};

// NVLinks between each pair of GPUs: `links[i]` lists GPU i's active links, `gpus[i]` its
// address. A direct link counts for the GPU at its far end. Links to NVSwitches reach every
// GPU that is also on the switches, so a pair gets the smaller of their switch link counts
// (an H100 HGX board: 18 for every pair). Result[i][j], with 0 on the diagonal.
std::vector<std::vector<int>> CountNvLinksBetweenGpus(
    const std::vector<PciAddress>& gpus, const std::vector<std::vector<NvLinkEnd>>& links);

}  // namespace gpuprof::gpu

#endif  // GPUPROF_GPU_GPU_PROBE_H_
