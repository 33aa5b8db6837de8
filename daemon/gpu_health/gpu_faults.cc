#include "daemon/gpu_health/gpu_faults.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gpuprof::daemon {
namespace {

struct XidEntry {
  int xid;
  v1::GpuFaultClass fault_class;
  const char* meaning;
};

constexpr XidEntry kXids[] = {
    {13, v1::GPU_FAULT_CLASS_APPLICATION, "graphics engine exception: an illegal instruction or "
                                          "out-of-range access by the program"},
    {31, v1::GPU_FAULT_CLASS_APPLICATION, "GPU memory page fault: the program touched an "
                                          "address it does not own"},
    {43, v1::GPU_FAULT_CLASS_APPLICATION, "GPU stopped processing: the program's channel was "
                                          "reset after a fault"},
    {45, v1::GPU_FAULT_CLASS_APPLICATION, "preemptive cleanup: the program was stopped after an "
                                          "earlier error"},
    {68, v1::GPU_FAULT_CLASS_APPLICATION, "video decoder exception"},
    {109, v1::GPU_FAULT_CLASS_APPLICATION, "context switch timeout: the program did not yield"},
    {48, v1::GPU_FAULT_CLASS_HARDWARE, "double-bit ECC error: uncorrectable memory error"},
    {61, v1::GPU_FAULT_CLASS_HARDWARE, "internal micro-controller breakpoint"},
    {62, v1::GPU_FAULT_CLASS_HARDWARE, "internal micro-controller halt"},
    {63, v1::GPU_FAULT_CLASS_HARDWARE, "ECC page retirement or row remapping recorded: a "
                                       "reset is needed to use it"},
    {64, v1::GPU_FAULT_CLASS_HARDWARE, "ECC page retirement or row remapping failed"},
    {74, v1::GPU_FAULT_CLASS_HARDWARE, "NVLink error"},
    {79, v1::GPU_FAULT_CLASS_HARDWARE, "the GPU has fallen off the bus"},
    {92, v1::GPU_FAULT_CLASS_HARDWARE, "high single-bit ECC error rate"},
    {94, v1::GPU_FAULT_CLASS_HARDWARE, "contained ECC error"},
    {95, v1::GPU_FAULT_CLASS_HARDWARE, "uncontained ECC error"},
    {119, v1::GPU_FAULT_CLASS_HARDWARE, "GSP firmware RPC timeout"},
    {120, v1::GPU_FAULT_CLASS_HARDWARE, "GSP firmware error"},
    {140, v1::GPU_FAULT_CLASS_HARDWARE, "unrecovered ECC error"},
};

const XidEntry* FindXid(int xid) {
  for (const XidEntry& entry : kXids) {
    if (entry.xid == xid) return &entry;
  }
  return nullptr;
}

GpuFault HardwareFault(int gpu, std::string description) {
  return GpuFault{gpu, 0, v1::GPU_FAULT_CLASS_HARDWARE, std::move(description)};
}

}  // namespace

v1::GpuFaultClass ClassifyXid(int xid) {
  const XidEntry* entry = FindXid(xid);
  return entry == nullptr ? v1::GPU_FAULT_CLASS_OTHER : entry->fault_class;
}

std::string DescribeXid(int xid) {
  const XidEntry* entry = FindXid(xid);
  if (entry == nullptr) return absl::StrCat("Xid ", xid);
  return absl::StrCat("Xid ", xid, " (", entry->meaning, ")");
}

GpuFault XidFault(int gpu, int xid) { return GpuFault{gpu, xid, ClassifyXid(xid), DescribeXid(xid)}; }

std::string FaultClassLabel(v1::GpuFaultClass fault_class) {
  switch (fault_class) {
    case v1::GPU_FAULT_CLASS_APPLICATION:
      return "application";
    case v1::GPU_FAULT_CLASS_HARDWARE:
      return "hardware";
    default:
      return "other";
  }
}

std::optional<GpuFault> MemoryErrorFault(int gpu, const std::optional<v1::GpuMemoryErrors>& before,
                                         const v1::GpuMemoryErrors& now) {
  if (now.remapping_failed()) {
    return HardwareFault(gpu, "row remapping failed: the memory cannot be repaired in place");
  }
  if (now.remapping_pending()) {
    return HardwareFault(gpu, "a row remapping waits for a GPU reset");
  }
  if (now.retirement_pending()) {
    return HardwareFault(gpu, "a page retirement waits for a GPU reset");
  }
  if (before.has_value() && before->ecc_uncorrected() >= 0 &&
      now.ecc_uncorrected() > before->ecc_uncorrected()) {
    return HardwareFault(gpu, absl::StrCat("uncorrectable ECC errors rose from ",
                                           before->ecc_uncorrected(), " to ",
                                           now.ecc_uncorrected()));
  }
  return std::nullopt;
}

}  // namespace gpuprof::daemon
