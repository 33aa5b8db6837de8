#include "client/sweep_commands.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/command.h"
#include "client/custom_kernel.h"
#include "client/listing_output.h"
#include "client/render.h"
#include "client/request_builder.h"
#include "client/request_text.h"
#include "client/stream_resume.h"
#include "client/sweep_axes.h"
#include "client/sweep_pages.h"
#include "client/sweep_plot.h"
#include "client/sweep_watch_summary.h"
#include "client/table.h"
#include "client/terminal_output.h"
#include "client/workload_flag_help.h"
#include "common/experiment_states.h"
#include "common/field_text.h"
#include "common/terminal_text.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace gpuprof::client {
namespace {

using ::google::protobuf::FieldDescriptor;
using ::grpc::ClientContext;

constexpr char kClearLine[] = "\r\033[K";

}  // namespace

FlagSpec SweepTargetFlag() {
  return {.name = "target",
          .value_syntax = "ADDR",
          .help = "gpuprofd: host:port or unix:/path (default: $GPUPROF_TARGET)"};
}

FlagSpec FormatFlag() {
  return {.name = "format",
          .value_syntax = "table|csv|jsonl|markdown",
          .help = "how points are printed (default: table)"};
}

namespace {

// The live table's header, in the widths its rows are printed in.
std::string FixedWidthHeader(const std::vector<std::string>& axes,
                             const std::vector<size_t>& widths) {
  std::vector<std::string> header;
  for (const std::string& column : SweepColumns(axes)) {
    header.push_back(absl::AsciiStrToUpper(column));
  }
  return FixedWidthRow(header, widths, axes.size() + 3);
}

// ---- following a sweep: rows as points end, a progress line with an ETA ----

// A sweep of more than kMaxPointsShownOneByOne points is shown (as a table) by a line of
// counts every 100 ended points or 2 s, unless `every_event`.
int FollowSweep(Session& session, const std::string& id, int64_t from_seq, SweepFormat format,
                bool json_events, bool every_event) {
  v1::Sweep sweep;
  {
    v1::GetSweepRequest request;
    request.set_sweep_id(id);
    if (const int code =
            session.CallOrReport(&v1::Profiler::StubInterface::GetSweep, request, sweep);
        code != kExitOk) {
      return code;
    }
  }
  // The first page of points is enough for the columns' widths.
  const std::vector<std::string> axes = SweepAxisNames(sweep);
  const std::vector<size_t> widths = SweepColumnWidths(sweep);
  const bool table = format == SweepFormat::kTable;
  const int total_points = SweepPointTotal(sweep);
  const absl::Time created = ToTime(sweep.created());
  std::optional<SweepWatchSummary> summary;
  if (!json_events && SummariseSweepWatch(total_points, table, every_event)) {
    summary.emplace(total_points, created);
  }
  const bool live =
      session.env().stdout_is_terminal && table && !json_events && !summary.has_value();
  // Summaries go where they do not spoil machine-readable output.
  std::ostream& notes = table && !json_events ? session.out() : session.err();
  if (summary.has_value()) {
    notes << id << ": " << total_points << " points; a line every "
          << SweepWatchSummary::Cadence().every_points << " ended points or "
          << absl::FormatDuration(SweepWatchSummary::Cadence().every)
          << " (--every-event: a row per point)\n";
  } else if (!json_events) {
    if (table) {
      session.out() << FixedWidthHeader(axes, widths);
    } else {
      session.out() << SweepHeaderLine(axes, format);
    }
  }

  v1::WatchSweepRequest request;
  request.set_sweep_id(id);
  request.set_from_seq(from_seq);
  if (const absl::Status text = CheckRequestIsUtf8(request); !text.ok()) {
    return ReportUsageError(session.env(), text.message(), "sweep watch");
  }
  auto context = std::make_unique<ClientContext>();
  auto reader = session.profiler().WatchSweep(context.get(), request);
  v1::SweepEvent event;
  int64_t last_seq = from_seq - 1;
  v1::SweepState state = sweep.state();
  std::string ended;
  bool live_showing = false;
  int resumes = 0;
  grpc::Status status;
  // Cut off for reading too slowly (a paused terminal), the stream is watched again from the
  // seq the daemon names.
  while (true) {
    while (reader->Read(&event)) {
      resumes = 0;
      last_seq = event.seq();
      state = event.state();
      if (json_events) {
        session.out() << JsonLine(event) << "\n";
      } else if (summary.has_value()) {
        if (auto line = summary->OnEvent(event, session.now())) notes << *line << "\n";
      } else if (event.has_point() && IsTerminalState(event.point().state())) {
        if (live_showing) WriteTerminalControl(session.out(), kClearLine);
        live_showing = false;
        session.out() << (table ? FixedWidthRow(SweepPointCells(event.point(), axes, true), widths,
                                                axes.size() + 3)
                                : SweepPointLine(event.point(), axes, format));
      }
      if (event.payload_case() == v1::SweepEvent::kEnded) ended = event.ended();
      if (live) {
        const int total = event.points_total() > 0 ? event.points_total() : total_points;
        WriteTerminalControl(session.out(), kClearLine);
        session.out() << SweepProgressLine(total, event.points_finished() + event.points_failed(),
                                           event.points_running(), event.points_failed(),
                                           session.now() - created);
        live_showing = true;
      }
      session.out().flush();
    }
    status = reader->Finish();
    const std::optional<int64_t> resume_from = ResumeFromSeq(*context, status);
    if (!resume_from.has_value() || resumes == kMaxStreamResumes) break;
    ++resumes;
    if (live_showing) WriteTerminalControl(session.out(), kClearLine);
    live_showing = false;
    session.err() << "note: " << EscapeForTerminal(status.error_message())
                  << "; watching again from seq " << *resume_from << "\n";
    request.set_from_seq(*resume_from);
    context = std::make_unique<ClientContext>();
    reader = session.profiler().WatchSweep(context.get(), request);
  }
  if (live_showing) WriteTerminalControl(session.out(), kClearLine);
  if (!status.ok()) {
    const int code = session.ReportRpcError(status);
    session.err() << "resume with: gpuprof sweep watch " << id << " --from-seq " << last_seq + 1
                  << "\n";
    return code;
  }
  if (state == v1::SWEEP_RUNNING || state == v1::SWEEP_STATE_UNSPECIFIED) {
    session.err() << "error: the event stream ended before the sweep did; resume with: "
                  << "gpuprof sweep watch " << id << " --from-seq " << last_seq + 1 << "\n";
    return kExitNotFinished;
  }
  if (!json_events) {
    if (summary.has_value()) notes << summary->FinalLine(session.now()) << "\n";
    notes << id << ": " << SweepStateName(state)
          << (ended.empty() ? "" : " (" + EscapeForTerminal(ended) + ")") << ", took "
          << FormatElapsed(session.now() - created) << "\n";
  }
  return state == v1::SWEEP_FINISHED ? kExitOk : kExitNotFinished;
}

absl::StatusOr<SweepFormat> FormatOf(const ParsedArgs& args) {
  if (args.Switch("json")) return SweepFormat::kJsonLines;
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok())
    return absl::InvalidArgumentError(absl::StrCat("--format: ", format.status().message()));
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
          {.name = "every-event",
           .is_switch = true,
           .help = "with --follow: a row per point even for a sweep of more than 50 points "
                   "(else a line of counts every 100 points or 2s)"},
          {.name = "node-wait",
           .value_syntax = "DURATION",
           .help = "across a fleet, how long --follow waits for a node that stopped answering "
                   "(default 10m)"},
          FormatFlag(),
          {.name = "json",
           .is_switch = true,
           .help = "the Sweep as JSON (with --follow: NDJSON events)"},
          SweepTargetFlag(),
          HelpFlag()};
}

constexpr absl::string_view kAxisSyntaxHelp =
    "axes: any workload or common flag given several values becomes an axis:\n"
    "  lists           --tokens 1,64,512,4Ki  --dtype bf16,fp16  --causal=true,false\n"
    "  ranges          --hidden 1024:8192:1024 (START:END[:STEP], integers, END included)\n"
    "  powers of two   --tokens pow2:1:64Ki\n"
    "Points are every combination (the last axis fastest) or, with --zip, the i-th value of\n"
    "every axis. Each point is an ordinary experiment; points share the machine fairly with\n"
    "other users' experiments.\n";

std::string SweepSubmitHelp(const ExperimentRequestBuilder& builder) {
  return absl::StrCat("usage: gpuprof sweep ", builder.workload(),
                      " [flags, some with several values] [--zip] [--max-gpus N] [--follow]\n\n",
                      kAxisSyntaxHelp, "\n", builder.workload(), " flags:\n",
                      FormatFlagHelp(DescribedWorkloadFlags(builder)),
                      builder.custom_kernel_flags().empty()
                          ? ""
                          : absl::StrCat("\ncustom kernel flags (--kernel-file a.cu,b.cu[,ours]: "
                                         "the kernel as an axis):\n",
                                         FormatFlagHelp(DescribedCustomKernelFlags(builder))),
                      "\ncommon flags:\n", FormatFlagHelp(builder.common_flags()),
                      "\nsweep flags:\n", FormatFlagHelp(SweepSubmitFlags()));
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
  if (!builder.ok()) return done(ReportUsageError(env, builder.status().message(), "sweep"));
  const std::string help_command = absl::StrCat("sweep ", args[0]);
  std::vector<FlagSpec> flags = builder->workload_flags();
  for (const auto& group :
       {builder->custom_kernel_flags(), builder->common_flags(), SweepSubmitFlags()}) {
    flags.insert(flags.end(), group.begin(), group.end());
  }
  const std::vector<std::string> words(args.begin() + 1, args.end());
  if (const absl::Status refused = RefuseCustomKernelFlags(*builder, words); !refused.ok()) {
    return done(ReportUsageError(env, refused.message(), help_command));
  }
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(words, flags, {.switch_value_lists = true});
  if (!parsed.ok()) return done(ReportUsageError(env, parsed.status().message(), help_command));
  if (parsed->Switch("help")) {
    *env.out << SweepSubmitHelp(*builder);
    return done(kExitOk);
  }
  if (!parsed->positionals.empty()) {
    return done(ReportUsageError(
        env, absl::StrCat("unexpected argument \"", parsed->positionals[0], "\""), help_command));
  }
  absl::StatusOr<SweepFormat> format = FormatOf(*parsed);
  if (!format.ok()) return done(ReportUsageError(env, format.status().message(), help_command));

  v1::SweepRequest request;
  // --kernel-file a.cu,b.cu[,ours]: the kernel as an axis, each point one source.
  std::vector<std::string> kernel_files;
  for (const std::string& value : parsed->GetAll(kKernelFileFlag)) {
    for (absl::string_view entry : absl::StrSplit(value, ',')) {
      kernel_files.emplace_back(absl::StripAsciiWhitespace(entry));
    }
  }
  const bool kernel_axis = kernel_files.size() > 1;
  if (kernel_axis) {
    absl::StatusOr<v1::SweepAxis> axis = KernelSweepAxis(kernel_files, parsed->Get("kernel-name"));
    if (!axis.ok()) return done(ReportUsageError(env, axis.status().message(), help_command));
    *request.add_axes() = *std::move(axis);
  }
  ParsedArgs base_args;
  for (const FlagValue& flag : parsed->flags) {
    if (kernel_axis && flag.name == kKernelFileFlag) continue;
    const FieldDescriptor* field = builder->FieldForFlag(flag.name);
    // Only a request's own fields make axes: a list given to a sweep's switch (--follow) is
    // refused, not read as false.
    const auto spec = std::find_if(flags.begin(), flags.end(),
                                   [&](const FlagSpec& f) { return f.name == flag.name; });
    if (field == nullptr && spec != flags.end() && spec->is_switch &&
        absl::StrContains(flag.value, ',')) {
      return done(ReportUsageError(
          env,
          absl::StrCat("--", flag.typed_name, ": takes one value; only a request's fields ",
                       "can be an axis"),
          help_command));
    }
    if (field != nullptr) {
      absl::StatusOr<std::optional<v1::SweepAxis>> axis = AxisFromFlag(field, flag.value);
      if (!axis.ok()) {
        return done(ReportUsageError(
            env, absl::StrCat("--", flag.typed_name, ": ", axis.status().message()), help_command));
      }
      if (axis->has_value()) {
        (*axis)->set_field(builder->ApiFieldName(flag.name));
        // Each value as if given alone: a 0 the daemon would replace is refused here too.
        std::vector<std::string> values((*axis)->values().begin(), (*axis)->values().end());
        if ((*axis)->has_range()) values.push_back(absl::StrCat((*axis)->range().start()));
        for (const std::string& value : values) {
          ParsedArgs one;
          one.flags.push_back({flag.name, flag.typed_name, value});
          const absl::StatusOr<v1::ExperimentRequest> point = builder->Build(one);
          const absl::Status zeros =
              point.ok() ? CheckNoSilentZeros(*builder, one, *point) : absl::OkStatus();
          if (!zeros.ok()) return done(ReportUsageError(env, zeros.message(), help_command));
        }
        *request.add_axes() = **axis;
        continue;
      }
    }
    base_args.flags.push_back(flag);
  }
  if (request.axes().empty()) {
    return done(ReportUsageError(
        env,
        "a sweep needs an axis: give a flag several values, e.g. --tokens 1,64,512, "
        "--hidden 1024:8192:1024 or --tokens pow2:1:64Ki",
        help_command));
  }
  absl::StatusOr<v1::ExperimentRequest> base = builder->Build(base_args);
  if (!base.ok()) return done(ReportUsageError(env, base.status().message(), help_command));
  if (const absl::Status zeros = CheckNoSilentZeros(*builder, base_args, *base); !zeros.ok()) {
    return done(ReportUsageError(env, zeros.message(), help_command));
  }
  // One kernel file: every point runs it; several: the axis above holds them.
  if (const absl::Status kernel =
          kernel_axis ? CheckCustomKernelFlags(*builder, *parsed, *base, kernel_files)
                      : ApplyKernelFile(*builder, base_args, *base);
      !kernel.ok()) {
    return done(ReportUsageError(env, kernel.message(), help_command));
  }
  if (kernel_axis && base->has_custom_kernel()) base->mutable_custom_kernel()->clear_kernel_name();
  // Empty means "me, as the daemon authenticates me"; another name needs an admin.
  if (base->user().empty() && explicit_user.has_value()) base->set_user(*explicit_user);
  request.set_user(base->user());
  request.set_description(base->description());
  *request.mutable_base() = *std::move(base);
  if (parsed->Switch("zip")) request.set_combination(v1::SweepRequest::ZIPPED);
  if (const auto max_gpus = parsed->Get("max-gpus"); max_gpus.has_value()) {
    int32_t cap = 0;
    if (!absl::SimpleAtoi(*max_gpus, &cap)) {
      return done(ReportUsageError(
          env, absl::StrCat("--max-gpus: \"", *max_gpus, "\" is not a number of GPUs"),
          help_command));
    }
    request.set_max_concurrent_gpus(cap);
  }

  return SweepSubmission{std::move(request), *std::move(parsed), *format};
}

namespace {

int RunSweepSubmit(const std::vector<std::string>& args, const ClientEnvironment& env,
                   const SessionMaker& make_session, const std::optional<std::string>& user) {
  int exit_code = kExitOk;
  std::optional<SweepSubmission> submission = ParseSweepSubmission(args, env, user, exit_code);
  if (!submission.has_value()) return exit_code;
  const ParsedArgs* parsed = &submission->args;
  const v1::SweepRequest& request = submission->request;
  const SweepFormat* format = &submission->format;
  absl::StatusOr<Session> made = make_session(*parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  v1::Sweep sweep;
  // Every point is validated and stored before the answer: give large sweeps time.
  if (const int code =
          session.CallOrReport(&v1::Profiler::StubInterface::SubmitSweep, request, sweep,
                               std::max(env.unary_rpc_deadline, absl::Minutes(5)));
      code != kExitOk) {
    return code;
  }
  if (parsed->Switch("follow")) {
    if (!parsed->Switch("json")) {
      session.err() << "submitted " << sweep.id() << ": " << SweepPointTotal(sweep) << " points\n";
    }
    return FollowSweep(session, sweep.id(), 1, *format, parsed->Switch("json"),
                       parsed->Switch("every-event"));
  }
  if (parsed->Switch("json")) {
    session.out() << JsonLine(sweep) << "\n";
  } else {
    session.out() << "submitted " << sweep.id() << ": " << SweepPointTotal(sweep)
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
  int (*run)(Session& session, const ParsedArgs& args);
};

std::vector<FlagSpec> SweepGetFlags() {
  return {FormatFlag(),
          {.name = "json", .is_switch = true, .help = "the Sweep as JSON"},
          SweepTargetFlag(),
          HelpFlag()};
}

// The points are read a page at a time and printed as they come: a sweep of one page as one
// table, a larger one row by row in the first page's column widths.
int RunSweepGet(Session& session, const ParsedArgs& args) {
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok()) return ReportUsageError(session.env(), format.status().message(), "sweep get");
  const std::string& id = args.positionals[0];
  if (args.Switch("json")) {
    v1::Sweep sweep;
    if (const grpc::Status status = GetWholeSweep(session, id, sweep); !status.ok()) {
      return session.ReportRpcError(status);
    }
    session.out() << JsonLine(sweep) << "\n";
    return kExitOk;
  }
  const bool table = *format == SweepFormat::kTable;
  bool first = true;
  std::vector<std::string> axes;
  std::vector<size_t> widths;
  const grpc::Status status = ForEachSweepPage(session, id, [&](const v1::Sweep& page) {
    if (first) {
      first = false;
      if (table) {
        session.out() << RenderSweepSummary(page, session.now(), session.env().time_zone) << "\n";
      }
      if (page.next_points_page_token().empty()) {
        session.out() << RenderSweepPoints(page, *format);
        return;
      }
      axes = SweepAxisNames(page);
      widths = SweepColumnWidths(page);
      session.out() << (table ? FixedWidthHeader(axes, widths) : SweepHeaderLine(axes, *format));
    }
    for (const v1::SweepPoint& point : page.points()) {
      session.out() << (table ? FixedWidthRow(SweepPointCells(point, axes, true), widths,
                                              axes.size() + 3)
                              : SweepPointLine(point, axes, *format));
    }
    session.out().flush();
  });
  return status.ok() ? kExitOk : session.ReportRpcError(status);
}

std::vector<FlagSpec> SweepListFlags() {
  return {{.name = "user", .value_syntax = "NAME", .help = "only this user's sweeps"},
          {.name = "mine", .is_switch = true, .help = "only your sweeps"},
          {.name = "limit", .value_syntax = "N", .help = "sweeps per page (daemon default 50)"},
          {.name = "page-token", .value_syntax = "TOKEN", .help = "continue a previous listing"},
          {.name = "json",
           .is_switch = true,
           .help = "one Sweep per line as JSON (NDJSON); damaged rows and the next page's token "
                   "go to stderr"},
          ListingStyleFlags()[0],
          ListingStyleFlags()[1],
          SweepTargetFlag(),
          HelpFlag()};
}

int PrintSweepList(Session& session, const v1::ListSweepsResponse& response, ListingStyle style) {
  session.err() << RenderDamagedRows(response.damaged());
  if (style == ListingStyle::kTable && response.sweeps().empty()) {
    session.out() << "no sweeps\n";
  } else {
    std::vector<std::string> ids;
    for (const v1::Sweep& sweep : response.sweeps()) ids.push_back(sweep.id());
    session.out() << RenderListing(
        style, response.sweeps(), RenderSweepList(response.sweeps(), session.env().time_zone), ids);
  }
  session.err() << PagingHint(response.next_page_token(), /*offer_all=*/false);
  return kExitOk;
}

int RunSweepList(Session& session, const ParsedArgs& args) {
  const absl::StatusOr<ListingStyle> style = ListingStyleOf(args);
  if (!style.ok()) return ReportUsageError(session.env(), style.status().message(), "sweep list");
  v1::ListSweepsRequest request;
  if (args.Switch("mine")) request.set_user(session.user());
  if (const auto user = args.Get("user"); user.has_value()) request.set_user(*user);
  const absl::StatusOr<std::optional<int32_t>> page_size = ParseCountFlag(args, "limit");
  if (!page_size.ok()) {
    return ReportUsageError(session.env(), std::string(page_size.status().message()), "sweep list");
  }
  if (page_size->has_value()) request.set_page_size(**page_size);
  request.set_page_token(args.Get("page-token").value_or(""));
  return session.CallAndPrint(&v1::Profiler::StubInterface::ListSweeps, request, /*json=*/false,
                              [&](const v1::ListSweepsResponse& response) {
                                return PrintSweepList(session, response, *style);
                              });
}

std::vector<FlagSpec> SweepCancelFlags() {
  return {{.name = "reason", .value_syntax = "TEXT", .help = "why, kept with the sweep"},
          {.name = "json", .is_switch = true, .help = "the Sweep as JSON"},
          SweepTargetFlag(),
          HelpFlag()};
}

int RunSweepCancel(Session& session, const ParsedArgs& args) {
  v1::CancelSweepRequest request;
  request.set_sweep_id(args.positionals[0]);
  // Without --reason the daemon records who cancelled it ("cancelled by NAME").
  request.set_reason(args.Get("reason").value_or(""));
  return session.CallAndPrint(&v1::Profiler::StubInterface::CancelSweep, request,
                              args.Switch("json"), [&session](const v1::Sweep& sweep) {
                                session.out()
                                    << EscapeForTerminal(sweep.id()) << ": "
                                    << SweepStateName(sweep.state()) << " ("
                                    << EscapeForTerminal(sweep.reason()) << "); "
                                    << sweep.points_finished() << " points had finished\n";
                                return kExitOk;
                              });
}

std::vector<FlagSpec> SweepWatchFlags() {
  return {{.name = "from-seq", .value_syntax = "N", .help = "replay stored events from N"},
          {.name = "every-event",
           .is_switch = true,
           .help = "a row per point even for a sweep of more than 50 points (else a line of "
                   "counts every 100 points or 2s)"},
          FormatFlag(),
          {.name = "json", .is_switch = true, .help = "each SweepEvent as a line of JSON"},
          SweepTargetFlag(),
          HelpFlag()};
}

int RunSweepWatch(Session& session, const ParsedArgs& args) {
  int64_t from_seq = 1;
  if (const auto from = args.Get("from-seq"); from.has_value()) {
    if (!absl::SimpleAtoi(*from, &from_seq) || from_seq < 0) {
      return ReportUsageError(session.env(),
                              absl::StrCat("--from-seq: \"", *from, "\" is not a number"),
                              "sweep watch");
    }
  }
  absl::StatusOr<SweepFormat> format = ParseSweepFormat(args.Get("format").value_or("table"));
  if (!format.ok())
    return ReportUsageError(session.env(), format.status().message(), "sweep watch");
  return FollowSweep(session, args.positionals[0], from_seq, *format, args.Switch("json"),
                     args.Switch("every-event"));
}

std::vector<FlagSpec> SweepPlotFlags() {
  return {{.name = "output", .value_syntax = "FILE", .help = "the .svg or .png to write (-o)"},
          {.name = "x",
           .value_syntax = "AXIS",
           .help = "the axis on x (default: the first numeric one)"},
          {.name = "y",
           .value_syntax = "figure|pct-of-copy",
           .help = "the figure (bandwidth, TFLOP/s, busbw, op/s) or % of copy bandwidth"},
          {.name = "title", .value_syntax = "TEXT", .help = "the plot's title"},
          SweepTargetFlag(),
          HelpFlag()};
}

int RunSweepPlot(Session& session, const ParsedArgs& args) {
  const auto output = args.Get("output");
  if (!output.has_value()) {
    return ReportUsageError(session.env(), "sweep plot needs -o FILE.svg or -o FILE.png",
                            "sweep plot");
  }
  PlotOptions options;
  options.x_axis = args.Get("x").value_or("");
  options.title = args.Get("title").value_or("");
  const std::string y = args.Get("y").value_or("figure");
  if (y != "figure" && y != "pct-of-copy") {
    return ReportUsageError(
        session.env(), absl::StrCat("--y: \"", y, "\" is not figure or pct-of-copy"), "sweep plot");
  }
  options.pct_of_copy = y == "pct-of-copy";
  v1::Sweep sweep;
  if (const grpc::Status status = GetWholeSweep(session, args.positionals[0], sweep);
      !status.ok()) {
    return session.ReportRpcError(status);
  }
  const absl::StatusOr<PlotData> data = BuildPlotData(sweep, options);
  if (!data.ok()) return ReportUsageError(session.env(), data.status().message(), "sweep plot");
  const absl::Status written = WriteSweepPlot(sweep, options, *output);
  if (!written.ok()) {
    session.err() << "error: " << written.message() << "\n";
    return absl::IsInvalidArgument(written) ? kExitUsage : kExitOtherError;
  }
  size_t points = 0;
  for (const PlotSeries& series : data->series) points += series.points.size();
  session.out() << "wrote " << *output << ": " << data->y_label << " against " << data->x_label
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
      {"watch", "sweep watch ID [--from-seq N] [--every-event] [--format F] [--json]",
       "follow a sweep: a row per point as it ends (over 50 points: counts every 100 points "
       "or 2s), progress and ETA",
       1, SweepWatchFlags, RunSweepWatch},
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
      "\nformats: table (default), csv, jsonl, markdown. csv and jsonl carry the same columns\n"
      "at full precision (point, the axes, state, experiment, gpu_ids, gpu, figure, value,\n"
      "unit, noise, samples, min_us, median_us, p90_us, p99_us, gb_per_s, tflops,\n"
      "pct_of_copy), empty (null) where not measured; sweep get --json is the whole Sweep.\n"
      "exit codes: --follow and watch exit 0 when every point finished, 1 otherwise.\n");
}

}  // namespace

int RunSweepCommand(const std::vector<std::string>& args, const ClientEnvironment& env,
                    const SessionMaker& make_session, const std::optional<std::string>& user) {
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
    if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), help_command);
    if (parsed->Switch("help")) {
      *env.out << "usage: gpuprof " << subcommand.usage << "\n\n"
               << subcommand.summary << "\n\nflags:\n"
               << FormatFlagHelp(subcommand.flags());
      return kExitOk;
    }
    if (static_cast<int>(parsed->positionals.size()) != subcommand.positionals) {
      return ReportUsageError(env, absl::StrCat("usage: gpuprof ", subcommand.usage), help_command);
    }
    absl::StatusOr<Session> session = make_session(*parsed);
    if (!session.ok()) return ReportUsageError(env, session.status().message(), "");
    return subcommand.run(*session, *parsed);
  }
  if (absl::StartsWith(args[0], "-")) {
    return ReportUsageError(env, "the workload (or get, list, cancel, watch, plot) comes first",
                            "sweep");
  }
  // A typo of a subcommand is not an unknown workload.
  std::vector<std::string> names = WorkloadNames();
  const bool workload = std::find(names.begin(), names.end(), args[0]) != names.end();
  for (const SweepSubcommand& subcommand : SweepSubcommands()) {
    names.emplace_back(subcommand.name);
  }
  if (const std::string closest = ClosestName(args[0], names); !workload && !closest.empty()) {
    return ReportUsageError(env,
                            absl::StrCat("unknown sweep subcommand or workload \"", args[0],
                                         "\" (did you mean ", closest, "?)"),
                            "sweep");
  }
  return RunSweepSubmit(args, env, make_session, user);
}

int RunSweepCommand(const Invocation& invocation, const std::vector<std::string>& args) {
  return RunSweepCommand(
      args, invocation.env,
      [&invocation](const ParsedArgs& parsed) { return invocation.MakeSession(parsed); },
      invocation.globals.user);
}

int SweepHelpCommand(const ClientEnvironment& env, const std::vector<std::string>& args) {
  if (args.empty()) {
    *env.out << SweepHelp();
    return kExitOk;
  }
  // A subcommand's or a workload's own help; printing help needs no daemon.
  std::vector<std::string> words = {args[0], "--help"};
  return RunSweepCommand(
      words, env,
      [](const ParsedArgs&) -> absl::StatusOr<Session> {
        return absl::InternalError("help needs no daemon");
      },
      std::nullopt);
}

std::vector<std::pair<std::string, std::vector<FlagSpec>>> SweepSubcommandFlags() {
  std::vector<std::pair<std::string, std::vector<FlagSpec>>> flags;
  for (const SweepSubcommand& subcommand : SweepSubcommands()) {
    flags.emplace_back(std::string(subcommand.name), subcommand.flags());
  }
  return flags;
}

std::vector<FlagSpec> SweepSubmitFlagSpecs() { return SweepSubmitFlags(); }

}  // namespace gpuprof::client
