#include "common/experiment_states.h"

namespace gpuprof {

bool IsTerminalState(v1::ExperimentState state) {
  switch (state) {
    case v1::FINISHED:
    case v1::FAILED:
    case v1::CANCELLED:
    case v1::TIMED_OUT:
    case v1::INTERRUPTED:
      return true;
    case v1::EXPERIMENT_STATE_UNSPECIFIED:
    case v1::QUEUED:
    case v1::RUNNING:
    case v1::PREEMPTED:
    default:
      return false;
  }
}

}  // namespace gpuprof
