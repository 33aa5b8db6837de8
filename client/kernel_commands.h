// Custom kernels' own commands (docs/custom-kernels.md): `gpuprof sass ID` and
// `gpuprof board WORKLOAD [shape flags]`.
#ifndef GPUPROF_CLIENT_KERNEL_COMMANDS_H_
#define GPUPROF_CLIENT_KERNEL_COMMANDS_H_

#include "client/command.h"

namespace gpuprof::client {

Command SassCommand();
Command BoardCommand();

// board's own flags (--best-per-kernel, --limit, --json, ...), besides the workload's shape
// flags; for completion.
std::vector<FlagSpec> BoardFlags();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_KERNEL_COMMANDS_H_
