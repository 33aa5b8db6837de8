// What the driver's Xid codes and memory error counters mean for the daemon: which faults
// are the running program's (fail the experiment only) and which are the GPU's (drain it until
// an admin clears it). Pure functions: the NVML side is gpu_health_monitor.h, the state they lead
// to gpu_health_state.h.
#ifndef GPUPROF_DAEMON_GPU_HEALTH_GPU_FAULTS_H_
#define GPUPROF_DAEMON_GPU_HEALTH_GPU_FAULTS_H_

#include <optional>
#include <string>

#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

// A fault the driver reported on one GPU.
struct GpuFault {
  int gpu = 0;  // physical index, as in ListGpus
  int xid = 0;  // 0 when a memory error counter, not an Xid, reported it
  v1::GpuFaultClass fault_class = v1::GPU_FAULT_CLASS_OTHER;
  // What happened, for people: "Xid 79 (the GPU has fallen off the bus)".
  std::string description;
};

// The class of an Xid, after NVIDIA's Xid catalogue: 13, 31, 43, 45, 68 and 109 are faults of
// the program that ran (illegal address, exception, timeout); 48, 61-64, 74, 79, 92, 94, 95,
// 119, 120 and 140 are the GPU's (uncorrectable memory errors, NVLink, fallen off the bus,
// firmware); anything else is OTHER: counted and shown, nothing is stopped.
v1::GpuFaultClass ClassifyXid(int xid);

// "Xid 79 (the GPU has fallen off the bus)"; "Xid 12345" for a code not in the table.
std::string DescribeXid(int xid);

GpuFault XidFault(int gpu, int xid);

// "application", "hardware" or "other": the class label of the Xid counter metric.
std::string FaultClassLabel(v1::GpuFaultClass fault_class);

// A hardware fault that the memory error counters show, comparing a reading with the one
// before (nullopt at the first reading): uncorrectable ECC errors that rose, a row remapping
// that failed, or a remapping or page retirement that waits for a GPU reset. Counts that were
// already there at the first reading are history, not news; pending and failed flags are not.
std::optional<GpuFault> MemoryErrorFault(int gpu, const std::optional<v1::GpuMemoryErrors>& before,
                                         const v1::GpuMemoryErrors& now);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_GPU_HEALTH_GPU_FAULTS_H_
