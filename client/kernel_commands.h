// Custom kernels' own commands (docs/custom-kernels.md): `gpuprof sass ID` and
// `gpuprof board WORKLOAD [shape flags]`.
#ifndef GPUPROF_CLIENT_KERNEL_COMMANDS_H_
#define GPUPROF_CLIENT_KERNEL_COMMANDS_H_

#include "client/command.h"

namespace gpuprof::client {

Command SassCommand();
Command BoardCommand();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_KERNEL_COMMANDS_H_
