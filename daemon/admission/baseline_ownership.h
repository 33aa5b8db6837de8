// Who may change a named baseline: the rules behind `gpuprof baseline save --replace` and
// `gpuprof baseline delete`, decided on the baseline as stored. SweepManager runs them inside
// the store's write transaction (ExperimentStore::ChangeBaseline), so that nothing can change
// the baseline between the check and the write.
#ifndef GPUPROF_DAEMON_ADMISSION_BASELINE_OWNERSHIP_H_
#define GPUPROF_DAEMON_ADMISSION_BASELINE_OWNERSHIP_H_

#include <string>

#include "absl/status/statusor.h"
#include "daemon/store/experiment_store.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon {

// Who asks to change a baseline, as the daemon authenticated them.
struct BaselineEditor {
  std::string user;
  std::string authenticated_by;
  bool admin = false;
};

// The refusal reason of a change by someone other than the owner or an admin (the label of
// gpuprof_access_refusals_total and the audit's reason, as for experiments).
inline constexpr char kBaselineNotOwner[] = "not-owner";

// A save of `baseline` (name, target_id, description and created set) by `editor` over `stored`
// (nullptr when the name is free):
// - a free name: the baseline is stored with the editor as its owner; audited `baseline-save`.
// - a taken name without `replace`: ALREADY_EXISTS naming the owner.
// - with `replace`: the owner or an admin only, else PERMISSION_DENIED naming the owner. A
//   baseline without an owner (saved before baselines had owners) is nobody's: admins only.
//   The owner stays the owner; audited `baseline-replace` with the target it replaced.
absl::StatusOr<ExperimentStore::BaselineWrite> DecideBaselineSave(const v1::Baseline* stored,
                                                                  v1::Baseline baseline,
                                                                  bool replace,
                                                                  const BaselineEditor& editor);

// A delete of the baseline `name` by `editor`: NOT_FOUND when there is none; the owner or an
// admin only, as for a replace; audited `baseline-delete` with what the baseline named.
absl::StatusOr<ExperimentStore::BaselineWrite> DecideBaselineDelete(const v1::Baseline* stored,
                                                                    const std::string& name,
                                                                    const BaselineEditor& editor);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_BASELINE_OWNERSHIP_H_
