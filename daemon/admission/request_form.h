// The RPC boundary's checks, run on every request before anything else looks at it: an id or
// a name that is not one, or text beyond its limit, is refused with a short error instead of
// being looked up, stored or echoed whole (an error echoing a 10,000-byte id does not fit in the
// client's metadata limit).
#ifndef GPUPROF_DAEMON_ADMISSION_REQUEST_FORM_H_
#define GPUPROF_DAEMON_ADMISSION_REQUEST_FORM_H_

#include "absl/status/status.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/profiler.pb.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon {

// The RPC boundary, before anything else looks at a request: ids and names have their form
// and a bounded length, free text a bounded length, and the whole message is well formed
// (CheckWellFormed). INVALID_ARGUMENT naming the field, an excerpt of the value, its length and
// the form or limit. A request that did not parse (text that is not UTF-8) is refused first,
// with the field that holds it (proto/wire/unparsable_request.h). Deeper checks (an ExperimentRequest's fields) are admission's.
absl::Status CheckRequestForm(const v1::ExperimentRequest& request);
absl::Status CheckRequestForm(const v1::WatchRequest& request);
absl::Status CheckRequestForm(const v1::CancelRequest& request);
absl::Status CheckRequestForm(const v1::GetExperimentRequest& request);
absl::Status CheckRequestForm(const v1::ListExperimentsRequest& request);
absl::Status CheckRequestForm(const v1::SweepRequest& request);
absl::Status CheckRequestForm(const v1::WatchSweepRequest& request);
absl::Status CheckRequestForm(const v1::GetSweepRequest& request);
absl::Status CheckRequestForm(const v1::ListSweepsRequest& request);
absl::Status CheckRequestForm(const v1::CancelSweepRequest& request);
absl::Status CheckRequestForm(const v1::SaveBaselineRequest& request);
absl::Status CheckRequestForm(const v1::ListBaselinesRequest& request);
absl::Status CheckRequestForm(const v1::DeleteBaselineRequest& request);
absl::Status CheckRequestForm(const v1::GetQuotaRequest& request);
absl::Status CheckRequestForm(const v1::ListAuditRequest& request);
absl::Status CheckRequestForm(const v1::ClearGpuHealthRequest& request);
absl::Status CheckRequestForm(const v1::ListGpusRequest& request);
absl::Status CheckRequestForm(const v1::WhoAmIRequest& request);
absl::Status CheckRequestForm(const v1::GetCaptureReportRequest& request);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_REQUEST_FORM_H_
