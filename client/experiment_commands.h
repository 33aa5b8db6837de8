// Experiments: submit, watch, list, get, cancel, and their stored activity (trace, story).
// list, get, watch and cancel also work across a fleet.
#ifndef GPUPROF_CLIENT_EXPERIMENT_COMMANDS_H_
#define GPUPROF_CLIENT_EXPERIMENT_COMMANDS_H_

#include "client/command.h"

namespace gpuprof::client {

Command SubmitCommand();
Command WatchCommand();
Command ListCommand();
Command GetCommand();
Command TraceCommand();
Command StoryCommand();
Command CancelCommand();

// --follow, --json, --target, --help: submit's flags besides the request's.
std::vector<FlagSpec> SubmitOutputFlags();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_EXPERIMENT_COMMANDS_H_
