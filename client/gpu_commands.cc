#include "client/gpu_commands.h"

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/render.h"
#include "common/terminal_text.h"
#include "common/write_health.h"

namespace gpuprof::client {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

// ---- gpus ----

std::vector<FlagSpec> GpusFlags() {
  return {JsonFlag("print the ListGpusResponse as JSON"), TargetFlag(), HelpFlag()};
}

int RunGpus(Session& session, const ParsedArgs& args) {
  return session.CallAndPrint(&v1::Profiler::StubInterface::ListGpus, {}, args.Switch("json"),
                              [&session](const v1::ListGpusResponse& response) {
                                session.out() << RenderGpus(response);
                                return kExitOk;
                              });
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
  return session.CallAndPrint(&v1::Profiler::StubInterface::ClearGpuHealth, request,
                              args.Switch("json"), [&session](const v1::GpuInfo& gpu) {
                                session.out()
                                    << "GPU " << gpu.index() << " ("
                                    << EscapeForTerminal(gpu.uuid()) << "): back in service\n";
                                return kExitOk;
                              });
}

// ---- health ----

std::vector<FlagSpec> HealthFlags() { return {TargetFlag(), HelpFlag()}; }

int RunHealth(Session& session, const ParsedArgs&) {
  HealthCheckRequest request;
  request.set_service("");
  HealthCheckResponse response;
  if (const int code =
          session.CallOrReport(&grpc::health::v1::Health::StubInterface::Check, request, response);
      code != kExitOk) {
    return code;
  }
  if (response.status() != HealthCheckResponse::SERVING) {
    session.out() << HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
    return kExitNotFinished;
  }
  // Reads served, writes maybe not: a daemon whose disk is full serves what it stored. A
  // daemon older than this service answers NOT_FOUND: it does not say, so take it as writing.
  request.set_service(kWritesHealthService);
  HealthCheckResponse writes;
  const grpc::Status asked =
      session.Call(&grpc::health::v1::Health::StubInterface::Check, request, writes);
  if (asked.ok() && writes.status() == HealthCheckResponse::NOT_SERVING) {
    session.out() << "SERVING reads only: writes NOT_SERVING (the disk holding gpuprofd's "
                     "database is full; free space there and gpuprofd carries on by itself)\n";
    return kExitNotFinished;
  }
  session.out() << "SERVING\n";
  return kExitOk;
}

// gpus and health: each node's own output under a header.
int RunFleetSections(Fleet& fleet, const Command& command, ParsedArgs args) {
  const bool json = args.Has("json") && args.Switch("json");
  std::vector<NodeOutcome> outcomes =
      fleet.RunOnEveryNode([&](Session& session, size_t) { return command.run(session, args); });
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const DaemonNode& node = fleet.node(i);
    const bool answered = outcomes[i].exit_code < kExitUsage;
    if (json) {
      std::string line = absl::StrCat("{\"node\":", JsonQuoted(node.name),
                                      ",\"address\":", JsonQuoted(node.address));
      if (answered) {
        absl::StrAppend(&line, ",\"response\":", absl::StripAsciiWhitespace(outcomes[i].out), "}");
      } else {
        absl::StrAppend(&line, ",\"error\":", JsonQuoted(Fleet::ErrorText(outcomes[i])), "}");
      }
      *fleet.env().out << line << "\n";
      continue;
    }
    *fleet.env().out << "== " << node.name << " (" << node.address << ")"
                     << (answered ? "" : ": NO ANSWER") << " ==\n"
                     << (answered ? outcomes[i].out : Fleet::ErrorText(outcomes[i]) + "\n");
  }
  const int code = fleet.ExitCode(outcomes);
  // health: a node that answers NOT_SERVING fails the whole check.
  if (code == kExitOk) {
    for (const NodeOutcome& outcome : outcomes) {
      if (outcome.exit_code != kExitOk) return outcome.exit_code;
    }
  }
  return code;
}

}  // namespace

Command GpusCommand() {
  return {.name = "gpus",
          .usage = "gpus [--json]",
          .summary = "the daemon's host, GPUs, leases and topology",
          .details =
              "Shows the host (driver, CUDA, NCCL, CUPTI and gpuprof versions, NUMA nodes), a "
              "table of\n"
              "GPUs with their spec and measured bandwidth and who holds them, the topology "
              "matrix\n"
              "(like nvidia-smi topo -m), the workloads the daemon runs and its JIT cache.",
          .flags = GpusFlags,
          .run = RunGpus,
          .run_on_fleet = RunFleetSections};
}

Command GpuCommand() {
  return {.name = "gpu",
          .usage = "gpu clear N [--reason TEXT]",
          .summary = "return a GPU drained by a hardware fault to service (admins)",
          .details =
              "A GPU whose driver reported a hardware Xid (or an uncorrectable memory error) "
              "is\n"
              "drained: no new experiment is placed on it, across daemon restarts, until an "
              "admin\n"
              "clears it. `gpuprof gpus` shows why it was drained; the clear goes into the "
              "audit\n"
              "trail with --reason.",
          .positionals = {"clear", "N"},
          .flags = GpuFlags,
          .run = RunGpu};
}

Command HealthCommand() {
  return {.name = "health",
          .usage = "health",
          .summary = "check that the daemon is serving",
          .details =
              "Calls grpc.health.v1.Health/Check for the whole server and prints "
              "SERVING or\n"
              "NOT_SERVING; exits 0 only when serving.",
          .flags = HealthFlags,
          .run = RunHealth,
          .run_on_fleet = RunFleetSections};
}

}  // namespace gpuprof::client
