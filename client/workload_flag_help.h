// What `submit <workload> --help` says of each workload flag, and the explicit zeros submit
// refuses. Both ask the workload's own spec (workloads/, the CUDA-free half the daemon links):
// its defaults and its validation, so that help states what the daemon does.
#ifndef GPUPROF_CLIENT_WORKLOAD_FLAG_HELP_H_
#define GPUPROF_CLIENT_WORKLOAD_FLAG_HELP_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/command_line.h"
#include "client/request_builder.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::client {

// The oneof field of ExperimentRequest that holds the builder's workload.
const google::protobuf::FieldDescriptor* WorkloadField(const ExperimentRequestBuilder& builder);

// The builder's workload flags with their help: the field's proto comment (its first
// sentence), the default the daemon applies to a request that sets nothing else, and for an
// enum only the values the workload's validation accepts.
std::vector<FlagSpec> DescribedWorkloadFlags(const ExperimentRequestBuilder& builder);

// The builder's custom kernel flags (--kernel-name, --block-threads, ...) with the first
// sentence of their CustomKernel field's proto comment as help; empty for a workload that
// takes no custom kernel.
std::vector<FlagSpec> DescribedCustomKernelFlags(const ExperimentRequestBuilder& builder);

// Proto3 cannot tell an explicit 0 from an unset field, so the daemon would replace
// `--num-requests 0` by its default. InvalidArgument, naming the flag and what it takes, for
// each workload flag given as 0 where the workload's defaults fill in something else, and each
// common flag (--min-iters, --max-iters, --time-budget, --timeout, --tp) given as 0.
absl::Status CheckNoSilentZeros(const ExperimentRequestBuilder& builder, const ParsedArgs& args,
                                const v1::ExperimentRequest& request);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_WORKLOAD_FLAG_HELP_H_
