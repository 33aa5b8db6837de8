// Sweeps and comparisons across a fleet. A fleet sweep is one ordinary sweep per node, each
// holding that node's share of the points (split in proportion to the nodes' free GPUs), so
// every node schedules its own points fairly through its own queue. The per-node sweeps carry
// the labels gpuprof.fleet-sweep=<fleet id> and gpuprof.fleet-nodes=<the nodes given a share>:
// that is where the fleet id lives, so any CLI with the fleet file finds the sweep again.
#ifndef GPUPROF_CLIENT_FLEET_SWEEP_H_
#define GPUPROF_CLIENT_FLEET_SWEEP_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/commands.h"
#include "client/connection_options.h"
#include "client/fleet.h"
#include "gpuprof/v1/sweep.pb.h"
#include "sweep/sweep_expansion.h"

namespace gpuprof::client {

inline constexpr char kFleetSweepLabel[] = "gpuprof.fleet-sweep";
inline constexpr char kFleetNodesLabel[] = "gpuprof.fleet-nodes";

// The nodes a fleet command runs on and how it reaches them.
struct FleetTargets {
  const ClientEnvironment& env;
  std::vector<DaemonNode> nodes;
  // Each node's unary calls end after this.
  absl::Duration node_timeout;
  // TLS files, token and claimed user shared by the nodes (the target is each node's address).
  ConnectionOptions connection;
  // --user: the daemon honours it for admins only.
  std::optional<std::string> user;
};

// `gpuprof sweep ...` across the fleet: a workload submits a fleet sweep; get, watch, cancel,
// plot take a fleet sweep id (fsw-...), a node-qualified sweep id (gpu-a/swp-000003) or an
// unqualified one held by exactly one node; list lists every node's sweeps.
int RunFleetSweepCommand(const std::vector<std::string>& args, const FleetTargets& fleet);

// `gpuprof compare A B` where each side is a fleet sweep, a node-qualified id
// (gpu-a/swp-000003, gpu-b/exp-000042, gpu-a/baseline-name) or an id one node holds.
int RunFleetCompareCommand(const std::vector<std::string>& args, const FleetTargets& fleet);

// How many of `total` points each node gets, in proportion to `weights` (largest remainder;
// nodes of weight 0 get none).
std::vector<int> SplitPoints(int total, const std::vector<double>& weights);

// Point i of the expansion -> the node it runs on: shares interleaved over the grid, so that
// each node gets a spread of the sweep rather than one corner of it.
std::vector<int> AssignPoints(const std::vector<int>& shares);

// A node's share as a sweep of its own: the base request (with the fleet labels) and one
// zipped axis per original axis, holding the share's values point by point.
v1::SweepRequest ShareRequest(const v1::SweepRequest& fleet_request,
                              const std::vector<sweep::ExpandedPoint>& points,
                              const std::vector<int>& point_indices, const std::string& fleet_id,
                              const std::string& fleet_nodes);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_FLEET_SWEEP_H_
