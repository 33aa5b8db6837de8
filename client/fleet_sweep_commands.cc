#include "client/fleet_sweep_commands.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/fleet_sweep.h"
#include "client/render.h"
#include "client/sweep_commands.h"
#include "client/sweep_plot.h"
#include "client/sweep_render.h"
#include "client/table.h"
#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

// ---- sweep get ----

int ShowFleetSweep(Fleet& fleet, const std::string& id, const ParsedArgs& args) {
  const FleetSweep fleet_sweep = LookUpFleetSweep(fleet, id);
  if (fleet_sweep.Empty()) return ReportNotFound(fleet, fleet_sweep);
  std::ostream& out = *fleet.env().out;
  if (args.Switch("json")) {
    for (size_t i = 0; i < fleet.size(); ++i) {
      if (!fleet_sweep.parts[i].has_value()) continue;
      out << "{\"node\":\"" << fleet.node(i).name
          << "\",\"sweep\":" << JsonLine(*fleet_sweep.parts[i]) << "}\n";
    }
    return fleet.WithPartial(fleet_sweep.Missing(fleet), kExitOk);
  }
  const std::vector<const v1::Sweep*> parts = PartsOf(fleet_sweep);
  int total = 0, finished = 0, running = 0, queued = 0, failed = 0;
  for (const v1::Sweep* part : parts) {
    total += SweepPointTotal(*part);
    finished += part->points_finished();
    running += part->points_running();
    queued += part->points_queued();
    failed += part->points_failed();
  }
  out << id << "  " << SweepStateName(CombinedState(parts)) << "  " << total << " points on "
      << parts.size() << " node(s): " << finished << " finished, " << running << " running, "
      << queued << " queued, " << failed << " failed\n"
      << "parts: " << PartsLine(fleet, fleet_sweep) << "\n\n";
  const std::vector<std::string> axes = SweepAxisNames(*parts.front());
  TextTable table(FleetColumns(axes));
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet_sweep.parts[i].has_value()) continue;
    for (const v1::SweepPoint& point : fleet_sweep.parts[i]->points()) {
      std::vector<std::string> cells = {fleet.node(i).name};
      for (std::string& cell : SweepPointCells(point, axes, true)) cells.push_back(std::move(cell));
      table.AddRow(cells);
    }
  }
  out << table.Render();
  return fleet.WithPartial(fleet_sweep.Missing(fleet), kExitOk);
}

// ---- one sweep on one node: node/swp-..., or an id exactly one node holds ----

// The node that holds `id` (qualified or not); nullopt after reporting why there is none.
std::optional<size_t> LocateSweep(Fleet& fleet, const std::string& text, int& exit_code,
                                  std::string& id) {
  const QualifiedId qualified = SplitQualifiedId(text);
  id = qualified.id;
  if (!qualified.node.empty()) {
    const std::optional<size_t> index = fleet.IndexOf(qualified.node);
    if (!index.has_value()) {
      exit_code = ReportUsageError(
          fleet.env(),
          absl::StrCat("no node \"", qualified.node, "\" in the fleet (", fleet.Names(), ")"),
          "sweep");
    }
    return index;
  }
  std::vector<std::optional<v1::Sweep>> found(fleet.size());
  const std::vector<grpc::Status> statuses =
      fleet.OnEveryNode([&](Session&, size_t i) { return GetPart(fleet, i, id, found[i]); });
  std::vector<std::string> holders, silent;
  std::optional<size_t> holder;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (statuses[i].ok()) {
      holders.push_back(fleet.node(i).name);
      holder = i;
    } else if (statuses[i].error_code() != grpc::StatusCode::NOT_FOUND) {
      silent.push_back(absl::StrCat(fleet.node(i).name, " (", StatusText(statuses[i]), ")"));
    }
  }
  if (holders.size() > 1) {
    exit_code = ReportUsageError(fleet.env(),
                                 absl::StrCat(id, " exists on ", absl::StrJoin(holders, ", "),
                                              ": qualify it, e.g. ", holders[0], "/", id),
                                 "sweep");
    return std::nullopt;
  }
  if (holders.empty()) {
    if (!silent.empty()) {
      *fleet.env().err << "error: " << id << " is on no node that answered; no answer from "
                       << absl::StrJoin(silent, "; ") << "\n";
      exit_code = kExitPartial;
    } else {
      *fleet.env().err << "error: NOT_FOUND: " << id << " is on none of the " << fleet.size()
                       << " nodes\n";
      exit_code = kExitUsage;
    }
    return std::nullopt;
  }
  return holder;
}

// ---- sweep list ----

int ListFleetSweeps(Fleet& fleet, const ParsedArgs& args) {
  std::vector<v1::ListSweepsResponse> listed(fleet.size());
  v1::ListSweepsRequest request;
  if (const auto user = args.Get("user"); user.has_value()) request.set_user(*user);
  if (args.Switch("mine")) {
    request.set_user(fleet.user().value_or(fleet.env().local_user));
  }
  const absl::StatusOr<std::optional<int32_t>> page_size = ParseCountFlag(args, "limit");
  if (!page_size.ok()) {
    return ReportUsageError(fleet.env(), std::string(page_size.status().message()), "sweep list");
  }
  if (page_size->has_value()) request.set_page_size(**page_size);
  const std::vector<grpc::Status> statuses = fleet.OnEveryNode([&](Session& session, size_t i) {
    return session.Call(&v1::Profiler::StubInterface::ListSweeps, request, listed[i]);
  });
  std::vector<std::string> missing;
  google::protobuf::RepeatedPtrField<v1::Sweep> merged;
  std::map<std::string, std::vector<std::string>> fleet_parts;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!statuses[i].ok()) {
      missing.push_back(absl::StrCat(fleet.node(i).name, " (", StatusText(statuses[i]), ")"));
      continue;
    }
    if (args.Switch("json")) {
      *fleet.env().out << "{\"node\":\"" << fleet.node(i).name
                       << "\",\"response\":" << JsonLine(listed[i]) << "}\n";
    }
    for (v1::Sweep sweep : listed[i].sweeps()) {
      sweep.set_id(absl::StrCat(fleet.node(i).name, "/", sweep.id()));
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
    std::ostream& out = *fleet.env().out;
    out << (merged.empty() ? "no sweeps\n" : RenderSweepList(merged, fleet.env().time_zone));
    for (const auto& [fleet_id, parts] : fleet_parts) {
      out << "fleet sweep " << fleet_id << ": " << absl::StrJoin(parts, ", ") << "\n";
    }
  }
  if (missing.size() == fleet.size()) {
    *fleet.env().err << "error: no node answered: " << absl::StrJoin(missing, "; ") << "\n";
    return kExitUnavailable;
  }
  return fleet.WithPartial(missing, kExitOk);
}

// ---- sweep cancel ----

int CancelFleetSweep(Fleet& fleet, const std::string& id, const ParsedArgs& args) {
  FleetSweep fleet_sweep = LookUpFleetSweep(fleet, id);
  if (fleet_sweep.Empty()) return ReportNotFound(fleet, fleet_sweep);
  std::vector<grpc::Status> cancelled = fleet.OnEveryNode([&](Session& session, size_t i) {
    if (!fleet_sweep.parts[i].has_value()) return grpc::Status::OK;
    v1::CancelSweepRequest request;
    request.set_sweep_id(fleet_sweep.parts[i]->id());
    request.set_reason(args.Get("reason").value_or(""));
    v1::Sweep sweep;
    const grpc::Status status =
        session.Call(&v1::Profiler::StubInterface::CancelSweep, request, sweep);
    if (status.ok()) fleet_sweep.parts[i] = std::move(sweep);
    return status;
  });
  int code = kExitOk;
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!fleet_sweep.parts[i].has_value()) continue;
    const v1::Sweep& part = *fleet_sweep.parts[i];
    if (!cancelled[i].ok()) {
      // An answer (already ended, not yours) or silence: either way this part goes on.
      *fleet.env().err << "error: " << fleet.node(i).name << "/" << part.id()
                       << ": not cancelled: " << StatusText(cancelled[i]) << "\n";
      if (code == kExitOk) code = ExitCodeForRpcStatus(cancelled[i].error_code());
      continue;
    }
    *fleet.env().out << fleet.node(i).name << "/" << part.id() << ": "
                     << SweepStateName(part.state()) << " (" << EscapeForTerminal(part.reason())
                     << "); " << part.points_finished() << " points had finished\n";
  }
  return fleet.WithPartial(fleet_sweep.Missing(fleet), code);
}

// ---- sweep plot ----

int PlotFleetSweep(Fleet& fleet, const std::string& id, const ParsedArgs& args) {
  const auto output = args.Get("output");
  if (!output.has_value()) {
    return ReportUsageError(fleet.env(), "sweep plot needs -o FILE.svg or -o FILE.png",
                            "sweep plot");
  }
  const FleetSweep fleet_sweep = LookUpFleetSweep(fleet, id);
  if (fleet_sweep.Empty()) return ReportNotFound(fleet, fleet_sweep);
  PlotOptions options;
  options.x_axis = args.Get("x").value_or("");
  options.title = args.Get("title").value_or(id);
  const std::string y = args.Get("y").value_or("figure");
  if (y != "figure" && y != "pct-of-copy") {
    return ReportUsageError(
        fleet.env(), absl::StrCat("--y: \"", y, "\" is not figure or pct-of-copy"), "sweep plot");
  }
  options.pct_of_copy = y == "pct-of-copy";
  const v1::Sweep merged = MergedSweep(fleet_sweep);
  const absl::Status written = WriteSweepPlot(merged, options, *output);
  if (!written.ok()) {
    *fleet.env().err << "error: " << written.message() << "\n";
    return absl::IsInvalidArgument(written) ? kExitUsage : kExitOtherError;
  }
  *fleet.env().out << "wrote " << *output << ": " << merged.points_size() << " point(s) from "
                   << PartsLine(fleet, fleet_sweep) << "\n";
  return fleet.WithPartial(fleet_sweep.Missing(fleet), kExitOk);
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

int RunFleetSweepCommand(Fleet& fleet, const std::vector<std::string>& args) {
  const ClientEnvironment& env = fleet.env();
  if (args.empty() || args[0] == "--help") {
    (args.empty() ? *env.err : *env.out) << kFleetSweepHelp;
    return args.empty() ? kExitUsage : kExitOk;
  }
  static const std::set<std::string> kSubcommands = {"get", "list", "cancel", "watch", "plot"};
  if (!kSubcommands.contains(args[0])) {
    if (absl::StartsWith(args[0], "-")) {
      return ReportUsageError(env, "the workload (or get, list, cancel, watch, plot) comes first",
                              "sweep");
    }
    return SubmitFleetSweep(fleet, args);
  }
  const std::string& action = args[0];
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), FleetSubcommandFlags());
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), "sweep " + action);
  if (parsed->Switch("help")) {
    *env.out << kFleetSweepHelp << "\nflags:\n" << FormatFlagHelp(FleetSubcommandFlags());
    return kExitOk;
  }
  if (action == "list") {
    if (!parsed->positionals.empty())
      return ReportUsageError(env, "sweep list takes no id", "sweep list");
    return ListFleetSweeps(fleet, *parsed);
  }
  if (parsed->positionals.size() != 1) {
    return ReportUsageError(
        env, absl::StrCat("usage: gpuprof --fleet sweep ", action, " fsw-...|NODE/swp-...|swp-..."),
        "sweep " + action);
  }
  const std::string& target = parsed->positionals[0];
  if (IsFleetSweepId(target)) {
    if (action == "get") return ShowFleetSweep(fleet, target, *parsed);
    if (action == "cancel") return CancelFleetSweep(fleet, target, *parsed);
    if (action == "plot") return PlotFleetSweep(fleet, target, *parsed);
    absl::StatusOr<absl::Duration> node_wait = NodeWaitOf(*parsed);
    if (!node_wait.ok()) return ReportUsageError(env, node_wait.status().message(), "sweep watch");
    FleetSweep fleet_sweep = LookUpFleetSweep(fleet, target);
    if (fleet_sweep.Empty() && fleet_sweep.Missing(fleet).empty()) {
      return ReportNotFound(fleet, fleet_sweep);
    }
    absl::Time started = absl::Now();
    for (const v1::Sweep* part : PartsOf(fleet_sweep)) {
      started = std::min(started, ToTime(part->created()));
    }
    return FollowFleetSweep(
        fleet, std::move(fleet_sweep),
        {.json = parsed->Switch("json"), .node_wait = *node_wait, .started = started});
  }
  // One node's sweep: run the single-daemon command there, with the id unqualified.
  int exit_code = kExitOk;
  std::string id;
  const std::optional<size_t> node = LocateSweep(fleet, target, exit_code, id);
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
    *env.out << "node: " << fleet.node(*node).name << "\n";
  }
  Session& session = fleet.session(*node);
  return RunSweepCommand(
      single, session.env(), [&session](const ParsedArgs&) { return session; }, fleet.user());
}

Command SweepCommand() {
  return {.name = "sweep",
          .summary = "run a parameter grid: gpuprof sweep <workload> --tokens 1,64,4Ki ...",
          .run_args = RunSweepCommand,
          .run_args_on_fleet = RunFleetSweepCommand,
          .help = SweepHelpCommand,
          .short_o_is_output = true};
}

}  // namespace gpuprof::client
