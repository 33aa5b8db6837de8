#include "client/fleet_sweep.h"

#include <algorithm>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/render.h"
#include "client/sweep_commands.h"
#include "client/sweep_pages.h"
#include "client/sweep_render.h"
#include "client/terminal_output.h"
#include "common/experiment_states.h"
#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

constexpr char kClearLine[] = "\r\033[K";
// How often --follow asks every node for its sweep.
constexpr absl::Duration kFollowPollInterval = absl::Seconds(1);

}  // namespace

// "fsw-" and 8 hex digits: short enough to type, random enough never to repeat in a fleet.
namespace {

std::string NewFleetSweepId() {
  std::random_device random;
  return absl::StrFormat("fsw-%08x", random());
}

}  // namespace

bool IsFleetSweepId(absl::string_view id) { return absl::StartsWith(id, "fsw-"); }

std::string LabelOf(const v1::Sweep& sweep, const std::string& key) {
  const auto& labels = sweep.request().base().labels();
  const auto found = labels.find(key);
  return found == labels.end() ? "" : found->second;
}

std::vector<std::string> FleetSweep::Missing(const Fleet& fleet) const {
  std::vector<std::string> missing;
  for (size_t i : share_nodes) {
    if (!statuses[i].ok()) {
      missing.push_back(absl::StrCat(fleet.node(i).name, " (", StatusText(statuses[i]), ")"));
    } else if (!parts[i].has_value()) {
      missing.push_back(absl::StrCat(fleet.node(i).name, " (holds no part of ", id, ")"));
    }
  }
  return missing;
}

bool FleetSweep::Empty() const {
  return std::none_of(parts.begin(), parts.end(),
                      [](const auto& part) { return part.has_value(); });
}

grpc::Status GetPart(Fleet& fleet, size_t node, const std::string& sweep_id,
                     std::optional<v1::Sweep>& part) {
  v1::Sweep sweep;
  const grpc::Status status = GetWholeSweep(fleet.session(node), sweep_id, sweep);
  if (status.ok()) part = std::move(sweep);
  return status;
}

// The node's part of fleet sweep `id`: its sweeps, newest first, searched for the label.
grpc::Status FindPart(Fleet& fleet, size_t node, const std::string& id,
                      std::optional<v1::Sweep>& part) {
  part.reset();
  v1::ListSweepsRequest list;
  list.set_page_size(1000);
  std::string found_id;
  while (found_id.empty()) {
    v1::ListSweepsResponse response;
    const grpc::Status status =
        fleet.session(node).Call(&v1::Profiler::StubInterface::ListSweeps, list, response);
    if (!status.ok()) return status;
    for (const v1::Sweep& sweep : response.sweeps()) {
      if (LabelOf(sweep, kFleetSweepLabel) == id) found_id = sweep.id();
    }
    if (response.next_page_token().empty()) break;
    list.set_page_token(response.next_page_token());
  }
  if (found_id.empty()) return grpc::Status::OK;
  return GetPart(fleet, node, found_id, part);
}

namespace {

void SetShareNodes(const Fleet& fleet, FleetSweep& fleet_sweep) {
  std::set<std::string> names;
  for (const auto& part : fleet_sweep.parts) {
    if (!part.has_value()) continue;
    for (absl::string_view name :
         absl::StrSplit(LabelOf(*part, kFleetNodesLabel), ',', absl::SkipEmpty())) {
      names.insert(std::string(name));
    }
  }
  fleet_sweep.share_nodes.clear();
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (names.contains(fleet.node(i).name)) fleet_sweep.share_nodes.push_back(i);
  }
}

}  // namespace

FleetSweep LookUpFleetSweep(Fleet& fleet, const std::string& id) {
  FleetSweep fleet_sweep;
  fleet_sweep.id = id;
  fleet_sweep.parts.resize(fleet.size());
  fleet_sweep.statuses = fleet.OnEveryNode(
      [&](Session&, size_t i) { return FindPart(fleet, i, id, fleet_sweep.parts[i]); });
  SetShareNodes(fleet, fleet_sweep);
  // A node that did not answer may hold a part: while nothing says otherwise, count it.
  if (fleet_sweep.share_nodes.empty()) {
    for (size_t i = 0; i < fleet.size(); ++i) {
      if (!fleet_sweep.statuses[i].ok()) fleet_sweep.share_nodes.push_back(i);
    }
  }
  return fleet_sweep;
}

// A fleet sweep no node holds: NOT_FOUND when every node answered, else partial.
int ReportNotFound(const Fleet& fleet, const FleetSweep& fleet_sweep) {
  const std::vector<std::string> missing = fleet_sweep.Missing(fleet);
  if (missing.empty()) {
    *fleet.env().err << "error: NOT_FOUND: no node of the fleet (" << fleet.Names() << ") holds "
                     << fleet_sweep.id << "\n";
    return kExitUsage;
  }
  *fleet.env().err << "error: " << fleet_sweep.id << " is on no node that answered; no answer "
                   << "from " << absl::StrJoin(missing, "; ") << "\n";
  return kExitPartial;
}

// Ends with the partial line and exit code 6 when some nodes' parts are missing.
v1::SweepState CombinedState(const std::vector<const v1::Sweep*>& parts) {
  bool running = false, cancelled = false, incomplete = false;
  for (const v1::Sweep* part : parts) {
    running |= part->state() == v1::SWEEP_RUNNING || part->state() == v1::SWEEP_STATE_UNSPECIFIED;
    cancelled |= part->state() == v1::SWEEP_CANCELLED;
    incomplete |= part->state() == v1::SWEEP_INCOMPLETE;
  }
  if (parts.empty() || running) return v1::SWEEP_RUNNING;
  if (cancelled) return v1::SWEEP_CANCELLED;
  return incomplete ? v1::SWEEP_INCOMPLETE : v1::SWEEP_FINISHED;
}

std::vector<const v1::Sweep*> PartsOf(const FleetSweep& fleet_sweep) {
  std::vector<const v1::Sweep*> parts;
  for (const auto& part : fleet_sweep.parts) {
    if (part.has_value()) parts.push_back(&*part);
  }
  return parts;
}

// The parts' points as one sweep (for plots): the first part with every part's points.
v1::Sweep MergedSweep(const FleetSweep& fleet_sweep) {
  v1::Sweep merged;
  int index = 0;
  for (const v1::Sweep* part : PartsOf(fleet_sweep)) {
    if (merged.id().empty()) {
      merged = *part;
      merged.clear_points();
      merged.set_id(fleet_sweep.id);
    }
    for (v1::SweepPoint point : part->points()) {
      point.set_index(index++);
      *merged.add_points() = std::move(point);
    }
  }
  return merged;
}

std::vector<std::string> FleetColumns(const std::vector<std::string>& axes) {
  std::vector<std::string> columns = {"NODE"};
  for (const std::string& column : SweepColumns(axes)) {
    columns.push_back(absl::AsciiStrToUpper(column));
  }
  return columns;
}

std::string PartsLine(const Fleet& fleet, const FleetSweep& fleet_sweep) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet_sweep.parts[i].has_value()) continue;
    const v1::Sweep& part = *fleet_sweep.parts[i];
    parts.push_back(absl::StrCat(fleet.node(i).name, "/", part.id(), " (",
                                 SweepStateName(part.state()), ", ", SweepPointTotal(part),
                                 " points)"));
  }
  return absl::StrJoin(parts, ", ");
}

// ---- sweep watch / --follow: one live table over every node ----

int FollowFleetSweep(Fleet& fleet, FleetSweep fleet_sweep, const FollowOptions& options) {
  const ClientEnvironment& env = fleet.env();
  std::ostream& out = *env.out;
  const bool live = env.stdout_is_terminal && !options.json;
  std::vector<std::string> axes;
  std::vector<size_t> widths;
  std::set<std::pair<size_t, int>> printed;
  std::vector<std::optional<absl::Time>> down_since(fleet.size());
  bool header_printed = false, live_showing = false;
  while (true) {
    // Rows for points that ended since the last round.
    for (size_t i = 0; i < fleet.size(); ++i) {
      if (!fleet_sweep.parts[i].has_value()) continue;
      const v1::Sweep& part = *fleet_sweep.parts[i];
      if (!header_printed && !options.json) {
        axes = SweepAxisNames(part);
        widths = SweepColumnWidths(part);
        size_t node_width = 4;
        for (size_t n = 0; n < fleet.size(); ++n) {
          node_width = std::max(node_width, fleet.node(n).name.size());
        }
        widths.insert(widths.begin(), node_width);
        out << FixedWidthRow(FleetColumns(axes), widths, axes.size() + 4);
        header_printed = true;
      }
      const bool part_ended = part.state() != v1::SWEEP_RUNNING;
      for (const v1::SweepPoint& point : part.points()) {
        // An interrupted point runs again once its daemon is back: it has not ended yet.
        const bool ended =
            IsTerminalState(point.state()) && (point.state() != v1::INTERRUPTED || part_ended);
        if (!ended || !printed.insert({i, point.index()}).second) continue;
        if (live_showing) WriteTerminalControl(out, kClearLine);
        live_showing = false;
        if (options.json) {
          out << "{\"node\":\"" << fleet.node(i).name << "\",\"sweep\":\"" << part.id()
              << "\",\"point\":" << JsonLine(point) << "}\n";
        } else {
          std::vector<std::string> cells = {fleet.node(i).name};
          for (std::string& cell : SweepPointCells(point, axes, true)) {
            cells.push_back(std::move(cell));
          }
          out << FixedWidthRow(cells, widths, axes.size() + 4);
        }
      }
    }
    const std::vector<const v1::Sweep*> parts = PartsOf(fleet_sweep);
    // Missing parts of nodes that answered will not appear: only silent nodes are waited for.
    std::vector<std::string> waiting_for, given_up;
    const absl::Time now = absl::Now();
    for (size_t i : fleet_sweep.share_nodes) {
      if (fleet_sweep.statuses[i].ok()) {
        if (down_since[i].has_value()) {
          if (live_showing) WriteTerminalControl(*env.err, kClearLine);
          *env.err << fleet.node(i).name << " answers again\n";
          live_showing = false;
        }
        down_since[i].reset();
        continue;
      }
      if (!down_since[i].has_value()) {
        down_since[i] = now;
        if (live_showing) WriteTerminalControl(out, kClearLine);
        live_showing = false;
        *env.err << fleet.node(i).name << ": no answer (" << StatusText(fleet_sweep.statuses[i])
                 << "); waiting up to " << absl::FormatDuration(options.node_wait)
                 << " for it (its points resume when its daemon is back)\n";
      }
      const std::string entry =
          absl::StrCat(fleet.node(i).name, " (", StatusText(fleet_sweep.statuses[i]), ")");
      (now - *down_since[i] > options.node_wait ? given_up : waiting_for).push_back(entry);
    }
    const bool all_parts_ended = std::all_of(parts.begin(), parts.end(), [](const v1::Sweep* part) {
      return part->state() != v1::SWEEP_RUNNING;
    });
    if (waiting_for.empty() && (all_parts_ended || !given_up.empty())) {
      if (live_showing) WriteTerminalControl(out, kClearLine);
      const v1::SweepState state = CombinedState(parts);
      std::ostream& notes = options.json ? *env.err : out;
      notes << fleet_sweep.id << ": "
            << (given_up.empty() ? SweepStateName(state) : std::string("partial")) << ", "
            << PartsLine(fleet, fleet_sweep) << ", took " << FormatElapsed(now - options.started)
            << "\n";
      std::vector<std::string> missing = fleet_sweep.Missing(fleet);
      const int code = given_up.empty() && all_parts_ended && state == v1::SWEEP_FINISHED
                           ? kExitOk
                           : kExitNotFinished;
      return fleet.WithPartial(missing, code);
    }
    if (live) {
      int total = 0, ended = 0, running = 0, failed = 0;
      for (const v1::Sweep* part : parts) {
        total += SweepPointTotal(*part);
        ended += part->points_finished() + part->points_failed();
        running += part->points_running();
        failed += part->points_failed();
      }
      WriteTerminalControl(out, kClearLine);
      out << SweepProgressLine(total, ended, running, failed, now - options.started);
      if (!waiting_for.empty()) out << "  waiting for " << waiting_for.size() << " node(s)";
      live_showing = true;
    }
    out.flush();
    absl::SleepFor(kFollowPollInterval);
    // The next round: each node's part by its id once known, else by the label.
    fleet_sweep.statuses = fleet.OnEveryNode([&](Session&, size_t i) {
      if (std::find(fleet_sweep.share_nodes.begin(), fleet_sweep.share_nodes.end(), i) ==
          fleet_sweep.share_nodes.end()) {
        return grpc::Status::OK;
      }
      std::optional<v1::Sweep> fresh;
      const grpc::Status status = fleet_sweep.parts[i].has_value()
                                      ? GetPart(fleet, i, fleet_sweep.parts[i]->id(), fresh)
                                      : FindPart(fleet, i, fleet_sweep.id, fresh);
      if (status.ok() && fresh.has_value()) fleet_sweep.parts[i] = std::move(fresh);
      return status;
    });
  }
}

absl::StatusOr<absl::Duration> NodeWaitOf(const ParsedArgs& args) {
  const auto value = args.Get("node-wait");
  if (!value.has_value()) return kDefaultNodeWait;
  absl::Duration wait;
  if (!absl::ParseDuration(*value, &wait) || wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--node-wait \"", *value, "\": a duration such as 10m (0: do not wait)"));
  }
  return wait;
}

// ---- sweep <workload>: the points spread over the nodes ----

namespace {

// How many GPUs one point asks for.
int GpusPerPoint(const v1::ExperimentRequest& request) {
  if (request.gpus().gpu_ids_size() > 0) return request.gpus().gpu_ids_size();
  return std::max({1, request.gpus().gpu_count(), request.tp_degree()});
}

}  // namespace

int SubmitFleetSweep(Fleet& fleet, const std::vector<std::string>& args) {
  const ClientEnvironment& env = fleet.env();
  int exit_code = kExitOk;
  std::optional<SweepSubmission> submission =
      ParseSweepSubmission(args, env, fleet.user(), exit_code);
  if (!submission.has_value()) return exit_code;
  const std::string help_command = absl::StrCat("sweep ", args[0]);
  absl::StatusOr<absl::Duration> node_wait = NodeWaitOf(submission->args);
  if (!node_wait.ok()) return ReportUsageError(env, node_wait.status().message(), help_command);
  const bool json = submission->args.Switch("json");
  if (!json && submission->format != SweepFormat::kTable) {
    return ReportUsageError(env, "a fleet sweep prints a table or, with --json, JSON lines",
                            help_command);
  }
  // Expanded here to split the points; each node checks its points again before storing any.
  absl::StatusOr<std::vector<sweep::ExpandedPoint>> points =
      sweep::ExpandSweep(submission->request);
  if (!points.ok()) return ReportUsageError(env, points.status().message(), help_command);

  // Which nodes answer, and their GPUs.
  std::vector<v1::ListGpusResponse> gpus(fleet.size());
  const std::vector<grpc::Status> asked = fleet.OnEveryNode([&](Session& session, size_t i) {
    return session.Call(&v1::Profiler::StubInterface::ListGpus, {}, gpus[i]);
  });
  std::vector<std::string> silent;
  bool any_gpus = false;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!asked[i].ok()) {
      silent.push_back(absl::StrCat(fleet.node(i).name, " (", StatusText(asked[i]), ")"));
    } else if (gpus[i].gpus_size() > 0) {
      any_gpus = true;
    }
  }
  if (silent.size() == fleet.size()) {
    *env.err << "error: no node answered: " << absl::StrJoin(silent, "; ") << "\n";
    return kExitUnavailable;
  }
  // Weights: each node's free GPUs (all its GPUs when none is free anywhere), among nodes
  // with enough GPUs for a point; every node alike when none has a GPU (CPU workloads).
  const int needed = GpusPerPoint(submission->request.base());
  std::vector<double> weights(fleet.size(), 0);
  bool any_free = false;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!asked[i].ok()) continue;
    int free_gpus = 0;
    for (const v1::GpuInfo& gpu : gpus[i].gpus()) free_gpus += gpu.leased_to_experiment().empty();
    any_free |= free_gpus >= needed;
  }
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!asked[i].ok()) continue;
    const auto& supported = gpus[i].supported_workloads();
    if (!supported.empty() &&
        std::find(supported.begin(), supported.end(), args[0]) == supported.end()) {
      continue;
    }
    if (!any_gpus) {
      weights[i] = 1;
      continue;
    }
    int free_gpus = 0;
    for (const v1::GpuInfo& gpu : gpus[i].gpus()) free_gpus += gpu.leased_to_experiment().empty();
    const int count = any_free ? free_gpus : gpus[i].gpus_size();
    if (count >= needed) weights[i] = count;
  }
  if (std::all_of(weights.begin(), weights.end(), [](double w) { return w == 0; })) {
    *env.err << "error: no node that answered can run " << args[0] << " with " << needed
             << " GPU(s) per point\n";
    return kExitUsage;
  }
  if (!silent.empty()) {
    *env.err << "not answering, left out of the sweep: " << absl::StrJoin(silent, "; ")
             << "; its share goes to the other nodes\n";
  }
  const std::vector<int> shares = SplitPoints(static_cast<int>(points->size()), weights);
  const std::vector<int> owner = AssignPoints(shares);
  std::vector<std::string> share_names;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (shares[i] > 0) share_names.push_back(fleet.node(i).name);
  }
  const std::string fleet_id = NewFleetSweepId();
  const std::string fleet_nodes = absl::StrJoin(share_names, ",");

  FleetSweep fleet_sweep;
  fleet_sweep.id = fleet_id;
  fleet_sweep.parts.resize(fleet.size());
  fleet_sweep.statuses = fleet.OnEveryNode([&](Session& session, size_t i) {
    if (shares[i] == 0) return grpc::Status::OK;
    std::vector<int> mine;
    for (size_t p = 0; p < owner.size(); ++p) {
      if (owner[p] == static_cast<int>(i)) mine.push_back(static_cast<int>(p));
    }
    const v1::SweepRequest request =
        ShareRequest(submission->request, *points, mine, fleet_id, fleet_nodes);
    v1::Sweep sweep;
    // Every point is validated and stored before the answer: give large shares time.
    const grpc::Status status =
        session.Call(&v1::Profiler::StubInterface::SubmitSweep, request, sweep,
                     std::max(fleet.node_timeout(), absl::Minutes(5)));
    if (status.ok()) fleet_sweep.parts[i] = std::move(sweep);
    return status;
  });
  SetShareNodes(fleet, fleet_sweep);
  std::vector<std::string> refused;
  grpc::Status first_refusal;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (fleet_sweep.statuses[i].ok()) continue;
    refused.push_back(
        absl::StrCat(fleet.node(i).name, " (", StatusText(fleet_sweep.statuses[i]), ")"));
    if (first_refusal.ok()) first_refusal = fleet_sweep.statuses[i];
  }
  if (fleet_sweep.Empty()) {
    *env.err << "error: no node took its share: " << absl::StrJoin(refused, "; ") << "\n";
    return ExitCodeForRpcStatus(first_refusal.error_code());
  }
  if (json) {
    for (size_t i = 0; i < fleet.size(); ++i) {
      if (!fleet_sweep.parts[i].has_value()) continue;
      *env.out << "{\"fleet_sweep\":\"" << fleet_id << "\",\"node\":\"" << fleet.node(i).name
               << "\",\"sweep\":" << JsonLine(*fleet_sweep.parts[i]) << "}\n";
    }
  } else {
    (submission->args.Switch("follow") ? *env.err : *env.out)
        << "submitted " << fleet_id << ": " << points->size() << " points over "
        << PartsOf(fleet_sweep).size() << " node(s): " << PartsLine(fleet, fleet_sweep)
        << (submission->args.Switch("follow")
                ? ""
                : absl::StrCat(" (gpuprof --fleet sweep watch ", fleet_id, " follows it)"))
        << "\n";
  }
  if (!refused.empty()) {
    *env.err << "partial: these nodes refused their share, whose points are not in the sweep: "
             << absl::StrJoin(refused, "; ") << "\n";
  }
  int code = refused.empty() ? kExitOk : kExitPartial;
  if (submission->args.Switch("follow")) {
    const int followed =
        FollowFleetSweep(fleet, std::move(fleet_sweep),
                         {.json = json, .node_wait = *node_wait, .started = absl::Now()});
    code = code == kExitOk ? followed : code;
  }
  return code;
}

std::vector<int> SplitPoints(int total, const std::vector<double>& weights) {
  std::vector<int> shares(weights.size(), 0);
  double sum = 0;
  for (double weight : weights) sum += std::max(0.0, weight);
  if (sum <= 0 || total <= 0) return shares;
  std::vector<std::pair<double, size_t>> remainders;
  int given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    const double exact = total * std::max(0.0, weights[i]) / sum;
    shares[i] = static_cast<int>(exact);
    given += shares[i];
    if (weights[i] > 0) remainders.push_back({exact - shares[i], i});
  }
  // Largest remainder first; ties to the earlier node.
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total; ++k, ++given)
    ++shares[remainders[k % remainders.size()].second];
  return shares;
}

std::vector<int> AssignPoints(const std::vector<int>& shares) {
  int total = 0;
  for (int share : shares) total += share;
  std::vector<int> owner;
  std::vector<int> assigned(shares.size(), 0);
  for (int point = 0; point < total; ++point) {
    // The node furthest behind its share so far.
    int best = -1;
    double best_fill = 0;
    for (size_t i = 0; i < shares.size(); ++i) {
      if (assigned[i] >= shares[i]) continue;
      const double fill = static_cast<double>(assigned[i]) / shares[i];
      if (best < 0 || fill < best_fill) {
        best = static_cast<int>(i);
        best_fill = fill;
      }
    }
    ++assigned[best];
    owner.push_back(best);
  }
  return owner;
}

v1::SweepRequest ShareRequest(const v1::SweepRequest& fleet_request,
                              const std::vector<sweep::ExpandedPoint>& points,
                              const std::vector<int>& point_indices, const std::string& fleet_id,
                              const std::string& fleet_nodes) {
  v1::SweepRequest share;
  *share.mutable_base() = fleet_request.base();
  (*share.mutable_base()->mutable_labels())[kFleetSweepLabel] = fleet_id;
  (*share.mutable_base()->mutable_labels())[kFleetNodesLabel] = fleet_nodes;
  share.set_combination(v1::SweepRequest::ZIPPED);
  share.set_max_concurrent_gpus(fleet_request.max_concurrent_gpus());
  share.set_user(fleet_request.user());
  share.set_description(
      fleet_request.description().empty()
          ? absl::StrCat("part of ", fleet_id)
          : absl::StrCat(fleet_request.description(), " (part of ", fleet_id, ")"));
  for (size_t axis = 0; axis < fleet_request.axes_size(); ++axis) {
    v1::SweepAxis* zipped = share.add_axes();
    zipped->set_field(fleet_request.axes(axis).field());
    for (int index : point_indices) zipped->add_values(points[index].parameters[axis].second);
    // The kernel axis: each point's own source goes with its label.
    const auto& kernels = fleet_request.axes(axis).kernels();
    const auto& labels = fleet_request.axes(axis).values();
    for (int index : point_indices) {
      for (int k = 0; k < kernels.size() && k < labels.size(); ++k) {
        if (labels[k] == points[index].parameters[axis].second) *zipped->add_kernels() = kernels[k];
      }
    }
  }
  return share;
}

}  // namespace gpuprof::client
