#include "client/kernel_commands.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/board.h"
#include "client/kernel_render.h"
#include "client/listing_output.h"
#include "client/request_builder.h"
#include "client/workload_flag_help.h"
#include "common/terminal_text.h"
#include "workloads/spec_table.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::FieldDescriptor;

// ---- sass ----

std::vector<FlagSpec> SassFlags() {
  return {JsonFlag("one SassLine per line as JSON (NDJSON)"), TargetFlag(), HelpFlag()};
}

int RunSass(Session& session, const ParsedArgs& args) {
  v1::GetExperimentRequest request;
  request.set_experiment_id(args.positionals[0]);
  v1::Experiment experiment;
  if (const int code =
          session.CallOrReport(&v1::Profiler::StubInterface::GetExperiment, request, experiment);
      code != kExitOk) {
    return code;
  }
  if (experiment.result().sass().empty()) {
    session.err() << "error: " << EscapeForTerminal(NoSassReason(experiment)) << "\n";
    return experiment.request().has_custom_kernel() ? kExitOtherError : kExitUsage;
  }
  if (args.Switch("json")) {
    session.out() << JsonLines(experiment.result().sass());
  } else {
    session.out() << RenderSass(experiment.result());
  }
  return kExitOk;
}

// ---- board ----

// A shape flag the board does not match on: the seed only picks inputs.
bool IsIgnoredShapeFlag(const FlagSpec& flag) { return flag.name == "seed"; }

}  // namespace

std::vector<FlagSpec> BoardFlags() {
  return {{.name = "best-per-kernel",
           .is_switch = true,
           .help = "keep each kernel's best run only (ours is one kernel; a source is known by "
                   "its SHA-256)"},
          {.name = "limit", .value_syntax = "N", .help = "rows shown (default 20; 0: all)"},
          JsonFlag("one row per line as JSON (NDJSON)"),
          ListingStyleFlags()[0],
          ListingStyleFlags()[1],
          TargetFlag(),
          HelpFlag()};
}

namespace {

std::string BoardHelp(const ExperimentRequestBuilder* builder) {
  std::string help = absl::StrCat(
      "usage: gpuprof board <workload> [shape flags] [--best-per-kernel] [--limit N] [--json]\n\n"
      "Ranks the finished, verified experiments of a workload whose shape matches the flags\n"
      "given (only those; the seed and measurement options are not compared; unset fields\n"
      "count as the daemon's defaults), fastest first by the workload's headline, across users\n"
      "and kernels: ours and every submitted source (NAME@SHA-256 (file)). Each row: rank,\n"
      "headline with its noise, ratio to the best, kernel, user, id, GPU, date.\n"
      "e.g. gpuprof board index --hidden 7168 --tokens 16384 --best-per-kernel\n\n"
      "workloads: ",
      absl::StrJoin(WorkloadNames(), ", "), "\n");
  if (builder != nullptr) {
    std::vector<FlagSpec> shape;
    for (const FlagSpec& flag : DescribedWorkloadFlags(*builder)) {
      if (!IsIgnoredShapeFlag(flag)) shape.push_back(flag);
    }
    absl::StrAppend(&help, "\n", builder->workload(), " shape flags:\n", FormatFlagHelp(shape));
  }
  absl::StrAppend(&help, "\nboard flags:\n", FormatFlagHelp(BoardFlags()));
  return help;
}

int BoardHelpCommand(const ClientEnvironment& env, const std::vector<std::string>& args) {
  if (args.empty()) {
    *env.out << BoardHelp(nullptr);
    return kExitOk;
  }
  absl::StatusOr<ExperimentRequestBuilder> builder = ExperimentRequestBuilder::ForWorkload(args[0]);
  if (!builder.ok()) return ReportUsageError(env, builder.status().message(), "board");
  *env.out << BoardHelp(&*builder);
  return kExitOk;
}

int RunBoard(const Invocation& invocation, const std::vector<std::string>& args) {
  const ClientEnvironment& env = invocation.env;
  if (args.empty() || args[0] == "--help") {
    if (args.empty()) {
      return ReportUsageError(
          env, absl::StrCat("board needs a workload: ", absl::StrJoin(WorkloadNames(), ", ")),
          "board");
    }
    *env.out << BoardHelp(nullptr);
    return kExitOk;
  }
  absl::StatusOr<ExperimentRequestBuilder> builder = ExperimentRequestBuilder::ForWorkload(args[0]);
  if (!builder.ok()) return ReportUsageError(env, builder.status().message(), "board");
  const std::string help_command = absl::StrCat("board ", args[0]);
  std::vector<FlagSpec> flags;
  for (const FlagSpec& flag : builder->workload_flags()) {
    if (!IsIgnoredShapeFlag(flag)) flags.push_back(flag);
  }
  for (const FlagSpec& flag : BoardFlags()) flags.push_back(flag);
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), flags);
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), help_command);
  if (parsed->Switch("help")) {
    *env.out << BoardHelp(&*builder);
    return kExitOk;
  }
  if (!parsed->positionals.empty()) {
    return ReportUsageError(
        env, absl::StrCat("unexpected argument \"", parsed->positionals[0], "\""), help_command);
  }
  const absl::StatusOr<ListingStyle> style = ListingStyleOf(*parsed);
  if (!style.ok()) return ReportUsageError(env, style.status().message(), help_command);
  const absl::StatusOr<std::optional<int32_t>> limit = ParseCountFlag(*parsed, "limit");
  if (!limit.ok()) return ReportUsageError(env, limit.status().message(), help_command);
  absl::StatusOr<v1::ExperimentRequest> shape = builder->Build(*parsed);
  if (!shape.ok()) return ReportUsageError(env, shape.status().message(), help_command);
  // Only the fields given are compared.
  std::vector<const FieldDescriptor*> fields;
  for (const FlagValue& flag : parsed->flags) {
    const std::vector<const FieldDescriptor*> path = builder->FieldPathForFlag(flag.name);
    if (path.size() == 2) fields.push_back(path[1]);
  }

  absl::StatusOr<Session> made = invocation.MakeSession(*parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  // Every finished experiment of the workload, page by page (listings carry no source).
  v1::ListExperimentsRequest list;
  list.set_workload(workloads::WorkloadOf(*shape));
  list.add_states(v1::FINISHED);
  list.set_page_size(1000);
  std::vector<v1::Experiment> experiments;
  while (true) {
    v1::ListExperimentsResponse page;
    if (const int code =
            session.CallOrReport(&v1::Profiler::StubInterface::ListExperiments, list, page);
        code != kExitOk) {
      return code;
    }
    for (v1::Experiment& experiment : *page.mutable_experiments()) {
      experiments.push_back(std::move(experiment));
    }
    session.err() << RenderDamagedRows(page.damaged());
    if (page.next_page_token().empty() || page.next_page_token() == list.page_token()) break;
    list.set_page_token(page.next_page_token());
  }
  std::vector<BoardRow> rows =
      RankBoard(experiments, *shape, fields, parsed->Switch("best-per-kernel"));
  const size_t shown_rows = limit->value_or(20) == 0 ? rows.size()
                                                     : static_cast<size_t>(limit->value_or(20));
  if (rows.size() > shown_rows) {
    session.err() << "showing the best " << shown_rows << " of " << rows.size()
                  << " runs (--limit 0: all)\n";
    rows.resize(shown_rows);
  }
  // Listings carry no provenance: the GPU of each row shown comes from the experiment itself.
  for (BoardRow& row : rows) {
    v1::GetExperimentRequest get;
    get.set_experiment_id(row.experiment.id());
    v1::Experiment full;
    if (!session.Call(&v1::Profiler::StubInterface::GetExperiment, get, full).ok()) continue;
    std::vector<std::string> names;
    for (const v1::GpuInfo& gpu : full.result().provenance().gpus()) names.push_back(gpu.name());
    row.gpu = absl::StrJoin(names, "+");
  }

  if (*style == ListingStyle::kTable && rows.empty()) {
    session.out() << "no finished, verified " << builder->workload()
                  << " experiments of this shape\n";
    return kExitOk;
  }
  google::protobuf::RepeatedPtrField<google::protobuf::Struct> items;
  std::vector<std::string> ids;
  for (const BoardRow& row : rows) {
    *items.Add() = BoardRowStruct(row);
    ids.push_back(row.experiment.id());
  }
  session.out() << RenderListing(*style, items, RenderBoard(rows, env.time_zone), ids);
  return kExitOk;
}

}  // namespace

Command SassCommand() {
  return {.name = "sass",
          .usage = "sass ID [--json]",
          .summary = "a custom kernel's SASS, with PC-sampling stalls per line (--mode profile)",
          .details =
              "Prints the compiled custom kernel's SASS from the toolkit's disassembler, a line\n"
              "per instruction: offset, instruction, source line (compiled with --kernel-option\n"
              "-lineinfo), and with --mode profile the PC samples that landed there and their most\n"
              "common stall; '>' marks the most sampled lines. Says why when there is none (our\n"
              "kernel, a kernel that did not compile, no disassembler on the box).",
          .positionals = {"ID"},
          .flags = SassFlags,
          .run = RunSass};
}

Command BoardCommand() {
  return {.name = "board",
          .usage = "board <workload> [shape flags] [--best-per-kernel] [--limit N] [--json]",
          .summary = "rank the verified runs of a shape across users and kernels, fastest first",
          .run_args = RunBoard,
          .help = BoardHelpCommand};
}

}  // namespace gpuprof::client
