// The host tests of admission validate against: two GPUs joined by NVLink.
#ifndef GPUPROF_DAEMON_ADMISSION_TEST_INVENTORY_H_
#define GPUPROF_DAEMON_ADMISSION_TEST_INVENTORY_H_

#include <initializer_list>

#include "gpuprof/v1/gpus.pb.h"

namespace gpuprof::daemon {

// GPUs 0 and 1 (80 GiB each, NUMA node 0) linked by NVLink, running `workloads`.
v1::ListGpusResponse TwoNvlinkGpus(std::initializer_list<const char*> workloads);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_TEST_INVENTORY_H_
