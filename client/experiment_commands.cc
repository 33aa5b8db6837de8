#include "client/experiment_commands.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/custom_kernel.h"
#include "client/event_printer.h"
#include "client/listing_output.h"
#include "client/render.h"
#include "client/request_builder.h"
#include "client/request_text.h"
#include "client/story_command.h"
#include "client/stream_resume.h"
#include "client/submit_command_line.h"
#include "client/trace_command.h"
#include "client/workload_flag_help.h"
#include "common/enum_names.h"
#include "common/experiment_states.h"
#include "common/field_text.h"
#include "common/terminal_text.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace gpuprof::client {
namespace {

using ::grpc::ClientContext;

constexpr absl::string_view kValueSyntaxHelp =
    "value syntax:\n"
    "  integers   4096, 32K (= 32000), 1.5M, 4Ki (= 4096), 0x10; for BYTES K/M/G are 1024-based\n"
    "             and may end in B: 64M = 64MiB = 67108864\n"
    "  enums      the value's name in any case, with '-' or '_': bf16, fused-kv, all-reduce\n"
    "  booleans   --flag, --flag=true, --flag=false\n"
    "  durations  500ms, 90s, 10m, 1h30m\n"
    "  messages   their fields joined by ':', e.g. --vocab-range 0:32000\n"
    "  lists      comma-separated or the flag repeated: --gpus 0,1; --label a=1 --label b=2\n"
    "The client checks syntax only; the daemon checks ranges and says what it rejects.\n";

// Reads a Submit/Watch stream to its end, rendering each event; a stream cut off for reading
// too slowly is watched again from where it stopped.
int FollowEvents(Session& session, std::unique_ptr<ClientContext> context,
                 std::unique_ptr<grpc::ClientReaderInterface<v1::ExperimentEvent>> reader,
                 bool json) {
  EventPrinter printer(session.out(), {.json = json,
                                       .live_line = session.env().stdout_is_terminal && !json,
                                       .terminal_width = session.env().terminal_width,
                                       .now = [&session] { return session.now(); }});
  v1::ExperimentEvent event;
  int64_t last_seq = 0;
  int resumes = 0;
  grpc::Status status;
  while (true) {
    while (reader->Read(&event)) {
      printer.Print(event);
      last_seq = event.seq();
      resumes = 0;
    }
    status = reader->Finish();
    const std::optional<int64_t> resume_from = ResumeFromSeq(*context, status);
    if (!resume_from.has_value() || printer.experiment_id().empty() || resumes == kMaxStreamResumes) {
      break;
    }
    ++resumes;
    session.err() << "note: " << EscapeForTerminal(status.error_message())
                  << "; watching again from seq " << *resume_from << "\n";
    v1::WatchRequest request;
    request.set_experiment_id(printer.experiment_id());
    request.set_from_seq(*resume_from);
    context = std::make_unique<ClientContext>();
    reader = session.profiler().Watch(context.get(), request);
  }
  printer.Finish();
  if (!status.ok()) {
    const int exit_code = session.ReportRpcError(status);
    if (!printer.experiment_id().empty()) {
      session.err() << "resume with: gpuprof watch " << EscapeForTerminal(printer.experiment_id())
                    << " --from-seq " << last_seq + 1 << "\n";
    }
    return exit_code;
  }
  if (printer.state() == v1::FINISHED) return kExitOk;
  // The user's source, not the run, failed: a usage error, as a request the daemon refuses.
  if (printer.kernel_did_not_compile()) return kExitUsage;
  if (!IsTerminalState(printer.state())) {
    session.err() << "error: the event stream ended before the experiment did";
    if (!printer.experiment_id().empty()) {
      session.err() << "; resume with: gpuprof watch " << EscapeForTerminal(printer.experiment_id())
                    << " --from-seq " << last_seq + 1;
    }
    session.err() << "\n";
  }
  return kExitNotFinished;
}

// ---- watch ----

std::vector<FlagSpec> WatchFlags() {
  return {{.name = "from-seq",
           .value_syntax = "N",
           .help = "replay stored events from this sequence number (default: all)"},
          JsonFlag("print each event as a line of JSON (NDJSON)"),
          TargetFlag(),
          HelpFlag()};
}

int RunWatch(Session& session, const ParsedArgs& args) {
  v1::WatchRequest request;
  request.set_experiment_id(args.positionals[0]);
  if (const auto from_seq = args.Get("from-seq"); from_seq.has_value()) {
    absl::StatusOr<int64_t> seq = ParseSizedInteger(*from_seq, SizeUnits::kCount);
    if (!seq.ok()) {
      return ReportUsageError(session.env(), absl::StrCat("--from-seq: ", seq.status().message()),
                              "watch");
    }
    request.set_from_seq(*seq);
  }
  if (const absl::Status text = CheckRequestIsUtf8(request); !text.ok()) {
    return ReportUsageError(session.env(), text.message(), "watch");
  }
  auto context = std::make_unique<ClientContext>();
  auto reader = session.profiler().Watch(context.get(), request);
  return FollowEvents(session, std::move(context), std::move(reader), args.Switch("json"));
}

// ---- list ----

std::vector<FlagSpec> ListFlags() {
  return {
      {.name = "user", .value_syntax = "NAME", .help = "only this user's experiments"},
      {.name = "mine", .is_switch = true, .help = "only your experiments"},
      {.name = "state",
       .repeatable = true,
       .value_syntax = absl::StrJoin(EnumChoices(v1::ExperimentState_descriptor()), "|"),
       .help = "only experiments in these states, comma-separated"},
      {.name = "workload",
       .value_syntax = absl::StrJoin(EnumChoices(v1::Workload_descriptor()), "|"),
       .help = "only this workload"},
      {.name = "limit", .value_syntax = "N", .help = "experiments per page (daemon default 50)"},
      {.name = "page-token", .value_syntax = "TOKEN", .help = "continue a previous listing"},
      {.name = "all", .is_switch = true, .help = "follow every page"},
      JsonFlag("one Experiment per line as JSON (NDJSON); damaged rows and the next page's "
               "token go to stderr"),
      ListingStyleFlags()[0],
      ListingStyleFlags()[1],
      TargetFlag(),
      HelpFlag(),
  };
}

// The request `list`'s flags ask for; a usage error's exit code when they do not parse.
std::optional<int> ListRequestFromArgs(Session& session, const ParsedArgs& args,
                                       v1::ListExperimentsRequest& request) {
  if (args.Has("user") && args.Switch("mine")) {
    return ReportUsageError(session.env(), "--user and --mine exclude each other", "list");
  }
  if (args.Switch("mine")) {
    // "Mine" is whoever the daemon authenticates us as, not $USER.
    v1::CallerInfo caller;
    if (const int code = session.CallOrReport(&v1::Profiler::StubInterface::WhoAmI, {}, caller);
        code != kExitOk) {
      return code;
    }
    request.set_user(session.explicit_user().value_or(caller.user()));
  }
  if (const auto user = args.Get("user"); user.has_value()) request.set_user(*user);
  for (const std::string& states : args.GetAll("state")) {
    for (absl::string_view state : absl::StrSplit(states, ',')) {
      auto value = ParseEnumValue(v1::ExperimentState_descriptor(), state);
      if (!value.ok()) {
        return ReportUsageError(session.env(), absl::StrCat("--state: ", value.status().message()),
                                "list");
      }
      request.add_states(static_cast<v1::ExperimentState>((*value)->number()));
    }
  }
  if (const auto workload = args.Get("workload"); workload.has_value()) {
    auto value = ParseEnumValue(v1::Workload_descriptor(), *workload);
    if (!value.ok()) {
      return ReportUsageError(session.env(), absl::StrCat("--workload: ", value.status().message()),
                              "list");
    }
    request.set_workload(static_cast<v1::Workload>((*value)->number()));
  }
  const absl::StatusOr<std::optional<int32_t>> page_size = ParseCountFlag(args, "limit");
  if (!page_size.ok()) {
    return ReportUsageError(session.env(), std::string(page_size.status().message()), "list");
  }
  if (page_size->has_value()) request.set_page_size(**page_size);
  request.set_page_token(args.Get("page-token").value_or(""));
  return std::nullopt;
}

// One page, or every page with `all_pages`.
grpc::Status FetchList(Session& session, v1::ListExperimentsRequest request, bool all_pages,
                       v1::ListExperimentsResponse& listed) {
  while (true) {
    v1::ListExperimentsResponse page;
    const grpc::Status status =
        session.Call(&v1::Profiler::StubInterface::ListExperiments, request, page);
    if (!status.ok()) return status;
    for (v1::Experiment& experiment : *page.mutable_experiments()) {
      *listed.add_experiments() = std::move(experiment);
    }
    for (v1::DamagedRow& row : *page.mutable_damaged()) *listed.add_damaged() = std::move(row);
    listed.set_next_page_token(page.next_page_token());
    // A token that does not change would loop forever.
    if (!all_pages || page.next_page_token().empty() ||
        page.next_page_token() == request.page_token()) {
      break;
    }
    request.set_page_token(page.next_page_token());
  }
  if (all_pages) listed.clear_next_page_token();
  return grpc::Status::OK;
}

int RunList(Session& session, const ParsedArgs& args) {
  const absl::StatusOr<ListingStyle> style = ListingStyleOf(args);
  if (!style.ok()) return ReportUsageError(session.env(), style.status().message(), "list");
  v1::ListExperimentsRequest request;
  if (auto usage = ListRequestFromArgs(session, args, request); usage.has_value()) return *usage;
  v1::ListExperimentsResponse listed;
  const grpc::Status status = FetchList(session, request, args.Switch("all"), listed);
  if (!status.ok()) return session.ReportRpcError(status);
  // Rows that do not parse are left out of the listing, not hidden: a line each on stderr.
  session.err() << RenderDamagedRows(listed.damaged());

  if (*style == ListingStyle::kTable && listed.experiments().empty()) {
    session.out() << "no experiments\n";
  } else {
    std::vector<std::string> ids;
    for (const v1::Experiment& experiment : listed.experiments()) ids.push_back(experiment.id());
    session.out() << RenderListing(*style, listed.experiments(),
                                   RenderExperimentTable(listed.experiments(), session.now(),
                                                         session.env().time_zone),
                                   ids);
  }
  // Hints on stderr: stdout holds the listing alone, whatever reads it.
  session.err() << PagingHint(listed.next_page_token(), /*offer_all=*/true);
  return kExitOk;
}

// ---- get ----

std::vector<FlagSpec> GetFlags() {
  return {JsonFlag("print the Experiment as JSON"),
          {.name = "command",
           .is_switch = true,
           .help = "print the gpuprof submit command line that runs it again (its workload's "
                   "parameters as run, the daemon's defaults filled in)"},
          {.name = "source",
           .is_switch = true,
           .help = "print the custom kernel's source exactly as submitted, nothing else"},
          TargetFlag(),
          HelpFlag()};
}

int RunGet(Session& session, const ParsedArgs& args) {
  v1::GetExperimentRequest request;
  request.set_experiment_id(args.positionals[0]);
  if (args.Switch("source")) {
    if (args.Switch("json") || args.Switch("command")) {
      return ReportUsageError(session.env(), "--source excludes --json and --command", "get");
    }
    v1::Experiment experiment;
    if (const int code =
            session.CallOrReport(&v1::Profiler::StubInterface::GetExperiment, request, experiment);
        code != kExitOk) {
      return code;
    }
    if (experiment.request().custom_kernel().source().empty()) {
      session.err() << "error: " << EscapeForTerminal(experiment.id())
                    << " ran our kernel: it has no source of its own\n";
      return kExitUsage;
    }
    // The bytes as submitted, for a file or a diff: nothing escaped, nothing added.
    session.out() << experiment.request().custom_kernel().source() << std::flush;
    return kExitOk;
  }
  if (args.Switch("command")) {
    if (args.Switch("json")) {
      return ReportUsageError(session.env(), "--command and --json exclude each other", "get");
    }
    v1::Experiment experiment;
    if (const int code =
            session.CallOrReport(&v1::Profiler::StubInterface::GetExperiment, request, experiment);
        code != kExitOk) {
      return code;
    }
    const absl::StatusOr<std::vector<std::string>> words =
        SubmitCommandWords(RequestToReproduce(experiment));
    if (!words.ok()) {
      session.err() << "error: " << words.status().message() << "\n";
      return kExitOtherError;
    }
    session.out() << ShellCommandLine(*words) << "\n";
    return kExitOk;
  }
  return session.CallAndPrint(&v1::Profiler::StubInterface::GetExperiment, request,
                              args.Switch("json"), [&session](const v1::Experiment& experiment) {
                                session.out() << RenderExperiment(experiment, session.now(),
                                                                  session.env().time_zone);
                                return kExitOk;
                              });
}

// ---- cancel ----

std::vector<FlagSpec> CancelFlags() {
  return {{.name = "reason",
           .value_syntax = "TEXT",
           .help = "why, kept with the experiment (default: \"cancelled by <you, as the "
                   "daemon knows you>\")"},
          JsonFlag("print the Experiment as JSON"),
          TargetFlag(),
          HelpFlag()};
}

int RunCancelOne(Session& session, const std::string& id, const ParsedArgs& args) {
  v1::CancelRequest request;
  request.set_experiment_id(id);
  // The API carries no caller identity; the reason at least records who asked.
  request.set_reason(args.Get("reason").value_or(""));
  // The daemon checks the caller owns the experiment (or is an admin) and records who it was.
  return session.CallAndPrint(&v1::Profiler::StubInterface::Cancel, request, args.Switch("json"),
                              [&session](const v1::Experiment& experiment) {
                                session.out() << EscapeForTerminal(experiment.id()) << ": "
                                              << StateName(experiment.state());
                                if (!experiment.reason().empty()) {
                                  session.out()
                                      << " (" << EscapeForTerminal(experiment.reason()) << ")";
                                }
                                session.out() << "\n";
                                return kExitOk;
                              });
}

// Each id in turn (`gpuprof list -q --state queued | xargs gpuprof cancel`): one that fails
// does not stop the others; the exit code is the first failure's.
int RunCancel(Session& session, const ParsedArgs& args) {
  int exit_code = kExitOk;
  for (const std::string& id : args.positionals) {
    const int code = RunCancelOne(session, id, args);
    if (exit_code == kExitOk) exit_code = code;
  }
  return exit_code;
}

// ---- trace, story (client/trace_command.h, client/story_command.h) ----

std::vector<FlagSpec> TraceFlags() {
  return {{.name = "output",
           .value_syntax = "PATH",
           .help = "where to write the Chrome trace JSON, -o for short; - for standard output, "
                   "a name ending in .gz for gzip (default: ID.trace.json)"},
          {.name = "gzip",
           .is_switch = true,
           .help = "write the trace gzipped (Perfetto opens it as it is); the default for a "
                   "PATH ending in .gz"},
          TargetFlag(),
          HelpFlag()};
}

int RunTrace(Session& session, const ParsedArgs& args) {
  ExperimentActivity activity;
  const grpc::Status status =
      FetchExperimentActivity(session.profiler(), args.positionals[0], activity);
  if (!status.ok()) return session.ReportRpcError(status);
  const bool gzip = args.Switch("gzip");
  const std::string path = args.Get("output").value_or(
      absl::StrCat(args.positionals[0], ".trace.json", gzip ? ".gz" : ""));
  if (const absl::Status written =
          WriteChromeTrace(activity, path, TraceWantsGzip(path, gzip), session.out());
      !written.ok()) {
    session.err() << "error: " << written.message() << "\n";
    return kExitOtherError;
  }
  // Standard output carries the trace: the summary goes to standard error.
  (path == kStandardOutputPath ? session.err() : session.out())
      << DescribeWrittenTrace(activity, path);
  return kExitOk;
}

std::vector<FlagSpec> StoryFlags() { return {TargetFlag(), HelpFlag()}; }

int RunStory(Session& session, const ParsedArgs& args) {
  ExperimentActivity activity;
  const grpc::Status status =
      FetchExperimentActivity(session.profiler(), args.positionals[0], activity);
  if (!status.ok()) return session.ReportRpcError(status);
  session.out() << RenderExperimentStory(activity);
  return kExitOk;
}

// ---- submit ----

}  // namespace

std::vector<FlagSpec> SubmitOutputFlags() {
  return {{.name = "follow",
           .is_switch = true,
           .help = "stream progress and the result until the experiment ends"},
          JsonFlag("print each event as a line of JSON (NDJSON)"),
          TargetFlag(),
          HelpFlag()};
}

namespace {

std::string SubmitHelp() {
  auto builder = ExperimentRequestBuilder::ForWorkload(WorkloadNames()[0]);
  return absl::StrCat(
      "usage: gpuprof submit <workload> [workload flags] [common flags] [--follow] [--json]\n\n"
      "workloads: ",
      absl::StrJoin(WorkloadNames(), ", "),
      " (gpuprof submit <workload> --help lists its flags)\n\n"
      "Queues an experiment. Without --follow, prints its id and returns; the experiment keeps\n"
      "running (gpuprof watch ID follows it). With --follow, streams progress and the result;\n"
      "exits 0 if the experiment finished, 2 if its custom kernel did not compile (the\n"
      "compiler's messages are printed), 1 if it did not finish otherwise.\n\n"
      "common flags:\n",
      builder.ok() ? FormatFlagHelp(builder->common_flags()) : "", "\noutput flags:\n",
      FormatFlagHelp(SubmitOutputFlags()), "\n", kValueSyntaxHelp);
}

std::string SubmitWorkloadHelp(const ExperimentRequestBuilder& builder) {
  std::string help = absl::StrCat(
      "usage: gpuprof submit ", builder.workload(), " [flags] [--follow] [--json]\n\n",
      builder.workload(), " flags (fields of ", builder.spec_type()->full_name(),
      "; unset fields get the daemon's defaults, shown for a request that sets nothing "
      "else):\n",
      FormatFlagHelp(DescribedWorkloadFlags(builder)));
  if (!builder.unsettable_fields().empty()) {
    absl::StrAppend(&help, "  (not settable from the command line: ",
                    absl::StrJoin(builder.unsettable_fields(), ", "), ")\n");
  }
  if (!builder.custom_kernel_flags().empty()) {
    absl::StrAppend(&help,
                    "\ncustom kernel flags (your own kernel in place of ours; contract and "
                    "examples in\ndocs/custom-kernels.md; an option that starts with -- is "
                    "given as --kernel-option=--use_fast_math):\n",
                    FormatFlagHelp(DescribedCustomKernelFlags(builder)));
  }
  absl::StrAppend(&help, "\ncommon flags:\n", FormatFlagHelp(builder.common_flags()),
                  "\noutput flags:\n", FormatFlagHelp(SubmitOutputFlags()), "\n", kValueSyntaxHelp);
  return help;
}

int RunSubmit(const Invocation& invocation, const std::vector<std::string>& args) {
  const ClientEnvironment& env = invocation.env;
  if (args.empty() || args[0] == "--help") {
    if (args.empty()) {
      return ReportUsageError(
          env, absl::StrCat("submit needs a workload: ", absl::StrJoin(WorkloadNames(), ", ")),
          "submit");
    }
    *env.out << SubmitHelp();
    return kExitOk;
  }
  if (absl::StartsWith(args[0], "-")) {
    return ReportUsageError(env,
                            absl::StrCat("the workload comes first: gpuprof submit <",
                                         absl::StrJoin(WorkloadNames(), "|"), "> [flags]"),
                            "submit");
  }
  absl::StatusOr<ExperimentRequestBuilder> builder = ExperimentRequestBuilder::ForWorkload(args[0]);
  if (!builder.ok()) return ReportUsageError(env, builder.status().message(), "submit");
  const std::string help_command = absl::StrCat("submit ", args[0]);

  std::vector<FlagSpec> flags = builder->workload_flags();
  for (const auto& group :
       {builder->custom_kernel_flags(), builder->common_flags(), SubmitOutputFlags()}) {
    flags.insert(flags.end(), group.begin(), group.end());
  }
  const std::vector<std::string> words(args.begin() + 1, args.end());
  if (const absl::Status refused = RefuseCustomKernelFlags(*builder, words); !refused.ok()) {
    return ReportUsageError(env, refused.message(), help_command);
  }
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(words, flags);
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), help_command);
  if (parsed->Switch("help")) {
    *env.out << SubmitWorkloadHelp(*builder);
    return kExitOk;
  }
  if (!parsed->positionals.empty()) {
    return ReportUsageError(
        env, absl::StrCat("unexpected argument \"", parsed->positionals[0], "\""), help_command);
  }
  absl::StatusOr<v1::ExperimentRequest> request = builder->Build(*parsed);
  if (!request.ok()) return ReportUsageError(env, request.status().message(), help_command);
  if (const absl::Status zeros = CheckNoSilentZeros(*builder, *parsed, *request); !zeros.ok()) {
    return ReportUsageError(env, zeros.message(), help_command);
  }
  // The source is read and checked here: a file that cannot be sent costs no RPC.
  if (const absl::Status kernel = ApplyKernelFile(*builder, *parsed, *request); !kernel.ok()) {
    return ReportUsageError(env, kernel.message(), help_command);
  }

  absl::StatusOr<Session> made = invocation.MakeSession(*parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  // Empty means "me, as the daemon authenticates me"; another name needs an admin.
  if (request->user().empty() && session.explicit_user().has_value()) {
    request->set_user(*session.explicit_user());
  }
  const bool json = parsed->Switch("json");
  auto context = std::make_unique<ClientContext>();
  auto reader = session.profiler().Submit(context.get(), *request);
  if (parsed->Switch("follow")) {
    return FollowEvents(session, std::move(context), std::move(reader), json);
  }

  v1::ExperimentEvent first;
  if (!reader->Read(&first)) {
    const grpc::Status status = reader->Finish();
    if (!status.ok()) return session.ReportRpcError(status);
    session.err() << "error: the daemon ended the Submit stream without an event\n";
    return kExitOtherError;
  }
  if (json) {
    session.out() << JsonLine(first) << "\n";
  } else {
    session.out() << "submitted " << EscapeForTerminal(first.experiment_id()) << ": "
                  << StateName(first.state().state());
    if (first.state().queue_position() > 0) {
      session.out() << " (position " << first.state().queue_position() << ")";
    }
    session.out() << "\n";
  }
  // Closing the stream only detaches: the experiment stays queued.
  context->TryCancel();
  reader->Finish();
  return kExitOk;
}

// ---- across a fleet: list every node; get, watch, cancel on the node holding the id ----

int RunFleetList(Fleet& fleet, const Command&, ParsedArgs args) {
  if (args.Has("page-token")) {
    return ReportUsageError(fleet.env(),
                            "--page-token continues one node's listing: add --node NAME", "list");
  }
  const absl::StatusOr<ListingStyle> style = ListingStyleOf(args);
  if (!style.ok()) return ReportUsageError(fleet.env(), style.status().message(), "list");
  v1::ListExperimentsRequest request;
  {
    Session session(fleet.env(), ConnectionOptions(), fleet.user());
    if (auto usage = ListRequestFromArgs(session, args, request); usage.has_value()) {
      return *usage;
    }
  }
  std::vector<v1::ListExperimentsResponse> listed(fleet.size());
  std::vector<NodeOutcome> outcomes = fleet.RunOnEveryNode([&](Session& session, size_t i) {
    const grpc::Status status = FetchList(session, request, args.Switch("all"), listed[i]);
    return status.ok() ? kExitOk : session.ReportRpcError(status);
  });
  // One listing, ids qualified by node (in the JSON too), newest first.
  google::protobuf::RepeatedPtrField<v1::Experiment> merged;
  for (size_t i = 0; i < fleet.size(); ++i) {
    for (v1::DamagedRow& row : *listed[i].mutable_damaged()) {
      row.set_id(absl::StrCat(fleet.node(i).name, "/", row.id()));
    }
    *fleet.env().err << RenderDamagedRows(listed[i].damaged());
    for (v1::Experiment& experiment : *listed[i].mutable_experiments()) {
      experiment.set_id(absl::StrCat(fleet.node(i).name, "/", experiment.id()));
      *merged.Add() = std::move(experiment);
    }
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const v1::Experiment& a, const v1::Experiment& b) {
                     return std::make_pair(a.created().seconds(), a.created().nanos()) >
                            std::make_pair(b.created().seconds(), b.created().nanos());
                   });
  Session session(fleet.env(), ConnectionOptions(), std::nullopt);
  if (*style == ListingStyle::kTable && merged.empty()) {
    *fleet.env().out << "no experiments\n";
  } else {
    std::vector<std::string> ids;
    for (const v1::Experiment& experiment : merged) ids.push_back(experiment.id());
    *fleet.env().out << RenderListing(
        *style, merged, RenderExperimentTable(merged, session.now(), fleet.env().time_zone), ids);
  }
  for (size_t i = 0; i < fleet.size(); ++i) {
    if (!listed[i].next_page_token().empty()) {
      *fleet.env().err << "more on " << fleet.node(i).name << ": add --node " << fleet.node(i).name
                       << " --page-token " << listed[i].next_page_token() << " (or --all)\n";
    }
  }
  return fleet.ExitCode(outcomes, kExitNotFinished);
}

// get, watch, cancel: the node a (possibly unqualified) id lives on, then the command there.
int RunFleetOnOneExperiment(Fleet& fleet, const Command& command, ParsedArgs args) {
  const QualifiedId qualified = SplitQualifiedId(args.positionals[0]);
  size_t node_index = fleet.size();
  if (!qualified.node.empty()) {
    for (size_t i = 0; i < fleet.size(); ++i) {
      if (fleet.node(i).name == qualified.node) node_index = i;
    }
    if (node_index == fleet.size()) {
      return ReportUsageError(
          fleet.env(),
          absl::StrCat("no node \"", qualified.node, "\" in the fleet (", fleet.Names(), ")"),
          command.name);
    }
  } else {
    // Ask every node; ids are per node, so the same id may exist on several.
    std::vector<NodeOutcome> outcomes = fleet.RunOnEveryNode([&](Session& session, size_t) {
      v1::GetExperimentRequest request;
      request.set_experiment_id(qualified.id);
      v1::Experiment experiment;
      const grpc::Status status =
          session.Call(&v1::Profiler::StubInterface::GetExperiment, request, experiment);
      return status.ok() ? kExitOk : session.ReportRpcError(status);
    });
    std::vector<std::string> holders, silent;
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i].exit_code == kExitOk) {
        holders.push_back(fleet.node(i).name);
        node_index = i;
      } else if (!absl::StrContains(outcomes[i].err, "NOT_FOUND")) {
        silent.push_back(
            absl::StrCat(fleet.node(i).name, " (", Fleet::ErrorText(outcomes[i]), ")"));
      }
    }
    if (holders.size() > 1) {
      return ReportUsageError(
          fleet.env(),
          absl::StrCat(qualified.id, " exists on ", absl::StrJoin(holders, ", "),
                       ": qualify it, e.g. ", holders[0], "/", qualified.id),
          command.name);
    }
    if (holders.empty()) {
      if (!silent.empty()) {
        *fleet.env().err << "error: " << qualified.id << " is on no node that answered; no answer "
                         << "from " << absl::StrJoin(silent, "; ") << "\n";
        return kExitPartial;
      }
      *fleet.env().err << "error: NOT_FOUND: " << qualified.id << " is on none of the "
                       << fleet.size() << " nodes\n";
      return kExitUsage;
    }
  }
  const DaemonNode& node = fleet.node(node_index);
  args.positionals[0] = qualified.id;
  if (!args.Switch("json") && command.name != "watch") {
    *fleet.env().out << "node: " << node.name << "\n";
  }
  return command.run(fleet.session(node_index), args);
}

int RunFleetCancel(Fleet& fleet, const Command& command, ParsedArgs args) {
  int exit_code = kExitOk;
  for (const std::string& id : std::vector<std::string>(args.positionals)) {
    ParsedArgs one = args;
    one.positionals = {id};
    const int code = RunFleetOnOneExperiment(fleet, command, std::move(one));
    if (exit_code == kExitOk) exit_code = code;
  }
  return exit_code;
}

// `gpuprof help submit [WORKLOAD]`.
int SubmitHelpCommand(const ClientEnvironment& env, const std::vector<std::string>& args) {
  if (args.empty()) {
    *env.out << SubmitHelp();
    return kExitOk;
  }
  auto builder = ExperimentRequestBuilder::ForWorkload(args[0]);
  if (!builder.ok()) return ReportUsageError(env, builder.status().message(), "submit");
  *env.out << SubmitWorkloadHelp(*builder);
  return kExitOk;
}

}  // namespace

Command SubmitCommand() {
  return {.name = "submit",
          .usage = "submit <workload> [workload flags] [common flags] [--follow] [--json]",
          .summary = "run an experiment: gpuprof submit <workload> --help lists its flags",
          .run_args = RunSubmit,
          .help = SubmitHelpCommand};
}

Command WatchCommand() {
  return {
      .name = "watch",
      .usage = "watch ID [--from-seq N] [--json]",
      .summary = "follow an experiment's progress and result",
      .details =
          "Replays the experiment's stored events, then streams live ones until it ends. On a\n"
          "terminal a progress line is rewritten in place; otherwise each step gets a line.\n"
          "Exits 0 if the experiment finished, 2 if its custom kernel did not compile (the\n"
          "compiler's messages are printed), 1 if it failed otherwise, was cancelled, timed out\n"
          "or was interrupted. Interrupting watch only detaches: the experiment keeps running.",
      .positionals = {"ID"},
      .flags = WatchFlags,
      .run = RunWatch,
      .run_on_fleet = RunFleetOnOneExperiment};
}

Command ListCommand() {
  return {.name = "list",
          .usage =
              "list [--user U | --mine] [--state S]... [--workload W] [--limit N] "
              "[--page-token T] [--all] [--json]",
          .summary = "list experiments, newest first",
          .details =
              "Lists experiments, newest first: id, user, workload, state, GPUs, creation time "
              "(local),\n"
              "run time and the headline figure of the result when the daemon includes one.",
          .flags = ListFlags,
          .run = RunList,
          .run_on_fleet = RunFleetList};
}

Command GetCommand() {
  return {.name = "get",
          .usage = "get ID [--json | --command | --source]",
          .summary = "one experiment: request, state, times, result",
          .details =
              "Shows one experiment: its request, state and reason, times, GPUs, the "
              "worker's stderr\n"
              "tail when it died, a custom kernel's block (name, file, SHA-256, launch, "
              "registers,\n"
              "spills, shared memory, occupancy, checks, guard bytes, sanitizer), and the result.\n"
              "--source prints a custom kernel's source exactly as submitted.",
          .positionals = {"ID"},
          .flags = GetFlags,
          .run = RunGet,
          .run_on_fleet = RunFleetOnOneExperiment};
}

Command TraceCommand() {
  return {.name = "trace",
          .usage = "trace ID [-o trace.json|trace.json.gz|-] [--gzip]",
          .summary = "write an experiment's GPU timeline as a Chrome trace (Perfetto)",
          .details =
              "Writes the experiment's CUPTI activity records (kernels, copies, memsets, CPU "
              "waits,\n"
              "phases) as Chrome trace JSON: one process per GPU, one thread per stream, the "
              "phases\n"
              "as their own track, the host's launch calls with an arrow to each kernel they "
              "launched.\n"
              "Open it in https://ui.perfetto.dev or chrome://tracing. -o - writes it to "
              "standard output,\n"
              "a PATH ending in .gz (or --gzip) gzipped. Waits for a running experiment to end.",
          .positionals = {"ID"},
          .flags = TraceFlags,
          .run = RunTrace,
          .short_o_is_output = true};
}

Command StoryCommand() {
  return {.name = "story",
          .usage = "story ID",
          .summary = "what happened on the GPU, phase by phase, with hardware metrics",
          .details =
              "Prints the execution story: the phases with start offsets and durations, each "
              "kernel\n"
              "(repeats collapsed: x N, median, total) with its launch configuration, hardware\n"
              "metrics and warp stalls when collected (--trace metrics / full), and whether it "
              "is\n"
              "memory-, compute- or latency-bound against the GPU's roofline. Waits for a "
              "running\n"
              "experiment to end.",
          .positionals = {"ID"},
          .flags = StoryFlags,
          .run = RunStory};
}

Command CancelCommand() {
  return {.name = "cancel",
          .usage = "cancel ID... [--reason TEXT]",
          .summary = "cancel queued or running experiments",
          .details =
              "Cancels each experiment and prints its new state (--json: one Experiment per\n"
              "line). An id that cannot be cancelled does not stop the others; the exit code is\n"
              "the first failure's.",
          .positionals = {"ID..."},
          .flags = CancelFlags,
          .run = RunCancel,
          .run_on_fleet = RunFleetCancel};
}

}  // namespace gpuprof::client
