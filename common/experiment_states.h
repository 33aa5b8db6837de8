// Facts about experiment states that the daemon, the client and the tests share.
#ifndef GPUPROF_COMMON_EXPERIMENT_STATES_H_
#define GPUPROF_COMMON_EXPERIMENT_STATES_H_

#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof {

// FINISHED, FAILED, CANCELLED, TIMED_OUT and INTERRUPTED: the experiment will not change again.
bool IsTerminalState(v1::ExperimentState state);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_EXPERIMENT_STATES_H_
