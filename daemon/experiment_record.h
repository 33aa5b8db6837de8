// An experiment's stored record and the events that change it: pure functions, so that the
// manager, start-up recovery and tests build and apply events one way.
#ifndef GPUPROF_DAEMON_EXPERIMENT_RECORD_H_
#define GPUPROF_DAEMON_EXPERIMENT_RECORD_H_

#include <string>
#include <utility>

#include "daemon/admission/admission.h"
#include "google/protobuf/timestamp.pb.h"
#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::daemon {

google::protobuf::Timestamp TimestampNow();

// A state change to `state`, with `reason` (unnumbered, untimed).
v1::ExperimentEvent StateEvent(v1::ExperimentState state, const std::string& reason = "");

// What `event` changes in the experiment it belongs to: its last seq, state, reason, GPUs,
// start and end times, or result.
void ApplyEvent(const v1::ExperimentEvent& event, v1::Experiment& experiment);

// An admitted request as it is stored: the experiment, QUEUED, and its first event (seq 1).
std::pair<v1::Experiment, v1::ExperimentEvent> NewExperiment(
    const Admission& admission, v1::ExperimentRequest request, const std::string& sweep_id,
    int point, int max_concurrent_gpus, const google::protobuf::Timestamp& now);

// A stored RUNNING experiment found at start-up: its INTERRUPTED event (the next seq, at
// `now`) and the experiment with it applied.
std::pair<v1::Experiment, v1::ExperimentEvent> InterruptedAtRestart(
    v1::Experiment experiment, const google::protobuf::Timestamp& now);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_EXPERIMENT_RECORD_H_
