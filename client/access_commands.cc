#include "client/access_commands.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/listing_output.h"
#include "client/table.h"
#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

std::vector<FlagSpec> WhoAmIFlags() {
  return {JsonFlag("print the CallerInfo as JSON"), TargetFlag(), HelpFlag()};
}

int PrintCaller(Session& session, const v1::CallerInfo& caller) {
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

int RunWhoAmI(Session& session, const ParsedArgs& args) {
  return session.CallAndPrint(
      &v1::Profiler::StubInterface::WhoAmI, {}, args.Switch("json"),
      [&session](const v1::CallerInfo& caller) { return PrintCaller(session, caller); });
}

std::vector<FlagSpec> QuotaFlags() {
  return {{.name = "user", .value_syntax = "NAME", .help = "another user's (admins only)"},
          JsonFlag("print the QuotaReport as JSON"),
          TargetFlag(),
          HelpFlag()};
}

int PrintQuota(Session& session, const v1::QuotaReport& report) {
  const v1::Quota& limits = report.limits();
  const auto limit = [&](bool has, const std::string& value) {
    return report.admin() ? std::string("none (admin)") : has ? value : std::string("unlimited");
  };
  TextTable table;
  table.AddRow({"QUOTA", "LIMIT", "IN USE"});
  table.AddRow(
      {"max_queued_experiments",
       limit(limits.has_max_queued_experiments(), absl::StrCat(limits.max_queued_experiments())),
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
  table.AddRow(
      {"max_priority", limit(limits.has_max_priority(), absl::StrCat(limits.max_priority())), "-"});
  session.out() << "user " << EscapeForTerminal(report.user()) << " (limits from "
                << EscapeForTerminal(report.source()) << ")\n"
                << table.Render("");
  return kExitOk;
}

int RunQuota(Session& session, const ParsedArgs& args) {
  v1::GetQuotaRequest request;
  request.set_user(args.Get("user").value_or(""));
  return session.CallAndPrint(
      &v1::Profiler::StubInterface::GetQuota, request, args.Switch("json"),
      [&session](const v1::QuotaReport& report) { return PrintQuota(session, report); });
}

std::vector<FlagSpec> AuditFlags() {
  return {{.name = "user", .value_syntax = "NAME", .help = "entries by or for this user"},
          {.name = "experiment", .value_syntax = "ID", .help = "entries about this experiment"},
          {.name = "limit", .value_syntax = "N", .help = "at most N entries (default 100)"},
          JsonFlag("one AuditEntry per line as JSON (NDJSON)"),
          ListingStyleFlags()[0],
          TargetFlag(),
          HelpFlag()};
}

int PrintAudit(Session& session, const v1::ListAuditResponse& response, ListingStyle style) {
  if (style == ListingStyle::kJsonLines) {
    session.out() << JsonLines(response.entries());
    return kExitOk;
  }
  TextTable table;
  if (style != ListingStyle::kNoHeaders) {
    table.AddRow({"TIME", "ACTOR", "FOR", "ACTION", "EXPERIMENT", "DETAIL"});
  }
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

int RunAudit(Session& session, const ParsedArgs& args) {
  v1::ListAuditRequest request;
  request.set_user(args.Get("user").value_or(""));
  request.set_experiment_id(args.Get("experiment").value_or(""));
  const absl::StatusOr<std::optional<int32_t>> limit = ParseCountFlag(args, "limit");
  if (!limit.ok()) {
    return ReportUsageError(session.env(), std::string(limit.status().message()), "audit");
  }
  if (limit->has_value()) request.set_limit(**limit);
  const absl::StatusOr<ListingStyle> style = ListingStyleOf(args);
  if (!style.ok()) return ReportUsageError(session.env(), style.status().message(), "audit");
  return session.CallAndPrint(
      &v1::Profiler::StubInterface::ListAudit, request, /*json=*/false,
      [&](const v1::ListAuditResponse& response) {
        return PrintAudit(session, response, *style);
      });
}

}  // namespace

Command WhoAmICommand() {
  return {.name = "whoami",
          .usage = "whoami [--json]",
          .summary = "who the daemon takes you for, and your role",
          .details =
              "Shows the user the daemon authenticated you as (unix peer credentials, loopback "
              "TCP\n"
              "owner, TLS client certificate or bearer token), whether you are an admin and why, "
              "and\n"
              "your Unix groups.",
          .flags = WhoAmIFlags,
          .run = RunWhoAmI};
}

Command QuotaCommand() {
  return {.name = "quota",
          .usage = "quota [--user U] [--json]",
          .summary = "your limits and what you use of them",
          .details =
              "Shows the quotas that apply to you (queued experiments, concurrent GPUs, "
              "GPU-hours\n"
              "over the last 24 hours, longest timeout, highest priority), where they come from "
              "in\n"
              "the daemon's policy, and your use now. Admins may ask about another user.",
          .flags = QuotaFlags,
          .run = RunQuota};
}

Command AuditCommand() {
  return {.name = "audit",
          .usage = "audit [--user U] [--experiment ID] [--limit N] [--json]",
          .summary = "the audit trail (admins)",
          .details =
              "Lists who submitted, cancelled or was refused what, and policy reloads, "
              "newest first.\n"
              "Only admins may read it.",
          .flags = AuditFlags,
          .run = RunAudit};
}

}  // namespace gpuprof::client
