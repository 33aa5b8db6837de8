#include "daemon/admission/request_form.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/admission/request_validation.h"
#include "proto/wire/unparsable_request.h"

namespace gpuprof::daemon {
namespace {

// Experiment and sweep ids are a prefix and 6-19 digits (an int64), "exp-000042".
constexpr size_t kMinIdDigits = 6;
constexpr size_t kMaxIdDigits = 19;
constexpr size_t kMaxBaselineNameBytes = 128;
// Names of users in requests and filters: local accounts, "tls:<subject>" names, token users.
constexpr size_t kMaxUserBytes = 256;
constexpr size_t kMaxReasonBytes = 1024;
// A page token is the base64 of "before-seq:" and a number (about 40 bytes).
constexpr size_t kMaxPageTokenBytes = 128;
// A sweep axis names a field path and gives numbers or enum names.
constexpr size_t kMaxAxisTextBytes = 128;

// An experiment id ("exp-000042") or a sweep id ("swp-000003"). `optional`: empty is allowed
// (a filter that is not set).
absl::Status CheckId(absl::string_view field, absl::string_view id, absl::string_view prefix,
                     bool optional = false) {
  if (optional && id.empty()) return absl::OkStatus();
  absl::string_view digits = id;
  const bool valid = absl::ConsumePrefix(&digits, prefix) && digits.size() >= kMinIdDigits &&
                     digits.size() <= kMaxIdDigits &&
                     std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit);
  if (valid) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: got %s; must be %s followed by %d-%d digits (at most %d bytes), e.g. %s000042", field,
      BoundedExcerpt(id), prefix, kMinIdDigits, kMaxIdDigits, prefix.size() + kMaxIdDigits,
      prefix));
}

// An experiment or a sweep: what a baseline may name.
absl::Status CheckTargetId(absl::string_view field, absl::string_view id) {
  if (absl::StartsWith(id, "swp-")) return CheckId(field, id, "swp-");
  if (absl::StartsWith(id, "exp-")) return CheckId(field, id, "exp-");
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: got %s; must be an experiment id (exp-000042) or a sweep id (swp-000003)", field,
      BoundedExcerpt(id)));
}

bool IsBaselineNameChar(char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.';
}

absl::Status CheckBaselineNameForm(absl::string_view field, absl::string_view name,
                                   bool optional = false) {
  if (optional && name.empty()) return absl::OkStatus();
  if (!name.empty() && name.size() <= kMaxBaselineNameBytes &&
      std::all_of(name.begin(), name.end(), IsBaselineNameChar)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: got %s; a baseline name is 1-%d characters of [A-Za-z0-9._-]", field,
                      BoundedExcerpt(name), kMaxBaselineNameBytes));
}

// Free text (a reason, a description, a user name in a filter): at most `limit` bytes. What it
// may contain is checked where it is used (CheckPrintableText).
absl::Status CheckLength(absl::string_view field, absl::string_view text, size_t limit) {
  if (text.size() <= limit) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: got %s; at most %d bytes", field, BoundedExcerpt(text), limit));
}

// A request that did not parse reached here empty, carrying the reason
// (proto/wire/lenient_request_traits.h): nothing else about it can be checked.
absl::Status CheckParsed(const google::protobuf::Message& request) {
  std::optional<std::string> why = wire::UnparsableReason(request);
  if (!why.has_value()) return absl::OkStatus();
  return absl::InvalidArgumentError(*std::move(why));
}

}  // namespace

// An experiment's own text is bounded by admission (request_validation), which names each
// limit and echoes nothing unbounded; here only its enums and Durations.
absl::Status CheckRequestForm(const v1::ExperimentRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::WatchRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckId("experiment_id", request.experiment_id(), "exp-"));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::CancelRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckId("experiment_id", request.experiment_id(), "exp-"));
  RETURN_IF_ERROR(CheckLength("reason", request.reason(), kMaxReasonBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::GetExperimentRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckId("experiment_id", request.experiment_id(), "exp-"));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::GetCaptureReportRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckId("experiment_id", request.experiment_id(), "exp-"));
  if (request.offset() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("offset: got ", request.offset(), "; must be 0 or more"));
  }
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::ListExperimentsRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckLength("user", request.user(), kMaxUserBytes));
  RETURN_IF_ERROR(CheckLength("page_token", request.page_token(), kMaxPageTokenBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::SweepRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  // The base is admitted point by point, as a submitted experiment is.
  RETURN_IF_ERROR(CheckLength("user", request.user(), kMaxUserBytes));
  RETURN_IF_ERROR(CheckLength("description", request.description(), kMaxDescriptionBytes));
  for (int i = 0; i < request.axes_size(); ++i) {
    // A field is a dotted path of proto field names; a value is one number or enum name.
    RETURN_IF_ERROR(CheckLength(absl::StrFormat("axes[%d].field", i), request.axes(i).field(),
                                kMaxAxisTextBytes));
    for (int k = 0; k < request.axes(i).values_size(); ++k) {
      RETURN_IF_ERROR(CheckLength(absl::StrFormat("axes[%d].values[%d]", i, k),
                                  request.axes(i).values(k), kMaxAxisTextBytes));
    }
  }
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::WatchSweepRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id(), "swp-"));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::GetSweepRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id(), "swp-"));
  RETURN_IF_ERROR(
      CheckLength("points_page_token", request.points_page_token(), kMaxPageTokenBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::ListSweepsRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckLength("user", request.user(), kMaxUserBytes));
  RETURN_IF_ERROR(CheckLength("page_token", request.page_token(), kMaxPageTokenBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::CancelSweepRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id(), "swp-"));
  RETURN_IF_ERROR(CheckLength("reason", request.reason(), kMaxReasonBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::SaveBaselineRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckBaselineNameForm("name", request.name()));
  RETURN_IF_ERROR(CheckTargetId("target_id", request.target_id()));
  RETURN_IF_ERROR(CheckLength("user", request.user(), kMaxUserBytes));
  RETURN_IF_ERROR(CheckLength("description", request.description(), kMaxDescriptionBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::ListBaselinesRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckBaselineNameForm("name", request.name(), /*optional=*/true));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::DeleteBaselineRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckBaselineNameForm("name", request.name()));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::GetQuotaRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckLength("user", request.user(), kMaxUserBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::ListAuditRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckLength("user", request.user(), kMaxUserBytes));
  // The audit trail files a sweep's entries under its sweep id.
  if (!request.experiment_id().empty()) {
    RETURN_IF_ERROR(CheckTargetId("experiment_id", request.experiment_id()));
  }
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::ClearGpuHealthRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  RETURN_IF_ERROR(CheckLength("reason", request.reason(), kMaxReasonBytes));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::ListGpusRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  return CheckWellFormed(request);
}

absl::Status CheckRequestForm(const v1::WhoAmIRequest& request) {
  RETURN_IF_ERROR(CheckParsed(request));
  return CheckWellFormed(request);
}

}  // namespace gpuprof::daemon
