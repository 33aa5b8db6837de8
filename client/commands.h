// gpuprof's entry: the command table (client/command.h; one file per command group) and the
// options before the command. Commands run against Profiler and Health stubs that the
// environment opens, so that tests can serve them in process; main.cc only fills a
// ClientEnvironment and calls RunGpuprof.
#ifndef GPUPROF_CLIENT_COMMANDS_H_
#define GPUPROF_CLIENT_COMMANDS_H_

#include <string>
#include <vector>

#include "client/session.h"

namespace gpuprof::client {

// Runs `gpuprof args...` (args without the program name) and returns the exit code.
int RunGpuprof(const std::vector<std::string>& args, const ClientEnvironment& env);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_COMMANDS_H_
