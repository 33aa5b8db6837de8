// Who you are to the daemon and what you may do: whoami, quota, audit.
#ifndef GPUPROF_CLIENT_ACCESS_COMMANDS_H_
#define GPUPROF_CLIENT_ACCESS_COMMANDS_H_

#include "client/command.h"

namespace gpuprof::client {

Command WhoAmICommand();
Command QuotaCommand();
Command AuditCommand();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_ACCESS_COMMANDS_H_
