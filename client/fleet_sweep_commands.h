// `gpuprof sweep ...` across a fleet (several --target, or --fleet before or after the
// command): a workload submits a fleet sweep; get, watch, cancel, plot take a fleet sweep id
// (fsw-...), a node-qualified sweep id (gpu-a/swp-000003) or an unqualified one held by
// exactly one node; list lists every node's sweeps. The sweep command's row, which runs on
// one daemon otherwise (client/sweep_commands.h).
#ifndef GPUPROF_CLIENT_FLEET_SWEEP_COMMANDS_H_
#define GPUPROF_CLIENT_FLEET_SWEEP_COMMANDS_H_

#include <string>
#include <vector>

#include "client/command.h"
#include "client/node_fanout.h"

namespace gpuprof::client {

int RunFleetSweepCommand(Fleet& fleet, const std::vector<std::string>& args);

Command SweepCommand();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_FLEET_SWEEP_COMMANDS_H_
