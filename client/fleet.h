// The daemons `gpuprof` works across: from a fleet file (fleet.proto) or repeated --target
// flags, checked before anything connects. Ids from a fleet are qualified by node:
// "gpu-a/exp-000042".
#ifndef GPUPROF_CLIENT_FLEET_H_
#define GPUPROF_CLIENT_FLEET_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuprof::client {

inline constexpr absl::Duration kDefaultNodeTimeout = absl::Seconds(10);

// TLS material of one node, read from its files when the fleet is loaded.
struct NodeTlsMaterial {
  std::string ca_pem;
  std::string cert_pem;
  std::string key_pem;
  std::string server_name;
};

struct DaemonNode {
  std::string name;
  std::string address;
  std::optional<NodeTlsMaterial> tls;
};

struct FleetConfig {
  std::vector<DaemonNode> nodes;
  // Unset when the file does not say.
  std::optional<absl::Duration> node_timeout;
};

// Parses a fleet textproto. Errors name the file and the field (node[1].address), say what
// was wrong and what is allowed; TLS files are read here, so a missing one fails now.
absl::StatusOr<FleetConfig> ParseFleet(const std::string& text, const std::string& file_name);
absl::StatusOr<FleetConfig> LoadFleetFile(const std::string& path);

// "--target NAME=ADDR" or "--target ADDR" (named after the address).
absl::StatusOr<DaemonNode> ParseTargetFlag(absl::string_view value);

// Keeps the nodes named in `names` (comma-separated), in the fleet's order; an unknown name is
// an error listing the fleet's names.
absl::StatusOr<std::vector<DaemonNode>> SelectNodes(const std::vector<DaemonNode>& nodes,
                                                    absl::string_view names);

// Checks names are valid and unique across the nodes, whatever their source.
absl::Status CheckNodeNames(const std::vector<DaemonNode>& nodes);

// "gpu-a/exp-000042" -> {"gpu-a", "exp-000042"}; an id without '/' has no node.
struct QualifiedId {
  std::string node;
  std::string id;
};
QualifiedId SplitQualifiedId(absl::string_view text);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_FLEET_H_
