// Checks an ExperimentRequest before anything is queued: a pure function of the request, the
// host's GPU inventory and the daemon's limits. The workload's own fields are checked by its
// spec (workloads/spec_table.h); this file checks what every request shares. Errors name the
// field, the value and what is allowed, e.g. "index.num_tokens: got -5; must be in [1, 16777216]".
#ifndef GPUPROF_DAEMON_ADMISSION_REQUEST_VALIDATION_H_
#define GPUPROF_DAEMON_ADMISSION_REQUEST_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/fault_label.h"
#include "daemon/capture/nsight_tools.h"
#include "google/protobuf/message.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon {

// Limits of a request's text, shared with the RPC boundary (request_form.h).
inline constexpr size_t kMaxLabelKeyBytes = 63;
inline constexpr size_t kMaxLabelValueBytes = 256;
inline constexpr size_t kMaxDescriptionBytes = 4096;

struct ValidationLimits {
  absl::Duration default_timeout = absl::Minutes(30);
  absl::Duration max_timeout = absl::Hours(24);
  // Fault-injection labels (gpuprof.fault=...) are refused unless the daemon runs for tests.
  bool allow_test_faults = false;
  // The largest custom_kernel.source admitted (gpuprofd --custom_kernel_max_source_bytes).
  int64_t custom_kernel_max_source_bytes = int64_t{256} << 10;
  // The Nsight tools a capture may run under, as the daemon found them (none by default).
  CaptureTools capture_tools;
};

// Fills unset (zero) fields with their documented defaults. Pure: no validation.
void ApplyRequestDefaults(const ValidationLimits& limits, const v1::ListGpusResponse& inventory,
                          v1::ExperimentRequest& request);

// INVALID_ARGUMENT for a malformed request, FAILED_PRECONDITION when this host cannot run it
// (a GPU workload without GPUs), UNIMPLEMENTED for a workload the worker was built without.
absl::Status ValidateExperimentRequest(const v1::ExperimentRequest& request,
                                       const v1::ListGpusResponse& inventory,
                                       const ValidationLimits& limits);

// ApplyRequestDefaults then ValidateExperimentRequest, looking the workload's spec up once:
// the request as admitted is the request as checked.
absl::Status ApplyDefaultsAndValidate(const ValidationLimits& limits,
                                      const v1::ListGpusResponse& inventory,
                                      v1::ExperimentRequest& request);

// Text people write for each other (labels, descriptions, reasons) is shown on other users'
// terminals, where a control character is acted on instead of shown (an OSC sequence sets the
// window title, CSI 2J clears the screen, a bidi override reorders the line). No such field
// has a use for one, so they are refused: INVALID_ARGUMENT naming `field`, the character, its
// byte offset and what is allowed. (The CLI escapes what it prints as well, for text stored
// before this check.)
absl::Status CheckPrintableText(absl::string_view field, absl::string_view text);

// The SweepRequest's own text (description, user, axis fields and values); its base request is
// validated point by point with ValidateExperimentRequest.
absl::Status ValidateSweepRequestText(const v1::SweepRequest& request);

// A baseline's name and description.
absl::Status ValidateBaselineText(const v1::SaveBaselineRequest& request);

// What a client sent, for an error message: at most 64 bytes of it, quoted, with every unsafe
// character made visible (EscapeForTerminal), then its length: "exp-42" (6 bytes). An error
// that echoes a 10,000-byte id whole does not fit in the client's metadata limit.
std::string BoundedExcerpt(absl::string_view text);

// Every google.protobuf.Duration in `message` is a valid one that is not negative (seconds in
// [0, 315576000000], nanos in [0, 999999999]) and every enum field holds a value its type
// names. Open proto3 enums keep any number and a Duration's two fields are independent, so the
// parser accepts both. INVALID_ARGUMENT naming the field path ("measurement.time_budget",
// "states[1]"), the value and what is allowed.
absl::Status CheckWellFormed(const google::protobuf::Message& message);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_REQUEST_VALIDATION_H_
