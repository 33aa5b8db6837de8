// One run of gpuprof as far as the options before the command go: which daemon or daemons,
// with which TLS files, token and user. Commands make their Session (one daemon) or Fleet
// (several) from it.
#ifndef GPUPROF_CLIENT_INVOCATION_H_
#define GPUPROF_CLIENT_INVOCATION_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/command_line.h"
#include "client/connection_options.h"
#include "client/fleet.h"
#include "client/node_fanout.h"
#include "client/session.h"

namespace gpuprof::client {

// Options given before the command; a command's own --target wins over them.
struct GlobalOptions {
  std::optional<std::string> target;
  std::optional<std::string> user;
  // Every --target given before the command (more than one makes a fleet).
  std::vector<std::string> targets;
  // --fleet (the default file) or --fleet=PATH.
  std::optional<std::string> fleet;
  std::optional<std::string> node;
  std::optional<std::string> node_timeout;
  std::optional<std::string> tls_ca;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> token_file;
};

struct Invocation {
  const ClientEnvironment& env;
  GlobalOptions globals;
  // The nodes the global options name (ResolveNodes); empty: one daemon.
  std::vector<DaemonNode> nodes;
  absl::Duration node_timeout = kDefaultNodeTimeout;

  // Fills `nodes` and `node_timeout`: a fleet file or several --target, narrowed by --node.
  absl::Status ResolveNodes();
  // Whether sweep and compare spread over the nodes: a fleet of several, or a fleet file's one
  // node when no --node picked it (one --target stays one daemon).
  bool SpreadsOverFleet() const;

  // Flags win over the environment, which wins over the config file; `args`' --target (a
  // command's own) over the global one.
  absl::StatusOr<ConnectionOptions> ResolveConnection(const ParsedArgs& args) const;
  // The session of a one-node command: the node the fleet options narrowed to, unless the
  // command's own --target names another daemon.
  absl::StatusOr<Session> MakeSession(const ParsedArgs& args) const;
  // Every node, with the connection settings they share.
  absl::StatusOr<Fleet> MakeFleet() const;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_INVOCATION_H_
