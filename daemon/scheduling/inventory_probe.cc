#include "daemon/scheduling/inventory_probe.h"

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof::daemon {

absl::StatusOr<v1::ListGpusResponse> ProbeInventory(const InventoryProbeOptions& options) {
  // Shared with the worker's reader thread, which may outlive a probe that timed out.
  struct ProbeState {
    absl::Mutex mutex;
    std::optional<v1::ListGpusResponse> inventory;
    std::optional<WorkerExit> exit;
    absl::Notification done;
  };
  auto state = std::make_shared<ProbeState>();
  auto process = WorkerProcess::Start(
      options.launch,
      [state](const worker_protocol::WorkerReport& report) {
        if (!report.has_probe()) return;
        absl::MutexLock lock(&state->mutex);
        state->inventory = report.probe();
        if (!state->done.HasBeenNotified()) state->done.Notify();
      },
      [state](const WorkerExit& exit) {
        absl::MutexLock lock(&state->mutex);
        state->exit = exit;
        if (!state->done.HasBeenNotified()) state->done.Notify();
      });
  if (!process.ok()) return process.status();
  worker_protocol::WorkerCommand command;
  command.mutable_probe()->set_measure_copy_bandwidth(options.measure_copy_bandwidth);
  (void)(*process)->Send(command);
  const bool answered = state->done.WaitForNotificationWithTimeout(options.timeout);
  worker_protocol::WorkerCommand shutdown;
  shutdown.mutable_shutdown();
  (void)(*process)->Send(shutdown);
  absl::MutexLock lock(&state->mutex);
  if (state->inventory.has_value()) return *state->inventory;
  v1::ListGpusResponse inventory;
  inventory.set_probe_error(answered ? absl::StrCat("the probe worker ", state->exit->description,
                                                    ": ", state->exit->stderr_tail)
                                     : absl::StrCat("the probe worker did not answer within ",
                                                    absl::FormatDuration(options.timeout)));
  return inventory;
}

}  // namespace gpuprof::daemon
