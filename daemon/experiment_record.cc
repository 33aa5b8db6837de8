#include "daemon/experiment_record.h"

#include <algorithm>
#include <tuple>

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
    v1::Experiment experiment, const google::protobuf::Timestamp& last_alive) {
  v1::ExperimentEvent event =
      StateEvent(v1::INTERRUPTED, "gpuprofd stopped while the experiment ran");
  event.set_experiment_id(experiment.id());
  event.set_seq(experiment.last_seq() + 1);
  *event.mutable_time() = last_alive;
  ApplyEvent(event, experiment);
  return {std::move(experiment), std::move(event)};
}

RecoveredOrders RecoveredSubmitOrders(const std::vector<v1::Experiment>& queued,
                                      const std::vector<v1::Experiment>& interrupted) {
  // By creation time, then by id (a sweep's points are created at one time; ids are numbered
  // in the order they were stored).
  auto created_before = [](const v1::Experiment& a, const v1::Experiment& b) {
    return std::make_tuple(a.created().seconds(), a.created().nanos(), a.id().size(), a.id()) <
           std::make_tuple(b.created().seconds(), b.created().nanos(), b.id().size(), b.id());
  };
  std::vector<const v1::Experiment*> points;
  for (const v1::Experiment& point : interrupted) points.push_back(&point);
  std::stable_sort(points.begin(), points.end(),
                   [&](const v1::Experiment* a, const v1::Experiment* b) {
                     return created_before(*a, *b);
                   });
  // Queued experiment k gets (k + 1) * stride; a point placed before queued experiment k (the
  // first one created after it) gets k * stride + its rank among the points there.
  const int64_t stride = static_cast<int64_t>(points.size()) + 1;
  RecoveredOrders orders;
  for (size_t k = 0; k < queued.size(); ++k) {
    orders.queued.push_back((static_cast<int64_t>(k) + 1) * stride);
  }
  for (size_t j = 0; j < points.size(); ++j) {
    size_t before = 0;
    while (before < queued.size() && !created_before(*points[j], queued[before])) ++before;
    orders.interrupted[points[j]->id()] =
        static_cast<int64_t>(before) * stride + static_cast<int64_t>(j) + 1;
  }
  orders.next = (static_cast<int64_t>(queued.size()) + 1) * stride;
  return orders;
}

}  // namespace gpuprof::daemon
