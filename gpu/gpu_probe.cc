#include "gpu/gpu_probe.h"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "gpu/datasheet_peaks.h"

namespace gpuprof::gpu {
namespace {

namespace v1 = ::gpuprof::v1;

// Debian's abseil has its own string_view type, not an alias of std::string_view.
absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }

// The probe never fails, so what it could not find out goes to the worker's stderr, which the
// daemon keeps with the worker's log.
void Note(std::string_view message) {
  std::string line = absl::StrCat("gpuprof: gpu_probe: ", AsAbsl(message), "\n");
  std::fputs(line.c_str(), stderr);
}

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

std::string CudaErrorText(cudaError_t error) {
  return absl::StrCat(cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

// probe_error when cudaGetDeviceCount fails; cudart reports a missing driver and a driver
// older than the runtime alike, so the driver version tells them apart.
std::string DescribeDeviceCountFailure(cudaError_t error, int driver_version) {
  const std::string detail = absl::StrCat("cudaGetDeviceCount returned ", CudaErrorText(error));
  switch (error) {
    case cudaErrorInsufficientDriver:
      if (driver_version == 0) return absl::StrCat("no CUDA driver: ", detail);
      return absl::StrCat("CUDA driver ", FormatCudaVersion(driver_version),
                          " is older than the CUDA runtime ", FormatCudaVersion(CUDART_VERSION),
                          ": ", detail);
    case cudaErrorStubLibrary:
      return absl::StrCat("no CUDA driver (only its stub library): ", detail);
    case cudaErrorNoDevice:
      return absl::StrCat("no CUDA-capable device: ", detail);
    default:
      return absl::StrCat("CUDA probe failed: ", detail);
  }
}

void FillHostInfo(const ProbeOptions& options, v1::HostInfo& host) {
  host.set_hostname(Hostname());
  host.set_gpuprof_version(options.gpuprof_version);
  host.set_numa_nodes(CountNumaNodes());

  // Both work without a driver: the runtime version is compiled in, and the driver version
  // is 0 when there is none.
  int runtime_version = 0;
  if (cudaRuntimeGetVersion(&runtime_version) == cudaSuccess) {
    host.set_cuda_runtime_version(FormatCudaVersion(runtime_version));
  }
  int driver_version = 0;
  if (cudaDriverGetVersion(&driver_version) == cudaSuccess) {
    host.set_cuda_driver_version(FormatCudaVersion(driver_version));
  }

  int nccl_version = 0;
  if (ncclGetVersion(&nccl_version) == ncclSuccess) {
    host.set_nccl_version(FormatNcclVersion(nccl_version));
  }
  uint32_t cupti_version = 0;
  if (cuptiGetVersion(&cupti_version) == CUPTI_SUCCESS) {
    host.set_cupti_version(absl::StrCat(cupti_version));
  }
}

// A device attribute, or 0 when the runtime cannot say.
int DeviceAttribute(cudaDeviceAttr attribute, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attribute, device) != cudaSuccess) return 0;
  return value;
}

absl::StatusOr<v1::GpuInfo> DescribeGpu(int device, const NvmlLibrary* nvml) {
  cudaDeviceProp properties = {};
  CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&properties, device));
  char pci_bus_id[32] = {};
  CUDA_RETURN_IF_ERROR(cudaDeviceGetPCIBusId(pci_bus_id, sizeof(pci_bus_id), device));

  v1::GpuInfo gpu;
  gpu.set_index(device);
  gpu.set_name(properties.name);
  uint8_t uuid[16];
  std::copy_n(reinterpret_cast<const uint8_t*>(properties.uuid.bytes), 16, uuid);
  gpu.set_uuid(FormatGpuUuid(uuid));
  gpu.set_pci_bus_id(pci_bus_id);
  gpu.set_total_memory_bytes(static_cast<int64_t>(properties.totalGlobalMem));
  gpu.set_sm_count(properties.multiProcessorCount);
  gpu.set_compute_capability_major(properties.major);
  gpu.set_compute_capability_minor(properties.minor);
  gpu.set_memory_bus_width_bits(properties.memoryBusWidth);
  gpu.set_l2_cache_bytes(properties.l2CacheSize);

  // CUDA 13 dropped clockRate and memoryClockRate from cudaDeviceProp; the attributes remain
  // (in kHz). NVML's maximum clocks stand in should a runtime stop reporting them.
  int sm_clock_mhz = DeviceAttribute(cudaDevAttrClockRate, device) / 1000;
  int memory_clock_mhz = DeviceAttribute(cudaDevAttrMemoryClockRate, device) / 1000;
  if ((sm_clock_mhz == 0 || memory_clock_mhz == 0) && nvml != nullptr) {
    if (absl::StatusOr<nvml::Device> handle = nvml->DeviceByPciBusId(pci_bus_id); handle.ok()) {
      if (sm_clock_mhz == 0) {
        sm_clock_mhz = nvml->MaxClockMhz(*handle, nvml::ClockType::kSm).value_or(0);
      }
      if (memory_clock_mhz == 0) {
        memory_clock_mhz = nvml->MaxClockMhz(*handle, nvml::ClockType::kMemory).value_or(0);
      }
    }
  }
  gpu.set_max_sm_clock_mhz(sm_clock_mhz);
  gpu.set_memory_clock_mhz(memory_clock_mhz);

  gpu.set_spec_peak_bandwidth_gbps(
      SpecPeakBandwidthGbps(memory_clock_mhz, properties.memoryBusWidth));
  // The datasheet's figure where the product is known (Hopper's is quoted below the maximum
  // clock the GPU reports), else derived from the clock.
  gpu.set_spec_peak_bf16_tflops(DatasheetBf16DenseTflops(properties.name)
                                    .value_or(SpecPeakBf16Tflops(properties.multiProcessorCount,
                                                                 sm_clock_mhz, properties.major,
                                                                 properties.minor)));
  gpu.set_spec_peak_fp32_tflops(SpecPeakFp32Tflops(properties.multiProcessorCount, sm_clock_mhz,
                                                   properties.major, properties.minor));
  if (!PeaksForComputeCapability(properties.major, properties.minor).has_value()) {
    Note(absl::StrCat("GPU ", device, " (", properties.name, "): compute capability ",
                      properties.major, ".", properties.minor,
                      " is not in the spec-peak table; FLOP/s peaks are reported as 0"));
  }

  int numa_node = -1;
  if (std::optional<PciAddress> address = ParsePciBusId(pci_bus_id); address.has_value()) {
    numa_node = ReadPciNumaNode(*address);
  }
  // The runtime knows too on systems where sysfs does not say (numa_node is -1 there).
  if (numa_node < 0 && properties.hostNumaId >= 0) numa_node = properties.hostNumaId;
  gpu.set_numa_node(numa_node);
  return gpu;
}

// GPU `device`'s active NVLinks and what is at their far ends.
std::vector<NvLinkEnd> ActiveNvLinks(const NvmlLibrary& nvml, nvml::Device device,
                                     const std::vector<PciAddress>& gpus) {
  std::vector<NvLinkEnd> ends;
  for (unsigned link = 0; link < nvml::kNvLinkMaxLinks; ++link) {
    // GPUs without NVLink, and link numbers past the GPU's count, answer with an error.
    absl::StatusOr<bool> active = nvml.NvLinkIsActive(device, link);
    if (!active.ok() || !*active) continue;

    NvLinkEnd end;
    absl::StatusOr<nvml::NvLinkDeviceType> type = nvml.NvLinkRemoteDeviceType(device, link);
    if (type.ok() && *type == nvml::NvLinkDeviceType::kSwitch) {
      end.kind = NvLinkEnd::Kind::kSwitch;
      ends.push_back(end);
      continue;
    }
    if (type.ok() && *type != nvml::NvLinkDeviceType::kGpu) {
      ends.push_back(end);  // kOther
      continue;
    }
    absl::StatusOr<nvml::PciInfo> remote = nvml.NvLinkRemotePciInfo(device, link);
    if (remote.ok()) {
      std::optional<PciAddress> address = ParsePciBusId(remote->bus_id);
      end.remote = address.value_or(PciAddress{remote->domain, remote->bus, remote->device, 0});
      // Without the device-type call, a GPU is recognised by its address.
      const bool is_listed_gpu = std::find(gpus.begin(), gpus.end(), end.remote) != gpus.end();
      if (type.ok() || is_listed_gpu) end.kind = NvLinkEnd::Kind::kGpu;
    }
    ends.push_back(end);
  }
  return ends;
}

void FillLinks(const NvmlLibrary* nvml, v1::ListGpusResponse& response) {
  const int gpu_count = response.gpus_size();
  if (gpu_count < 2) return;

  std::vector<PciAddress> addresses(gpu_count);
  std::vector<std::optional<nvml::Device>> nvml_devices(gpu_count);
  for (int i = 0; i < gpu_count; ++i) {
    const v1::GpuInfo& gpu = response.gpus(i);
    addresses[i] = ParsePciBusId(gpu.pci_bus_id()).value_or(PciAddress{});
    if (nvml == nullptr) continue;
    absl::StatusOr<nvml::Device> handle = nvml->DeviceByPciBusId(gpu.pci_bus_id());
    if (!handle.ok()) handle = nvml->DeviceByUuid(gpu.uuid());
    if (handle.ok()) {
      nvml_devices[i] = *handle;
    } else {
      Note(absl::StrCat("GPU ", gpu.index(), " not found in NVML (", handle.status().ToString(),
                        "); its links are judged by NUMA node"));
    }
  }

  std::vector<std::vector<NvLinkEnd>> nvlinks(gpu_count);
  for (int i = 0; i < gpu_count; ++i) {
    if (nvml_devices[i].has_value()) nvlinks[i] = ActiveNvLinks(*nvml, *nvml_devices[i], addresses);
  }
  const std::vector<std::vector<int>> nvlink_counts = CountNvLinksBetweenGpus(addresses, nvlinks);

  for (int a = 0; a < gpu_count; ++a) {
    for (int b = 0; b < gpu_count; ++b) {
      if (a == b) continue;
      const v1::GpuInfo& gpu_a = response.gpus(a);
      const v1::GpuInfo& gpu_b = response.gpus(b);
      v1::GpuLink& link = *response.add_links();
      link.set_gpu_a(gpu_a.index());
      link.set_gpu_b(gpu_b.index());
      int can_access_peer = 0;
      if (cudaDeviceCanAccessPeer(&can_access_peer, gpu_a.index(), gpu_b.index()) == cudaSuccess) {
        link.set_p2p_supported(can_access_peer != 0);
      }

      if (nvlink_counts[a][b] > 0) {
        link.set_type(v1::LINK_TYPE_NVLINK);
        link.set_nvlink_count(nvlink_counts[a][b]);
        continue;
      }
      if (nvml_devices[a].has_value() && nvml_devices[b].has_value()) {
        // NVLink that could not be counted (an unrecognised far end) still shows up here.
        if (nvml->P2pSupported(*nvml_devices[a], *nvml_devices[b], nvml::P2pCapability::kNvLink)
                .value_or(false)) {
          link.set_type(v1::LINK_TYPE_NVLINK);
          continue;
        }
        absl::StatusOr<nvml::TopologyLevel> level =
            nvml->TopologyCommonAncestor(*nvml_devices[a], *nvml_devices[b]);
        if (level.ok()) {
          link.set_type(LinkTypeFromTopologyLevel(*level));
          continue;
        }
      }
      // Without NVML the PCIe tree is not visible (CUDA does not expose it); the NUMA nodes
      // tell apart the one distinction that matters most for placement.
      link.set_type(LinkTypeFromNumaNodes(gpu_a.numa_node(), gpu_b.numa_node()));
    }
  }
}

}  // namespace

std::string FormatGpuUuid(std::span<const uint8_t, 16> bytes) {
  std::string uuid = "GPU-";
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
    absl::StrAppendFormat(&uuid, "%02x", bytes[i]);
  }
  return uuid;
}

std::string FormatCudaVersion(int version) {
  if (version <= 0) return "";
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

std::string FormatNcclVersion(int version_code) {
  // NCCL 2.9 widened the code from major*1000 + minor*100 + patch to
  // major*10000 + minor*100 + patch.
  if (version_code >= 10000) {
    return absl::StrCat(version_code / 10000, ".", (version_code % 10000) / 100, ".",
                        version_code % 100);
  }
  return absl::StrCat(version_code / 1000, ".", (version_code % 1000) / 100, ".",
                      version_code % 100);
}

std::optional<PciAddress> ParsePciBusId(std::string_view bus_id) {
  // [domain:]bus:device.function, all hexadecimal.
  auto parse_hex = [](std::string_view text, uint32_t max, uint32_t& value) {
    if (text.empty()) return false;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value, 16);
    return error == std::errc() && end == text.data() + text.size() && value <= max;
  };
  while (!bus_id.empty() && bus_id.back() == '\0') bus_id.remove_suffix(1);
  const size_t dot = bus_id.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::string_view function = bus_id.substr(dot + 1);
  std::string_view rest = bus_id.substr(0, dot);
  const size_t device_colon = rest.rfind(':');
  if (device_colon == std::string_view::npos) return std::nullopt;
  const std::string_view device = rest.substr(device_colon + 1);
  rest = rest.substr(0, device_colon);
  const size_t bus_colon = rest.rfind(':');
  const std::string_view bus =
      bus_colon == std::string_view::npos ? rest : rest.substr(bus_colon + 1);
  const std::string_view domain =
      bus_colon == std::string_view::npos ? std::string_view("0") : rest.substr(0, bus_colon);

  PciAddress address;
  if (!parse_hex(domain, 0xffffffff, address.domain) || !parse_hex(bus, 0xff, address.bus) ||
      !parse_hex(device, 0x1f, address.device) || !parse_hex(function, 0x7, address.function)) {
    return std::nullopt;
  }
  return address;
}

std::string SysfsPciName(const PciAddress& address) {
  return absl::StrFormat("%04x:%02x:%02x.%x", address.domain, address.bus, address.device,
                         address.function);
}

int ReadPciNumaNode(const PciAddress& address, const std::string& sysfs_pci_devices) {
  std::ifstream file(sysfs_pci_devices + "/" + SysfsPciName(address) + "/numa_node");
  int node = -1;
  if (!(file >> node) || node < 0) return -1;
  return node;
}

int CountNumaNodes(const std::string& sysfs_nodes) {
  std::error_code error;
  std::filesystem::directory_iterator entries(sysfs_nodes, error);
  if (error) return 0;
  int count = 0;
  for (const std::filesystem::directory_entry& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.starts_with("node") &&
        std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      ++count;
    }
  }
  return count;
}

std::optional<ArchitecturePeaks> PeaksForComputeCapability(int major, int minor) {
  // Dense FP16/BF16 tensor FLOP/clock/SM = the whitepaper's dense TFLOP/s / (SMs x boost
  // clock); FP32 lanes from the SM diagrams.
  struct Entry {
    int major;
    int minor;
    ArchitecturePeaks peaks;
  };
  static constexpr Entry kTable[] = {
      {7, 0, {1024, 64}},    // V100: 125 TFLOP/s FP16 = 80 SMs x 1530 MHz x 1024
      {7, 5, {1024, 64}},    // T4: 65 TFLOP/s FP16 = 40 SMs x 1590 MHz x 1024
      {8, 0, {2048, 64}},    // A100: 312 TFLOP/s = 108 SMs x 1410 MHz x 2048
      {8, 6, {1024, 128}},   // A10 / A40 (GeForce parts with FP32 accumulate: half)
      {8, 9, {1024, 128}},   // L4 / L40S: 362 TFLOP/s = 142 SMs x 2520 MHz x 1024
      {9, 0, {4096, 128}},   // H100 / H200 SXM: 989 TFLOP/s = 132 SMs x 1830 MHz x 4096
      {10, 0, {8192, 128}},  // B200: twice Hopper per SM per clock
  };
  for (const Entry& entry : kTable) {
    if (entry.major == major && entry.minor == minor) return entry.peaks;
  }
  return std::nullopt;
}

double SpecPeakBandwidthGbps(int memory_clock_mhz, int memory_bus_width_bits) {
  return 2.0 * memory_clock_mhz * 1e6 * memory_bus_width_bits / 8 / 1e9;
}

double SpecPeakBf16Tflops(int sm_count, int sm_clock_mhz, int major, int minor) {
  std::optional<ArchitecturePeaks> peaks = PeaksForComputeCapability(major, minor);
  if (!peaks.has_value()) return 0;
  return double{1.0} * sm_count * sm_clock_mhz * 1e6 * peaks->dense_16bit_tensor_flops_per_clock /
         1e12;
}

double SpecPeakFp32Tflops(int sm_count, int sm_clock_mhz, int major, int minor) {
  std::optional<ArchitecturePeaks> peaks = PeaksForComputeCapability(major, minor);
  if (!peaks.has_value()) return 0;
  return double{2.0} * sm_count * sm_clock_mhz * 1e6 * peaks->fp32_lanes / 1e12;
}

v1::LinkType LinkTypeFromTopologyLevel(nvml::TopologyLevel level) {
  switch (level) {
    case nvml::TopologyLevel::kInternal:
    case nvml::TopologyLevel::kSingle:
    case nvml::TopologyLevel::kMultiple:
      return v1::LINK_TYPE_PCIE_SWITCH;
    case nvml::TopologyLevel::kHostBridge:
    case nvml::TopologyLevel::kNode:
      return v1::LINK_TYPE_PCIE_HOST_BRIDGE;
    case nvml::TopologyLevel::kSystem:
      return v1::LINK_TYPE_CROSS_NUMA;
  }
  // A level added by a later driver: assume the farthest, so placement never counts on it.
  return v1::LINK_TYPE_CROSS_NUMA;
}

v1::LinkType LinkTypeFromNumaNodes(int numa_node_a, int numa_node_b) {
  if (numa_node_a >= 0 && numa_node_b >= 0 && numa_node_a != numa_node_b) {
    return v1::LINK_TYPE_CROSS_NUMA;
  }
  return v1::LINK_TYPE_PCIE_HOST_BRIDGE;
}

std::vector<std::vector<int>> CountNvLinksBetweenGpus(
    const std::vector<PciAddress>& gpus, const std::vector<std::vector<NvLinkEnd>>& links) {
  const size_t gpu_count = gpus.size();
  std::vector<std::vector<int>> counts(gpu_count, std::vector<int>(gpu_count, 0));
  std::vector<int> switch_links(gpu_count, 0);
  for (size_t i = 0; i < gpu_count && i < links.size(); ++i) {
    for (const NvLinkEnd& end : links[i]) {
      if (end.kind == NvLinkEnd::Kind::kSwitch) {
        ++switch_links[i];
      } else if (end.kind == NvLinkEnd::Kind::kGpu) {
        for (size_t j = 0; j < gpu_count; ++j) {
          if (j != i && gpus[j] == end.remote) ++counts[i][j];
        }
      }
    }
  }
  for (size_t i = 0; i < gpu_count; ++i) {
    for (size_t j = 0; j < gpu_count; ++j) {
      if (i != j) counts[i][j] += std::min(switch_links[i], switch_links[j]);
    }
  }
  return counts;
}

v1::ListGpusResponse ProbeHost(const ProbeOptions& options) {
  v1::ListGpusResponse response;
  v1::HostInfo& host = *response.mutable_host();
  FillHostInfo(options, host);

  absl::StatusOr<NvmlLibrary> nvml = NvmlLibrary::Load();
  const NvmlLibrary* nvml_or_null = nvml.ok() ? &*nvml : nullptr;
  absl::StatusOr<std::string> driver_version =
      nvml.ok() ? nvml->DriverVersion() : absl::StatusOr<std::string>(nvml.status());
  host.set_driver_version(driver_version.ok() ? *driver_version : host.cuda_driver_version());

  int driver_cuda_version = 0;
  if (cudaDriverGetVersion(&driver_cuda_version) != cudaSuccess) driver_cuda_version = 0;
  int device_count = 0;
  if (cudaError_t error = cudaGetDeviceCount(&device_count); error != cudaSuccess) {
    response.set_probe_error(DescribeDeviceCountFailure(error, driver_cuda_version));
    return response;
  }
  if (device_count == 0) {
    response.set_probe_error("no CUDA-capable device: cudaGetDeviceCount found none");
    return response;
  }
  if (!nvml.ok()) {
    Note(absl::StrCat(nvml.status().ToString(),
                      "; GPU links are judged by NUMA node, without NVLink counts"));
  }

  std::string first_failure;
  for (int device = 0; device < device_count; ++device) {
    absl::StatusOr<v1::GpuInfo> gpu = DescribeGpu(device, nvml_or_null);
    if (gpu.ok()) {
      *response.add_gpus() = *std::move(gpu);
      continue;
    }
    std::string failure = absl::StrCat("GPU ", device, ": ", gpu.status().message());
    Note(failure);
    if (first_failure.empty()) first_failure = std::move(failure);
  }
  if (response.gpus_size() == 0) {
    response.set_probe_error(absl::StrCat("no GPU could be described: ", first_failure));
    return response;
  }

  FillLinks(nvml_or_null, response);

  return response;
}

}  // namespace gpuprof::gpu
