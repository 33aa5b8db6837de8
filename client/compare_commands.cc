#include "client/compare_commands.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "client/fleet_sweep.h"
#include "client/listing_output.h"
#include "client/record_row.h"
#include "client/render.h"
#include "client/sweep_commands.h"
#include "client/sweep_pages.h"
#include "client/sweep_render.h"
#include "client/table.h"
#include "common/terminal_text.h"
#include "sweep/point_figure.h"

namespace gpuprof::client {
namespace {

std::vector<FlagSpec> CompareFlags() {
  return {{.name = "fail-on-regression",
           .value_syntax = "PCT",
           .help = "exit 5 when a point of B is significantly worse than A by more than PCT%"},
          {.name = "min-change",
           .value_syntax = "PCT",
           .help = "differences below this are never significant (default 1)"},
          {.name = "cpu-run-noise",
           .value_syntax = "PCT",
           .help = "judge CPU rates (radix) assuming runs differ by this much (stddev/mean); "
                   "without it their points are not judged"},
          FormatFlag(),
          {.name = "json",
           .is_switch = true,
           .help = "one JSON object per compared point (the same as --format jsonl)"},
          SweepTargetFlag(),
          HelpFlag()};
}

std::string CompareHelp() {
  return absl::StrCat(
      "usage: gpuprof compare A B [--fail-on-regression PCT] [--min-change PCT] "
      "[--format F]\n\n"
      "A and B are experiments (exp-...), sweeps (swp-...) or baselines (a name, or\n"
      "baseline:NAME). Points are matched by their parameters; each shows both figures,\n"
      "B/A (above 1: B is better) and whether the difference exceeds both the change chance\n"
      "allows (NOISE: 2 x sqrt(noise_A^2 + noise_B^2), each noise at the 95% upper bound\n"
      "of its sample count; docs/sweeps.md) and --min-change. The summary gives the\n"
      "geometric mean of B/A, the regressions and improvements, and what differs in the\n"
      "provenance (GPU, driver, CUDA, NCCL, gpuprof version, host). Where a figure's\n"
      "noise is unknown (a radix run without repeated passes, or on a shared CPU), so is\n"
      "the verdict: NOISE and VERDICT say \"unknown\" and --fail-on-regression never fails\n"
      "on that point. A CPU rate's passes say nothing of how far another run lands (runs\n"
      "differ more than passes), so radix points are judged only with --cpu-run-noise PCT.\n"
      "exit codes: 0; 5 with --fail-on-regression when a point is worse beyond PCT;\n"
      "2 when nothing matches or an id is unknown.\n\nflags:\n",
      FormatFlagHelp(CompareFlags()));
}

std::vector<FlagSpec> BaselineFlags() {
  return {{.name = "replace", .is_switch = true, .help = "save: replace a baseline of that name"},
          {.name = "description", .value_syntax = "TEXT", .help = "save: kept with the baseline"},
          {.name = "json", .is_switch = true, .help = "list: one Baseline per line as JSON"},
          ListingStyleFlags()[0],
          ListingStyleFlags()[1],
          SweepTargetFlag(),
          HelpFlag()};
}

constexpr absl::string_view kBaselineHelp =
    "usage: gpuprof baseline save NAME ID [--replace] [--description TEXT]\n"
    "       gpuprof baseline delete NAME\n"
    "       gpuprof baseline list [--json]\n\n"
    "Names an experiment (exp-...) or a sweep (swp-...) so that `gpuprof compare NAME ID`\n"
    "compares a new run against it. Names: letters, digits, '-', '_' and '.'.\n"
    "A baseline belongs to who first saved it: only its owner or an admin may replace\n"
    "(--replace) or delete it. Baselines saved before owners were recorded have none\n"
    "(OWNER -): only admins may change them.\n";

// Adds the sweep's points that ran to `side` (and its axes when it has none yet); returns the
// provenance of its first finished point, asked of the daemon, when there is one.
std::optional<v1::Provenance> AddSweepPoints(Session& session, const v1::Sweep& sweep,
                                             sweep::CompareSide& side) {
  if (side.axes.empty()) side.axes = SweepAxisNames(sweep);
  std::string provenance_from;
  for (const v1::SweepPoint& point : sweep.points()) {
    if (!point.has_experiment()) continue;
    side.points.push_back(point.experiment());
    if (provenance_from.empty() && point.state() == v1::FINISHED) {
      provenance_from = point.experiment_id();
    }
  }
  if (provenance_from.empty()) return std::nullopt;
  v1::GetExperimentRequest request;
  request.set_experiment_id(provenance_from);
  v1::Experiment experiment;
  if (!session.Call(&v1::Profiler::StubInterface::GetExperiment, request, experiment).ok()) {
    return std::nullopt;
  }
  return experiment.result().provenance();
}

std::string BaselineHelp() {
  return absl::StrCat(kBaselineHelp, "\nflags:\n", FormatFlagHelp(BaselineFlags()));
}

}  // namespace

grpc::Status ResolveCompareSide(Session& session, const std::string& name,
                                sweep::CompareSide& side) {
  std::string id = name;
  side.id = name;
  if (absl::StartsWith(name, "baseline:") ||
      !(absl::StartsWith(name, "exp-") || absl::StartsWith(name, "swp-"))) {
    const std::string baseline(absl::StripPrefix(name, "baseline:"));
    v1::ListBaselinesRequest request;
    request.set_name(baseline);
    v1::ListBaselinesResponse response;
    const grpc::Status status =
        session.Call(&v1::Profiler::StubInterface::ListBaselines, request, response);
    if (!status.ok()) return status;
    if (response.baselines().empty()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no experiment, sweep or baseline named \"", name, "\""));
    }
    id = response.baselines(0).target_id();
    side.id = absl::StrCat(baseline, " (", id, ")");
  }
  if (absl::StartsWith(id, "exp-")) {
    v1::GetExperimentRequest request;
    request.set_experiment_id(id);
    v1::Experiment experiment;
    const grpc::Status status =
        session.Call(&v1::Profiler::StubInterface::GetExperiment, request, experiment);
    if (!status.ok()) return status;
    side.provenance = experiment.result().provenance();
    side.points.push_back(std::move(experiment));
    return grpc::Status::OK;
  }
  v1::Sweep sweep;
  const grpc::Status status = GetWholeSweep(session, id, sweep);
  if (!status.ok()) return status;
  if (auto provenance = AddSweepPoints(session, sweep, side); provenance.has_value()) {
    side.provenance = *std::move(provenance);
  }
  return grpc::Status::OK;
}

namespace {

std::string SignedPercent(double ratio) { return absl::StrFormat("%+.1f%%", 100 * (ratio - 1)); }

// A compared point for CSV and JSON lines, at full precision: the same columns in both.
RecordRow ComparedPointRecord(const sweep::ComparedPoint& point, bool by_node) {
  RecordRow row;
  row.AddText("point", point.parameters);
  row.AddText("figure", point.a.name);
  row.AddNumber("a", point.a.value);
  row.AddNumber("b", point.b.value);
  row.AddText("unit", point.a.unit);
  row.AddNumber("ratio", point.ratio);
  row.AddNumber("change_pct", 100 * (point.ratio - 1));
  // Empty (null) where a side's noise was not measured.
  row.AddOptionalNumber("noise_a", point.a.relative_noise);
  row.AddOptionalNumber("noise_b", point.b.relative_noise);
  row.AddOptionalNumber("noise", point.noise);
  row.AddText("verdict", sweep::VerdictName(point.verdict));
  if (by_node) {
    row.AddText("node_a", point.node_a);
    row.AddText("node_b", point.node_b);
  }
  return row;
}

}  // namespace

int CompareAndPrint(const ClientEnvironment& env, const ParsedArgs& args,
                    const CompareResolver& resolve) {
  const auto percent = [&](absl::string_view flag, double fallback) -> std::optional<double> {
    const auto value = args.Get(flag);
    if (!value.has_value()) return fallback;
    double parsed = 0;
    if (!absl::SimpleAtod(absl::StripSuffix(*value, "%"), &parsed) || parsed < 0) {
      return std::nullopt;
    }
    return parsed;
  };
  const std::optional<double> min_change = percent("min-change", 1);
  const std::optional<double> fail_pct = percent("fail-on-regression", -1);
  const std::optional<double> cpu_run_noise = percent("cpu-run-noise", -1);
  if (!min_change.has_value() || !fail_pct.has_value() || !cpu_run_noise.has_value()) {
    return ReportUsageError(
        env, "--min-change, --fail-on-regression and --cpu-run-noise take a percentage >= 0",
        "compare");
  }
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok()) return ReportUsageError(env, format.status().message(), "compare");
  if (args.Switch("json")) {
    if (args.Has("format") && *format != SweepFormat::kJsonLines) {
      return ReportUsageError(env, "--json and --format exclude each other", "compare");
    }
    format = SweepFormat::kJsonLines;
  }

  sweep::CompareSide a, b;
  for (auto [name, side] :
       {std::pair{args.positionals[0], &a}, std::pair{args.positionals[1], &b}}) {
    if (const int code = resolve(name, *side); code != kExitOk) return code;
  }
  sweep::CompareOptions options{.min_change = *min_change / 100};
  if (*cpu_run_noise >= 0) options.cpu_run_noise = *cpu_run_noise / 100;
  const sweep::Comparison comparison = sweep::Compare(a, b, options);

  std::ostream& out = *env.out;
  const bool table = *format == SweepFormat::kTable;
  std::ostream& notes = table ? out : *env.err;
  const auto figure = [](const sweep::PointFigure& f) {
    return absl::StrCat(FormatNumber(f.value), " ", f.unit);
  };
  std::vector<std::string> header = {"point", "A", "B", "ratio", "change", "noise", "verdict"};
  // Across nodes, each row says where its two figures were measured.
  const bool by_node = std::any_of(comparison.points.begin(), comparison.points.end(),
                                   [](const sweep::ComparedPoint& point) {
                                     return !point.node_a.empty() || !point.node_b.empty();
                                   });
  if (by_node) {
    header.push_back("node A");
    header.push_back("node B");
  }
  switch (*format) {
    case SweepFormat::kTable: {
      std::vector<std::string> columns = {"POINT", "A", "B", "B/A", "CHANGE", "NOISE", "VERDICT"};
      if (by_node) {
        columns.push_back("NODE A");
        columns.push_back("NODE B");
      }
      TextTable rows(columns);
      for (size_t column = 1; column <= 5; ++column)
        rows.SetAlign(column, TextTable::Align::kRight);
      for (const auto& point : comparison.points) {
        std::vector<std::string> cells = {point.parameters,  // TextTable escapes it
                                          figure(point.a),
                                          figure(point.b),
                                          absl::StrFormat("%.3f", point.ratio),
                                          SignedPercent(point.ratio),
                                          point.noise.has_value()
                                              ? absl::StrFormat("%.1f%%", 100 * *point.noise)
                                              : std::string("unknown"),
                                          sweep::VerdictName(point.verdict)};
        if (by_node) {
          cells.push_back(point.node_a);
          cells.push_back(point.node_b);
        }
        rows.AddRow(cells);
      }
      out << "A: " << EscapeForTerminal(a.id) << "\nB: " << EscapeForTerminal(b.id) << "\n\n"
          << rows.Render();
      break;
    }
    case SweepFormat::kCsv:
    case SweepFormat::kJsonLines: {
      bool first = true;
      for (const auto& point : comparison.points) {
        const RecordRow row = ComparedPointRecord(point, by_node);
        if (first && *format == SweepFormat::kCsv) out << row.CsvHeader();
        first = false;
        out << (*format == SweepFormat::kCsv ? row.Csv() : row.Json());
      }
      break;
    }
    case SweepFormat::kMarkdown:
      // The same cells as the table, under a header of as many columns.
      out << "| " << absl::StrJoin(header, " | ") << " |\n|"
          << absl::StrJoin(std::vector<std::string>(header.size(), "---"), "|") << "|\n";
      for (const auto& point : comparison.points) {
        out << "| " << absl::StrReplaceAll(EscapeForTerminal(point.parameters), {{"|", "\\|"}})
            << " | " << figure(point.a) << " | " << figure(point.b) << " | "
            << absl::StrFormat("%.3f", point.ratio) << " | " << SignedPercent(point.ratio)
            << " | "
            << (point.noise.has_value() ? absl::StrFormat("%.1f%%", 100 * *point.noise)
                                        : std::string("unknown"))
            << " | " << sweep::VerdictName(point.verdict)
            << (by_node ? absl::StrCat(" | ", point.node_a, " | ", point.node_b) : "") << " |\n";
      }
      break;
  }
  for (const auto& [label, list] :
       {std::pair{"only in A", &comparison.only_in_a},
        std::pair{"only in B", &comparison.only_in_b},
        std::pair{"no result to compare", &comparison.without_result}}) {
    if (!list->empty()) {
      notes << label << ": " << EscapeForTerminal(absl::StrJoin(*list, "; ")) << "\n";
    }
  }
  const int same = static_cast<int>(comparison.points.size()) - comparison.improvements -
                   comparison.regressions - comparison.noise_unknown;
  notes << comparison.points.size() << " point(s) compared: geomean B/A "
        << absl::StrFormat("%.3f", comparison.geomean_ratio) << " ("
        << SignedPercent(comparison.geomean_ratio) << "), " << comparison.regressions << " worse";
  if (comparison.regressions > 0) {
    notes << " (worst -" << absl::StrFormat("%.1f", comparison.worst_regression_pct) << "%)";
  }
  notes << ", " << comparison.improvements << " better, " << same << " within noise";
  if (comparison.noise_unknown > 0) notes << ", " << comparison.noise_unknown << " noise unknown";
  notes << "\n";
  notes << (comparison.provenance_differences.empty()
                ? std::string("provenance: same GPU, driver and gpuprof version\n")
                : absl::StrCat(
                      "provenance differs: ",
                      EscapeForTerminal(absl::StrJoin(comparison.provenance_differences, "; ")),
                      "\n"));
  if (comparison.points.empty()) {
    *env.err << "error: nothing to compare: no point of A matches a point of B\n";
    return kExitUsage;
  }
  // A figure without a measured noise may be anywhere in its spread: the gate never fails on
  // it, and says what it left unjudged.
  if (*fail_pct >= 0 && comparison.noise_unknown > 0) {
    *env.err << "not gated: " << comparison.noise_unknown
             << " point(s) whose noise is unknown (not measured, measured on a shared CPU, or a "
                "CPU rate without --cpu-run-noise), "
             << sweep::UnjudgedWorseThan(comparison, *fail_pct) << " of them worse by more than "
             << *fail_pct << "%\n";
  }
  if (*fail_pct >= 0 && sweep::RegressionBeyond(comparison, *fail_pct)) {
    *env.err << "regression: B is worse than A by more than " << *fail_pct
             << "% beyond the noise at " << comparison.regressions << " point(s)\n";
    return kExitRegression;
  }
  return kExitOk;
}

namespace {

int RunCompareCommand(const Invocation& invocation, const std::vector<std::string>& args) {
  const ClientEnvironment& env = invocation.env;
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, CompareFlags());
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), "compare");
  if (parsed->Switch("help")) {
    *env.out << CompareHelp();
    return kExitOk;
  }
  if (parsed->positionals.size() != 2) {
    return ReportUsageError(env, "usage: gpuprof compare A B (experiment, sweep or baseline ids)",
                            "compare");
  }
  absl::StatusOr<Session> made = invocation.MakeSession(*parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  return CompareAndPrint(env, *parsed,
                         [&session](const std::string& name, sweep::CompareSide& side) {
                           const grpc::Status status = ResolveCompareSide(session, name, side);
                           return status.ok() ? kExitOk : session.ReportRpcError(status);
                         });
}

int RunBaselineCommand(const Invocation& invocation, const std::vector<std::string>& args) {
  const ClientEnvironment& env = invocation.env;
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, BaselineFlags());
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), "baseline");
  if (parsed->Switch("help") || parsed->positionals.empty()) {
    (parsed->Switch("help") ? *env.out : *env.err) << BaselineHelp();
    return parsed->Switch("help") ? kExitOk : kExitUsage;
  }
  absl::StatusOr<Session> made = invocation.MakeSession(*parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  const std::string& action = parsed->positionals[0];
  if (action == "save" && parsed->positionals.size() == 3) {
    v1::SaveBaselineRequest request;
    request.set_name(parsed->positionals[1]);
    request.set_target_id(parsed->positionals[2]);
    request.set_user(session.user());
    request.set_description(parsed->Get("description").value_or(""));
    request.set_replace(parsed->Switch("replace"));
    v1::Baseline baseline;
    if (const int code =
            session.CallOrReport(&v1::Profiler::StubInterface::SaveBaseline, request, baseline);
        code != kExitOk) {
      return code;
    }
    session.out() << "baseline " << baseline.name() << " -> " << baseline.target_id() << "\n";
    return kExitOk;
  }
  if (action == "delete" && parsed->positionals.size() == 2) {
    v1::DeleteBaselineRequest request;
    request.set_name(parsed->positionals[1]);
    v1::Baseline baseline;
    if (const int code =
            session.CallOrReport(&v1::Profiler::StubInterface::DeleteBaseline, request, baseline);
        code != kExitOk) {
      return code;
    }
    session.out() << "baseline " << baseline.name() << " deleted (it named " << baseline.target_id()
                  << ")\n";
    return kExitOk;
  }
  if (action == "list" && parsed->positionals.size() == 1) {
    const absl::StatusOr<ListingStyle> style = ListingStyleOf(*parsed);
    if (!style.ok()) return ReportUsageError(env, style.status().message(), "baseline");
    return session.CallAndPrint(
        &v1::Profiler::StubInterface::ListBaselines, {}, /*json=*/false,
        [&](const v1::ListBaselinesResponse& response) {
          // OWNER may replace or delete it; SAVED BY saved this version (the owner or an admin).
          TextTable table({"NAME", "TARGET", "OWNER", "SAVED BY", "CREATED", "DESCRIPTION"});
          for (const v1::Baseline& baseline : response.baselines()) {
            table.AddRow({baseline.name(), baseline.target_id(),
                          baseline.owner().empty() ? "-" : baseline.owner(), baseline.user(),
                          FormatLocalTime(ToTime(baseline.created()), env.time_zone),
                          baseline.description()});
          }
          std::vector<std::string> names;
          for (const v1::Baseline& baseline : response.baselines()) {
            names.push_back(baseline.name());
          }
          session.out() << (response.baselines().empty() && *style == ListingStyle::kTable
                                ? "no baselines\n"
                                : RenderListing(*style, response.baselines(), table.Render(),
                                                names));
          return kExitOk;
        });
  }
  return ReportUsageError(
      env,
      "usage: gpuprof baseline save NAME ID | gpuprof baseline delete NAME | gpuprof "
      "baseline list",
      "baseline");
}

int RunFleetCompareCommand(Fleet& fleet, const std::vector<std::string>& args) {
  const ClientEnvironment& env = fleet.env();
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, CompareFlags());
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), "compare");
  if (parsed->Switch("help") || parsed->positionals.size() != 2) {
    (parsed->Switch("help") ? *env.out : *env.err)
        << "usage: gpuprof --fleet compare A B [flags]\n\n"
           "Across a fleet, A and B are fleet sweeps (fsw-...), ids qualified by node\n"
           "(gpu-a/swp-000003, gpu-b/exp-000042, gpu-a/BASELINE) or ids one node holds. Points\n"
           "are matched by parameters whichever node ran them; NODE A and NODE B say where, and\n"
           "the provenance (GPU, driver, CUDA, NCCL, gpuprof version, host) is compared per\n"
           "pair of nodes. Exit 6 when a node holding part of A or B did not answer.\n\nflags:\n"
        << FormatFlagHelp(CompareFlags());
    return parsed->Switch("help") ? kExitOk : kExitUsage;
  }
  std::vector<std::string> missing;
  const auto resolve = [&](const std::string& name, sweep::CompareSide& side) -> int {
    if (IsFleetSweepId(name)) {
      const FleetSweep fleet_sweep = LookUpFleetSweep(fleet, name);
      if (fleet_sweep.Empty()) return ReportNotFound(fleet, fleet_sweep);
      for (const std::string& node : fleet_sweep.Missing(fleet)) missing.push_back(node);
      side.id = name;
      for (size_t i = 0; i < fleet.size(); ++i) {
        if (!fleet_sweep.parts[i].has_value()) continue;
        const v1::Sweep& part = *fleet_sweep.parts[i];
        const std::string& node = fleet.node(i).name;
        auto provenance = AddSweepPoints(fleet.session(i), part, side);
        side.point_nodes.resize(side.points.size(), node);
        if (provenance.has_value()) side.node_provenance[node] = *std::move(provenance);
      }
      return kExitOk;
    }
    const QualifiedId qualified = SplitQualifiedId(name);
    std::vector<size_t> candidates;
    if (!qualified.node.empty()) {
      const std::optional<size_t> index = fleet.IndexOf(qualified.node);
      if (!index.has_value()) {
        return ReportUsageError(
            env,
            absl::StrCat("no node \"", qualified.node, "\" in the fleet (", fleet.Names(), ")"),
            "compare");
      }
      candidates.push_back(*index);
    } else {
      for (size_t i = 0; i < fleet.size(); ++i) candidates.push_back(i);
    }
    std::vector<sweep::CompareSide> found(fleet.size());
    const std::vector<grpc::Status> statuses = fleet.OnEveryNode([&](Session& session, size_t i) {
      if (std::find(candidates.begin(), candidates.end(), i) == candidates.end()) {
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "not asked");
      }
      return ResolveCompareSide(session, qualified.id, found[i]);
    });
    std::vector<size_t> holders;
    std::vector<std::string> silent;
    for (size_t i : candidates) {
      if (statuses[i].ok()) {
        holders.push_back(i);
      } else if (candidates.size() == 1 ||
                 statuses[i].error_code() != grpc::StatusCode::NOT_FOUND) {
        silent.push_back(absl::StrCat(fleet.node(i).name, " (", StatusText(statuses[i]), ")"));
      }
    }
    if (holders.size() > 1) {
      return ReportUsageError(
          env,
          absl::StrCat(qualified.id, " exists on several nodes: qualify it, e.g. ",
                       fleet.node(holders[0]).name, "/", qualified.id),
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
    side.id = absl::StrCat(fleet.node(holder).name, "/", side.id);
    side.point_nodes.assign(side.points.size(), fleet.node(holder).name);
    side.node_provenance[fleet.node(holder).name] = side.provenance;
    return kExitOk;
  };
  const int code = CompareAndPrint(env, *parsed, resolve);
  return fleet.WithPartial(missing, code);
}

int CompareHelpCommand(const ClientEnvironment& env, const std::vector<std::string>&) {
  *env.out << CompareHelp();
  return kExitOk;
}

int BaselineHelpCommand(const ClientEnvironment& env, const std::vector<std::string>&) {
  *env.out << BaselineHelp();
  return kExitOk;
}

}  // namespace

Command CompareCommand() {
  return {.name = "compare",
          .summary = "compare two experiments, sweeps or baselines, noise-aware",
          .flags = CompareFlags,
          .run_args = RunCompareCommand,
          .run_args_on_fleet = RunFleetCompareCommand,
          .help = CompareHelpCommand};
}

Command BaselineCommand() {
  return {.name = "baseline",
          .summary = "name an experiment or sweep as a baseline to compare against",
          .flags = BaselineFlags,
          .run_args = RunBaselineCommand,
          .help = BaselineHelpCommand};
}

}  // namespace gpuprof::client
