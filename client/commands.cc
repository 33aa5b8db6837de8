#include "client/commands.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
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
#include "client/command_line.h"
#include "client/event_printer.h"
#include "common/field_text.h"
#include "client/fleet.h"
#include "client/fleet_sweep.h"
#include "client/render.h"
#include "client/request_builder.h"
#include "client/story_command.h"
#include "client/sweep_commands.h"
#include "client/table.h"
#include "client/token_command.h"
#include "client/trace_command.h"
#include "common/status_macros.h"
#include "common/terminal_text.h"
#include "common/version.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"

namespace gpuprof::client {
namespace {

using ::grpc::ClientContext;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

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

constexpr absl::string_view kExitCodeHelp =
    "exit codes:\n"
    "  0  success (submit --follow, watch: the experiment finished)\n"
    "  1  the experiment failed, was cancelled, timed out or was interrupted, or the stream\n"
    "     ended first; health: the daemon is not serving\n"
    "  2  bad command line, or the daemon rejected the request (INVALID_ARGUMENT, NOT_FOUND,\n"
    "     FAILED_PRECONDITION, ...)\n"
    "  3  the daemon cannot be reached (UNAVAILABLE)\n"
    "  4  any other error\n"
    "  5  compare --fail-on-regression: B is worse than A beyond the limit\n"
    "  6  across a fleet: some nodes did not answer in time or failed; the output covers the\n"
    "     others and names the missing ones\n";

// Options given before the command; a command's own --target wins over them.
struct GlobalOptions {
  std::optional<std::string> target;
  std::optional<std::string> user;
  // Every --target given before the command (more than one makes a fleet).
  std::vector<std::string> targets;
  // --fleet (the default file) or --fleet=PATH.
  std::optional<std::string> fleet;
  std::optional<std::string> node;
  std::optional<std::string> node_timeout;
  // The one node the command talks to, when the fleet options narrowed it to one.
  std::optional<DaemonNode> single_node;
  std::optional<std::string> tls_ca;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::string> token_file;
};

FlagSpec TargetFlag() {
  return {.name = "target",
          .value_syntax = "ADDR",
          .help = absl::StrCat("gpuprofd: host:port or unix:/path (default: $GPUPROF_TARGET, ",
                               "else ", kDefaultTarget, ")")};
}

FlagSpec HelpFlag() { return {.name = "help", .is_switch = true, .help = "show this help"}; }

FlagSpec JsonFlag(absl::string_view help) {
  return {.name = "json", .is_switch = true, .help = std::string(help)};
}

// Talks to one daemon for one command: connects on first use, reports errors uniformly.
class Session {
 public:
  // `node`: a node of a fleet, whose own TLS material (from the fleet file), when it has any,
  // replaces the connection's TLS files.
  Session(const ClientEnvironment& env, ConnectionOptions connection,
          std::optional<std::string> explicit_user, std::optional<DaemonNode> node = std::nullopt)
      : env_(env),
        connection_(std::move(connection)),
        user_(explicit_user.value_or(env.local_user)),
        explicit_user_(std::move(explicit_user)),
        node_(std::move(node)) {}

  std::ostream& out() const { return *env_.out; }
  std::ostream& err() const { return *env_.err; }
  const ClientEnvironment& env() const { return env_; }
  const std::string& user() const { return user_; }
  // --user, when given: the daemon honours it for admins only.
  const std::optional<std::string>& explicit_user() const { return explicit_user_; }
  absl::Time now() const { return env_.now ? env_.now() : absl::Now(); }

  v1::Profiler::StubInterface& profiler() {
    Connect();
    return *stubs_.profiler;
  }
  grpc::health::v1::Health::StubInterface& health() {
    Connect();
    return *stubs_.health;
  }

  // Unary RPCs must not hang on a stuck daemon; streams get no deadline.
  void SetUnaryDeadline(ClientContext& context) const {
    context.set_deadline(absl::ToChronoTime(absl::Now() + env_.unary_rpc_deadline));
  }

  int ReportRpcError(const grpc::Status& status) const {
    return client::ReportRpcError(err(), status, connection_);
  }

 private:
  void Connect() {
    if (stubs_.profiler != nullptr) return;
    stubs_ = node_.has_value() && env_.connect_node ? env_.connect_node(*node_, connection_)
                                                   : env_.connect(connection_);
  }

  const ClientEnvironment& env_;
  ConnectionOptions connection_;
  std::string user_;
  std::optional<std::string> explicit_user_;
  std::optional<DaemonNode> node_;
  DaemonStubs stubs_;
};

int ReportUsageError(const ClientEnvironment& env, absl::string_view message,
                     absl::string_view help_command) {
  *env.err << "error: " << EscapeForTerminal(message) << "\n";
  if (!help_command.empty()) *env.err << "(see gpuprof " << help_command << " --help)\n";
  return kExitUsage;
}

// Flags win over the environment, which wins over the config file.
absl::StatusOr<ConnectionOptions> ResolveConnection(const ClientEnvironment& env,
                                                    const GlobalOptions& globals,
                                                    const ParsedArgs& args) {
  v1::ClientConfig config;
  if (!env.config_path.empty()) {
    auto loaded = LoadClientConfig(env.config_path);
    if (!loaded.ok()) return loaded.status();
    config = *std::move(loaded);
  }
  ConnectionOptions options;
  options.target = args.Get("target").value_or(globals.target.value_or(
      !env.target_from_env.empty() ? env.target_from_env
      : !config.target().empty()   ? config.target()
                                   : std::string(kDefaultTarget)));
  options.tls_ca = globals.tls_ca.value_or(config.tls_ca());
  options.tls_cert = globals.tls_cert.value_or(config.tls_cert());
  options.tls_key = globals.tls_key.value_or(config.tls_key());
  std::string token_source = "$GPUPROF_TOKEN";
  if (globals.token_file.has_value() || (env.token_from_env.empty() && !config.token_file().empty())) {
    const std::string path = globals.token_file.value_or(config.token_file());
    token_source = absl::StrCat(globals.token_file.has_value() ? "--token " : "token_file ", path);
    auto token = ReadFileForFlag(path, globals.token_file.has_value() ? "--token" : "token_file");
    if (!token.ok()) return token.status();
    options.token = std::string(absl::StripAsciiWhitespace(*token));
    if (options.token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--token: ", path, " is empty"));
    }
  } else {
    options.token = env.token_from_env;
  }
  options.claimed_user = globals.user.value_or(env.local_user);
  // Both travel in gRPC headers; gRPC aborts the process on a value it cannot send.
  RETURN_IF_ERROR(CheckHeaderValue(globals.user.has_value() ? "--user" : "$USER",
                                   options.claimed_user, /*show_value=*/true));
  RETURN_IF_ERROR(CheckHeaderValue(token_source, options.token, /*show_value=*/false));
  RETURN_IF_ERROR(CheckConnectionOptions(options, env.now ? env.now() : absl::Now()));
  return options;
}

// The connection for a node of a fleet: the resolved options (TLS files, token, user) with the
// node's address; the node's own TLS material, if any, is applied when connecting.
ConnectionOptions NodeConnection(ConnectionOptions options, const DaemonNode& node) {
  options.target = node.address;
  return options;
}

// The session of a one-node command: the node the fleet options narrowed to, unless the
// command's own --target names another daemon.
absl::StatusOr<Session> MakeSession(const ClientEnvironment& env, const GlobalOptions& globals,
                                    const ParsedArgs& args) {
  ASSIGN_OR_RETURN(ConnectionOptions connection, ResolveConnection(env, globals, args));
  if (!args.Has("target") && globals.single_node.has_value()) {
    return Session(env, NodeConnection(std::move(connection), *globals.single_node), globals.user,
                   globals.single_node);
  }
  return Session(env, std::move(connection), globals.user);
}

// Reads a Submit/Watch stream to its end, rendering each event.
int FollowEvents(Session& session, grpc::ClientReaderInterface<v1::ExperimentEvent>& reader,
                 bool json) {
  EventPrinter printer(session.out(), {.json = json,
                                       .live_line = session.env().stdout_is_terminal && !json,
                                       .terminal_width = session.env().terminal_width,
                                       .now = [&session] { return session.now(); }});
  v1::ExperimentEvent event;
  int64_t last_seq = 0;
  while (reader.Read(&event)) {
    printer.Print(event);
    last_seq = event.seq();
  }
  printer.Finish();
  const grpc::Status status = reader.Finish();
  if (!status.ok()) {
    const int exit_code = session.ReportRpcError(status);
    if (!printer.experiment_id().empty()) {
      session.err() << "resume with: gpuprof watch " << EscapeForTerminal(printer.experiment_id())
                    << " --from-seq " << last_seq + 1 << "\n";
    }
    return exit_code;
  }
  if (printer.state() == v1::FINISHED) return kExitOk;
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

// A subcommand: its help and how to run it on already-split args.
struct Command {
  absl::string_view name;
  absl::string_view usage;    // after "gpuprof "
  absl::string_view summary;  // one line in `gpuprof help`
  absl::string_view details;  // a paragraph in `gpuprof <name> --help`
  std::vector<std::string> positionals;
  std::vector<FlagSpec> (*flags)();
  int (*run)(Session& session, const ParsedArgs& args);
};

std::string CommandHelp(const Command& command) {
  return absl::StrCat("usage: gpuprof ", command.usage, "\n\n", command.details, "\n\nflags:\n",
                      FormatFlagHelp(command.flags()));
}

// ---- gpus ----

std::vector<FlagSpec> GpusFlags() {
  return {JsonFlag("print the ListGpusResponse as JSON"), TargetFlag(), HelpFlag()};
}

int RunGpus(Session& session, const ParsedArgs& args) {
  ClientContext context;
  session.SetUnaryDeadline(context);
  v1::ListGpusResponse response;
  const grpc::Status status = session.profiler().ListGpus(&context, {}, &response);
  if (!status.ok()) return session.ReportRpcError(status);
  session.out() << (args.Switch("json") ? JsonLine(response) + "\n" : RenderGpus(response));
  return kExitOk;
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
  ClientContext context;
  auto reader = session.profiler().Watch(&context, request);
  return FollowEvents(session, *reader, args.Switch("json"));
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
      JsonFlag("print the ListExperimentsResponse as JSON (one for --all)"),
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
    ClientContext context;
    session.SetUnaryDeadline(context);
    v1::CallerInfo caller;
    const grpc::Status status =
        session.profiler().WhoAmI(&context, v1::WhoAmIRequest(), &caller);
    if (!status.ok()) return session.ReportRpcError(status);
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
    ClientContext context;
    session.SetUnaryDeadline(context);
    v1::ListExperimentsResponse page;
    const grpc::Status status = session.profiler().ListExperiments(&context, request, &page);
    if (!status.ok()) return status;
    for (v1::Experiment& experiment : *page.mutable_experiments()) {
      *listed.add_experiments() = std::move(experiment);
    }
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
  v1::ListExperimentsRequest request;
  if (auto usage = ListRequestFromArgs(session, args, request); usage.has_value()) return *usage;
  v1::ListExperimentsResponse listed;
  const grpc::Status status = FetchList(session, request, args.Switch("all"), listed);
  if (!status.ok()) return session.ReportRpcError(status);

  if (args.Switch("json")) {
    session.out() << JsonLine(listed) << "\n";
    return kExitOk;
  }
  if (listed.experiments().empty()) {
    session.out() << "no experiments\n";
  } else {
    session.out() << RenderExperimentTable(listed.experiments(), session.now(),
                                           session.env().time_zone);
  }
  if (!listed.next_page_token().empty()) {
    session.out() << "more: add --page-token " << EscapeForTerminal(listed.next_page_token())
                  << " (or --all)\n";
  }
  return kExitOk;
}

// ---- get ----

std::vector<FlagSpec> GetFlags() {
  return {JsonFlag("print the Experiment as JSON"), TargetFlag(), HelpFlag()};
}

int RunGet(Session& session, const ParsedArgs& args) {
  v1::GetExperimentRequest request;
  request.set_experiment_id(args.positionals[0]);
  ClientContext context;
  session.SetUnaryDeadline(context);
  v1::Experiment experiment;
  const grpc::Status status = session.profiler().GetExperiment(&context, request, &experiment);
  if (!status.ok()) return session.ReportRpcError(status);
  session.out() << (args.Switch("json")
                        ? JsonLine(experiment) + "\n"
                        : RenderExperiment(experiment, session.now(), session.env().time_zone));
  return kExitOk;
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

int RunCancel(Session& session, const ParsedArgs& args) {
  v1::CancelRequest request;
  request.set_experiment_id(args.positionals[0]);
  // The API carries no caller identity; the reason at least records who asked.
  request.set_reason(args.Get("reason").value_or(""));
  // The daemon checks the caller owns the experiment (or is an admin) and records who it was.
  ClientContext context;
  session.SetUnaryDeadline(context);
  v1::Experiment experiment;
  const grpc::Status status = session.profiler().Cancel(&context, request, &experiment);
  if (!status.ok()) return session.ReportRpcError(status);
  if (args.Switch("json")) {
    session.out() << JsonLine(experiment) << "\n";
    return kExitOk;
  }
  session.out() << EscapeForTerminal(experiment.id()) << ": " << StateName(experiment.state());
  if (!experiment.reason().empty()) {
    session.out() << " (" << EscapeForTerminal(experiment.reason()) << ")";
  }
  session.out() << "\n";
  return kExitOk;
}

// ---- gpu clear ----

std::vector<FlagSpec> GpuFlags() {
  return {{.name = "reason",
           .value_syntax = "TEXT",
           .help = "why the GPU is fit again (kept in the audit trail), e.g. \"reset, "
                   "nvidia-smi -q clean\""},
          JsonFlag("print the GpuInfo as JSON"),
          TargetFlag(),
          HelpFlag()};
}

int RunGpu(Session& session, const ParsedArgs& args) {
  if (args.positionals[0] != "clear") {
    session.err() << "error: gpu " << args.positionals[0]
                  << ": unknown action; the one action is clear (gpuprof gpu clear N)\n";
    return kExitUsage;
  }
  int index = -1;
  if (!absl::SimpleAtoi(args.positionals[1], &index) || index < 0) {
    session.err() << "error: gpu clear " << args.positionals[1]
                  << ": N must be a GPU index (0, 1, ...) as gpuprof gpus lists it\n";
    return kExitUsage;
  }
  v1::ClearGpuHealthRequest request;
  request.set_gpu_index(index);
  request.set_reason(args.Get("reason").value_or(""));
  ClientContext context;
  session.SetUnaryDeadline(context);
  v1::GpuInfo gpu;
  const grpc::Status status = session.profiler().ClearGpuHealth(&context, request, &gpu);
  if (!status.ok()) return session.ReportRpcError(status);
  if (args.Switch("json")) {
    session.out() << JsonLine(gpu) << "\n";
    return kExitOk;
  }
  session.out() << "GPU " << gpu.index() << " (" << EscapeForTerminal(gpu.uuid())
                << "): back in service\n";
  return kExitOk;
}

// ---- whoami, quota, audit ----

std::vector<FlagSpec> WhoAmIFlags() {
  return {JsonFlag("print the CallerInfo as JSON"), TargetFlag(), HelpFlag()};
}

int RunWhoAmI(Session& session, const ParsedArgs& args) {
  ClientContext context;
  session.SetUnaryDeadline(context);
  v1::CallerInfo caller;
  const grpc::Status status = session.profiler().WhoAmI(&context, v1::WhoAmIRequest(), &caller);
  if (!status.ok()) return session.ReportRpcError(status);
  if (args.Switch("json")) {
    session.out() << JsonLine(caller) << "\n";
    return kExitOk;
  }
  session.out() << "user:   " << EscapeForTerminal(caller.user()) << "\n"
                << "by:     " << EscapeForTerminal(caller.authenticated_by()) << "\n"
                << "role:   "
                << (caller.admin()
                        ? absl::StrCat("admin (", EscapeForTerminal(caller.admin_reason()), ")")
                        : std::string("user"))
                << "\n";
  if (caller.groups_size() > 0) {
    session.out() << "groups: " << EscapeForTerminal(absl::StrJoin(caller.groups(), ", ")) << "\n";
  }
  return kExitOk;
}

std::vector<FlagSpec> QuotaFlags() {
  return {{.name = "user", .value_syntax = "NAME", .help = "another user's (admins only)"},
          JsonFlag("print the QuotaReport as JSON"),
          TargetFlag(),
          HelpFlag()};
}

int RunQuota(Session& session, const ParsedArgs& args) {
  v1::GetQuotaRequest request;
  request.set_user(args.Get("user").value_or(""));
  ClientContext context;
  session.SetUnaryDeadline(context);
  v1::QuotaReport report;
  const grpc::Status status = session.profiler().GetQuota(&context, request, &report);
  if (!status.ok()) return session.ReportRpcError(status);
  if (args.Switch("json")) {
    session.out() << JsonLine(report) << "\n";
    return kExitOk;
  }
  const v1::Quota& limits = report.limits();
  const auto limit = [&](bool has, const std::string& value) {
    return report.admin() ? std::string("none (admin)") : has ? value : std::string("unlimited");
  };
  TextTable table;
  table.AddRow({"QUOTA", "LIMIT", "IN USE"});
  table.AddRow({"max_queued_experiments",
                limit(limits.has_max_queued_experiments(),
                      absl::StrCat(limits.max_queued_experiments())),
                absl::StrCat(report.queued_experiments())});
  table.AddRow({"max_concurrent_gpus",
                limit(limits.has_max_concurrent_gpus(), absl::StrCat(limits.max_concurrent_gpus())),
                absl::StrCat(report.running_gpus())});
  table.AddRow({"max_gpu_hours_per_day",
                limit(limits.has_max_gpu_hours_per_day(),
                      absl::StrFormat("%g", limits.max_gpu_hours_per_day())),
                absl::StrFormat("%.3f", report.gpu_hours_last_day())});
  table.AddRow({"max_timeout",
                limit(limits.has_max_timeout(),
                      absl::FormatDuration(absl::Seconds(limits.max_timeout().seconds()) +
                                           absl::Nanoseconds(limits.max_timeout().nanos()))),
                "-"});
  table.AddRow({"max_priority",
                limit(limits.has_max_priority(), absl::StrCat(limits.max_priority())), "-"});
  session.out() << "user " << EscapeForTerminal(report.user()) << " (limits from "
                << EscapeForTerminal(report.source()) << ")\n"
                << table.Render("");
  return kExitOk;
}

std::vector<FlagSpec> AuditFlags() {
  return {{.name = "user", .value_syntax = "NAME", .help = "entries by or for this user"},
          {.name = "experiment", .value_syntax = "ID", .help = "entries about this experiment"},
          {.name = "limit", .value_syntax = "N", .help = "at most N entries (default 100)"},
          JsonFlag("print the ListAuditResponse as JSON"),
          TargetFlag(),
          HelpFlag()};
}

int RunAudit(Session& session, const ParsedArgs& args) {
  v1::ListAuditRequest request;
  request.set_user(args.Get("user").value_or(""));
  request.set_experiment_id(args.Get("experiment").value_or(""));
  const absl::StatusOr<std::optional<int32_t>> limit = ParseCountFlag(args, "limit");
  if (!limit.ok()) {
    return ReportUsageError(session.env(), std::string(limit.status().message()), "audit");
  }
  if (limit->has_value()) request.set_limit(**limit);
  ClientContext context;
  session.SetUnaryDeadline(context);
  v1::ListAuditResponse response;
  const grpc::Status status = session.profiler().ListAudit(&context, request, &response);
  if (!status.ok()) return session.ReportRpcError(status);
  if (args.Switch("json")) {
    session.out() << JsonLine(response) << "\n";
    return kExitOk;
  }
  TextTable table;
  table.AddRow({"TIME", "ACTOR", "FOR", "ACTION", "EXPERIMENT", "DETAIL"});
  for (const v1::AuditEntry& entry : response.entries()) {
    const absl::Time time = absl::FromUnixSeconds(entry.time().seconds());
    table.AddRow({absl::FormatTime("%Y-%m-%d %H:%M:%S", time, session.env().time_zone),
                  entry.actor(), entry.on_behalf_of().empty() ? "-" : entry.on_behalf_of(),
                  entry.action(), entry.experiment_id().empty() ? "-" : entry.experiment_id(),
                  entry.detail()});
  }
  session.out() << table.Render("");
  return kExitOk;
}

// ---- health ----

std::vector<FlagSpec> HealthFlags() { return {TargetFlag(), HelpFlag()}; }

int RunHealth(Session& session, const ParsedArgs&) {
  HealthCheckRequest request;
  request.set_service("");
  ClientContext context;
  session.SetUnaryDeadline(context);
  HealthCheckResponse response;
  const grpc::Status status = session.health().Check(&context, request, &response);
  if (!status.ok()) return session.ReportRpcError(status);
  session.out() << HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return response.status() == HealthCheckResponse::SERVING ? kExitOk : kExitNotFinished;
}

// ---- trace, story (client/trace_command.h, client/story_command.h) ----

std::vector<FlagSpec> TraceFlags() {
  return {{.name = "output",
           .value_syntax = "PATH",
           .help = "where to write the Chrome trace JSON, -o for short (default: ID.trace.json)"},
          TargetFlag(),
          HelpFlag()};
}

int RunTrace(Session& session, const ParsedArgs& args) {
  ExperimentActivity activity;
  const grpc::Status status =
      FetchExperimentActivity(session.profiler(), args.positionals[0], activity);
  if (!status.ok()) return session.ReportRpcError(status);
  const std::string path = args.Get("output").value_or(args.positionals[0] + ".trace.json");
  if (const absl::Status written = WriteChromeTraceFile(activity, path); !written.ok()) {
    session.err() << "error: " << written.message() << "\n";
    return kExitOtherError;
  }
  session.out() << DescribeWrittenTrace(activity, path);
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

const std::vector<Command>& Commands() {
  static const auto* const commands = new std::vector<Command>{
      {"gpus",
       "gpus [--json]",
       "the daemon's host, GPUs, leases and topology",
       "Shows the host (driver, CUDA, NCCL, CUPTI and gpuprof versions, NUMA nodes), a table of\n"
       "GPUs with their spec and measured bandwidth and who holds them, the topology matrix\n"
       "(like nvidia-smi topo -m), the workloads the daemon runs and its JIT cache.",
       {},
       GpusFlags,
       RunGpus},
      {"submit",
       "submit <workload> [workload flags] [common flags] [--follow] [--json]",
       "run an experiment: gpuprof submit <workload> --help lists its flags",
       "",
       {},
       nullptr,
       nullptr},
      {"watch",
       "watch ID [--from-seq N] [--json]",
       "follow an experiment's progress and result",
       "Replays the experiment's stored events, then streams live ones until it ends. On a\n"
       "terminal a progress line is rewritten in place; otherwise each step gets a line.\n"
       "Exits 0 if the experiment finished, 1 if it failed, was cancelled, timed out or was\n"
       "interrupted. Interrupting watch only detaches: the experiment keeps running.",
       {"ID"},
       WatchFlags,
       RunWatch},
      {"list",
       "list [--user U | --mine] [--state S]... [--workload W] [--limit N] [--page-token T] "
       "[--all] [--json]",
       "list experiments, newest first",
       "Lists experiments, newest first: id, user, workload, state, GPUs, creation time (local),\n"
       "run time and the headline figure of the result when the daemon includes one.",
       {},
       ListFlags,
       RunList},
      {"get",
       "get ID [--json]",
       "one experiment: request, state, times, result",
       "Shows one experiment: its request, state and reason, times, GPUs, the worker's stderr\n"
       "tail when it died, and the result.",
       {"ID"},
       GetFlags,
       RunGet},
      {"trace",
       "trace ID [-o trace.json]",
       "write an experiment's GPU timeline as a Chrome trace (Perfetto)",
       "Writes the experiment's CUPTI activity records (kernels, copies, memsets, CPU waits,\n"
       "phases) as Chrome trace JSON: one process per GPU, one thread per stream, the phases\n"
       "as their own track. Open it in https://ui.perfetto.dev or chrome://tracing. Waits for\n"
       "a running experiment to end.",
       {"ID"},
       TraceFlags,
       RunTrace},
      {"story",
       "story ID",
       "what happened on the GPU, phase by phase, with hardware metrics",
       "Prints the execution story: the phases with start offsets and durations, each kernel\n"
       "(repeats collapsed: x N, median, total) with its launch configuration, hardware\n"
       "metrics and warp stalls when collected (--trace metrics / full), and whether it is\n"
       "memory-, compute- or latency-bound against the GPU's roofline. Waits for a running\n"
       "experiment to end.",
       {"ID"},
       StoryFlags,
       RunStory},
      {"cancel",
       "cancel ID [--reason TEXT]",
       "cancel a queued or running experiment",
       "Cancels the experiment and prints its new state.",
       {"ID"},
       CancelFlags,
       RunCancel},
      {"gpu",
       "gpu clear N [--reason TEXT]",
       "return a GPU drained by a hardware fault to service (admins)",
       "A GPU whose driver reported a hardware Xid (or an uncorrectable memory error) is\n"
       "drained: no new experiment is placed on it, across daemon restarts, until an admin\n"
       "clears it. `gpuprof gpus` shows why it was drained; the clear goes into the audit\n"
       "trail with --reason.",
       {"clear", "N"},
       GpuFlags,
       RunGpu},
      {"whoami",
       "whoami [--json]",
       "who the daemon takes you for, and your role",
       "Shows the user the daemon authenticated you as (unix peer credentials, loopback TCP\n"
       "owner, TLS client certificate or bearer token), whether you are an admin and why, and\n"
       "your Unix groups.",
       {},
       WhoAmIFlags,
       RunWhoAmI},
      {"quota",
       "quota [--user U] [--json]",
       "your limits and what you use of them",
       "Shows the quotas that apply to you (queued experiments, concurrent GPUs, GPU-hours\n"
       "over the last 24 hours, longest timeout, highest priority), where they come from in\n"
       "the daemon's policy, and your use now. Admins may ask about another user.",
       {},
       QuotaFlags,
       RunQuota},
      {"audit",
       "audit [--user U] [--experiment ID] [--limit N] [--json]",
       "the audit trail (admins)",
       "Lists who submitted, cancelled or was refused what, and policy reloads, newest first.\n"
       "Only admins may read it.",
       {},
       AuditFlags,
       RunAudit},
      {"health",
       "health",
       "check that the daemon is serving",
       "Calls grpc.health.v1.Health/Check for the whole server and prints SERVING or\n"
       "NOT_SERVING; exits 0 only when serving.",
       {},
       HealthFlags,
       RunHealth},
  };
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::string MainHelp() {
  TextTable commands;
  for (const Command& command : Commands()) {
    commands.AddRow({std::string(command.name), std::string(command.summary)});
  }
  commands.AddRow({"sweep", "run a parameter grid: gpuprof sweep <workload> --tokens 1,64,4Ki ..."});
  commands.AddRow({"compare", "compare two experiments, sweeps or baselines, noise-aware"});
  commands.AddRow({"baseline", "name an experiment or sweep as a baseline to compare against"});
  commands.AddRow(
      {"token-hash", "a bearer token's SHA-256 for the daemon's policy, or a new token (local)"});
  commands.AddRow({"help", "this text, or a command's: gpuprof help submit index"});
  const std::vector<FlagSpec> global_flags = {
      TargetFlag(),
      {.name = "target NAME=ADDR",
       .help = "several --target make a fleet; NAME qualifies its ids (NAME/exp-000042)"},
      {.name = "fleet[=PATH]",
       .help = "the daemons of a fleet file (default ~/.config/gpuprof/fleet.textproto; "
               "also $GPUPROF_FLEET)"},
      {.name = "node", .value_syntax = "NAME[,NAME]", .help = "only these nodes of the fleet"},
      {.name = "node-timeout",
       .value_syntax = "DURATION",
       .help = "how long each node may take to answer (default: the fleet file's, else 10s)"},
      {.name = "user", .value_syntax = "NAME", .help = "who you are (default: $USER)"},
      {.name = "user",
       .value_syntax = "NAME",
       .help = "act for this user (admins only; the daemon authenticates everyone else)"},
      {.name = "tls-ca",
       .value_syntax = "FILE",
       .help = "PEM CA of the daemon's certificate: connect with TLS"},
      {.name = "tls-cert", .value_syntax = "FILE", .help = "PEM client certificate (mutual TLS)"},
      {.name = "tls-key", .value_syntax = "FILE", .help = "PEM key of --tls-cert"},
      {.name = "token",
       .value_syntax = "FILE",
       .help = "file holding a bearer token (TLS only; or $GPUPROF_TOKEN); gpuprof token-hash "
               "gives the policy entry for it"},
      {.name = "version", .is_switch = true, .help = "print the client's version"},
      HelpFlag(),
  };
  return absl::StrCat(
      "gpuprof ", GpuprofVersion(),
      ": run GPU profiling experiments on a gpuprofd daemon and read their results\n\n"
      "usage: gpuprof [--target ADDR | --target NAME=ADDR... | --fleet[=PATH]] [--node NAME]\n"
      "               [--user NAME] [--tls-ca FILE [--tls-cert FILE --tls-key FILE]]\n"
      "               [--token FILE] <command> [args] [flags]\n\n"
      "Across a fleet, gpus, list, get, watch, cancel and health work on every node at once;\n"
      "sweep spreads its points over the nodes (gpuprof --fleet sweep --help) and compare\n"
      "matches results across them; other commands need one node (--node NAME). The TLS\n"
      "files and token apply to every node; a node of a fleet file with its own TLS files\n"
      "uses those.\n\n"
      "commands:\n",
      commands.Render("  "), "\nglobal flags (before the command; --target also after it):\n",
      FormatFlagHelp(global_flags),
      "\nThe connection can also be set in ~/.config/gpuprof/config.textproto (or\n"
      "$GPUPROF_CONFIG): target, tls_ca, tls_cert, tls_key, token_file; flags and\n"
      "$GPUPROF_TARGET / $GPUPROF_TOKEN win over it.\n"
      "\n--json output follows the proto3 JSON mapping: lowerCamelCase names, enums by name,\n"
      "64-bit integers as strings, fields at their default value left out; streams (submit\n"
      "--follow, watch) print one event per line (NDJSON).\n\n",
      kExitCodeHelp);
}

// ---- submit ----

std::vector<FlagSpec> SubmitOutputFlags() {
  return {{.name = "follow",
           .is_switch = true,
           .help = "stream progress and the result until the experiment ends"},
          JsonFlag("print each event as a line of JSON (NDJSON)"),
          TargetFlag(),
          HelpFlag()};
}

std::string SubmitHelp() {
  auto builder = ExperimentRequestBuilder::ForWorkload(WorkloadNames()[0]);
  return absl::StrCat(
      "usage: gpuprof submit <workload> [workload flags] [common flags] [--follow] [--json]\n\n"
      "workloads: ",
      absl::StrJoin(WorkloadNames(), ", "),
      " (gpuprof submit <workload> --help lists its flags)\n\n"
      "Queues an experiment. Without --follow, prints its id and returns; the experiment keeps\n"
      "running (gpuprof watch ID follows it). With --follow, streams progress and the result;\n"
      "exits 0 if the experiment finished, 1 if not.\n\n"
      "common flags:\n",
      builder.ok() ? FormatFlagHelp(builder->common_flags()) : "", "\noutput flags:\n",
      FormatFlagHelp(SubmitOutputFlags()), "\n", kValueSyntaxHelp);
}

std::string SubmitWorkloadHelp(const ExperimentRequestBuilder& builder) {
  std::string help = absl::StrCat(
      "usage: gpuprof submit ", builder.workload(), " [flags] [--follow] [--json]\n\n",
      builder.workload(), " flags (fields of ", builder.spec_type()->full_name(),
      "; unset fields get the daemon's defaults):\n", FormatFlagHelp(builder.workload_flags()));
  if (!builder.unsettable_fields().empty()) {
    absl::StrAppend(&help, "  (not settable from the command line: ",
                    absl::StrJoin(builder.unsettable_fields(), ", "), ")\n");
  }
  absl::StrAppend(&help, "\ncommon flags:\n", FormatFlagHelp(builder.common_flags()),
                  "\noutput flags:\n", FormatFlagHelp(SubmitOutputFlags()), "\n", kValueSyntaxHelp);
  return help;
}

int RunSubmit(const ClientEnvironment& env, const GlobalOptions& globals,
              const std::vector<std::string>& args) {
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
  for (const auto& group : {builder->common_flags(), SubmitOutputFlags()}) {
    flags.insert(flags.end(), group.begin(), group.end());
  }
  absl::StatusOr<ParsedArgs> parsed =
      ParseArgs(std::vector<std::string>(args.begin() + 1, args.end()), flags);
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

  absl::StatusOr<Session> made = MakeSession(env, globals, *parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  // Empty means "me, as the daemon authenticates me"; another name needs an admin.
  if (request->user().empty() && session.explicit_user().has_value()) {
    request->set_user(*session.explicit_user());
  }
  const bool json = parsed->Switch("json");
  ClientContext context;
  auto reader = session.profiler().Submit(&context, *request);
  if (parsed->Switch("follow")) return FollowEvents(session, *reader, json);

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
  context.TryCancel();
  reader->Finish();
  return kExitOk;
}


// ---- across a fleet ----

// A JSON string literal for `text`.
std::string JsonString(absl::string_view text) { return JsonQuoted(text); }

struct NodeOutcome {
  int exit_code = kExitOk;
  std::string out;
  std::string err;
};

struct FleetRun {
  const ClientEnvironment& env;
  const GlobalOptions& globals;
  std::vector<DaemonNode> nodes;
  absl::Duration node_timeout;
  // TLS files, token and user shared by every node (the target is each node's address).
  ConnectionOptions connection;
};

// Runs `run` on every node at once, each in its own session whose output is kept apart and
// whose unary calls end at the node deadline, so one stuck node delays nobody.
std::vector<NodeOutcome> RunOnEachNode(const FleetRun& fleet,
                                       const std::function<int(Session&, size_t)>& run) {
  std::vector<NodeOutcome> outcomes(fleet.nodes.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < fleet.nodes.size(); ++i) {
    threads.emplace_back([&fleet, &run, &outcomes, i] {
      std::ostringstream out, err;
      ClientEnvironment env = fleet.env;
      env.out = &out;
      env.err = &err;
      env.stdout_is_terminal = false;
      env.unary_rpc_deadline = fleet.node_timeout;
      Session session(env, NodeConnection(fleet.connection, fleet.nodes[i]), fleet.globals.user,
                      fleet.nodes[i]);
      outcomes[i].exit_code = run(session, i);
      outcomes[i].out = out.str();
      outcomes[i].err = err.str();
    });
  }
  for (std::thread& thread : threads) thread.join();
  return outcomes;
}

// A node's error line without the "error: " prefix and newline.
std::string ErrorText(const NodeOutcome& outcome) {
  std::string text(absl::StripSuffix(absl::StripPrefix(outcome.err, "error: "), "\n"));
  return text.empty() ? absl::StrCat("exit code ", outcome.exit_code) : text;
}

// 0 when every node answered; the nodes' own code when none did; else kExitPartial, after
// naming the nodes that are missing from the output.
int FleetExitCode(const FleetRun& fleet, const std::vector<NodeOutcome>& outcomes,
                  int failure_code_floor = kExitUsage) {
  std::vector<std::string> missing;
  int first_failure = kExitOk;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].exit_code < failure_code_floor) continue;
    missing.push_back(absl::StrCat(fleet.nodes[i].name, " (", ErrorText(outcomes[i]), ")"));
    if (first_failure == kExitOk) first_failure = outcomes[i].exit_code;
  }
  if (missing.empty()) return kExitOk;
  *fleet.env.err << (missing.size() == outcomes.size() ? "error: no node answered: "
                                                        : "partial: no answer from ")
                 << absl::StrJoin(missing, "; ") << "\n";
  return missing.size() == outcomes.size() ? first_failure : kExitPartial;
}

// gpus and health: each node's own output under a header.
int RunFleetSections(const FleetRun& fleet, const Command& command, const ParsedArgs& args) {
  const bool json = args.Has("json") && args.Switch("json");
  std::vector<NodeOutcome> outcomes = RunOnEachNode(
      fleet, [&](Session& session, size_t) { return command.run(session, args); });
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const DaemonNode& node = fleet.nodes[i];
    const bool answered = outcomes[i].exit_code < kExitUsage;
    if (json) {
      std::string line = absl::StrCat("{\"node\":", JsonString(node.name),
                                      ",\"address\":", JsonString(node.address));
      if (answered) {
        absl::StrAppend(&line, ",\"response\":",
                        absl::StripAsciiWhitespace(outcomes[i].out), "}");
      } else {
        absl::StrAppend(&line, ",\"error\":", JsonString(ErrorText(outcomes[i])), "}");
      }
      *fleet.env.out << line << "\n";
      continue;
    }
    *fleet.env.out << "== " << node.name << " (" << node.address << ")"
                   << (answered ? "" : ": NO ANSWER") << " ==\n"
                   << (answered ? outcomes[i].out : ErrorText(outcomes[i]) + "\n");
  }
  const int code = FleetExitCode(fleet, outcomes);
  // health: a node that answers NOT_SERVING fails the whole check.
  if (code == kExitOk) {
    for (const NodeOutcome& outcome : outcomes) {
      if (outcome.exit_code != kExitOk) return outcome.exit_code;
    }
  }
  return code;
}

int RunFleetList(const FleetRun& fleet, const ParsedArgs& args) {
  if (args.Has("page-token")) {
    return ReportUsageError(fleet.env, "--page-token continues one node's listing: add --node NAME",
                            "list");
  }
  v1::ListExperimentsRequest request;
  {
    Session session(fleet.env, ConnectionOptions(), fleet.globals.user);
    if (auto usage = ListRequestFromArgs(session, args, request); usage.has_value()) {
      return *usage;
    }
  }
  std::vector<v1::ListExperimentsResponse> listed(fleet.nodes.size());
  std::vector<NodeOutcome> outcomes = RunOnEachNode(fleet, [&](Session& session, size_t i) {
    const grpc::Status status = FetchList(session, request, args.Switch("all"), listed[i]);
    return status.ok() ? kExitOk : session.ReportRpcError(status);
  });
  if (args.Switch("json")) {
    for (size_t i = 0; i < fleet.nodes.size(); ++i) {
      if (outcomes[i].exit_code != kExitOk) continue;
      *fleet.env.out << "{\"node\":" << JsonString(fleet.nodes[i].name)
                     << ",\"response\":" << JsonLine(listed[i]) << "}\n";
    }
    return FleetExitCode(fleet, outcomes, kExitNotFinished);
  }
  // One table, ids qualified by node, newest first.
  google::protobuf::RepeatedPtrField<v1::Experiment> merged;
  for (size_t i = 0; i < fleet.nodes.size(); ++i) {
    for (v1::Experiment& experiment : *listed[i].mutable_experiments()) {
      experiment.set_id(absl::StrCat(fleet.nodes[i].name, "/", experiment.id()));
      *merged.Add() = std::move(experiment);
    }
  }
  std::stable_sort(merged.begin(), merged.end(),
                   [](const v1::Experiment& a, const v1::Experiment& b) {
                     return std::make_pair(a.created().seconds(), a.created().nanos()) >
                            std::make_pair(b.created().seconds(), b.created().nanos());
                   });
  Session session(fleet.env, ConnectionOptions(), std::nullopt);
  if (merged.empty()) {
    *fleet.env.out << "no experiments\n";
  } else {
    *fleet.env.out << RenderExperimentTable(merged, session.now(), fleet.env.time_zone);
  }
  for (size_t i = 0; i < fleet.nodes.size(); ++i) {
    if (!listed[i].next_page_token().empty()) {
      *fleet.env.out << "more on " << fleet.nodes[i].name << ": add --node "
                     << fleet.nodes[i].name << " --page-token " << listed[i].next_page_token()
                     << " (or --all)\n";
    }
  }
  return FleetExitCode(fleet, outcomes, kExitNotFinished);
}

// get, watch, cancel: the node a (possibly unqualified) id lives on, then the command there.
int RunFleetOnOneExperiment(const FleetRun& fleet, const Command& command, ParsedArgs args) {
  const QualifiedId qualified = SplitQualifiedId(args.positionals[0]);
  size_t node_index = fleet.nodes.size();
  if (!qualified.node.empty()) {
    for (size_t i = 0; i < fleet.nodes.size(); ++i) {
      if (fleet.nodes[i].name == qualified.node) node_index = i;
    }
    if (node_index == fleet.nodes.size()) {
      std::vector<std::string> names;
      for (const DaemonNode& node : fleet.nodes) names.push_back(node.name);
      return ReportUsageError(fleet.env,
                              absl::StrCat("no node \"", qualified.node, "\" in the fleet (",
                                           absl::StrJoin(names, ", "), ")"),
                              command.name);
    }
  } else {
    // Ask every node; ids are per node, so the same id may exist on several.
    std::vector<NodeOutcome> outcomes = RunOnEachNode(fleet, [&](Session& session, size_t) {
      v1::GetExperimentRequest request;
      request.set_experiment_id(qualified.id);
      ClientContext context;
      session.SetUnaryDeadline(context);
      v1::Experiment experiment;
      const grpc::Status status = session.profiler().GetExperiment(&context, request, &experiment);
      return status.ok() ? kExitOk : session.ReportRpcError(status);
    });
    std::vector<std::string> holders, silent;
    for (size_t i = 0; i < outcomes.size(); ++i) {
      if (outcomes[i].exit_code == kExitOk) {
        holders.push_back(fleet.nodes[i].name);
        node_index = i;
      } else if (!absl::StrContains(outcomes[i].err, "NOT_FOUND")) {
        silent.push_back(absl::StrCat(fleet.nodes[i].name, " (", ErrorText(outcomes[i]), ")"));
      }
    }
    if (holders.size() > 1) {
      return ReportUsageError(
          fleet.env,
          absl::StrCat(qualified.id, " exists on ", absl::StrJoin(holders, ", "),
                       ": qualify it, e.g. ", holders[0], "/", qualified.id),
          command.name);
    }
    if (holders.empty()) {
      if (!silent.empty()) {
        *fleet.env.err << "error: " << qualified.id << " is on no node that answered; no answer "
                       << "from " << absl::StrJoin(silent, "; ") << "\n";
        return kExitPartial;
      }
      *fleet.env.err << "error: NOT_FOUND: " << qualified.id << " is on none of the "
                     << fleet.nodes.size() << " nodes\n";
      return kExitUsage;
    }
  }
  const DaemonNode& node = fleet.nodes[node_index];
  args.positionals[0] = qualified.id;
  ClientEnvironment env = fleet.env;
  env.unary_rpc_deadline = fleet.node_timeout;
  if (!args.Switch("json") && command.name != "watch") *env.out << "node: " << node.name << "\n";
  Session session(env, NodeConnection(fleet.connection, node), fleet.globals.user, node);
  return command.run(session, args);
}

// The nodes the global options name: a fleet file or several --target, narrowed by --node.
// Empty when neither is given (one daemon, as before).
absl::StatusOr<std::vector<DaemonNode>> ResolveNodes(const ClientEnvironment& env,
                                                     const GlobalOptions& globals,
                                                     absl::Duration& node_timeout) {
  std::vector<DaemonNode> nodes;
  node_timeout = kDefaultNodeTimeout;
  std::string fleet_path = globals.fleet.value_or(env.fleet_from_env);
  if (globals.fleet.has_value() && globals.fleet->empty()) {
    fleet_path = absl::StrCat(env.home_dir, "/.config/gpuprof/fleet.textproto");
  }
  if (!globals.targets.empty() && globals.fleet.has_value()) {
    return absl::InvalidArgumentError("give --fleet or --target, not both");
  }
  if (!globals.targets.empty()) {
    for (const std::string& target : globals.targets) {
      ASSIGN_OR_RETURN(DaemonNode node, ParseTargetFlag(target));
      nodes.push_back(std::move(node));
    }
  } else if (!fleet_path.empty()) {
    ASSIGN_OR_RETURN(FleetConfig fleet, LoadFleetFile(fleet_path));
    nodes = std::move(fleet.nodes);
    if (fleet.node_timeout.has_value()) node_timeout = *fleet.node_timeout;
  }
  RETURN_IF_ERROR(CheckNodeNames(nodes));
  if (globals.node.has_value()) {
    if (nodes.empty()) {
      return absl::InvalidArgumentError("--node picks from a fleet: add --fleet or --target NAME=ADDR");
    }
    ASSIGN_OR_RETURN(nodes, SelectNodes(nodes, *globals.node));
  }
  if (globals.node_timeout.has_value()) {
    if (!absl::ParseDuration(*globals.node_timeout, &node_timeout) ||
        node_timeout <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--node-timeout \"", *globals.node_timeout, "\": a positive duration such as 10s"));
    }
  }
  return nodes;
}

// Parses a command's flags and positionals and runs it.
int RunCommand(const Command& command, const ClientEnvironment& env, const GlobalOptions& globals,
               const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, command.flags());
  if (!parsed.ok()) return ReportUsageError(env, parsed.status().message(), command.name);
  if (parsed->Switch("help")) {
    *env.out << CommandHelp(command);
    return kExitOk;
  }
  if (parsed->positionals.size() != command.positionals.size()) {
    const std::string message =
        parsed->positionals.size() < command.positionals.size()
            ? absl::StrCat(command.name, " needs ", absl::StrJoin(command.positionals, " "),
                           ": gpuprof ", command.usage)
            : absl::StrCat("unexpected argument \"",
                           parsed->positionals[command.positionals.size()], "\"");
    return ReportUsageError(env, message, command.name);
  }
  absl::StatusOr<Session> made = MakeSession(env, globals, *parsed);
  if (!made.ok()) return ReportUsageError(env, made.status().message(), "");
  Session& session = *made;
  return command.run(session, *parsed);
}

// A command across several nodes.
int RunFleetCommand(const Command& command, const FleetRun& fleet,
                    const std::vector<std::string>& args) {
  absl::StatusOr<ParsedArgs> parsed = ParseArgs(args, command.flags());
  if (!parsed.ok()) return ReportUsageError(fleet.env, parsed.status().message(), command.name);
  if (parsed->Switch("help")) {
    *fleet.env.out << CommandHelp(command);
    return kExitOk;
  }
  if (parsed->Has("target")) {
    return ReportUsageError(fleet.env, "a command's --target and a fleet exclude each other",
                            command.name);
  }
  if (parsed->positionals.size() != command.positionals.size()) {
    return ReportUsageError(fleet.env,
                            absl::StrCat(command.name, " takes ", command.positionals.size(),
                                         " argument(s): gpuprof ", command.usage),
                            command.name);
  }
  if (command.name == "gpus" || command.name == "health") {
    return RunFleetSections(fleet, command, *parsed);
  }
  if (command.name == "list") return RunFleetList(fleet, *parsed);
  if (command.name == "get" || command.name == "watch" || command.name == "cancel") {
    return RunFleetOnOneExperiment(fleet, command, *std::move(parsed));
  }
  return ReportUsageError(fleet.env,
                          absl::StrCat(command.name, " works on one node: pick it with --node NAME"),
                          command.name);
}

int RunHelp(const ClientEnvironment& env, const std::vector<std::string>& args) {
  if (args.empty()) {
    *env.out << MainHelp();
    return kExitOk;
  }
  if (args[0] == "token-hash") {
    *env.out << TokenHashHelp();
    return kExitOk;
  }
  if (args[0] == "submit") {
    if (args.size() == 1) {
      *env.out << SubmitHelp();
      return kExitOk;
    }
    auto builder = ExperimentRequestBuilder::ForWorkload(args[1]);
    if (!builder.ok()) return ReportUsageError(env, builder.status().message(), "submit");
    *env.out << SubmitWorkloadHelp(*builder);
    return kExitOk;
  }
  const Command* command = FindCommand(args[0]);
  if (command == nullptr) {
    return ReportUsageError(env, absl::StrCat("unknown command \"", args[0], "\""), "");
  }
  *env.out << CommandHelp(*command);
  return kExitOk;
}

}  // namespace

std::string StatusCodeName(grpc::StatusCode code) {
  static constexpr absl::string_view kNames[] = {"OK",
                                                 "CANCELLED",
                                                 "UNKNOWN",
                                                 "INVALID_ARGUMENT",
                                                 "DEADLINE_EXCEEDED",
                                                 "NOT_FOUND",
                                                 "ALREADY_EXISTS",
                                                 "PERMISSION_DENIED",
                                                 "RESOURCE_EXHAUSTED",
                                                 "FAILED_PRECONDITION",
                                                 "ABORTED",
                                                 "OUT_OF_RANGE",
                                                 "UNIMPLEMENTED",
                                                 "INTERNAL",
                                                 "UNAVAILABLE",
                                                 "DATA_LOSS",
                                                 "UNAUTHENTICATED"};
  const int index = static_cast<int>(code);
  if (index < 0 || index >= static_cast<int>(std::size(kNames))) {
    return absl::StrCat("CODE_", index);
  }
  return std::string(kNames[index]);
}

int ReportRpcError(std::ostream& err, const grpc::Status& status,
                 const ConnectionOptions& connection) {
  // Refusals echo what was asked (an id, a label), which may be someone else's text.
  const std::string message = EscapeForTerminal(status.error_message());
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE && connection.tls()) {
    err << "error: UNAVAILABLE: no TLS session with gpuprofd at " << connection.target << ": "
        << message
        << "\nif the daemon is running, it refused the handshake: check that --tls-ca is "
           "the CA that signed the daemon's certificate and that your --tls-cert is signed "
           "by the daemon's client CA, not expired and not revoked (the daemon requires a "
           "client certificate unless it accepts tokens)\n";
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    err << "error: UNAVAILABLE: cannot reach gpuprofd at " << connection.target << ": " << message
        << "; is it running? set --target or GPUPROF_TARGET\n";
  } else if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
    err << "error: UNAUTHENTICATED: gpuprofd does not know who you are: " << message << "\n";
  } else {
    err << "error: " << StatusCodeName(status.error_code()) << ": " << message << "\n";
  }
  return ExitCodeForRpcStatus(status.error_code());
}

int ExitCodeForRpcStatus(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return kExitOk;
    // The request itself was wrong: fix the command line or the id.
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return kExitUsage;
    case grpc::StatusCode::UNAVAILABLE:
      return kExitUnavailable;
    default:
      return kExitOtherError;
  }
}

int RunGpuprof(const std::vector<std::string>& args, const ClientEnvironment& env) {
  GlobalOptions globals;
  size_t next = 0;
  // Options before the command: --target, --user, --help, --version.
  while (next < args.size() && absl::StartsWith(args[next], "-")) {
    const std::string& word = args[next];
    if (word == "--help" || word == "-h") {
      *env.out << MainHelp();
      return kExitOk;
    }
    if (word == "--version") {
      *env.out << "gpuprof " << GpuprofVersion() << "\n";
      return kExitOk;
    }
    struct ValueOption {
      absl::string_view name;
      std::optional<std::string>* value;
    };
    if (word == "--fleet") {
      globals.fleet = "";
      ++next;
      continue;
    }
    bool matched = false;
    for (const ValueOption& option :
         {ValueOption{"--target", &globals.target}, ValueOption{"--user", &globals.user},
          ValueOption{"--fleet", &globals.fleet}, ValueOption{"--node", &globals.node},
          ValueOption{"--node-timeout", &globals.node_timeout},
          ValueOption{"--tls-ca", &globals.tls_ca}, ValueOption{"--tls-cert", &globals.tls_cert},
          ValueOption{"--tls-key", &globals.tls_key},
          ValueOption{"--token", &globals.token_file}}) {
      if (word == option.name) {
        if (next + 1 >= args.size()) {
          return ReportUsageError(env, absl::StrCat(option.name, " needs a value"), "");
        }
        *option.value = args[++next];
        matched = true;
      } else if (absl::StartsWith(word, absl::StrCat(option.name, "="))) {
        *option.value = word.substr(option.name.size() + 1);
        matched = true;
      }
    }
    if (!matched) {
      return ReportUsageError(env, absl::StrCat("unknown flag ", word, " before the command"), "");
    }
    if (absl::StartsWith(word, "--target")) globals.targets.push_back(*globals.target);
    ++next;
  }
  if (next >= args.size()) {
    *env.err << MainHelp();
    return kExitUsage;
  }
  const std::string& name = args[next];
  std::vector<std::string> rest(args.begin() + next + 1, args.end());
  // "-h" is the one single-dash flag people type out of habit.
  for (std::string& word : rest) {
    if (word == "-h") word = "--help";
    if (word == "-o" && (name == "trace" || name == "sweep")) word = "--output";
  }
  if (name == "help") return RunHelp(env, rest);
  // Local: needs no daemon, so nothing about the connection may stop it.
  if (name == "token-hash") return RunTokenHashCommand(rest, env);
  // `sweep ... --fleet[=PATH]` and `compare ... --fleet[=PATH]`: the same as before the command.
  if (name == "sweep" || name == "compare") {
    for (auto word = rest.begin(); word != rest.end();) {
      if (*word == "--fleet" || absl::StartsWith(*word, "--fleet=")) {
        globals.fleet = *word == "--fleet" ? "" : word->substr(8);
        word = rest.erase(word);
      } else {
        ++word;
      }
    }
  }
  absl::Duration node_timeout;
  absl::StatusOr<std::vector<DaemonNode>> nodes = ResolveNodes(env, globals, node_timeout);
  if (!nodes.ok()) return ReportUsageError(env, nodes.status().message(), "");
  if (nodes->size() == 1) globals.single_node = nodes->front();
  if (name == "submit") {
    if (nodes->size() > 1) {
      return ReportUsageError(env, "submit runs on one node: pick it with --node NAME", "");
    }
    return RunSubmit(env, globals, rest);
  }
  // Sweeps and comparisons across the nodes: a fleet of several, or a fleet file's one node
  // when no --node picked it (one --target stays one daemon).
  const bool from_fleet_file =
      globals.targets.empty() && (globals.fleet.has_value() || !env.fleet_from_env.empty());
  if ((name == "sweep" || name == "compare") &&
      (nodes->size() > 1 || (nodes->size() == 1 && from_fleet_file && !globals.node.has_value()))) {
    absl::StatusOr<ConnectionOptions> connection = ResolveConnection(env, globals, ParsedArgs());
    if (!connection.ok()) return ReportUsageError(env, connection.status().message(), "");
    const FleetTargets fleet{env, *std::move(nodes), node_timeout, *std::move(connection),
                             globals.user};
    return name == "sweep" ? RunFleetSweepCommand(rest, fleet)
                           : RunFleetCompareCommand(rest, fleet);
  }
  // Baselines live on one daemon.
  if (name == "sweep" || name == "compare" || name == "baseline") {
    if (nodes->size() > 1) {
      return ReportUsageError(env, absl::StrCat(name, " runs on one node: pick it with --node NAME"),
                              "");
    }
    absl::StatusOr<ConnectionOptions> connection = ResolveConnection(env, globals, ParsedArgs());
    if (!connection.ok()) return ReportUsageError(env, connection.status().message(), "");
    CommandDefaults defaults{*std::move(connection), std::nullopt, globals.user};
    if (globals.single_node.has_value()) {
      defaults.connection = NodeConnection(std::move(defaults.connection), *globals.single_node);
      defaults.node = globals.single_node;
    }
    if (name == "sweep") return RunSweepCommand(rest, env, defaults);
    if (name == "compare") return RunCompareCommand(rest, env, defaults);
    return RunBaselineCommand(rest, env, defaults);
  }
  const Command* command = FindCommand(name);
  if (command == nullptr) {
    return ReportUsageError(env, absl::StrCat("unknown command \"", name, "\"; run gpuprof help"),
                            "");
  }
  if (nodes->size() <= 1) return RunCommand(*command, env, globals, rest);
  absl::StatusOr<ConnectionOptions> connection = ResolveConnection(env, globals, ParsedArgs());
  if (!connection.ok()) return ReportUsageError(env, connection.status().message(), "");
  return RunFleetCommand(
      *command, FleetRun{env, globals, *std::move(nodes), node_timeout, *std::move(connection)},
      rest);
}

}  // namespace gpuprof::client
