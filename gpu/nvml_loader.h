// NVML (the driver's management library) loaded at run time with dlopen. nvml.h is not
// installed on build machines and libnvidia-ml.so.1 ships with the driver, so linking it would
// stop the worker from starting on a machine without a GPU. The few types and values used are
// declared here from NVML's documented ABI.
#ifndef GPUPROF_GPU_NVML_LOADER_H_
#define GPUPROF_GPU_NVML_LOADER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpuprof::gpu {

namespace nvml {

// nvmlReturn_t.
using Return = int;
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorUninitialized = 1;
inline constexpr Return kErrorInvalidArgument = 2;
inline constexpr Return kErrorNotSupported = 3;
inline constexpr Return kErrorNoPermission = 4;
inline constexpr Return kErrorNotFound = 6;
inline constexpr Return kErrorInsufficientSize = 7;
inline constexpr Return kErrorDriverNotLoaded = 9;
inline constexpr Return kErrorTimeout = 10;
inline constexpr Return kErrorLibraryNotFound = 12;
inline constexpr Return kErrorFunctionNotFound = 13;
inline constexpr Return kErrorGpuIsLost = 15;
inline constexpr Return kErrorUnknown = 999;

// nvmlDevice_t: an opaque handle owned by NVML.
using Device = struct NvmlDeviceOpaque*;

// nvmlGpuTopologyLevel_t: the closest common ancestor of two GPUs on the PCIe tree.
enum class TopologyLevel : int {
  kInternal = 0,     // the same board (multi-GPU board)
  kSingle = 10,      // one PCIe switch (PIX)
  kMultiple = 20,    // several PCIe switches, no host bridge (PXB)
  kHostBridge = 30,  // the CPU's host bridge (PHB)
  kNode = 40,        // host bridges within one NUMA node (NODE)
  kSystem = 50,      // across NUMA nodes, over the CPU interconnect (SYS)
};

// nvmlClockType_t.
enum class ClockType : int { kGraphics = 0, kSm = 1, kMemory = 2, kVideo = 3 };

// nvmlIntNvLinkDeviceType_t: what the far end of an NVLink is.
enum class NvLinkDeviceType : int { kGpu = 0, kIbmNpu = 1, kSwitch = 2, kUnknown = 0xFF };

// nvmlGpuP2PCapsIndex_t and nvmlGpuP2PStatus_t (only OK matters here).
enum class P2pCapability : int {
  kRead = 0,
  kWrite = 1,
  kNvLink = 2,
  kAtomics = 3,
  kPci = 4,
};
inline constexpr int kP2pStatusOk = 0;

// NVML_NVLINK_MAX_LINKS on drivers since Hopper (18 links per H100).
inline constexpr unsigned kNvLinkMaxLinks = 18;

// nvmlPciInfo_t as taken by nvmlDeviceGetNvLinkRemotePciInfo_v2 (and GetPciInfo_v3).
struct PciInfo {
  char bus_id_legacy[16];  // "0000:3B:00.0"
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;  // device id << 16 | vendor id
  unsigned int pci_subsystem_id;
  char bus_id[32];  // "00000000:3B:00.0": eight-digit domain, upper-case hex
};
static_assert(sizeof(PciInfo) == 68, "must match nvmlPciInfo_t");

// nvmlUtilization_t: percent of the last sample period.
struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
static_assert(sizeof(Utilization) == 8, "must match nvmlUtilization_t");

// nvmlMemory_t (version 1), in bytes. NVML declares unsigned long long: the same 8 bytes.
struct Memory {
  uint64_t total;
  uint64_t free;
  uint64_t used;
};
static_assert(sizeof(Memory) == 24, "must match nvmlMemory_t");

// nvmlEventSet_t: an opaque handle owned by NVML.
using EventSet = struct NvmlEventSetOpaque*;

// nvmlEventType* bits (nvmlDeviceRegisterEvents).
inline constexpr uint64_t kEventTypeSingleBitEccError = 0x1;
inline constexpr uint64_t kEventTypeDoubleBitEccError = 0x2;
inline constexpr uint64_t kEventTypeXidCriticalError = 0x8;

// nvmlEventData_t.
struct EventData {
  Device device;
  unsigned long long event_type;
  unsigned long long event_data;  // the Xid, for kEventTypeXidCriticalError
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(EventData) == 32, "must match nvmlEventData_t");

// nvmlMemoryErrorType_t and nvmlEccCounterType_t.
enum class MemoryErrorType : int { kCorrected = 0, kUncorrected = 1 };
enum class EccCounterType : int { kVolatile = 0, kAggregate = 1 };
// nvmlPageRetirementCause_t.
enum class PageRetirementCause : int { kMultipleSingleBitEccErrors = 0, kDoubleBitEccError = 1 };

// nvmlDeviceGetRemappedRows' outputs.
struct RemappedRows {
  unsigned correctable = 0;
  unsigned uncorrectable = 0;
  bool pending = false;
  bool failure_occurred = false;
};

}  // namespace nvml

// Maps an nvmlReturn_t to a status: NOT_SUPPORTED -> UNIMPLEMENTED, NO_PERMISSION ->
// PERMISSION_DENIED, NOT_FOUND -> NOT_FOUND, driver missing -> FAILED_PRECONDITION, ...
absl::StatusCode NvmlReturnToStatusCode(nvml::Return result);

// The loaded and initialized NVML. Move-only (a moved-from object may only be destroyed or
// assigned to); the destructor calls nvmlShutdown and closes the library. Functions that this
// driver's NVML lacks report UNIMPLEMENTED "... not available". NVML is thread-safe, and so are
// these calls.
class NvmlLibrary {
 public:
  // Loads `path` (by default the soname the driver installs) and calls nvmlInit_v2. When the
  // library is absent (a machine without a driver) the status is UNAVAILABLE and says why;
  // when nvmlInit_v2 fails, its code mapped by NvmlReturnToStatusCode.
  static absl::StatusOr<NvmlLibrary> Load(const std::string& path = "libnvidia-ml.so.1");

  NvmlLibrary(NvmlLibrary&& other) noexcept;
  NvmlLibrary& operator=(NvmlLibrary&& other) noexcept;
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();

  // NVML's text for a return code ("Not Supported"), or the number when unknown.
  std::string ErrorString(nvml::Return result) const;

  // Driver version, e.g. "580.95.05".
  absl::StatusOr<std::string> DriverVersion() const;

  // How many GPUs NVML sees, and one of them by NVML's index (PCI bus order).
  absl::StatusOr<unsigned> DeviceCount() const;
  absl::StatusOr<nvml::Device> DeviceByIndex(unsigned index) const;

  // A GPU by PCI bus id ("0000:3b:00.0" or "00000000:3B:00.0") or by UUID ("GPU-...").
  absl::StatusOr<nvml::Device> DeviceByPciBusId(std::string_view pci_bus_id) const;
  absl::StatusOr<nvml::Device> DeviceByUuid(std::string_view uuid) const;
  absl::StatusOr<std::string> DeviceUuid(nvml::Device device) const;

  // Topology and NVLink.
  absl::StatusOr<nvml::TopologyLevel> TopologyCommonAncestor(nvml::Device a, nvml::Device b) const;
  absl::StatusOr<bool> NvLinkIsActive(nvml::Device device, unsigned link) const;
  absl::StatusOr<nvml::PciInfo> NvLinkRemotePciInfo(nvml::Device device, unsigned link) const;
  absl::StatusOr<nvml::NvLinkDeviceType> NvLinkRemoteDeviceType(nvml::Device device,
                                                                unsigned link) const;
  absl::StatusOr<bool> P2pSupported(nvml::Device a, nvml::Device b,
                                    nvml::P2pCapability capability) const;

  // Telemetry, for the metrics exporter.
  absl::StatusOr<nvml::Utilization> UtilizationRates(nvml::Device device) const;
  absl::StatusOr<nvml::Memory> MemoryInfo(nvml::Device device) const;
  absl::StatusOr<unsigned> ClockMhz(nvml::Device device, nvml::ClockType type) const;
  absl::StatusOr<unsigned> MaxClockMhz(nvml::Device device, nvml::ClockType type) const;
  absl::StatusOr<unsigned> GpuTemperatureCelsius(nvml::Device device) const;
  absl::StatusOr<unsigned> PowerUsageMilliwatts(nvml::Device device) const;
  // Bit mask of why clocks are below their maximum (nvmlClocksEventReason*: 0x1 idle,
  // 0x4 software power cap, 0x20 software thermal, 0x40 hardware thermal, ...).
  absl::StatusOr<uint64_t> ClocksEventReasons(nvml::Device device) const;

  // Health, for the GPU health monitor.
  // An event set; free it with FreeEventSet.
  absl::StatusOr<nvml::EventSet> CreateEventSet() const;
  void FreeEventSet(nvml::EventSet set) const;
  // Registers `event_types` (nvml::kEventType* bits) of `device` with `set`. UNIMPLEMENTED
  // when the GPU cannot report them.
  absl::Status RegisterEvents(nvml::Device device, uint64_t event_types, nvml::EventSet set) const;
  // The next event, or nullopt when none came within `timeout_ms`.
  absl::StatusOr<std::optional<nvml::EventData>> WaitForEvent(nvml::EventSet set,
                                                              unsigned timeout_ms) const;
  absl::StatusOr<uint64_t> TotalEccErrors(nvml::Device device, nvml::MemoryErrorType error_type,
                                          nvml::EccCounterType counter_type) const;
  // How many pages were retired for `cause`.
  absl::StatusOr<unsigned> RetiredPageCount(nvml::Device device,
                                            nvml::PageRetirementCause cause) const;
  // Whether a page retirement waits for the next reset.
  absl::StatusOr<bool> RetiredPagesPending(nvml::Device device) const;
  absl::StatusOr<nvml::RemappedRows> RemappedRows(nvml::Device device) const;

 private:
  struct Api;  // dlopen handle and function pointers

  explicit NvmlLibrary(std::unique_ptr<Api> api);

  // The status for a failed call: "<function> failed: <NVML text> (nvmlReturn_t <n>)".
  absl::Status Error(std::string_view function, nvml::Return result) const;

  std::unique_ptr<Api> api_;
};

}  // namespace gpuprof::gpu

#endif  // GPUPROF_GPU_NVML_LOADER_H_
