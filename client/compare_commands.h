// Comparisons and what they compare against: `gpuprof compare A B` (experiments, sweeps or
// baselines; across a fleet also fleet sweeps and node-qualified ids) and `gpuprof baseline`.
#ifndef GPUPROF_CLIENT_COMPARE_COMMANDS_H_
#define GPUPROF_CLIENT_COMPARE_COMMANDS_H_

#include <functional>
#include <string>

#include "client/command.h"
#include "client/command_line.h"
#include "client/session.h"
#include "grpcpp/support/status.h"
#include "sweep/compare.h"

namespace gpuprof::client {

// One side of `compare` from one daemon: an experiment (exp-...), a sweep (swp-...) or a
// baseline (NAME or baseline:NAME), with the provenance of one finished point.
grpc::Status ResolveCompareSide(Session& session, const std::string& name,
                                sweep::CompareSide& side);

// Fills a side of the comparison from its name; returns kExitOk, or the exit code after
// reporting why it could not.
using CompareResolver = std::function<int(const std::string& name, sweep::CompareSide& side)>;
// `compare A B` with its flags already parsed (two positionals): resolves both sides, prints
// the comparison in the chosen format and returns the exit code (5 on a regression).
int CompareAndPrint(const ClientEnvironment& env, const ParsedArgs& args,
                    const CompareResolver& resolve);

Command CompareCommand();
Command BaselineCommand();

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_COMPARE_COMMANDS_H_
