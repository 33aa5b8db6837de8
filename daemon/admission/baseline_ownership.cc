#include "daemon/admission/baseline_ownership.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpuprof::daemon {
namespace {

// PERMISSION_DENIED naming the owner unless `editor` may `verb` the stored baseline.
absl::Status CheckMayChange(const v1::Baseline& stored, const BaselineEditor& editor,
                            absl::string_view verb) {
  if (editor.admin || (!stored.owner().empty() && stored.owner() == editor.user)) {
    return absl::OkStatus();
  }
  const std::string you =
      absl::StrCat("(you are ", editor.user, ", ", editor.authenticated_by, ")");
  if (stored.owner().empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat("baseline \"", stored.name(),
                     "\" has no owner (it was saved before baselines had "
                     "owners); only an admin may ",
                     verb, " it ", you));
  }
  return absl::PermissionDeniedError(absl::StrCat("baseline \"", stored.name(), "\" belongs to ",
                                                  stored.owner(),
                                                  "; only its owner or an admin "
                                                  "may ",
                                                  verb, " it ", you));
}

// The audit entry of a change by `editor`; an admin changing another user's baseline acts on
// their behalf.
v1::AuditEntry AuditOf(const BaselineEditor& editor, const std::string& owner,
                       const std::string& action, const std::string& target, std::string detail) {
  v1::AuditEntry entry;
  entry.set_actor(editor.user);
  entry.set_authenticated_by(editor.authenticated_by);
  if (!owner.empty() && owner != editor.user) entry.set_on_behalf_of(owner);
  entry.set_action(action);
  // In the experiment column, as sweeps are: `gpuprof audit --experiment ID` finds the
  // baselines that named the run.
  entry.set_experiment_id(target);
  entry.set_detail(std::move(detail));
  return entry;
}

}  // namespace

absl::StatusOr<ExperimentStore::BaselineWrite> DecideBaselineSave(const v1::Baseline* stored,
                                                                  v1::Baseline baseline,
                                                                  bool replace,
                                                                  const BaselineEditor& editor) {
  baseline.set_user(editor.user);
  ExperimentStore::BaselineWrite write;
  if (stored == nullptr) {
    baseline.set_owner(editor.user);
    write.audit = AuditOf(editor, baseline.owner(), "baseline-save", baseline.target_id(),
                          absl::StrCat("baseline ", baseline.name(), " -> ", baseline.target_id()));
  } else {
    if (!replace) {
      return absl::AlreadyExistsError(absl::StrCat(
          "baseline \"", stored->name(), "\" already exists (",
          stored->owner().empty() ? "no owner" : absl::StrCat("owner ", stored->owner()),
          ", naming ", stored->target_id(),
          "); replace it with --replace (its owner or an admin)"));
    }
    if (absl::Status allowed = CheckMayChange(*stored, editor, "replace"); !allowed.ok()) {
      return allowed;
    }
    baseline.set_owner(stored->owner());
    write.audit =
        AuditOf(editor, stored->owner(), "baseline-replace", baseline.target_id(),
                absl::StrCat("baseline ", baseline.name(), " -> ", baseline.target_id(), " (was ",
                             stored->target_id(), ", saved by ", stored->user(), ")"));
  }
  *write.audit.mutable_time() = baseline.created();
  write.baseline = std::move(baseline);
  return write;
}

absl::StatusOr<ExperimentStore::BaselineWrite> DecideBaselineDelete(const v1::Baseline* stored,
                                                                    const std::string& name,
                                                                    const BaselineEditor& editor) {
  if (stored == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("name: no baseline named \"", name, "\" (gpuprof baseline list shows them)"));
  }
  if (absl::Status allowed = CheckMayChange(*stored, editor, "delete"); !allowed.ok()) {
    return allowed;
  }
  ExperimentStore::BaselineWrite write;
  write.audit =
      AuditOf(editor, stored->owner(), "baseline-delete", stored->target_id(),
              absl::StrCat("baseline ", name, " deleted (it named ", stored->target_id(),
                           ", owner ", stored->owner().empty() ? "none" : stored->owner(), ")"));
  return write;
}

}  // namespace gpuprof::daemon
