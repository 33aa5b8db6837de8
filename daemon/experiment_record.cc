#include "daemon/experiment_record.h"

#include "absl/time/clock.h"
#include "common/experiment_states.h"
#include "google/protobuf/util/time_util.h"
#include "workloads/spec_table.h"

namespace gpuprof::daemon {

using ::google::protobuf::util::TimeUtil;

google::protobuf::Timestamp TimestampNow() {
  return TimeUtil::NanosecondsToTimestamp(absl::ToUnixNanos(absl::Now()));
}

v1::ExperimentEvent StateEvent(v1::ExperimentState state, const std::string& reason) {
  v1::ExperimentEvent event;
  event.mutable_state()->set_state(state);
  event.mutable_state()->set_reason(reason);
  return event;
}

void ApplyEvent(const v1::ExperimentEvent& event, v1::Experiment& experiment) {
  experiment.set_last_seq(event.seq());
  if (event.has_state()) {
    const auto& change = event.state();
    experiment.set_state(change.state());
    if (!change.reason().empty()) experiment.set_reason(change.reason());
    if (!change.worker_stderr_tail().empty()) {
      experiment.set_worker_stderr_tail(change.worker_stderr_tail());
    }
    if (change.state() == v1::RUNNING) {
      // A run after a preemption starts afresh.
      if (change.reason().empty()) experiment.clear_reason();
      experiment.mutable_gpu_ids()->CopyFrom(change.gpu_ids());
      *experiment.mutable_started() = event.time();
      experiment.set_queue_position(0);
    }
    if (IsTerminalState(change.state())) *experiment.mutable_finished() = event.time();
  } else if (event.has_result()) {
    *experiment.mutable_result() = event.result();
  }
}

std::pair<v1::Experiment, v1::ExperimentEvent> NewExperiment(
    const Admission& admission, v1::ExperimentRequest request, const std::string& sweep_id,
    int point, int max_concurrent_gpus, const google::protobuf::Timestamp& now) {
  v1::Experiment experiment;
  experiment.set_sweep_id(sweep_id);
  experiment.set_sweep_point(point);
  experiment.set_sweep_max_concurrent_gpus(max_concurrent_gpus);
  experiment.set_state(v1::QUEUED);
  experiment.set_workload(workloads::WorkloadOf(request));
  experiment.set_user(admission.user());
  if (admission.on_behalf()) experiment.set_submitted_by(admission.actor().user);
  experiment.set_authenticated_by(admission.actor().authenticated_by);
  *experiment.mutable_created() = now;
  experiment.set_last_seq(1);
  *experiment.mutable_request() = std::move(request);
  v1::ExperimentEvent first = StateEvent(v1::QUEUED);
  first.set_seq(1);
  *first.mutable_time() = now;
  return {std::move(experiment), std::move(first)};
}

std::pair<v1::Experiment, v1::ExperimentEvent> InterruptedAtRestart(
    v1::Experiment experiment, const google::protobuf::Timestamp& now) {
  v1::ExperimentEvent event =
      StateEvent(v1::INTERRUPTED, "gpuprofd stopped while the experiment ran");
  event.set_experiment_id(experiment.id());
  event.set_seq(experiment.last_seq() + 1);
  *event.mutable_time() = now;
  ApplyEvent(event, experiment);
  return {std::move(experiment), std::move(event)};
}

}  // namespace gpuprof::daemon
