// The node itself: gpus (host, GPUs, leases, topology), gpu clear (a drained GPU back to
// service) and health. gpus and health also print every node of a fleet, one section each.
#ifndef GPUPROF_CLIENT_GPU_COMMANDS_H_
#define GPUPROF_CLIENT_GPU_COMMANDS_H_

#include "client/command.h"

namespace gpuprof::client {

Command GpusCommand();
Command GpuCommand();
Command HealthCommand();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_GPU_COMMANDS_H_
