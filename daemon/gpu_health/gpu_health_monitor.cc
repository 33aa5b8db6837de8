#include "daemon/gpu_health/gpu_health_monitor.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpu/nvml_devices.h"

namespace gpuprof::daemon {
namespace nvml = gpu::nvml;

namespace {

// How long one event wait lasts: also how soon the destructor returns.
constexpr unsigned kEventWaitMs = 200;

template <typename T>
int64_t OrMinusOne(const absl::StatusOr<T>& value) {
  return value.ok() ? static_cast<int64_t>(*value) : -1;
}

}  // namespace

v1::GpuMemoryErrors ReadMemoryErrors(const gpu::NvmlLibrary& nvml, nvml::Device device) {
  v1::GpuMemoryErrors errors;
  errors.set_ecc_corrected(OrMinusOne(nvml.TotalEccErrors(
      device, nvml::MemoryErrorType::kCorrected, nvml::EccCounterType::kVolatile)));
  errors.set_ecc_uncorrected(OrMinusOne(nvml.TotalEccErrors(
      device, nvml::MemoryErrorType::kUncorrected, nvml::EccCounterType::kVolatile)));
  errors.set_retired_pages_single_bit(OrMinusOne(
      nvml.RetiredPageCount(device, nvml::PageRetirementCause::kMultipleSingleBitEccErrors)));
  errors.set_retired_pages_double_bit(
      OrMinusOne(nvml.RetiredPageCount(device, nvml::PageRetirementCause::kDoubleBitEccError)));
  errors.set_retirement_pending(nvml.RetiredPagesPending(device).value_or(false));
  if (const auto rows = nvml.RemappedRows(device); rows.ok()) {
    errors.set_remapped_rows_correctable(rows->correctable);
    errors.set_remapped_rows_uncorrectable(rows->uncorrectable);
    errors.set_remapping_pending(rows->pending);
    errors.set_remapping_failed(rows->failure_occurred);
  } else {
    errors.set_remapped_rows_correctable(-1);
    errors.set_remapped_rows_uncorrectable(-1);
  }
  return errors;
}

absl::StatusOr<std::unique_ptr<GpuHealthMonitor>> GpuHealthMonitor::Start(
    const std::vector<v1::GpuInfo>& gpus, const std::string& nvml_path,
    absl::Duration counter_interval, Callbacks callbacks) {
  absl::StatusOr<gpu::NvmlLibrary> library = gpu::NvmlLibrary::Load(nvml_path);
  if (!library.ok()) return library.status();
  absl::StatusOr<gpu::NvmlDevices> devices = gpu::FindNvmlDevices(*library, gpus);
  if (!devices.ok()) return devices.status();
  std::unique_ptr<GpuHealthMonitor> monitor(new GpuHealthMonitor(
      *std::move(library), std::move(devices->found), counter_interval, std::move(callbacks)));
  std::vector<std::string> notes;
  if (absl::StatusOr<nvml::EventSet> set = monitor->nvml_.CreateEventSet(); set.ok()) {
    monitor->events_ = *set;
    for (const auto& [index, device] : monitor->devices_) {
      const absl::Status registered =
          monitor->nvml_.RegisterEvents(device, nvml::kEventTypeXidCriticalError, *set);
      if (registered.ok()) {
        monitor->xid_watched_.push_back(index);
      } else {
        notes.push_back(absl::StrCat("GPU ", index, ": no Xid events (", registered.message(), ")"));
      }
    }
  } else {
    notes.push_back(absl::StrCat("no Xid events (", set.status().message(), ")"));
  }
  if (!devices->not_found.empty()) {
    notes.push_back(absl::StrCat("not in NVML: ", absl::StrJoin(devices->not_found, ", ")));
  }
  monitor->summary_ = absl::StrCat(
      "GPU health: Xid events of GPU(s) ",
      monitor->xid_watched_.empty() ? "none" : absl::StrJoin(monitor->xid_watched_, ","),
      ", memory error counters every ", absl::FormatDuration(counter_interval),
      notes.empty() ? "" : absl::StrCat("; ", absl::StrJoin(notes, "; ")));
  // The first reading before the thread starts: a GPU that waits for a reset is drained
  // before anything is scheduled on it.
  monitor->ReadCounters();
  monitor->thread_ = std::thread([m = monitor.get()] { m->Run(); });
  return monitor;
}

GpuHealthMonitor::GpuHealthMonitor(gpu::NvmlLibrary nvml,
                                   std::vector<std::pair<int, nvml::Device>> devices,
                                   absl::Duration counter_interval, Callbacks callbacks)
    : nvml_(std::move(nvml)),
      devices_(std::move(devices)),
      counter_interval_(counter_interval),
      callbacks_(std::move(callbacks)) {}

GpuHealthMonitor::~GpuHealthMonitor() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  nvml_.FreeEventSet(events_);
}

void GpuHealthMonitor::ReadCounters() {
  for (const auto& [index, device] : devices_) {
    const v1::GpuMemoryErrors now = ReadMemoryErrors(nvml_, device);
    const auto before = last_errors_.find(index);
    std::optional<v1::GpuMemoryErrors> previous;
    if (before != last_errors_.end()) previous = before->second;
    last_errors_[index] = now;
    if (callbacks_.on_memory_errors) callbacks_.on_memory_errors(index, now);
    if (std::optional<GpuFault> fault = MemoryErrorFault(index, previous, now);
        fault.has_value() && callbacks_.on_fault) {
      callbacks_.on_fault(*fault);
    }
  }
}

void GpuHealthMonitor::Run() {
  absl::Time next_counters = absl::Now() + counter_interval_;
  bool wait_failure_logged = false;
  while (!stopping_) {
    if (events_ == nullptr || xid_watched_.empty()) {
      absl::SleepFor(absl::Milliseconds(kEventWaitMs));
    } else {
      const auto event = nvml_.WaitForEvent(events_, kEventWaitMs);
      if (!event.ok()) {
        // A lost GPU makes waits fail at once; do not spin on it.
        if (!wait_failure_logged) {
          std::fprintf(stderr, "gpuprofd: waiting for NVML events: %s\n",
                       event.status().ToString().c_str());
          wait_failure_logged = true;
        }
        absl::SleepFor(absl::Milliseconds(kEventWaitMs));
      } else if (event->has_value() &&
                 ((*event)->event_type & nvml::kEventTypeXidCriticalError) != 0) {
        for (const auto& [index, device] : devices_) {
          if (device != (*event)->device) continue;
          if (callbacks_.on_fault) {
            callbacks_.on_fault(XidFault(index, static_cast<int>((*event)->event_data)));
          }
          break;
        }
      }
    }
    if (absl::Now() >= next_counters) {
      ReadCounters();
      next_counters = absl::Now() + counter_interval_;
    }
  }
}

}  // namespace gpuprof::daemon
