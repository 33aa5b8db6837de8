#include "client/sweep_commands.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/command_line.h"
#include "common/field_text.h"
#include "client/render.h"
#include "client/request_builder.h"
#include "client/sweep_plot.h"
#include "client/sweep_render.h"
#include "client/table.h"
#include "client/terminal_output.h"
#include "common/experiment_states.h"
#include "common/terminal_text.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "sweep/compare.h"
#include "sweep/point_figure.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::grpc::ClientContext;

constexpr char kClearLine[] = "\r\033[K";

FlagSpec TargetFlag() {
  return {.name = "target",
          .value_syntax = "ADDR",
          .help = "gpuprofd: host:port or unix:/path (default: $GPUPROF_TARGET)"};
}
FlagSpec HelpFlag() { return {.name = "help", .is_switch = true, .help = "show this help"}; }
FlagSpec FormatFlag() {
  return {.name = "format",
          .value_syntax = "table|csv|jsonl|markdown",
          .help = "how points are printed (default: table)"};
}

int Usage(const ClientEnvironment& env, absl::string_view message, absl::string_view command) {
  *env.err << "error: " << EscapeForTerminal(message) << "\n";
  if (!command.empty()) *env.err << "(see gpuprof " << command << " --help)\n";
  return kExitUsage;
}

// One daemon connection for one command, with the same settings (TLS files, token, config
// file) as the other commands.
class Connection {
 public:
  Connection(const ClientEnvironment& env, const CommandDefaults& defaults, const ParsedArgs& args)
      : env_(env),
        connection_(defaults.connection),
        node_(args.Has("target") ? std::nullopt : defaults.node),
        user_(defaults.user.value_or(env.local_user)),
        explicit_user_(defaults.user) {
    if (const auto target = args.Get("target"); target.has_value()) connection_.target = *target;
  }

  std::ostream& out() const { return *env_.out; }
  std::ostream& err() const { return *env_.err; }
  const ClientEnvironment& env() const { return env_; }
  const std::string& user() const { return user_; }
  // --user, when given: the daemon honours it for admins only.
  const std::optional<std::string>& explicit_user() const { return explicit_user_; }
  absl::Time now() const { return env_.now ? env_.now() : absl::Now(); }

  v1::Profiler::StubInterface& profiler() {
    if (stubs_.profiler == nullptr) {
      stubs_ = node_.has_value() && env_.connect_node ? env_.connect_node(*node_, connection_)
                                                      : env_.connect(connection_);
    }
    return *stubs_.profiler;
  }
  void SetDeadline(ClientContext& context, absl::Duration deadline) const {
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
  void SetUnaryDeadline(ClientContext& context) const {
    SetDeadline(context, env_.unary_rpc_deadline);
  }
  int ReportRpcError(const grpc::Status& status) const {
    return client::ReportRpcError(err(), status, connection_);
  }

 private:
  const ClientEnvironment& env_;
  ConnectionOptions connection_;
  std::optional<DaemonNode> node_;
  std::string user_;
  std::optional<std::string> explicit_user_;
  DaemonStubs stubs_;
};

bool IsIntegerScalar(const FieldDescriptor* field) {
  if (field->is_repeated()) return false;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
    case FieldDescriptor::CPPTYPE_INT64:
    case FieldDescriptor::CPPTYPE_UINT32:
    case FieldDescriptor::CPPTYPE_UINT64:
      return true;
    default:
      return false;
  }
}

// A flag's value as an axis: "1,64,4Ki" (a list), "1024:8192:1024" (a range, integers),
// "pow2:1:64Ki" (powers of two, integers); nullopt for a plain value of the base request.
absl::StatusOr<std::optional<v1::SweepAxis>> AxisFromFlag(const FieldDescriptor* field,
                                                         const std::string& value) {
  // A repeated field takes a list as one value; a map's entries (labels) can be an axis.
  if (field->is_repeated() && !field->is_map()) return std::nullopt;
  v1::SweepAxis axis;
  const SizeUnits units = IsByteSizedField(field) ? SizeUnits::kBytes : SizeUnits::kCount;
  if (absl::StartsWith(value, "pow2:")) {
    if (!IsIntegerScalar(field)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", value, "\": powers of two need an integer field"));
    }
    const std::vector<std::string> parts = absl::StrSplit(value.substr(5), ':');
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", value, "\": write powers of two as pow2:MIN:MAX, e.g. pow2:1:64Ki"));
    }
    absl::StatusOr<int64_t> min = ParseSizedInteger(parts[0], units);
    if (!min.ok()) return min.status();
    absl::StatusOr<int64_t> max = ParseSizedInteger(parts[1], units);
    if (!max.ok()) return max.status();
    axis.mutable_powers_of_two()->set_min(*min);
    axis.mutable_powers_of_two()->set_max(*max);
    return axis;
  }
  if (IsIntegerScalar(field) && absl::StrContains(value, ':') && !absl::StrContains(value, ',')) {
    const std::vector<std::string> parts = absl::StrSplit(value, ':');
    if (parts.size() == 2 || parts.size() == 3) {
      std::vector<int64_t> numbers;
      for (const std::string& part : parts) {
        absl::StatusOr<int64_t> number = ParseSizedInteger(part, units);
        if (!number.ok()) return number.status();
        numbers.push_back(*number);
      }
      axis.mutable_range()->set_start(numbers[0]);
      axis.mutable_range()->set_end(numbers[1]);
      axis.mutable_range()->set_step(numbers.size() == 3 ? numbers[2] : 1);
      return axis;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("\"", value, "\": write a range as START:END or START:END:STEP"));
  }
  if (!absl::StrContains(value, ',')) return std::nullopt;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    axis.add_values(std::string(absl::StripAsciiWhitespace(part)));
  }
  return axis;
}

// ---- following a sweep: rows as points end, a progress line with an ETA ----

int FollowSweep(Connection& connection, const std::string& id, int64_t from_seq,
                SweepFormat format, bool json_events) {
  v1::Sweep sweep;
  {
    ClientContext context;
    connection.SetUnaryDeadline(context);
    v1::GetSweepRequest request;
    request.set_sweep_id(id);
    const grpc::Status status = connection.profiler().GetSweep(&context, request, &sweep);
    if (!status.ok()) return connection.ReportRpcError(status);
  }
  const std::vector<std::string> axes = SweepAxisNames(sweep);
  const std::vector<size_t> widths = SweepColumnWidths(sweep);
  const bool table = format == SweepFormat::kTable;
  const bool live = connection.env().stdout_is_terminal && table && !json_events;
  // Summaries go where they do not spoil machine-readable output.
  std::ostream& notes = table && !json_events ? connection.out() : connection.err();
  const absl::Time created = ToTime(sweep.created());
  if (!json_events) {
    if (table) {
      std::vector<std::string> header;
      for (const std::string& column : SweepColumns(axes)) {
        header.push_back(absl::AsciiStrToUpper(column));
      }
      connection.out() << FixedWidthRow(header, widths, axes.size() + 3);
    } else {
      connection.out() << SweepHeaderLine(axes, format);
    }
  }

  v1::WatchSweepRequest request;
  request.set_sweep_id(id);
  request.set_from_seq(from_seq);
  ClientContext context;
  auto reader = connection.profiler().WatchSweep(&context, request);
  v1::SweepEvent event;
  int64_t last_seq = from_seq - 1;
  v1::SweepState state = sweep.state();
  std::string ended;
  bool live_showing = false;
  while (reader->Read(&event)) {
    last_seq = event.seq();
    state = event.state();
    if (json_events) {
      connection.out() << JsonLine(event) << "\n";
    } else if (event.has_point() && IsTerminalState(event.point().state())) {
      if (live_showing) WriteTerminalControl(connection.out(), kClearLine);
      live_showing = false;
      connection.out() << (table ? FixedWidthRow(SweepPointCells(event.point(), axes, true),
                                                 widths, axes.size() + 3)
                                 : SweepPointLine(event.point(), axes, format));
    }
    if (event.payload_case() == v1::SweepEvent::kEnded) ended = event.ended();
    if (live) {
      const int total = event.points_total() > 0 ? event.points_total() : sweep.points_size();
      WriteTerminalControl(connection.out(), kClearLine);
      connection.out() << SweepProgressLine(total, event.points_finished() + event.points_failed(),
                                            event.points_running(), event.points_failed(),
                                            connection.now() - created);
      live_showing = true;
    }
    connection.out().flush();
  }
  if (live_showing) WriteTerminalControl(connection.out(), kClearLine);
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    const int code = connection.ReportRpcError(status);
    connection.err() << "resume with: gpuprof sweep watch " << id << " --from-seq "
                     << last_seq + 1 << "\n";
    return code;
  }
  if (state == v1::SWEEP_RUNNING || state == v1::SWEEP_STATE_UNSPECIFIED) {
    connection.err() << "error: the event stream ended before the sweep did; resume with: "
                     << "gpuprof sweep watch " << id << " --from-seq " << last_seq + 1 << "\n";
    return kExitNotFinished;
  }
  if (!json_events) {
    notes << id << ": " << SweepStateName(state)
          << (ended.empty() ? "" : " (" + EscapeForTerminal(ended) + ")") << ", took "
          << FormatElapsed(connection.now() - created) << "\n";
  }
  return state == v1::SWEEP_FINISHED ? kExitOk : kExitNotFinished;
}

absl::StatusOr<SweepFormat> FormatOf(const ParsedArgs& args) {
  if (args.Switch("json")) return SweepFormat::kJsonLines;
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok()) return absl::InvalidArgumentError(absl::StrCat("--format: ", format.status().message()));
  return format;
}

// ---- gpuprof sweep <workload> ----

std::vector<FlagSpec> SweepSubmitFlags() {
  return {{.name = "zip",
           .is_switch = true,
           .help = "pair the axes' values (all the same length) instead of every combination"},
          {.name = "max-gpus",
           .value_syntax = "N",
           .help = "run at most N GPUs' worth of points at once (default: every free GPU)"},
          {.name = "follow",
           .is_switch = true,
           .help = "print each point as it ends, with progress and an ETA, until the sweep ends"},
          {.name = "node-wait",
           .value_syntax = "DURATION",
           .help = "across a fleet, how long --follow waits for a node that stopped answering "
                   "(default 10m)"},
          FormatFlag(),
          {.name = "json",
           .is_switch = true,
           .help = "the Sweep as JSON (with --follow: NDJSON events)"},
          TargetFlag(),
          HelpFlag()};
}

constexpr absl::string_view kAxisSyntaxHelp =
    "axes: any workload or common flag given several values becomes an axis:\n"
    "  lists           --tokens 1,64,512,4Ki  --dtype bf16,fp16\n"
    "  ranges          --hidden 1024:8192:1024 (START:END[:STEP], integers, END included)\n"
    "  powers of two   --tokens pow2:1:64Ki\n"
    "Points are every combination (the last axis fastest) or, with --zip, the i-th value of\n"
    "every axis. Each point is an ordinary experiment; points share the machine fairly with\n"
    "other users' experiments.\n";

std::string SweepSubmitHelp(const ExperimentRequestBuilder& builder) {
  return absl::StrCat("usage: gpuprof sweep ", builder.workload(),
                      " [flags, some with several values] [--zip] [--max-gpus N] [--follow]\n\n",
                      kAxisSyntaxHelp, "\n", builder.workload(), " flags:\n",
                      FormatFlagHelp(builder.workload_flags()), "\ncommon flags:\n",
                      FormatFlagHelp(builder.common_flags()), "\nsweep flags:\n",
                      FormatFlagHelp(SweepSubmitFlags()));
}

}  // namespace

std::optional<SweepSubmission> ParseSweepSubmission(const std::vector<std::string>& args,
                                                    const ClientEnvironment& env,
                                                    const std::optional<std::string>& explicit_user,
                                                    int& exit_code) {
  // Every early return below is a finished command: help (0) or a usage error (2).
  const auto done = [&exit_code](int code) -> std::optional<SweepSubmission> {
    exit_code = code;
    return std::nullopt;
  };
  absl::StatusOr<ExperimentRequestBuilder> builder = ExperimentRequestBuilder::ForWorkload(args[0]);
  if (!builder.ok()) return done(Usage(env, builder.status().message(), "sweep"));
  const std::string help_command = absl::StrCat("sweep ", args[0]);
  std::vector<FlagSpec> flags = builder->workload_flags();
  for (const auto& group : {builder->common_flags(), SweepSubmitFlags()}) {
    flags.insert(flags.end(), group.begin(), group.end());
  }
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), flags);
  if (!parsed.ok()) return done(Usage(env, parsed.status().message(), help_command));
  if (parsed->Switch("help")) {
    *env.out << SweepSubmitHelp(*builder);
    return done(kExitOk);
  }
  if (!parsed->positionals.empty()) {
    return done(Usage(env, absl::StrCat("unexpected argument \"", parsed->positionals[0], "\""),
                      help_command));
  }
  absl::StatusOr<SweepFormat> format = FormatOf(*parsed);
  if (!format.ok()) return done(Usage(env, format.status().message(), help_command));

  v1::SweepRequest request;
  ParsedArgs base_args;
  for (const FlagValue& flag : parsed->flags) {
    const FieldDescriptor* field = builder->FieldForFlag(flag.name);
    if (field != nullptr) {
      absl::StatusOr<std::optional<v1::SweepAxis>> axis = AxisFromFlag(field, flag.value);
      if (!axis.ok()) {
        return done(Usage(env, absl::StrCat("--", flag.typed_name, ": ", axis.status().message()),
                          help_command));
      }
      if (axis->has_value()) {
        (*axis)->set_field(builder->ApiFieldName(flag.name));
        *request.add_axes() = **axis;
        continue;
      }
    }
    base_args.flags.push_back(flag);
  }
  if (request.axes().empty()) {
    return done(Usage(env,
                      "a sweep needs an axis: give a flag several values, e.g. --tokens 1,64,512, "
                      "--hidden 1024:8192:1024 or --tokens pow2:1:64Ki",
                      help_command));
  }
  absl::StatusOr<v1::ExperimentRequest> base = builder->Build(base_args);
  if (!base.ok()) return done(Usage(env, base.status().message(), help_command));
  // Empty means "me, as the daemon authenticates me"; another name needs an admin.
  if (base->user().empty() && explicit_user.has_value()) base->set_user(*explicit_user);
  request.set_user(base->user());
  request.set_description(base->description());
  *request.mutable_base() = *std::move(base);
  if (parsed->Switch("zip")) request.set_combination(v1::SweepRequest::ZIPPED);
  if (const auto max_gpus = parsed->Get("max-gpus"); max_gpus.has_value()) {
    int32_t cap = 0;
    if (!absl::SimpleAtoi(*max_gpus, &cap)) {
      return done(Usage(env,
                        absl::StrCat("--max-gpus: \"", *max_gpus, "\" is not a number of GPUs"),
                        help_command));
    }
    request.set_max_concurrent_gpus(cap);
  }

  return SweepSubmission{std::move(request), *std::move(parsed), *format};
}

namespace {

int RunSweepSubmit(const std::vector<std::string>& args, const ClientEnvironment& env,
                   const CommandDefaults& defaults) {
  int exit_code = kExitOk;
  std::optional<SweepSubmission> submission =
      ParseSweepSubmission(args, env, defaults.user, exit_code);
  if (!submission.has_value()) return exit_code;
  const ParsedArgs* parsed = &submission->args;
  const v1::SweepRequest& request = submission->request;
  const SweepFormat* format = &submission->format;
  Connection connection(env, defaults, *parsed);
  v1::Sweep sweep;
  {
    ClientContext context;
    // Every point is validated and stored before the answer: give large sweeps time.
    connection.SetDeadline(context, std::max(env.unary_rpc_deadline, absl::Minutes(5)));
    const grpc::Status status = connection.profiler().SubmitSweep(&context, request, &sweep);
    if (!status.ok()) return connection.ReportRpcError(status);
  }
  if (parsed->Switch("follow")) {
    if (!parsed->Switch("json")) {
      connection.err() << "submitted " << sweep.id() << ": " << sweep.points_size()
                       << " points\n";
    }
    return FollowSweep(connection, sweep.id(), 1, *format, parsed->Switch("json"));
  }
  if (parsed->Switch("json")) {
    connection.out() << JsonLine(sweep) << "\n";
  } else {
    connection.out() << "submitted " << sweep.id() << ": " << sweep.points_size()
                     << " points (gpuprof sweep watch " << sweep.id() << " follows it)\n";
  }
  return kExitOk;
}

// ---- gpuprof sweep get|list|cancel|watch|plot ----

struct SweepSubcommand {
  absl::string_view name;
  absl::string_view usage;
  absl::string_view summary;
  int positionals;
  std::vector<FlagSpec> (*flags)();
  int (*run)(Connection& connection, const ParsedArgs& args);
};

std::vector<FlagSpec> SweepGetFlags() {
  return {FormatFlag(), {.name = "json", .is_switch = true, .help = "the Sweep as JSON"},
          TargetFlag(), HelpFlag()};
}

int RunSweepGet(Connection& connection, const ParsedArgs& args) {
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok()) return Usage(connection.env(), format.status().message(), "sweep get");
  v1::GetSweepRequest request;
  request.set_sweep_id(args.positionals[0]);
  ClientContext context;
  connection.SetUnaryDeadline(context);
  v1::Sweep sweep;
  const grpc::Status status = connection.profiler().GetSweep(&context, request, &sweep);
  if (!status.ok()) return connection.ReportRpcError(status);
  if (args.Switch("json")) {
    connection.out() << JsonLine(sweep) << "\n";
  } else if (*format == SweepFormat::kTable) {
    connection.out() << RenderSweepSummary(sweep, connection.now(), connection.env().time_zone)
                     << "\n"
                     << RenderSweepPoints(sweep, *format);
  } else {
    connection.out() << RenderSweepPoints(sweep, *format);
  }
  return kExitOk;
}

std::vector<FlagSpec> SweepListFlags() {
  return {{.name = "user", .value_syntax = "NAME", .help = "only this user's sweeps"},
          {.name = "mine", .is_switch = true, .help = "only your sweeps"},
          {.name = "limit", .value_syntax = "N", .help = "sweeps per page (daemon default 50)"},
          {.name = "page-token", .value_syntax = "TOKEN", .help = "continue a previous listing"},
          {.name = "json", .is_switch = true, .help = "the ListSweepsResponse as JSON"},
          TargetFlag(),
          HelpFlag()};
}

int RunSweepList(Connection& connection, const ParsedArgs& args) {
  v1::ListSweepsRequest request;
  if (args.Switch("mine")) request.set_user(connection.user());
  if (const auto user = args.Get("user"); user.has_value()) request.set_user(*user);
  const absl::StatusOr<std::optional<int32_t>> page_size = ParseCountFlag(args, "limit");
  if (!page_size.ok()) {
    return Usage(connection.env(), std::string(page_size.status().message()), "sweep list");
  }
  if (page_size->has_value()) request.set_page_size(**page_size);
  request.set_page_token(args.Get("page-token").value_or(""));
  ClientContext context;
  connection.SetUnaryDeadline(context);
  v1::ListSweepsResponse response;
  const grpc::Status status = connection.profiler().ListSweeps(&context, request, &response);
  if (!status.ok()) return connection.ReportRpcError(status);
  if (args.Switch("json")) {
    connection.out() << JsonLine(response) << "\n";
    return kExitOk;
  }
  connection.out() << (response.sweeps().empty()
                           ? "no sweeps\n"
                           : RenderSweepList(response.sweeps(), connection.env().time_zone));
  if (!response.next_page_token().empty()) {
    connection.out() << "more: add --page-token " << response.next_page_token() << "\n";
  }
  return kExitOk;
}

std::vector<FlagSpec> SweepCancelFlags() {
  return {{.name = "reason", .value_syntax = "TEXT", .help = "why, kept with the sweep"},
          {.name = "json", .is_switch = true, .help = "the Sweep as JSON"},
          TargetFlag(),
          HelpFlag()};
}

int RunSweepCancel(Connection& connection, const ParsedArgs& args) {
  v1::CancelSweepRequest request;
  request.set_sweep_id(args.positionals[0]);
  // Without --reason the daemon records who cancelled it ("cancelled by NAME").
  request.set_reason(args.Get("reason").value_or(""));
  ClientContext context;
  connection.SetUnaryDeadline(context);
  v1::Sweep sweep;
  const grpc::Status status = connection.profiler().CancelSweep(&context, request, &sweep);
  if (!status.ok()) return connection.ReportRpcError(status);
  if (args.Switch("json")) {
    connection.out() << JsonLine(sweep) << "\n";
  } else {
    connection.out() << EscapeForTerminal(sweep.id()) << ": " << SweepStateName(sweep.state())
                     << " (" << EscapeForTerminal(sweep.reason()) << "); "
                     << sweep.points_finished() << " points had finished\n";
  }
  return kExitOk;
}

std::vector<FlagSpec> SweepWatchFlags() {
  return {{.name = "from-seq", .value_syntax = "N", .help = "replay stored events from N"},
          FormatFlag(),
          {.name = "json", .is_switch = true, .help = "each SweepEvent as a line of JSON"},
          TargetFlag(),
          HelpFlag()};
}

int RunSweepWatch(Connection& connection, const ParsedArgs& args) {
  int64_t from_seq = 1;
  if (const auto from = args.Get("from-seq"); from.has_value()) {
    if (!absl::SimpleAtoi(*from, &from_seq) || from_seq < 0) {
      return Usage(connection.env(), absl::StrCat("--from-seq: \"", *from, "\" is not a number"),
                   "sweep watch");
    }
  }
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok()) return Usage(connection.env(), format.status().message(), "sweep watch");
  return FollowSweep(connection, args.positionals[0], from_seq, *format, args.Switch("json"));
}

std::vector<FlagSpec> SweepPlotFlags() {
  return {{.name = "output", .value_syntax = "FILE", .help = "the .svg or .png to write (-o)"},
          {.name = "x", .value_syntax = "AXIS", .help = "the axis on x (default: the first numeric one)"},
          {.name = "y",
           .value_syntax = "figure|pct-of-copy",
           .help = "the figure (bandwidth, TFLOP/s, busbw, op/s) or % of copy bandwidth"},
          {.name = "title", .value_syntax = "TEXT", .help = "the plot's title"},
          TargetFlag(),
          HelpFlag()};
}

int RunSweepPlot(Connection& connection, const ParsedArgs& args) {
  const auto output = args.Get("output");
  if (!output.has_value()) {
    return Usage(connection.env(), "sweep plot needs -o FILE.svg or -o FILE.png", "sweep plot");
  }
  PlotOptions options;
  options.x_axis = args.Get("x").value_or("");
  options.title = args.Get("title").value_or("");
  const std::string y = args.Get("y").value_or("figure");
  if (y != "figure" && y != "pct-of-copy") {
    return Usage(connection.env(), absl::StrCat("--y: \"", y, "\" is not figure or pct-of-copy"),
                 "sweep plot");
  }
  options.pct_of_copy = y == "pct-of-copy";
  v1::GetSweepRequest request;
  request.set_sweep_id(args.positionals[0]);
  ClientContext context;
  connection.SetUnaryDeadline(context);
  v1::Sweep sweep;
  const grpc::Status status = connection.profiler().GetSweep(&context, request, &sweep);
  if (!status.ok()) return connection.ReportRpcError(status);
  const absl::StatusOr<PlotData> data = BuildPlotData(sweep, options);
  if (!data.ok()) return Usage(connection.env(), data.status().message(), "sweep plot");
  const absl::Status written = WriteSweepPlot(sweep, options, *output);
  if (!written.ok()) {
    connection.err() << "error: " << written.message() << "\n";
    return absl::IsInvalidArgument(written) ? kExitUsage : kExitOtherError;
  }
  size_t points = 0;
  for (const PlotSeries& series : data->series) points += series.points.size();
  connection.out() << "wrote " << *output << ": " << data->y_label << " against " << data->x_label
                   << ", " << data->series.size() << " line(s), " << points << " point(s)\n";
  return kExitOk;
}

const std::vector<SweepSubcommand>& SweepSubcommands() {
  static const auto* const subcommands = new std::vector<SweepSubcommand>{
      {"get", "sweep get ID [--format F] [--json]", "a sweep and its points", 1, SweepGetFlags,
       RunSweepGet},
      {"list", "sweep list [--user U | --mine] [--limit N] [--json]", "sweeps, newest first", 0,
       SweepListFlags, RunSweepList},
      {"cancel", "sweep cancel ID [--reason TEXT]",
       "cancel the points that have not ended; finished points keep their results", 1,
       SweepCancelFlags, RunSweepCancel},
      {"watch", "sweep watch ID [--from-seq N] [--format F] [--json]",
       "follow a sweep: a row per point as it ends, progress and ETA", 1, SweepWatchFlags,
       RunSweepWatch},
      {"plot", "sweep plot ID -o FILE.svg|png [--x AXIS] [--y figure|pct-of-copy]",
       "plot the figure against an axis, one line per combination of the others (gnuplot)", 1,
       SweepPlotFlags, RunSweepPlot},
  };
  return *subcommands;
}

std::string SweepHelp() {
  TextTable subcommands;
  subcommands.AddRow({"sweep <workload> [flags]", "submit a sweep (--help after the workload)"});
  for (const SweepSubcommand& subcommand : SweepSubcommands()) {
    subcommands.AddRow({std::string(subcommand.usage), std::string(subcommand.summary)});
  }
  return absl::StrCat(
      "usage: gpuprof sweep <workload> [flags] | gpuprof sweep get|list|cancel|watch|plot ...\n\n",
      subcommands.Render("  "), "\n", kAxisSyntaxHelp,
      "\nformats: table (default), csv, jsonl (one SweepPoint per line), markdown.\n"
      "exit codes: --follow and watch exit 0 when every point finished, 1 otherwise.\n");
}

// ---- gpuprof compare ----

std::vector<FlagSpec> CompareFlags() {
  return {{.name = "fail-on-regression",
           .value_syntax = "PCT",
           .help = "exit 5 when a point of B is significantly worse than A by more than PCT%"},
          {.name = "min-change",
           .value_syntax = "PCT",
           .help = "differences below this are never significant (default 1)"},
          FormatFlag(),
          TargetFlag(),
          HelpFlag()};
}

// An experiment, a sweep or a baseline by name ("baseline:NAME" or just NAME).
}  // namespace

grpc::Status ResolveCompareSide(v1::Profiler::StubInterface& profiler, absl::Duration deadline,
                                const std::string& name, sweep::CompareSide& side) {
  const auto set_deadline = [deadline](ClientContext& context) {
    context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  };
  std::string id = name;
  side.id = name;
  if (absl::StartsWith(name, "baseline:") ||
      !(absl::StartsWith(name, "exp-") || absl::StartsWith(name, "swp-"))) {
    const std::string baseline(absl::StripPrefix(name, "baseline:"));
    v1::ListBaselinesRequest request;
    request.set_name(baseline);
    ClientContext context;
    set_deadline(context);
    v1::ListBaselinesResponse response;
    const grpc::Status status = profiler.ListBaselines(&context, request, &response);
    if (!status.ok()) return status;
    if (response.baselines().empty()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("no experiment, sweep or baseline named \"", name, "\""));
    }
    id = response.baselines(0).target_id();
    side.id = absl::StrCat(baseline, " (", id, ")");
  }
  std::string provenance_from;
  if (absl::StartsWith(id, "exp-")) {
    provenance_from = id;
    v1::GetExperimentRequest request;
    request.set_experiment_id(id);
    ClientContext context;
    set_deadline(context);
    v1::Experiment experiment;
    const grpc::Status status = profiler.GetExperiment(&context, request, &experiment);
    if (!status.ok()) return status;
    side.provenance = experiment.result().provenance();
    side.points.push_back(std::move(experiment));
    return grpc::Status::OK;
  }
  v1::GetSweepRequest request;
  request.set_sweep_id(id);
  ClientContext context;
  set_deadline(context);
  v1::Sweep sweep;
  const grpc::Status status = profiler.GetSweep(&context, request, &sweep);
  if (!status.ok()) return status;
  side.axes = SweepAxisNames(sweep);
  for (const v1::SweepPoint& point : sweep.points()) {
    if (!point.has_experiment()) continue;
    side.points.push_back(point.experiment());
    if (provenance_from.empty() && point.state() == v1::FINISHED) {
      provenance_from = point.experiment_id();
    }
  }
  if (!provenance_from.empty()) {
    v1::GetExperimentRequest get;
    get.set_experiment_id(provenance_from);
    ClientContext get_context;
    set_deadline(get_context);
    v1::Experiment experiment;
    if (profiler.GetExperiment(&get_context, get, &experiment).ok()) {
      side.provenance = experiment.result().provenance();
    }
  }
  return grpc::Status::OK;
}

namespace {

std::string SignedPercent(double ratio) { return absl::StrFormat("%+.1f%%", 100 * (ratio - 1)); }

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
  if (!min_change.has_value() || !fail_pct.has_value()) {
    return Usage(env, "--min-change and --fail-on-regression take a percentage >= 0", "compare");
  }
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok()) return Usage(env, format.status().message(), "compare");

  sweep::CompareSide a, b;
  for (auto [name, side] : {std::pair{args.positionals[0], &a}, std::pair{args.positionals[1], &b}}) {
    if (const int code = resolve(name, *side); code != kExitOk) return code;
  }
  const sweep::Comparison comparison = sweep::Compare(a, b, {.min_change = *min_change / 100});

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
      for (size_t column = 1; column <= 5; ++column) rows.SetAlign(column, TextTable::Align::kRight);
      for (const auto& point : comparison.points) {
        std::vector<std::string> cells = {point.parameters,  // TextTable escapes it
                                          figure(point.a),
                                          figure(point.b),
                                          absl::StrFormat("%.3f", point.ratio),
                                          SignedPercent(point.ratio),
                                          absl::StrFormat("%.1f%%", 100 * point.noise),
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
      out << "point,a,b,unit,ratio,noise,verdict" << (by_node ? ",node_a,node_b" : "") << "\n";
      for (const auto& point : comparison.points) {
        out << "\"" << absl::StrReplaceAll(EscapeForTerminal(point.parameters), {{"\"", "\"\""}})
            << "\"," << absl::StrFormat("%.6g", point.a.value) << ","
            << absl::StrFormat("%.6g", point.b.value) << "," << point.a.unit << ","
            << absl::StrFormat("%.6g", point.ratio) << "," << absl::StrFormat("%.6g", point.noise)
            << "," << sweep::VerdictName(point.verdict)
            << (by_node ? absl::StrCat(",", point.node_a, ",", point.node_b) : "") << "\n";
      }
      break;
    case SweepFormat::kJsonLines:
      for (const auto& point : comparison.points) {
        out << absl::StrFormat(
            "{\"point\":%s,\"a\":%.6g,\"b\":%.6g,\"unit\":%s,\"ratio\":%.6g,"
            "\"noise\":%.6g,\"verdict\":\"%s\"%s}\n",
            JsonQuoted(point.parameters), point.a.value, point.b.value, JsonQuoted(point.a.unit),
            point.ratio, point.noise, sweep::VerdictName(point.verdict),
            by_node ? absl::StrCat(",\"node_a\":", JsonQuoted(point.node_a),
                                   ",\"node_b\":", JsonQuoted(point.node_b))
                    : "");
      }
      break;
    case SweepFormat::kMarkdown:
      out << "| " << absl::StrJoin(header, " | ") << " |\n|"
          << absl::StrJoin(std::vector<std::string>(header.size(), "---"), "|") << "|\n";
      for (const auto& point : comparison.points) {
        out << "| " << absl::StrReplaceAll(EscapeForTerminal(point.parameters), {{"|", "\\|"}})
            << " | " << figure(point.a) << " | " << figure(point.b) << " | "
            << absl::StrFormat("%.3f", point.ratio) << " | "
            << absl::StrFormat("%.1f%%", 100 * point.noise) << " | "
            << sweep::VerdictName(point.verdict)
            << (by_node ? absl::StrCat(" | ", point.node_a, " | ", point.node_b) : "") << " |\n";
      }
      break;
  }
  for (const auto& [label, list] : {std::pair{"only in A", &comparison.only_in_a},
                                    std::pair{"only in B", &comparison.only_in_b},
                                    std::pair{"no result to compare", &comparison.without_result}}) {
    if (!list->empty()) {
      notes << label << ": " << EscapeForTerminal(absl::StrJoin(*list, "; ")) << "\n";
    }
  }
  const int same = static_cast<int>(comparison.points.size()) - comparison.improvements -
                   comparison.regressions;
  notes << comparison.points.size() << " point(s) compared: geomean B/A "
        << absl::StrFormat("%.3f", comparison.geomean_ratio) << " ("
        << SignedPercent(comparison.geomean_ratio) << "), " << comparison.regressions << " worse";
  if (comparison.regressions > 0) {
    notes << " (worst -" << absl::StrFormat("%.1f", comparison.worst_regression_pct) << "%)";
  }
  notes << ", " << comparison.improvements << " better, " << same << " within noise\n";
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
  if (*fail_pct >= 0 && sweep::RegressionBeyond(comparison, *fail_pct)) {
    *env.err << "regression: B is worse than A by more than " << *fail_pct
             << "% beyond the noise at " << comparison.regressions << " point(s)\n";
    return kExitRegression;
  }
  return kExitOk;
}

namespace {}  // namespace

std::vector<FlagSpec> CompareCommandFlags() { return CompareFlags(); }

namespace {

// ---- gpuprof baseline ----

std::vector<FlagSpec> BaselineFlags() {
  return {{.name = "replace", .is_switch = true, .help = "save: replace a baseline of that name"},
          {.name = "description", .value_syntax = "TEXT", .help = "save: kept with the baseline"},
          {.name = "json", .is_switch = true, .help = "list: the baselines as JSON"},
          TargetFlag(),
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

}  // namespace

int RunSweepCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                    const CommandDefaults& defaults) {
  if (args.empty() || args[0] == "--help") {
    if (args.empty()) {
      *env.err << SweepHelp();
      return kExitUsage;
    }
    *env.out << SweepHelp();
    return kExitOk;
  }
  for (const SweepSubcommand& subcommand : SweepSubcommands()) {
    if (args[0] != subcommand.name) continue;
    const std::string help_command = absl::StrCat("sweep ", subcommand.name);
    absl::StatusOr<ParsedArgs> parsed =
        ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), subcommand.flags());
    if (!parsed.ok()) return Usage(env, parsed.status().message(), help_command);
    if (parsed->Switch("help")) {
      *env.out << "usage: gpuprof " << subcommand.usage << "\n\n" << subcommand.summary
               << "\n\nflags:\n" << FormatFlagHelp(subcommand.flags());
      return kExitOk;
    }
    if (static_cast<int>(parsed->positionals.size()) != subcommand.positionals) {
      return Usage(env, absl::StrCat("usage: gpuprof ", subcommand.usage), help_command);
    }
    Connection connection(env, defaults, *parsed);
    return subcommand.run(connection, *parsed);
  }
  if (absl::StartsWith(args[0], "-")) {
    return Usage(env, "the workload (or get, list, cancel, watch, plot) comes first", "sweep");
  }
  return RunSweepSubmit(args, env, defaults);
}

int RunCompareCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                      const CommandDefaults& defaults) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, CompareFlags());
  if (!parsed.ok()) return Usage(env, parsed.status().message(), "compare");
  if (parsed->Switch("help")) {
    *env.out << "usage: gpuprof compare A B [--fail-on-regression PCT] [--min-change PCT] "
                "[--format F]\n\n"
                "A and B are experiments (exp-...), sweeps (swp-...) or baselines (a name, or\n"
                "baseline:NAME). Points are matched by their parameters; each shows both figures,\n"
                "B/A (above 1: B is better) and whether the difference exceeds the noise both runs\n"
                "measured, sqrt(noise_A^2 + noise_B^2), and --min-change. The summary gives the\n"
                "geometric mean of B/A, the regressions and improvements, and what differs in the\n"
                "provenance (GPU, driver, CUDA, NCCL, gpuprof version, host).\n"
                "exit codes: 0; 5 with --fail-on-regression when a point is worse beyond PCT;\n"
                "2 when nothing matches or an id is unknown.\n\nflags:\n"
             << FormatFlagHelp(CompareFlags());
    return kExitOk;
  }
  if (parsed->positionals.size() != 2) {
    return Usage(env, "usage: gpuprof compare A B (experiment, sweep or baseline ids)", "compare");
  }
  Connection connection(env, defaults, *parsed);
  return CompareAndPrint(
      env, *parsed, [&connection](const std::string& name, sweep::CompareSide& side) {
        const grpc::Status status = ResolveCompareSide(
            connection.profiler(), connection.env().unary_rpc_deadline, name, side);
        return status.ok() ? kExitOk : connection.ReportRpcError(status);
      });
}

int RunBaselineCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                       const CommandDefaults& defaults) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, BaselineFlags());
  if (!parsed.ok()) return Usage(env, parsed.status().message(), "baseline");
  if (parsed->Switch("help") || parsed->positionals.empty()) {
    (parsed->Switch("help") ? *env.out : *env.err) << kBaselineHelp << "\nflags:\n"
                                                    << FormatFlagHelp(BaselineFlags());
    return parsed->Switch("help") ? kExitOk : kExitUsage;
  }
  Connection connection(env, defaults, *parsed);
  const std::string& action = parsed->positionals[0];
  if (action == "save" && parsed->positionals.size() == 3) {
    v1::SaveBaselineRequest request;
    request.set_name(parsed->positionals[1]);
    request.set_target_id(parsed->positionals[2]);
    request.set_user(connection.user());
    request.set_description(parsed->Get("description").value_or(""));
    request.set_replace(parsed->Switch("replace"));
    ClientContext context;
    connection.SetUnaryDeadline(context);
    v1::Baseline baseline;
    const grpc::Status status = connection.profiler().SaveBaseline(&context, request, &baseline);
    if (!status.ok()) return connection.ReportRpcError(status);
    connection.out() << "baseline " << baseline.name() << " -> " << baseline.target_id() << "\n";
    return kExitOk;
  }
  if (action == "delete" && parsed->positionals.size() == 2) {
    v1::DeleteBaselineRequest request;
    request.set_name(parsed->positionals[1]);
    ClientContext context;
    connection.SetUnaryDeadline(context);
    v1::Baseline baseline;
    const grpc::Status status = connection.profiler().DeleteBaseline(&context, request, &baseline);
    if (!status.ok()) return connection.ReportRpcError(status);
    connection.out() << "baseline " << baseline.name() << " deleted (it named "
                     << baseline.target_id() << ")\n";
    return kExitOk;
  }
  if (action == "list" && parsed->positionals.size() == 1) {
    ClientContext context;
    connection.SetUnaryDeadline(context);
    v1::ListBaselinesResponse response;
    const grpc::Status status = connection.profiler().ListBaselines(&context, {}, &response);
    if (!status.ok()) return connection.ReportRpcError(status);
    if (parsed->Switch("json")) {
      connection.out() << JsonLine(response) << "\n";
      return kExitOk;
    }
    // OWNER may replace or delete it; SAVED BY saved this version (the owner or an admin).
    TextTable table({"NAME", "TARGET", "OWNER", "SAVED BY", "CREATED", "DESCRIPTION"});
    for (const v1::Baseline& baseline : response.baselines()) {
      table.AddRow({baseline.name(), baseline.target_id(),
                    baseline.owner().empty() ? "-" : baseline.owner(), baseline.user(),
                    FormatLocalTime(ToTime(baseline.created()), env.time_zone),
                    baseline.description()});
    }
    connection.out() << (response.baselines().empty() ? "no baselines\n" : table.Render());
    return kExitOk;
  }
  return Usage(env,
               "usage: gpuprof baseline save NAME ID | gpuprof baseline delete NAME | gpuprof "
               "baseline list",
               "baseline");
}

}  // namespace gpuprof::client
