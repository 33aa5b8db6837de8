// An experiment's stored record and the events that change it: pure functions, so that the
// manager, start-up recovery and tests build and apply events one way.
#ifndef GPUPROF_DAEMON_EXPERIMENT_RECORD_H_
#define GPUPROF_DAEMON_EXPERIMENT_RECORD_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

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
// `last_alive`: the last time the daemon knew it running, so that the downtime is not counted
// as run time) and the experiment with it applied.
std::pair<v1::Experiment, v1::ExperimentEvent> InterruptedAtRestart(
    v1::Experiment experiment, const google::protobuf::Timestamp& last_alive);

// Queue places (the scheduler's submit orders, first come first served) for what start-up
// recovers: `queued` keep their order; each of `interrupted` (sweep points a sweep may run
// again) gets the place its creation time gives it among them, kept for its re-run, instead of
// the back of the queue.
struct RecoveredOrders {
  std::vector<int64_t> queued;  // by index of `queued`
  std::map<std::string, int64_t> interrupted;  // by experiment id
  int64_t next = 0;  // the first order after all of them, for new submissions
};
RecoveredOrders RecoveredSubmitOrders(const std::vector<v1::Experiment>& queued,
                                      const std::vector<v1::Experiment>& interrupted);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_EXPERIMENT_RECORD_H_
