// Sweeps across a fleet. A fleet sweep is one ordinary sweep per node, each holding that
// node's share of the points (split in proportion to the nodes' free GPUs), so every node
// schedules its own points fairly through its own queue. The per-node sweeps carry the labels
// gpuprof.fleet-sweep=<fleet id> and gpuprof.fleet-nodes=<the nodes given a share>: that is
// where the fleet id lives, so any CLI with the fleet file finds the sweep again.
#ifndef GPUPROF_CLIENT_FLEET_SWEEP_H_
#define GPUPROF_CLIENT_FLEET_SWEEP_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/command_line.h"
#include "client/node_fanout.h"
#include "gpuprof/v1/sweep.pb.h"
#include "grpcpp/support/status.h"
#include "sweep/sweep_expansion.h"

namespace gpuprof::client {

inline constexpr char kFleetSweepLabel[] = "gpuprof.fleet-sweep";
inline constexpr char kFleetNodesLabel[] = "gpuprof.fleet-nodes";
// How long --follow waits for a node that stopped answering before it gives up on it.
inline constexpr absl::Duration kDefaultNodeWait = absl::Minutes(10);

// "fsw-...".
bool IsFleetSweepId(absl::string_view id);
// The value of a label of the sweep's base request; empty when it has none.
std::string LabelOf(const v1::Sweep& sweep, const std::string& key);

// Every part of a fleet sweep that the nodes hold, as far as they answered.
struct FleetSweep {
  std::string id;
  // Per node of the fleet: its part (with points), when it holds one.
  std::vector<std::optional<v1::Sweep>> parts;
  // Per node: the status of asking it (OK also when it holds no part).
  std::vector<grpc::Status> statuses;
  // The nodes the sweep was spread over (from its label), in the fleet's order.
  std::vector<size_t> share_nodes;

  // Nodes given a share that did not answer, or answered without their part.
  std::vector<std::string> Missing(const Fleet& fleet) const;
  bool Empty() const;
};

// Node `node`'s sweep `sweep_id`, into `part` when it answers.
grpc::Status GetPart(Fleet& fleet, size_t node, const std::string& sweep_id,
                     std::optional<v1::Sweep>& part);
// Every node asked for its part of fleet sweep `id`.
FleetSweep LookUpFleetSweep(Fleet& fleet, const std::string& id);
// A fleet sweep no node holds: NOT_FOUND when every node answered, else partial.
int ReportNotFound(const Fleet& fleet, const FleetSweep& fleet_sweep);

// The parts the nodes answered with.
std::vector<const v1::Sweep*> PartsOf(const FleetSweep& fleet_sweep);
// The parts' points as one sweep (for plots): the first part with every part's points.
v1::Sweep MergedSweep(const FleetSweep& fleet_sweep);
// The state of the whole: running while any part runs, then cancelled, incomplete, finished.
v1::SweepState CombinedState(const std::vector<const v1::Sweep*>& parts);
// NODE and the sweep table's columns, upper case.
std::vector<std::string> FleetColumns(const std::vector<std::string>& axes);
// "gpu-a/swp-000003 (running, 12 points), ...".
std::string PartsLine(const Fleet& fleet, const FleetSweep& fleet_sweep);

struct FollowOptions {
  bool json = false;
  absl::Duration node_wait = kDefaultNodeWait;
  absl::Time started;
};
// watch and --follow: one live table over every node until every part ends (or a silent
// node's wait runs out).
int FollowFleetSweep(Fleet& fleet, FleetSweep fleet_sweep, const FollowOptions& options);
// --node-wait, or kDefaultNodeWait.
absl::StatusOr<absl::Duration> NodeWaitOf(const ParsedArgs& args);

// `gpuprof --fleet sweep <workload> ...`: the points spread over the nodes that answer.
int SubmitFleetSweep(Fleet& fleet, const std::vector<std::string>& args);

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
