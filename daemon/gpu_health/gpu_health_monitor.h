// Watches the GPUs' health through NVML, which needs no CUDA context: the driver's Xid events
// (nvmlEventSetWait_v2 on nvmlEventTypeXidCriticalError) as they happen, and the memory error
// counters (ECC, retired pages, remapped rows) every `counter_interval`. What it finds goes to
// callbacks; what a fault means for experiments and leases is the experiment manager's call.
#ifndef GPUPROF_DAEMON_GPU_HEALTH_GPU_HEALTH_MONITOR_H_
#define GPUPROF_DAEMON_GPU_HEALTH_GPU_HEALTH_MONITOR_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/gpu_health/gpu_faults.h"
#include "gpu/nvml_loader.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

class GpuHealthMonitor {
 public:
  struct Callbacks {
    // An Xid, or a hardware fault the counters show. Called on the monitor's thread.
    std::function<void(const GpuFault& fault)> on_fault;
    // Every counter reading of a GPU.
    std::function<void(int gpu, const v1::GpuMemoryErrors& errors)> on_memory_errors;
  };

  // Loads NVML from `nvml_path`, finds each GPU (PCI bus id, else UUID), registers for Xid
  // events and starts watching. UNAVAILABLE without NVML, NOT_FOUND when NVML knows none of
  // the GPUs.
  static absl::StatusOr<std::unique_ptr<GpuHealthMonitor>> Start(
      const std::vector<v1::GpuInfo>& gpus, const std::string& nvml_path,
      absl::Duration counter_interval, Callbacks callbacks);
  // Stops the thread (within one event wait, 200 ms).
  ~GpuHealthMonitor();
  GpuHealthMonitor(const GpuHealthMonitor&) = delete;
  GpuHealthMonitor& operator=(const GpuHealthMonitor&) = delete;

  // GPUs whose Xid events are watched; the counters are read on every GPU NVML knows.
  const std::vector<int>& xid_watched_gpus() const { return xid_watched_; }
  // One line on what is watched, for the log.
  const std::string& summary() const { return summary_; }

 private:
  GpuHealthMonitor(gpu::NvmlLibrary nvml, std::vector<std::pair<int, gpu::nvml::Device>> devices,
                   absl::Duration counter_interval, Callbacks callbacks);
  void Run();
  void ReadCounters();

  gpu::NvmlLibrary nvml_;
  std::vector<std::pair<int, gpu::nvml::Device>> devices_;
  const absl::Duration counter_interval_;
  const Callbacks callbacks_;
  gpu::nvml::EventSet events_ = nullptr;  // null when no GPU reports Xid events
  std::vector<int> xid_watched_;
  std::string summary_;
  std::map<int, v1::GpuMemoryErrors> last_errors_;  // the monitor thread's own
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// One reading of a GPU's memory error counters; a counter NVML refuses is -1.
v1::GpuMemoryErrors ReadMemoryErrors(const gpu::NvmlLibrary& nvml, gpu::nvml::Device device);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_GPU_HEALTH_GPU_HEALTH_MONITOR_H_
