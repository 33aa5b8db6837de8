// `gpuprof get ID --command`: the `gpuprof submit ...` command line that asks for the same
// request again, built from the same flag tables `submit` parses, and checked by parsing it
// back with them.
#ifndef GPUPROF_CLIENT_SUBMIT_COMMAND_LINE_H_
#define GPUPROF_CLIENT_SUBMIT_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::client {

// The words after "gpuprof": {"submit", "attention", "--phase", "prefill", ...}, a flag for
// each field the request sets. FailedPrecondition naming the fields when no flags can say
// them (a repeated text holding a comma, a field no flag sets).
absl::StatusOr<std::vector<std::string>> SubmitCommandWords(const v1::ExperimentRequest& request);

// The request `get --command` reproduces: the one submitted, its workload's parameters as the
// run used them (the daemon's defaults filled in, from the provenance) so that a change of
// default does not change the rerun, and no user (the rerun is the caller's).
v1::ExperimentRequest RequestToReproduce(const v1::Experiment& experiment);

// One singular field's value as a flag reads it back: "4096", "bf16", "1m30s", "0:32000".
std::string FieldValueText(const google::protobuf::Message& message,
                           const google::protobuf::FieldDescriptor* field);

// The words as one line a POSIX shell splits back into them: "gpuprof submit index ...".
std::string ShellCommandLine(const std::vector<std::string>& words);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SUBMIT_COMMAND_LINE_H_
