#include "gpu/nvml_loader.h"

#include <dlfcn.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuprof::gpu {
namespace {

using nvml::Device;
using nvml::Return;

// Debian's abseil has its own string_view type, not an alias of std::string_view.
absl::string_view AsAbsl(std::string_view text) { return {text.data(), text.size()}; }

template <typename Function>
void LoadSymbol(void* handle, const char* name, Function* function) {
  *function = reinterpret_cast<Function>(dlsym(handle, name));
}

absl::Status NotAvailable(std::string_view function) {
  return absl::UnimplementedError(
      absl::StrCat(AsAbsl(function), " is not available in this driver's NVML"));
}

}  // namespace

// Enumerations are passed as int: a C enum is an int in the x86-64 ABI.
struct NvmlLibrary::Api {
  Api() = default;
  Api(const Api&) = delete;
  Api& operator=(const Api&) = delete;
  ~Api() {
    if (initialized && shutdown != nullptr) shutdown();
    if (handle != nullptr) dlclose(handle);
  }

  void* handle = nullptr;
  bool initialized = false;

  Return (*init)() = nullptr;
  Return (*shutdown)() = nullptr;
  const char* (*error_string)(Return) = nullptr;
  Return (*system_get_driver_version)(char*, unsigned) = nullptr;
  Return (*device_get_handle_by_pci_bus_id)(const char*, Device*) = nullptr;
  Return (*device_get_handle_by_uuid)(const char*, Device*) = nullptr;
  Return (*device_get_uuid)(Device, char*, unsigned) = nullptr;
  Return (*device_get_topology_common_ancestor)(Device, Device, int*) = nullptr;
  Return (*device_get_nvlink_state)(Device, unsigned, int*) = nullptr;
  Return (*device_get_nvlink_remote_pci_info)(Device, unsigned, nvml::PciInfo*) = nullptr;
  Return (*device_get_nvlink_remote_device_type)(Device, unsigned, int*) = nullptr;
  Return (*device_get_p2p_status)(Device, Device, int, int*) = nullptr;
  Return (*device_get_utilization_rates)(Device, nvml::Utilization*) = nullptr;
  Return (*device_get_memory_info)(Device, nvml::Memory*) = nullptr;
  Return (*device_get_clock_info)(Device, int, unsigned*) = nullptr;
  Return (*device_get_max_clock_info)(Device, int, unsigned*) = nullptr;
  Return (*device_get_temperature)(Device, int, unsigned*) = nullptr;
  Return (*device_get_power_usage)(Device, unsigned*) = nullptr;
  Return (*device_get_clocks_event_reasons)(Device, uint64_t*) = nullptr;
  Return (*device_get_count)(unsigned*) = nullptr;
  Return (*device_get_handle_by_index)(unsigned, Device*) = nullptr;
  Return (*event_set_create)(nvml::EventSet*) = nullptr;
  Return (*event_set_free)(nvml::EventSet) = nullptr;
  Return (*device_register_events)(Device, unsigned long long, nvml::EventSet) = nullptr;
  Return (*event_set_wait)(nvml::EventSet, nvml::EventData*, unsigned) = nullptr;
  Return (*device_get_total_ecc_errors)(Device, int, int, unsigned long long*) = nullptr;
  Return (*device_get_retired_pages)(Device, int, unsigned*, unsigned long long*) = nullptr;
  Return (*device_get_retired_pages_pending_status)(Device, int*) = nullptr;
  Return (*device_get_remapped_rows)(Device, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
};

absl::StatusCode NvmlReturnToStatusCode(Return result) {
  switch (result) {
    case nvml::kSuccess:
      return absl::StatusCode::kOk;
    case nvml::kErrorInvalidArgument:
      return absl::StatusCode::kInvalidArgument;
    case nvml::kErrorNotSupported:
    case nvml::kErrorFunctionNotFound:
      return absl::StatusCode::kUnimplemented;
    case nvml::kErrorNoPermission:
      return absl::StatusCode::kPermissionDenied;
    case nvml::kErrorNotFound:
      return absl::StatusCode::kNotFound;
    case nvml::kErrorUninitialized:
    case nvml::kErrorDriverNotLoaded:
    case nvml::kErrorLibraryNotFound:
      return absl::StatusCode::kFailedPrecondition;
    case nvml::kErrorGpuIsLost:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::StatusOr<NvmlLibrary> NvmlLibrary::Load(const std::string& path) {
  auto api = std::make_unique<Api>();
  api->handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->handle == nullptr) {
    const char* reason = dlerror();
    return absl::UnavailableError(
        absl::StrCat("NVML unavailable: dlopen(", path, ") failed: ", reason ? reason : "unknown"));
  }
  void* handle = api->handle;
  LoadSymbol(handle, "nvmlInit_v2", &api->init);
  LoadSymbol(handle, "nvmlShutdown", &api->shutdown);
  LoadSymbol(handle, "nvmlErrorString", &api->error_string);
  if (api->init == nullptr || api->shutdown == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("NVML unavailable: ", path, " lacks nvmlInit_v2 or nvmlShutdown"));
  }
  LoadSymbol(handle, "nvmlSystemGetDriverVersion", &api->system_get_driver_version);
  LoadSymbol(handle, "nvmlDeviceGetHandleByPciBusId_v2", &api->device_get_handle_by_pci_bus_id);
  LoadSymbol(handle, "nvmlDeviceGetHandleByUUID", &api->device_get_handle_by_uuid);
  LoadSymbol(handle, "nvmlDeviceGetUUID", &api->device_get_uuid);
  LoadSymbol(handle, "nvmlDeviceGetTopologyCommonAncestor",
             &api->device_get_topology_common_ancestor);
  LoadSymbol(handle, "nvmlDeviceGetNvLinkState", &api->device_get_nvlink_state);
  LoadSymbol(handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2",
             &api->device_get_nvlink_remote_pci_info);
  LoadSymbol(handle, "nvmlDeviceGetNvLinkRemoteDeviceType",
             &api->device_get_nvlink_remote_device_type);
  LoadSymbol(handle, "nvmlDeviceGetP2PStatus", &api->device_get_p2p_status);
  LoadSymbol(handle, "nvmlDeviceGetUtilizationRates", &api->device_get_utilization_rates);
  LoadSymbol(handle, "nvmlDeviceGetMemoryInfo", &api->device_get_memory_info);
  LoadSymbol(handle, "nvmlDeviceGetClockInfo", &api->device_get_clock_info);
  LoadSymbol(handle, "nvmlDeviceGetMaxClockInfo", &api->device_get_max_clock_info);
  // Deprecated in NVML 13.0 in favour of nvmlDeviceGetTemperatureV (a versioned struct), but
  // still exported by driver 580.
  LoadSymbol(handle, "nvmlDeviceGetTemperature", &api->device_get_temperature);
  LoadSymbol(handle, "nvmlDeviceGetPowerUsage", &api->device_get_power_usage);
  // Renamed from "throttle reasons" in driver 535; older drivers have only the old name.
  LoadSymbol(handle, "nvmlDeviceGetCurrentClocksEventReasons",
             &api->device_get_clocks_event_reasons);
  if (api->device_get_clocks_event_reasons == nullptr) {
    LoadSymbol(handle, "nvmlDeviceGetCurrentClocksThrottleReasons",
               &api->device_get_clocks_event_reasons);
  }

  LoadSymbol(handle, "nvmlDeviceGetCount_v2", &api->device_get_count);
  LoadSymbol(handle, "nvmlDeviceGetHandleByIndex_v2", &api->device_get_handle_by_index);
  LoadSymbol(handle, "nvmlEventSetCreate", &api->event_set_create);
  LoadSymbol(handle, "nvmlEventSetFree", &api->event_set_free);
  LoadSymbol(handle, "nvmlDeviceRegisterEvents", &api->device_register_events);
  LoadSymbol(handle, "nvmlEventSetWait_v2", &api->event_set_wait);
  LoadSymbol(handle, "nvmlDeviceGetTotalEccErrors", &api->device_get_total_ecc_errors);
  LoadSymbol(handle, "nvmlDeviceGetRetiredPages", &api->device_get_retired_pages);
  LoadSymbol(handle, "nvmlDeviceGetRetiredPagesPendingStatus",
             &api->device_get_retired_pages_pending_status);
  LoadSymbol(handle, "nvmlDeviceGetRemappedRows", &api->device_get_remapped_rows);

  NvmlLibrary library(std::move(api));
  if (Return result = library.api_->init(); result != nvml::kSuccess) {
    return absl::Status(
        NvmlReturnToStatusCode(result),
        absl::StrCat("NVML unavailable: nvmlInit_v2 failed: ", library.ErrorString(result)));
  }
  library.api_->initialized = true;
  return library;
}

NvmlLibrary::NvmlLibrary(std::unique_ptr<Api> api) : api_(std::move(api)) {}
NvmlLibrary::NvmlLibrary(NvmlLibrary&& other) noexcept = default;
NvmlLibrary& NvmlLibrary::operator=(NvmlLibrary&& other) noexcept = default;
NvmlLibrary::~NvmlLibrary() = default;

std::string NvmlLibrary::ErrorString(Return result) const {
  const char* text = api_->error_string != nullptr ? api_->error_string(result) : nullptr;
  if (text == nullptr) return absl::StrCat("nvmlReturn_t ", result);
  return text;
}

absl::Status NvmlLibrary::Error(std::string_view function, Return result) const {
  return absl::Status(NvmlReturnToStatusCode(result),
                      absl::StrCat(AsAbsl(function), " failed: ", ErrorString(result),
                                   " (nvmlReturn_t ", result, ")"));
}

absl::StatusOr<std::string> NvmlLibrary::DriverVersion() const {
  if (api_->system_get_driver_version == nullptr) {
    return NotAvailable("nvmlSystemGetDriverVersion");
  }
  char version[80] = {};  // NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE
  if (Return result = api_->system_get_driver_version(version, sizeof(version));
      result != nvml::kSuccess) {
    return Error("nvmlSystemGetDriverVersion", result);
  }
  return std::string(version);
}

absl::StatusOr<Device> NvmlLibrary::DeviceByPciBusId(std::string_view pci_bus_id) const {
  if (api_->device_get_handle_by_pci_bus_id == nullptr) {
    return NotAvailable("nvmlDeviceGetHandleByPciBusId_v2");
  }
  Device device = nullptr;
  if (Return result =
          api_->device_get_handle_by_pci_bus_id(std::string(pci_bus_id).c_str(), &device);
      result != nvml::kSuccess) {
    return Error(absl::StrCat("nvmlDeviceGetHandleByPciBusId_v2(", AsAbsl(pci_bus_id), ")"),
                 result);
  }
  return device;
}

absl::StatusOr<Device> NvmlLibrary::DeviceByUuid(std::string_view uuid) const {
  if (api_->device_get_handle_by_uuid == nullptr) return NotAvailable("nvmlDeviceGetHandleByUUID");
  Device device = nullptr;
  if (Return result = api_->device_get_handle_by_uuid(std::string(uuid).c_str(), &device);
      result != nvml::kSuccess) {
    return Error(absl::StrCat("nvmlDeviceGetHandleByUUID(", AsAbsl(uuid), ")"), result);
  }
  return device;
}

absl::StatusOr<std::string> NvmlLibrary::DeviceUuid(Device device) const {
  if (api_->device_get_uuid == nullptr) return NotAvailable("nvmlDeviceGetUUID");
  char uuid[96] = {};  // NVML_DEVICE_UUID_V2_BUFFER_SIZE
  if (Return result = api_->device_get_uuid(device, uuid, sizeof(uuid)); result != nvml::kSuccess) {
    return Error("nvmlDeviceGetUUID", result);
  }
  return std::string(uuid);
}

absl::StatusOr<nvml::TopologyLevel> NvmlLibrary::TopologyCommonAncestor(Device a, Device b) const {
  if (api_->device_get_topology_common_ancestor == nullptr) {
    return NotAvailable("nvmlDeviceGetTopologyCommonAncestor");
  }
  int level = 0;
  if (Return result = api_->device_get_topology_common_ancestor(a, b, &level);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetTopologyCommonAncestor", result);
  }
  return static_cast<nvml::TopologyLevel>(level);
}

absl::StatusOr<bool> NvmlLibrary::NvLinkIsActive(Device device, unsigned link) const {
  if (api_->device_get_nvlink_state == nullptr) return NotAvailable("nvmlDeviceGetNvLinkState");
  int enabled = 0;  // nvmlEnableState_t: 0 disabled, 1 enabled
  if (Return result = api_->device_get_nvlink_state(device, link, &enabled);
      result != nvml::kSuccess) {
    return Error(absl::StrCat("nvmlDeviceGetNvLinkState(link ", link, ")"), result);
  }
  return enabled == 1;
}

absl::StatusOr<nvml::PciInfo> NvmlLibrary::NvLinkRemotePciInfo(Device device, unsigned link) const {
  if (api_->device_get_nvlink_remote_pci_info == nullptr) {
    return NotAvailable("nvmlDeviceGetNvLinkRemotePciInfo_v2");
  }
  nvml::PciInfo info = {};
  if (Return result = api_->device_get_nvlink_remote_pci_info(device, link, &info);
      result != nvml::kSuccess) {
    return Error(absl::StrCat("nvmlDeviceGetNvLinkRemotePciInfo_v2(link ", link, ")"), result);
  }
  return info;
}

absl::StatusOr<nvml::NvLinkDeviceType> NvmlLibrary::NvLinkRemoteDeviceType(Device device,
                                                                           unsigned link) const {
  if (api_->device_get_nvlink_remote_device_type == nullptr) {
    return NotAvailable("nvmlDeviceGetNvLinkRemoteDeviceType");
  }
  int type = 0;
  if (Return result = api_->device_get_nvlink_remote_device_type(device, link, &type);
      result != nvml::kSuccess) {
    return Error(absl::StrCat("nvmlDeviceGetNvLinkRemoteDeviceType(link ", link, ")"), result);
  }
  return static_cast<nvml::NvLinkDeviceType>(type);
}

absl::StatusOr<bool> NvmlLibrary::P2pSupported(Device a, Device b,
                                               nvml::P2pCapability capability) const {
  if (api_->device_get_p2p_status == nullptr) return NotAvailable("nvmlDeviceGetP2PStatus");
  int p2p_status = 0;
  if (Return result = api_->device_get_p2p_status(a, b, static_cast<int>(capability), &p2p_status);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetP2PStatus", result);
  }
  return p2p_status == nvml::kP2pStatusOk;
}

absl::StatusOr<nvml::Utilization> NvmlLibrary::UtilizationRates(Device device) const {
  if (api_->device_get_utilization_rates == nullptr) {
    return NotAvailable("nvmlDeviceGetUtilizationRates");
  }
  nvml::Utilization utilization = {};
  if (Return result = api_->device_get_utilization_rates(device, &utilization);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetUtilizationRates", result);
  }
  return utilization;
}

absl::StatusOr<nvml::Memory> NvmlLibrary::MemoryInfo(Device device) const {
  if (api_->device_get_memory_info == nullptr) return NotAvailable("nvmlDeviceGetMemoryInfo");
  nvml::Memory memory = {};
  if (Return result = api_->device_get_memory_info(device, &memory); result != nvml::kSuccess) {
    return Error("nvmlDeviceGetMemoryInfo", result);
  }
  return memory;
}

absl::StatusOr<unsigned> NvmlLibrary::ClockMhz(Device device, nvml::ClockType type) const {
  if (api_->device_get_clock_info == nullptr) return NotAvailable("nvmlDeviceGetClockInfo");
  unsigned mhz = 0;
  if (Return result = api_->device_get_clock_info(device, static_cast<int>(type), &mhz);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetClockInfo", result);
  }
  return mhz;
}

absl::StatusOr<unsigned> NvmlLibrary::MaxClockMhz(Device device, nvml::ClockType type) const {
  if (api_->device_get_max_clock_info == nullptr) return NotAvailable("nvmlDeviceGetMaxClockInfo");
  unsigned mhz = 0;
  if (Return result = api_->device_get_max_clock_info(device, static_cast<int>(type), &mhz);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetMaxClockInfo", result);
  }
  return mhz;
}

absl::StatusOr<unsigned> NvmlLibrary::GpuTemperatureCelsius(Device device) const {
  if (api_->device_get_temperature == nullptr) return NotAvailable("nvmlDeviceGetTemperature");
  constexpr int kTemperatureGpu = 0;  // NVML_TEMPERATURE_GPU: the die
  unsigned celsius = 0;
  if (Return result = api_->device_get_temperature(device, kTemperatureGpu, &celsius);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetTemperature", result);
  }
  return celsius;
}

absl::StatusOr<unsigned> NvmlLibrary::PowerUsageMilliwatts(Device device) const {
  if (api_->device_get_power_usage == nullptr) return NotAvailable("nvmlDeviceGetPowerUsage");
  unsigned milliwatts = 0;
  if (Return result = api_->device_get_power_usage(device, &milliwatts); result != nvml::kSuccess) {
    return Error("nvmlDeviceGetPowerUsage", result);
  }
  return milliwatts;
}

absl::StatusOr<uint64_t> NvmlLibrary::ClocksEventReasons(Device device) const {
  if (api_->device_get_clocks_event_reasons == nullptr) {
    return NotAvailable("nvmlDeviceGetCurrentClocksEventReasons");
  }
  uint64_t reasons = 0;
  if (Return result = api_->device_get_clocks_event_reasons(device, &reasons);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetCurrentClocksEventReasons", result);
  }
  return reasons;
}

absl::StatusOr<unsigned> NvmlLibrary::DeviceCount() const {
  if (api_->device_get_count == nullptr) return NotAvailable("nvmlDeviceGetCount_v2");
  unsigned count = 0;
  if (Return result = api_->device_get_count(&count); result != nvml::kSuccess) {
    return Error("nvmlDeviceGetCount_v2", result);
  }
  return count;
}

absl::StatusOr<Device> NvmlLibrary::DeviceByIndex(unsigned index) const {
  if (api_->device_get_handle_by_index == nullptr) {
    return NotAvailable("nvmlDeviceGetHandleByIndex_v2");
  }
  Device device = nullptr;
  if (Return result = api_->device_get_handle_by_index(index, &device);
      result != nvml::kSuccess) {
    return Error(absl::StrCat("nvmlDeviceGetHandleByIndex_v2(", index, ")"), result);
  }
  return device;
}

absl::StatusOr<nvml::EventSet> NvmlLibrary::CreateEventSet() const {
  if (api_->event_set_create == nullptr || api_->event_set_free == nullptr) {
    return NotAvailable("nvmlEventSetCreate");
  }
  nvml::EventSet set = nullptr;
  if (Return result = api_->event_set_create(&set); result != nvml::kSuccess) {
    return Error("nvmlEventSetCreate", result);
  }
  return set;
}

void NvmlLibrary::FreeEventSet(nvml::EventSet set) const {
  if (set != nullptr && api_->event_set_free != nullptr) api_->event_set_free(set);
}

absl::Status NvmlLibrary::RegisterEvents(Device device, uint64_t event_types,
                                         nvml::EventSet set) const {
  if (api_->device_register_events == nullptr) return NotAvailable("nvmlDeviceRegisterEvents");
  if (Return result = api_->device_register_events(device, event_types, set);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceRegisterEvents", result);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<nvml::EventData>> NvmlLibrary::WaitForEvent(
    nvml::EventSet set, unsigned timeout_ms) const {
  if (api_->event_set_wait == nullptr) return NotAvailable("nvmlEventSetWait_v2");
  nvml::EventData data = {};
  const Return result = api_->event_set_wait(set, &data, timeout_ms);
  if (result == nvml::kErrorTimeout) return std::optional<nvml::EventData>();
  if (result != nvml::kSuccess) return Error("nvmlEventSetWait_v2", result);
  return std::optional<nvml::EventData>(data);
}

absl::StatusOr<uint64_t> NvmlLibrary::TotalEccErrors(Device device,
                                                     nvml::MemoryErrorType error_type,
                                                     nvml::EccCounterType counter_type) const {
  if (api_->device_get_total_ecc_errors == nullptr) {
    return NotAvailable("nvmlDeviceGetTotalEccErrors");
  }
  unsigned long long count = 0;
  if (Return result = api_->device_get_total_ecc_errors(
          device, static_cast<int>(error_type), static_cast<int>(counter_type), &count);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetTotalEccErrors", result);
  }
  return static_cast<uint64_t>(count);
}

absl::StatusOr<unsigned> NvmlLibrary::RetiredPageCount(Device device,
                                                       nvml::PageRetirementCause cause) const {
  if (api_->device_get_retired_pages == nullptr) return NotAvailable("nvmlDeviceGetRetiredPages");
  // A count of 0 with no buffer asks for the count alone: NVML answers INSUFFICIENT_SIZE with
  // the count when there are pages, SUCCESS when there are none.
  unsigned count = 0;
  const Return result =
      api_->device_get_retired_pages(device, static_cast<int>(cause), &count, nullptr);
  if (result != nvml::kSuccess && result != nvml::kErrorInsufficientSize) {
    return Error("nvmlDeviceGetRetiredPages", result);
  }
  return count;
}

absl::StatusOr<bool> NvmlLibrary::RetiredPagesPending(Device device) const {
  if (api_->device_get_retired_pages_pending_status == nullptr) {
    return NotAvailable("nvmlDeviceGetRetiredPagesPendingStatus");
  }
  int pending = 0;  // nvmlEnableState_t
  if (Return result = api_->device_get_retired_pages_pending_status(device, &pending);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetRetiredPagesPendingStatus", result);
  }
  return pending == 1;
}

absl::StatusOr<nvml::RemappedRows> NvmlLibrary::RemappedRows(Device device) const {
  if (api_->device_get_remapped_rows == nullptr) return NotAvailable("nvmlDeviceGetRemappedRows");
  unsigned correctable = 0, uncorrectable = 0, pending = 0, failure = 0;
  if (Return result = api_->device_get_remapped_rows(device, &correctable, &uncorrectable,
                                                     &pending, &failure);
      result != nvml::kSuccess) {
    return Error("nvmlDeviceGetRemappedRows", result);
  }
  return nvml::RemappedRows{correctable, uncorrectable, pending != 0, failure != 0};
}

}  // namespace gpuprof::gpu
