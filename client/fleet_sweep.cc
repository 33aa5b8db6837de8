#include "client/fleet_sweep.h"

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/command_line.h"
#include "common/field_text.h"
#include "client/render.h"
#include "client/sweep_commands.h"
#include "client/sweep_plot.h"
#include "client/sweep_render.h"
#include "client/table.h"
#include "client/terminal_output.h"
#include "common/experiment_states.h"
#include "common/terminal_text.h"
#include "grpcpp/client_context.h"

namespace gpuprof::client {
namespace {

using ::grpc::ClientContext;

constexpr char kClearLine[] = "\r\033[K";
// How often --follow asks every node for its sweep.
constexpr absl::Duration kFollowPollInterval = absl::Seconds(1);
// How long --follow waits for a node that stopped answering before it gives up on it.
constexpr absl::Duration kDefaultNodeWait = absl::Minutes(10);

int Usage(const ClientEnvironment& env, absl::string_view message, absl::string_view command) {
  *env.err << "error: " << EscapeForTerminal(message) << "\n";
  if (!command.empty()) *env.err << "(see gpuprof " << command << " --help)\n";
  return kExitUsage;
}

std::string StatusText(const grpc::Status& status) {
  return absl::StrCat(StatusCodeName(status.error_code()), ": ",
                      EscapeForTerminal(status.error_message()));
}

// One connection per node, made once and shared by the threads that call the nodes.
class FleetClients {
 public:
  explicit FleetClients(const FleetTargets& fleet) : fleet_(fleet) {
    for (const DaemonNode& node : fleet.nodes) {
      ConnectionOptions options = fleet.connection;
      options.target = node.address;
      stubs_.push_back(fleet.env.connect_node ? fleet.env.connect_node(node, options)
                                              : fleet.env.connect(options));
    }
  }
  size_t size() const { return fleet_.nodes.size(); }
  const DaemonNode& node(size_t i) const { return fleet_.nodes[i]; }
  const FleetTargets& fleet() const { return fleet_; }
  const ClientEnvironment& env() const { return fleet_.env; }
  v1::Profiler::StubInterface& profiler(size_t i) { return *stubs_[i].profiler; }
  void SetDeadline(ClientContext& context) const {
    context.set_deadline(absl::ToChronoTime(absl::Now() + fleet_.node_timeout));
  }
  std::optional<size_t> IndexOf(absl::string_view name) const {
    for (size_t i = 0; i < size(); ++i) {
      if (fleet_.nodes[i].name == name) return i;
    }
    return std::nullopt;
  }
  std::string Names() const {
    std::vector<std::string> names;
    for (const DaemonNode& node : fleet_.nodes) names.push_back(node.name);
    return absl::StrJoin(names, ", ");
  }

  // Calls `call` for every node at once; each returns that node's status.
  std::vector<grpc::Status> OnEveryNode(const std::function<grpc::Status(size_t)>& call) {
    std::vector<grpc::Status> statuses(size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < size(); ++i) {
      threads.emplace_back([&statuses, &call, i] { statuses[i] = call(i); });
    }
    for (std::thread& thread : threads) thread.join();
    return statuses;
  }

 private:
  const FleetTargets& fleet_;
  std::vector<DaemonStubs> stubs_;
};

// "fsw-" and 8 hex digits: short enough to type, random enough never to repeat in a fleet.
std::string NewFleetSweepId() {
  std::random_device random;
  return absl::StrFormat("fsw-%08x", random());
}

bool IsFleetSweepId(absl::string_view id) { return absl::StartsWith(id, "fsw-"); }

std::string LabelOf(const v1::Sweep& sweep, const std::string& key) {
  const auto& labels = sweep.request().base().labels();
  const auto found = labels.find(key);
  return found == labels.end() ? "" : found->second;
}

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
  std::vector<std::string> Missing(const FleetClients& clients) const {
    std::vector<std::string> missing;
    for (size_t i : share_nodes) {
      if (!statuses[i].ok()) {
        missing.push_back(absl::StrCat(clients.node(i).name, " (", StatusText(statuses[i]), ")"));
      } else if (!parts[i].has_value()) {
        missing.push_back(absl::StrCat(clients.node(i).name, " (holds no part of ", id, ")"));
      }
    }
    return missing;
  }
  bool Empty() const {
    return std::none_of(parts.begin(), parts.end(),
                        [](const auto& part) { return part.has_value(); });
  }
};

grpc::Status GetPart(FleetClients& clients, size_t node, const std::string& sweep_id,
                     std::optional<v1::Sweep>& part) {
  v1::GetSweepRequest request;
  request.set_sweep_id(sweep_id);
  ClientContext context;
  clients.SetDeadline(context);
  v1::Sweep sweep;
  const grpc::Status status = clients.profiler(node).GetSweep(&context, request, &sweep);
  if (status.ok()) part = std::move(sweep);
  return status;
}

// The node's part of fleet sweep `id`: its sweeps, newest first, searched for the label.
grpc::Status FindPart(FleetClients& clients, size_t node, const std::string& id,
                      std::optional<v1::Sweep>& part) {
  part.reset();
  v1::ListSweepsRequest list;
  list.set_page_size(1000);
  std::string found_id;
  while (found_id.empty()) {
    ClientContext context;
    clients.SetDeadline(context);
    v1::ListSweepsResponse response;
    const grpc::Status status = clients.profiler(node).ListSweeps(&context, list, &response);
    if (!status.ok()) return status;
    for (const v1::Sweep& sweep : response.sweeps()) {
      if (LabelOf(sweep, kFleetSweepLabel) == id) found_id = sweep.id();
    }
    if (response.next_page_token().empty()) break;
    list.set_page_token(response.next_page_token());
  }
  if (found_id.empty()) return grpc::Status::OK;
  return GetPart(clients, node, found_id, part);
}

void SetShareNodes(const FleetClients& clients, FleetSweep& fleet_sweep) {
  std::set<std::string> names;
  for (const auto& part : fleet_sweep.parts) {
    if (!part.has_value()) continue;
    for (absl::string_view name :
         absl::StrSplit(LabelOf(*part, kFleetNodesLabel), ',', absl::SkipEmpty())) {
      names.insert(std::string(name));
    }
  }
  fleet_sweep.share_nodes.clear();
  for (size_t i = 0; i < clients.size(); ++i) {
    if (names.contains(clients.node(i).name)) fleet_sweep.share_nodes.push_back(i);
  }
}

FleetSweep LookUpFleetSweep(FleetClients& clients, const std::string& id) {
  FleetSweep fleet_sweep;
  fleet_sweep.id = id;
  fleet_sweep.parts.resize(clients.size());
  fleet_sweep.statuses =
      clients.OnEveryNode([&](size_t i) { return FindPart(clients, i, id, fleet_sweep.parts[i]); });
  SetShareNodes(clients, fleet_sweep);
  // A node that did not answer may hold a part: while nothing says otherwise, count it.
  if (fleet_sweep.share_nodes.empty()) {
    for (size_t i = 0; i < clients.size(); ++i) {
      if (!fleet_sweep.statuses[i].ok()) fleet_sweep.share_nodes.push_back(i);
    }
  }
  return fleet_sweep;
}

// A fleet sweep no node holds: NOT_FOUND when every node answered, else partial.
int ReportNotFound(const FleetClients& clients, const FleetSweep& fleet_sweep) {
  const std::vector<std::string> missing = fleet_sweep.Missing(clients);
  if (missing.empty()) {
    *clients.env().err << "error: NOT_FOUND: no node of the fleet (" << clients.Names()
                       << ") holds " << fleet_sweep.id << "\n";
    return kExitUsage;
  }
  *clients.env().err << "error: " << fleet_sweep.id << " is on no node that answered; no answer "
                     << "from " << absl::StrJoin(missing, "; ") << "\n";
  return kExitPartial;
}

// Ends with the partial line and exit code 6 when some nodes' parts are missing.
int WithPartial(const FleetClients& clients, const std::vector<std::string>& missing, int code) {
  if (missing.empty()) return code;
  *clients.env().err << "partial: no answer from " << absl::StrJoin(missing, "; ") << "\n";
  return code == kExitOk || code == kExitNotFinished ? kExitPartial : code;
}

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

std::string PartsLine(const FleetClients& clients, const FleetSweep& fleet_sweep) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!fleet_sweep.parts[i].has_value()) continue;
    const v1::Sweep& part = *fleet_sweep.parts[i];
    parts.push_back(absl::StrCat(clients.node(i).name, "/", part.id(), " (",
                                 SweepStateName(part.state()), ", ", part.points_size(),
                                 " points)"));
  }
  return absl::StrJoin(parts, ", ");
}

// ---- sweep get ----

int ShowFleetSweep(FleetClients& clients, const std::string& id, const ParsedArgs& args) {
  const FleetSweep fleet_sweep = LookUpFleetSweep(clients, id);
  if (fleet_sweep.Empty()) return ReportNotFound(clients, fleet_sweep);
  std::ostream& out = *clients.env().out;
  if (args.Switch("json")) {
    for (size_t i = 0; i < clients.size(); ++i) {
      if (!fleet_sweep.parts[i].has_value()) continue;
      out << "{\"node\":\"" << clients.node(i).name
          << "\",\"sweep\":" << JsonLine(*fleet_sweep.parts[i]) << "}\n";
    }
    return WithPartial(clients, fleet_sweep.Missing(clients), kExitOk);
  }
  const std::vector<const v1::Sweep*> parts = PartsOf(fleet_sweep);
  int total = 0, finished = 0, running = 0, queued = 0, failed = 0;
  for (const v1::Sweep* part : parts) {
    total += part->points_size();
    finished += part->points_finished();
    running += part->points_running();
    queued += part->points_queued();
    failed += part->points_failed();
  }
  out << id << "  " << SweepStateName(CombinedState(parts)) << "  " << total << " points on "
      << parts.size() << " node(s): " << finished << " finished, " << running << " running, "
      << queued << " queued, " << failed << " failed\n"
      << "parts: " << PartsLine(clients, fleet_sweep) << "\n\n";
  const std::vector<std::string> axes = SweepAxisNames(*parts.front());
  TextTable table(FleetColumns(axes));
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!fleet_sweep.parts[i].has_value()) continue;
    for (const v1::SweepPoint& point : fleet_sweep.parts[i]->points()) {
      std::vector<std::string> cells = {clients.node(i).name};
      for (std::string& cell : SweepPointCells(point, axes, true)) cells.push_back(std::move(cell));
      table.AddRow(cells);
    }
  }
  out << table.Render();
  return WithPartial(clients, fleet_sweep.Missing(clients), kExitOk);
}

// ---- sweep watch / --follow: one live table over every node ----

struct FollowOptions {
  bool json = false;
  absl::Duration node_wait = kDefaultNodeWait;
  absl::Time started;
};

int FollowFleetSweep(FleetClients& clients, FleetSweep fleet_sweep, const FollowOptions& options) {
  const ClientEnvironment& env = clients.env();
  std::ostream& out = *env.out;
  const bool live = env.stdout_is_terminal && !options.json;
  std::vector<std::string> axes;
  std::vector<size_t> widths;
  std::set<std::pair<size_t, int>> printed;
  std::vector<std::optional<absl::Time>> down_since(clients.size());
  bool header_printed = false, live_showing = false;
  while (true) {
    // Rows for points that ended since the last round.
    for (size_t i = 0; i < clients.size(); ++i) {
      if (!fleet_sweep.parts[i].has_value()) continue;
      const v1::Sweep& part = *fleet_sweep.parts[i];
      if (!header_printed && !options.json) {
        axes = SweepAxisNames(part);
        widths = SweepColumnWidths(part);
        size_t node_width = 4;
        for (size_t n = 0; n < clients.size(); ++n) {
          node_width = std::max(node_width, clients.node(n).name.size());
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
          out << "{\"node\":\"" << clients.node(i).name << "\",\"sweep\":\"" << part.id()
              << "\",\"point\":" << JsonLine(point) << "}\n";
        } else {
          std::vector<std::string> cells = {clients.node(i).name};
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
          *env.err << clients.node(i).name << " answers again\n";
          live_showing = false;
        }
        down_since[i].reset();
        continue;
      }
      if (!down_since[i].has_value()) {
        down_since[i] = now;
        if (live_showing) WriteTerminalControl(out, kClearLine);
        live_showing = false;
        *env.err << clients.node(i).name << ": no answer (" << StatusText(fleet_sweep.statuses[i])
                 << "); waiting up to " << absl::FormatDuration(options.node_wait)
                 << " for it (its points resume when its daemon is back)\n";
      }
      const std::string entry =
          absl::StrCat(clients.node(i).name, " (", StatusText(fleet_sweep.statuses[i]), ")");
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
            << PartsLine(clients, fleet_sweep) << ", took " << FormatElapsed(now - options.started)
            << "\n";
      std::vector<std::string> missing = fleet_sweep.Missing(clients);
      const int code = given_up.empty() && all_parts_ended && state == v1::SWEEP_FINISHED
                           ? kExitOk
                           : kExitNotFinished;
      return WithPartial(clients, missing, code);
    }
    if (live) {
      int total = 0, ended = 0, running = 0, failed = 0;
      for (const v1::Sweep* part : parts) {
        total += part->points_size();
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
    fleet_sweep.statuses = clients.OnEveryNode([&](size_t i) {
      if (std::find(fleet_sweep.share_nodes.begin(), fleet_sweep.share_nodes.end(), i) ==
          fleet_sweep.share_nodes.end()) {
        return grpc::Status::OK;
      }
      std::optional<v1::Sweep> fresh;
      const grpc::Status status = fleet_sweep.parts[i].has_value()
                                      ? GetPart(clients, i, fleet_sweep.parts[i]->id(), fresh)
                                      : FindPart(clients, i, fleet_sweep.id, fresh);
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

// How many GPUs one point asks for.
int GpusPerPoint(const v1::ExperimentRequest& request) {
  if (request.gpus().gpu_ids_size() > 0) return request.gpus().gpu_ids_size();
  return std::max({1, request.gpus().gpu_count(), request.tp_degree()});
}

int SubmitFleetSweep(FleetClients& clients, const std::vector<std::string>& args) {
  const ClientEnvironment& env = clients.env();
  int exit_code = kExitOk;
  std::optional<SweepSubmission> submission =
      ParseSweepSubmission(args, env, clients.fleet().user, exit_code);
  if (!submission.has_value()) return exit_code;
  const std::string help_command = absl::StrCat("sweep ", args[0]);
  absl::StatusOr<absl::Duration> node_wait = NodeWaitOf(submission->args);
  if (!node_wait.ok()) return Usage(env, node_wait.status().message(), help_command);
  const bool json = submission->args.Switch("json");
  if (!json && submission->format != SweepFormat::kTable) {
    return Usage(env, "a fleet sweep prints a table or, with --json, JSON lines", help_command);
  }
  // Expanded here to split the points; each node checks its points again before storing any.
  absl::StatusOr<std::vector<sweep::ExpandedPoint>> points =
      sweep::ExpandSweep(submission->request);
  if (!points.ok()) return Usage(env, points.status().message(), help_command);

  // Which nodes answer, and their GPUs.
  std::vector<v1::ListGpusResponse> gpus(clients.size());
  const std::vector<grpc::Status> asked = clients.OnEveryNode([&](size_t i) {
    ClientContext context;
    clients.SetDeadline(context);
    return clients.profiler(i).ListGpus(&context, v1::ListGpusRequest(), &gpus[i]);
  });
  std::vector<std::string> silent;
  bool any_gpus = false;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!asked[i].ok()) {
      silent.push_back(absl::StrCat(clients.node(i).name, " (", StatusText(asked[i]), ")"));
    } else if (gpus[i].gpus_size() > 0) {
      any_gpus = true;
    }
  }
  if (silent.size() == clients.size()) {
    *env.err << "error: no node answered: " << absl::StrJoin(silent, "; ") << "\n";
    return kExitUnavailable;
  }
  // Weights: each node's free GPUs (all its GPUs when none is free anywhere), among nodes
  // with enough GPUs for a point; every node alike when none has a GPU (CPU workloads).
  const int needed = GpusPerPoint(submission->request.base());
  std::vector<double> weights(clients.size(), 0);
  bool any_free = false;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!asked[i].ok()) continue;
    int free_gpus = 0;
    for (const v1::GpuInfo& gpu : gpus[i].gpus()) free_gpus += gpu.leased_to_experiment().empty();
    any_free |= free_gpus >= needed;
  }
  for (size_t i = 0; i < clients.size(); ++i) {
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
  for (size_t i = 0; i < clients.size(); ++i) {
    if (shares[i] > 0) share_names.push_back(clients.node(i).name);
  }
  const std::string fleet_id = NewFleetSweepId();
  const std::string fleet_nodes = absl::StrJoin(share_names, ",");

  FleetSweep fleet_sweep;
  fleet_sweep.id = fleet_id;
  fleet_sweep.parts.resize(clients.size());
  fleet_sweep.statuses = clients.OnEveryNode([&](size_t i) {
    if (shares[i] == 0) return grpc::Status::OK;
    std::vector<int> mine;
    for (size_t p = 0; p < owner.size(); ++p) {
      if (owner[p] == static_cast<int>(i)) mine.push_back(static_cast<int>(p));
    }
    const v1::SweepRequest request =
        ShareRequest(submission->request, *points, mine, fleet_id, fleet_nodes);
    ClientContext context;
    // Every point is validated and stored before the answer: give large shares time.
    context.set_deadline(
        absl::ToChronoTime(absl::Now() + std::max(clients.fleet().node_timeout, absl::Minutes(5))));
    v1::Sweep sweep;
    const grpc::Status status = clients.profiler(i).SubmitSweep(&context, request, &sweep);
    if (status.ok()) fleet_sweep.parts[i] = std::move(sweep);
    return status;
  });
  SetShareNodes(clients, fleet_sweep);
  std::vector<std::string> refused;
  grpc::Status first_refusal;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (fleet_sweep.statuses[i].ok()) continue;
    refused.push_back(
        absl::StrCat(clients.node(i).name, " (", StatusText(fleet_sweep.statuses[i]), ")"));
    if (first_refusal.ok()) first_refusal = fleet_sweep.statuses[i];
  }
  if (fleet_sweep.Empty()) {
    *env.err << "error: no node took its share: " << absl::StrJoin(refused, "; ") << "\n";
    return ExitCodeForRpcStatus(first_refusal.error_code());
  }
  if (json) {
    for (size_t i = 0; i < clients.size(); ++i) {
      if (!fleet_sweep.parts[i].has_value()) continue;
      *env.out << "{\"fleet_sweep\":\"" << fleet_id << "\",\"node\":\"" << clients.node(i).name
               << "\",\"sweep\":" << JsonLine(*fleet_sweep.parts[i]) << "}\n";
    }
  } else {
    (submission->args.Switch("follow") ? *env.err : *env.out)
        << "submitted " << fleet_id << ": " << points->size() << " points over "
        << PartsOf(fleet_sweep).size() << " node(s): " << PartsLine(clients, fleet_sweep)
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
        FollowFleetSweep(clients, std::move(fleet_sweep),
                         {.json = json, .node_wait = *node_wait, .started = absl::Now()});
    code = code == kExitOk ? followed : code;
  }
  return code;
}

// ---- one sweep on one node: node/swp-..., or an id exactly one node holds ----

// The node that holds `id` (qualified or not); nullopt after reporting why there is none.
std::optional<size_t> LocateSweep(FleetClients& clients, const std::string& text, int& exit_code,
                                  std::string& id) {
  const QualifiedId qualified = SplitQualifiedId(text);
  id = qualified.id;
  if (!qualified.node.empty()) {
    const std::optional<size_t> index = clients.IndexOf(qualified.node);
    if (!index.has_value()) {
      exit_code = Usage(
          clients.env(),
          absl::StrCat("no node \"", qualified.node, "\" in the fleet (", clients.Names(), ")"),
          "sweep");
    }
    return index;
  }
  std::vector<std::optional<v1::Sweep>> found(clients.size());
  const std::vector<grpc::Status> statuses =
      clients.OnEveryNode([&](size_t i) { return GetPart(clients, i, id, found[i]); });
  std::vector<std::string> holders, silent;
  std::optional<size_t> holder;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (statuses[i].ok()) {
      holders.push_back(clients.node(i).name);
      holder = i;
    } else if (statuses[i].error_code() != grpc::StatusCode::NOT_FOUND) {
      silent.push_back(absl::StrCat(clients.node(i).name, " (", StatusText(statuses[i]), ")"));
    }
  }
  if (holders.size() > 1) {
    exit_code = Usage(clients.env(),
                      absl::StrCat(id, " exists on ", absl::StrJoin(holders, ", "),
                                   ": qualify it, e.g. ", holders[0], "/", id),
                      "sweep");
    return std::nullopt;
  }
  if (holders.empty()) {
    if (!silent.empty()) {
      *clients.env().err << "error: " << id << " is on no node that answered; no answer from "
                         << absl::StrJoin(silent, "; ") << "\n";
      exit_code = kExitPartial;
    } else {
      *clients.env().err << "error: NOT_FOUND: " << id << " is on none of the " << clients.size()
                         << " nodes\n";
      exit_code = kExitUsage;
    }
    return std::nullopt;
  }
  return holder;
}

int RunOnOneNode(const FleetTargets& fleet, size_t node, std::vector<std::string> args,
                 const std::function<int(const std::vector<std::string>&, const ClientEnvironment&,
                                         const CommandDefaults&)>& run) {
  ClientEnvironment env = fleet.env;
  env.unary_rpc_deadline = fleet.node_timeout;
  CommandDefaults defaults{fleet.connection, fleet.nodes[node], fleet.user};
  defaults.connection.target = fleet.nodes[node].address;
  return run(args, env, defaults);
}

// ---- sweep list ----

int ListFleetSweeps(FleetClients& clients, const ParsedArgs& args) {
  std::vector<v1::ListSweepsResponse> listed(clients.size());
  v1::ListSweepsRequest request;
  if (const auto user = args.Get("user"); user.has_value()) request.set_user(*user);
  if (args.Switch("mine")) {
    request.set_user(clients.fleet().user.value_or(clients.env().local_user));
  }
  const absl::StatusOr<std::optional<int32_t>> page_size = ParseCountFlag(args, "limit");
  if (!page_size.ok()) {
    return Usage(clients.env(), std::string(page_size.status().message()), "sweep list");
  }
  if (page_size->has_value()) request.set_page_size(**page_size);
  const std::vector<grpc::Status> statuses = clients.OnEveryNode([&](size_t i) {
    ClientContext context;
    clients.SetDeadline(context);
    return clients.profiler(i).ListSweeps(&context, request, &listed[i]);
  });
  std::vector<std::string> missing;
  google::protobuf::RepeatedPtrField<v1::Sweep> merged;
  std::map<std::string, std::vector<std::string>> fleet_parts;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!statuses[i].ok()) {
      missing.push_back(absl::StrCat(clients.node(i).name, " (", StatusText(statuses[i]), ")"));
      continue;
    }
    if (args.Switch("json")) {
      *clients.env().out << "{\"node\":\"" << clients.node(i).name
                         << "\",\"response\":" << JsonLine(listed[i]) << "}\n";
    }
    for (v1::Sweep sweep : listed[i].sweeps()) {
      sweep.set_id(absl::StrCat(clients.node(i).name, "/", sweep.id()));
      if (const std::string fleet_id = LabelOf(sweep, kFleetSweepLabel); !fleet_id.empty()) {
        fleet_parts[fleet_id].push_back(sweep.id());
      }
      *merged.Add() = std::move(sweep);
    }
  }
  if (!args.Switch("json")) {
    std::sort(merged.begin(), merged.end(), [](const v1::Sweep& a, const v1::Sweep& b) {
      return ToTime(a.created()) > ToTime(b.created());
    });
    std::ostream& out = *clients.env().out;
    out << (merged.empty() ? "no sweeps\n" : RenderSweepList(merged, clients.env().time_zone));
    for (const auto& [fleet_id, parts] : fleet_parts) {
      out << "fleet sweep " << fleet_id << ": " << absl::StrJoin(parts, ", ") << "\n";
    }
  }
  if (missing.size() == clients.size()) {
    *clients.env().err << "error: no node answered: " << absl::StrJoin(missing, "; ") << "\n";
    return kExitUnavailable;
  }
  return WithPartial(clients, missing, kExitOk);
}

// ---- sweep cancel ----

int CancelFleetSweep(FleetClients& clients, const std::string& id, const ParsedArgs& args) {
  FleetSweep fleet_sweep = LookUpFleetSweep(clients, id);
  if (fleet_sweep.Empty()) return ReportNotFound(clients, fleet_sweep);
  std::vector<grpc::Status> cancelled = clients.OnEveryNode([&](size_t i) {
    if (!fleet_sweep.parts[i].has_value()) return grpc::Status::OK;
    v1::CancelSweepRequest request;
    request.set_sweep_id(fleet_sweep.parts[i]->id());
    request.set_reason(args.Get("reason").value_or(""));
    ClientContext context;
    clients.SetDeadline(context);
    v1::Sweep sweep;
    const grpc::Status status = clients.profiler(i).CancelSweep(&context, request, &sweep);
    if (status.ok()) fleet_sweep.parts[i] = std::move(sweep);
    return status;
  });
  int code = kExitOk;
  for (size_t i = 0; i < clients.size(); ++i) {
    if (!fleet_sweep.parts[i].has_value()) continue;
    const v1::Sweep& part = *fleet_sweep.parts[i];
    if (!cancelled[i].ok()) {
      // An answer (already ended, not yours) or silence: either way this part goes on.
      *clients.env().err << "error: " << clients.node(i).name << "/" << part.id()
                         << ": not cancelled: " << StatusText(cancelled[i]) << "\n";
      if (code == kExitOk) code = ExitCodeForRpcStatus(cancelled[i].error_code());
      continue;
    }
    *clients.env().out << clients.node(i).name << "/" << part.id() << ": "
                       << SweepStateName(part.state()) << " (" << EscapeForTerminal(part.reason())
                       << "); " << part.points_finished() << " points had finished\n";
  }
  return WithPartial(clients, fleet_sweep.Missing(clients), code);
}

// ---- sweep plot ----

int PlotFleetSweep(FleetClients& clients, const std::string& id, const ParsedArgs& args) {
  const auto output = args.Get("output");
  if (!output.has_value()) {
    return Usage(clients.env(), "sweep plot needs -o FILE.svg or -o FILE.png", "sweep plot");
  }
  const FleetSweep fleet_sweep = LookUpFleetSweep(clients, id);
  if (fleet_sweep.Empty()) return ReportNotFound(clients, fleet_sweep);
  PlotOptions options;
  options.x_axis = args.Get("x").value_or("");
  options.title = args.Get("title").value_or(id);
  const std::string y = args.Get("y").value_or("figure");
  if (y != "figure" && y != "pct-of-copy") {
    return Usage(clients.env(), absl::StrCat("--y: \"", y, "\" is not figure or pct-of-copy"),
                 "sweep plot");
  }
  options.pct_of_copy = y == "pct-of-copy";
  const v1::Sweep merged = MergedSweep(fleet_sweep);
  const absl::Status written = WriteSweepPlot(merged, options, *output);
  if (!written.ok()) {
    *clients.env().err << "error: " << written.message() << "\n";
    return absl::IsInvalidArgument(written) ? kExitUsage : kExitOtherError;
  }
  *clients.env().out << "wrote " << *output << ": " << merged.points_size() << " point(s) from "
                     << PartsLine(clients, fleet_sweep) << "\n";
  return WithPartial(clients, fleet_sweep.Missing(clients), kExitOk);
}

std::vector<FlagSpec> FleetSubcommandFlags() {
  return {
      {.name = "format", .value_syntax = "table|csv|jsonl|markdown", .help = "output format"},
      {.name = "json", .is_switch = true, .help = "JSON lines, one per node or point"},
      {.name = "from-seq", .value_syntax = "N", .help = "watch of one node's sweep: replay from N"},
      {.name = "reason", .value_syntax = "TEXT", .help = "cancel: why, kept with the sweep"},
      {.name = "user", .value_syntax = "NAME", .help = "list: only this user's sweeps"},
      {.name = "mine", .is_switch = true, .help = "list: only your sweeps"},
      {.name = "limit", .value_syntax = "N", .help = "list: sweeps per node"},
      {.name = "output", .value_syntax = "FILE", .help = "plot: the .svg or .png to write"},
      {.name = "x", .value_syntax = "AXIS", .help = "plot: the axis on x"},
      {.name = "y", .value_syntax = "figure|pct-of-copy", .help = "plot: what is on y"},
      {.name = "title", .value_syntax = "TEXT", .help = "plot: the title"},
      {.name = "node-wait",
       .value_syntax = "DURATION",
       .help = "watch: how long to wait for a node that stopped answering (default 10m)"},
      {.name = "help", .is_switch = true, .help = "show this help"}};
}

constexpr absl::string_view kFleetSweepHelp =
    "Across a fleet (--fleet or several --target):\n"
    "  gpuprof --fleet sweep <workload> [flags] [--follow] [--node-wait 10m]\n"
    "      spreads the points over the nodes (in proportion to their free GPUs; evenly among\n"
    "      nodes without GPUs); each node runs its share as an ordinary sweep in its own fair\n"
    "      queue. Prints the fleet sweep's id (fsw-...). A node that does not answer is left\n"
    "      out and its share goes to the others.\n"
    "  gpuprof --fleet sweep get|watch|cancel|plot fsw-...|NODE/swp-...|swp-...\n"
    "  gpuprof --fleet sweep list\n"
    "watch and --follow print one table over every node; a node that stops answering is\n"
    "waited for up to --node-wait (its points resume when its daemon is back). Exit codes as\n"
    "for one daemon, and 6 when some node's part is missing from the output.\n";

}  // namespace

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
  }
  return share;
}

int RunFleetSweepCommand(const std::vector<std::string>& args, const FleetTargets& fleet) {
  const ClientEnvironment& env = fleet.env;
  if (args.empty() || args[0] == "--help") {
    (args.empty() ? *env.err : *env.out) << kFleetSweepHelp;
    return args.empty() ? kExitUsage : kExitOk;
  }
  static const std::set<std::string> kSubcommands = {"get", "list", "cancel", "watch", "plot"};
  FleetClients clients(fleet);
  if (!kSubcommands.contains(args[0])) {
    if (absl::StartsWith(args[0], "-")) {
      return Usage(env, "the workload (or get, list, cancel, watch, plot) comes first", "sweep");
    }
    return SubmitFleetSweep(clients, args);
  }
  const std::string& action = args[0];
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), FleetSubcommandFlags());
  if (!parsed.ok()) return Usage(env, parsed.status().message(), "sweep " + action);
  if (parsed->Switch("help")) {
    *env.out << kFleetSweepHelp << "\nflags:\n" << FormatFlagHelp(FleetSubcommandFlags());
    return kExitOk;
  }
  if (action == "list") {
    if (!parsed->positionals.empty()) return Usage(env, "sweep list takes no id", "sweep list");
    return ListFleetSweeps(clients, *parsed);
  }
  if (parsed->positionals.size() != 1) {
    return Usage(
        env, absl::StrCat("usage: gpuprof --fleet sweep ", action, " fsw-...|NODE/swp-...|swp-..."),
        "sweep " + action);
  }
  const std::string& target = parsed->positionals[0];
  if (IsFleetSweepId(target)) {
    if (action == "get") return ShowFleetSweep(clients, target, *parsed);
    if (action == "cancel") return CancelFleetSweep(clients, target, *parsed);
    if (action == "plot") return PlotFleetSweep(clients, target, *parsed);
    absl::StatusOr<absl::Duration> node_wait = NodeWaitOf(*parsed);
    if (!node_wait.ok()) return Usage(env, node_wait.status().message(), "sweep watch");
    FleetSweep fleet_sweep = LookUpFleetSweep(clients, target);
    if (fleet_sweep.Empty() && fleet_sweep.Missing(clients).empty()) {
      return ReportNotFound(clients, fleet_sweep);
    }
    absl::Time started = absl::Now();
    for (const v1::Sweep* part : PartsOf(fleet_sweep)) {
      started = std::min(started, ToTime(part->created()));
    }
    return FollowFleetSweep(
        clients, std::move(fleet_sweep),
        {.json = parsed->Switch("json"), .node_wait = *node_wait, .started = started});
  }
  // One node's sweep: run the single-daemon command there, with the id unqualified.
  int exit_code = kExitOk;
  std::string id;
  const std::optional<size_t> node = LocateSweep(clients, target, exit_code, id);
  if (!node.has_value()) return exit_code;
  std::vector<std::string> single(args.begin(), args.end());
  for (std::string& word : single) {
    if (word == target) word = id;
  }
  // --node-wait is the fleet's own: one node's commands do not know it.
  for (auto word = single.begin(); word != single.end();) {
    if (*word == "--node-wait" && word + 1 != single.end()) {
      word = single.erase(word, word + 2);
    } else if (absl::StartsWith(*word, "--node-wait=")) {
      word = single.erase(word);
    } else {
      ++word;
    }
  }
  if (action != "watch" && !parsed->Switch("json")) {
    *env.out << "node: " << fleet.nodes[*node].name << "\n";
  }
  return RunOnOneNode(fleet, *node, single, RunSweepCommand);
}

int RunFleetCompareCommand(const std::vector<std::string>& args, const FleetTargets& fleet) {
  const ClientEnvironment& env = fleet.env;
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, CompareCommandFlags());
  if (!parsed.ok()) return Usage(env, parsed.status().message(), "compare");
  if (parsed->Switch("help") || parsed->positionals.size() != 2) {
    (parsed->Switch("help") ? *env.out : *env.err)
        << "usage: gpuprof --fleet compare A B [flags]\n\n"
           "Across a fleet, A and B are fleet sweeps (fsw-...), ids qualified by node\n"
           "(gpu-a/swp-000003, gpu-b/exp-000042, gpu-a/BASELINE) or ids one node holds. Points\n"
           "are matched by parameters whichever node ran them; NODE A and NODE B say where, and\n"
           "the provenance (GPU, driver, CUDA, NCCL, gpuprof version, host) is compared per\n"
           "pair of nodes. Exit 6 when a node holding part of A or B did not answer.\n\nflags:\n"
        << FormatFlagHelp(CompareCommandFlags());
    return parsed->Switch("help") ? kExitOk : kExitUsage;
  }
  FleetClients clients(fleet);
  std::vector<std::string> missing;
  const auto resolve = [&](const std::string& name, sweep::CompareSide& side) -> int {
    if (IsFleetSweepId(name)) {
      const FleetSweep fleet_sweep = LookUpFleetSweep(clients, name);
      if (fleet_sweep.Empty()) return ReportNotFound(clients, fleet_sweep);
      for (const std::string& node : fleet_sweep.Missing(clients)) missing.push_back(node);
      side.id = name;
      for (size_t i = 0; i < clients.size(); ++i) {
        if (!fleet_sweep.parts[i].has_value()) continue;
        const v1::Sweep& part = *fleet_sweep.parts[i];
        if (side.axes.empty()) side.axes = SweepAxisNames(part);
        std::string provenance_from;
        for (const v1::SweepPoint& point : part.points()) {
          if (!point.has_experiment()) continue;
          side.points.push_back(point.experiment());
          side.point_nodes.push_back(clients.node(i).name);
          if (provenance_from.empty() && point.state() == v1::FINISHED) {
            provenance_from = point.experiment_id();
          }
        }
        if (provenance_from.empty()) continue;
        v1::GetExperimentRequest request;
        request.set_experiment_id(provenance_from);
        ClientContext context;
        clients.SetDeadline(context);
        v1::Experiment experiment;
        if (clients.profiler(i).GetExperiment(&context, request, &experiment).ok()) {
          side.node_provenance[clients.node(i).name] = experiment.result().provenance();
        }
      }
      return kExitOk;
    }
    const QualifiedId qualified = SplitQualifiedId(name);
    std::vector<size_t> candidates;
    if (!qualified.node.empty()) {
      const std::optional<size_t> index = clients.IndexOf(qualified.node);
      if (!index.has_value()) {
        return Usage(
            env,
            absl::StrCat("no node \"", qualified.node, "\" in the fleet (", clients.Names(), ")"),
            "compare");
      }
      candidates.push_back(*index);
    } else {
      for (size_t i = 0; i < clients.size(); ++i) candidates.push_back(i);
    }
    std::vector<sweep::CompareSide> found(clients.size());
    const std::vector<grpc::Status> statuses = clients.OnEveryNode([&](size_t i) {
      if (std::find(candidates.begin(), candidates.end(), i) == candidates.end()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "not asked");
      }
      return ResolveCompareSide(clients.profiler(i), fleet.node_timeout, qualified.id, found[i]);
    });
    std::vector<size_t> holders;
    std::vector<std::string> silent;
    for (size_t i : candidates) {
      if (statuses[i].ok()) {
        holders.push_back(i);
      } else if (candidates.size() == 1 ||
                 statuses[i].error_code() != grpc::StatusCode::NOT_FOUND) {
        silent.push_back(absl::StrCat(clients.node(i).name, " (", StatusText(statuses[i]), ")"));
      }
    }
    if (holders.size() > 1) {
      return Usage(env,
                   absl::StrCat(qualified.id, " exists on several nodes: qualify it, e.g. ",
                                clients.node(holders[0]).name, "/", qualified.id),
                   "compare");
    }
    if (holders.empty()) {
      if (candidates.size() == 1) {
        *env.err << "error: " << name << ": " << silent.front() << "\n";
        return ExitCodeForRpcStatus(statuses[candidates[0]].error_code());
      }
      *env.err << "error: NOT_FOUND: " << qualified.id << " is on no node that answered"
               << (silent.empty() ? ""
                                  : absl::StrCat("; no answer from ", absl::StrJoin(silent, "; ")))
               << "\n";
      return silent.empty() ? kExitUsage : kExitPartial;
    }
    const size_t holder = holders[0];
    side = std::move(found[holder]);
    side.id = absl::StrCat(clients.node(holder).name, "/", side.id);
    side.point_nodes.assign(side.points.size(), clients.node(holder).name);
    side.node_provenance[clients.node(holder).name] = side.provenance;
    return kExitOk;
  };
  const int code = CompareAndPrint(env, *parsed, resolve);
  return WithPartial(clients, missing, code);
}

}  // namespace gpuprof::client
