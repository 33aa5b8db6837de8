// What the audit trail records of a submission's custom kernels: which source ran on the box,
// as its SHA-256 and size (never the text: the experiment keeps that), so a kernel that did
// harm can be traced to its submitter and its exact source.
#ifndef GPUPROF_DAEMON_ADMISSION_CUSTOM_KERNEL_AUDIT_H_
#define GPUPROF_DAEMON_ADMISSION_CUSTOM_KERNEL_AUDIT_H_

#include <string>
#include <vector>

#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {

// "; custom kernel my_gather.cu (my_gather), source sha256 <64 hex>, 1834 bytes", one entry per
// distinct source in the order of `requests` ("; custom kernels a.cu (...) ..., b.cu ..."), or
// "" when none carries a custom kernel. Appended to the submit's audit detail.
std::string CustomKernelAuditDetail(const std::vector<v1::ExperimentRequest>& requests);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_CUSTOM_KERNEL_AUDIT_H_
