// `gpuprof token-hash`: the SHA-256 of a bearer token for the daemon's access policy, or a new
// token. Runs locally: it never connects to a daemon.
#ifndef GPUPROF_CLIENT_TOKEN_COMMAND_H_
#define GPUPROF_CLIENT_TOKEN_COMMAND_H_

#include <string>
#include <vector>

#include "client/command.h"
#include "client/session.h"

namespace gpuprof::client {

// The command's help text (`gpuprof token-hash --help`).
std::string TokenHashHelp();

// Runs `gpuprof token-hash args...` (args after the command name); returns the exit code.
int RunTokenHashCommand(const std::vector<std::string>& args, const ClientEnvironment& env);

Command TokenHashCommand();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_TOKEN_COMMAND_H_
