#include "client/invocation.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace gpuprof::client {

absl::Status Invocation::ResolveNodes() {
  nodes.clear();
  node_timeout = kDefaultNodeTimeout;
  std::string fleet_path = globals.fleet.value_or(env.fleet_from_env);
  if (globals.fleet.has_value() && globals.fleet->empty()) {
    fleet_path = absl::StrCat(env.home_dir, "/.config/gpuprof/fleet.textproto");
  }
  if (!globals.targets.empty() && globals.fleet.has_value()) {
    return absl::InvalidArgumentError("give --fleet or --target, not both");
  }
  if (!globals.targets.empty()) {
    for (const std::string& target : globals.targets) {
      ASSIGN_OR_RETURN(DaemonNode node, ParseTargetFlag(target));
      nodes.push_back(std::move(node));
    }
  } else if (!fleet_path.empty()) {
    ASSIGN_OR_RETURN(FleetConfig fleet, LoadFleetFile(fleet_path));
    nodes = std::move(fleet.nodes);
    if (fleet.node_timeout.has_value()) node_timeout = *fleet.node_timeout;
  }
  RETURN_IF_ERROR(CheckNodeNames(nodes));
  if (globals.node.has_value()) {
    if (nodes.empty()) {
      return absl::InvalidArgumentError(
          "--node picks from a fleet: add --fleet or --target NAME=ADDR");
    }
    ASSIGN_OR_RETURN(nodes, SelectNodes(nodes, *globals.node));
  }
  if (globals.node_timeout.has_value()) {
    if (!absl::ParseDuration(*globals.node_timeout, &node_timeout) ||
        node_timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat("--node-timeout \"", *globals.node_timeout,
                                                     "\": a positive duration such as 10s"));
    }
  }
  return absl::OkStatus();
}

bool Invocation::SpreadsOverFleet() const {
  const bool from_fleet_file =
      globals.targets.empty() && (globals.fleet.has_value() || !env.fleet_from_env.empty());
  return nodes.size() > 1 || (nodes.size() == 1 && from_fleet_file && !globals.node.has_value());
}

absl::StatusOr<ConnectionOptions> Invocation::ResolveConnection(const ParsedArgs& args) const {
  v1::ClientConfig config;
  if (!env.config_path.empty()) {
    auto loaded = LoadClientConfig(env.config_path);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  }
  ConnectionOptions options;
  options.target = args.Get("target").value_or(
      globals.target.value_or(!env.target_from_env.empty() ? env.target_from_env
                              : !config.target().empty()   ? config.target()
                                                           : std::string(kDefaultTarget)));
  options.tls_ca = globals.tls_ca.value_or(config.tls_ca());
  options.tls_cert = globals.tls_cert.value_or(config.tls_cert());
  options.tls_key = globals.tls_key.value_or(config.tls_key());
  std::string token_source = "$GPUPROF_TOKEN";
  if (globals.token_file.has_value() ||
      (env.token_from_env.empty() && !config.token_file().empty())) {
    const std::string path = globals.token_file.value_or(config.token_file());
    token_source = absl::StrCat(globals.token_file.has_value() ? "--token " : "token_file ", path);
    auto token = ReadFileForFlag(path, globals.token_file.has_value() ? "--token" : "token_file");
    if (!token.ok()) return token.status();
    options.token = std::string(absl::StripAsciiWhitespace(*token));
    if (options.token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--token: ", path, " is empty"));
    }
  } else {
    options.token = env.token_from_env;
  }
  options.claimed_user = globals.user.value_or(env.local_user);
  // Both travel in gRPC headers; gRPC aborts the process on a value it cannot send.
  RETURN_IF_ERROR(CheckHeaderValue(globals.user.has_value() ? "--user" : "$USER",
                                   options.claimed_user, /*show_value=*/true));
  RETURN_IF_ERROR(CheckHeaderValue(token_source, options.token, /*show_value=*/false));
  RETURN_IF_ERROR(CheckConnectionOptions(options, env.now ? env.now() : absl::Now()));
  return options;
}

absl::StatusOr<Session> Invocation::MakeSession(const ParsedArgs& args) const {
  ASSIGN_OR_RETURN(ConnectionOptions connection, ResolveConnection(args));
  // A fleet's one node (--node NAME): its address, and its own TLS material when it has any.
  if (!args.Has("target") && nodes.size() == 1) {
    connection.target = nodes.front().address;
    return Session(env, std::move(connection), globals.user, nodes.front());
  }
  return Session(env, std::move(connection), globals.user);
}

absl::StatusOr<Fleet> Invocation::MakeFleet() const {
  ASSIGN_OR_RETURN(const ConnectionOptions connection, ResolveConnection(ParsedArgs()));
  return Fleet(env, nodes, node_timeout, connection, globals.user);
}

}  // namespace gpuprof::client
