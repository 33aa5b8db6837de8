// Arbitrary bytes as the ExperimentRequest a client sends: decode as gRPC does, apply the
// defaults and validate against a two-GPU inventory. Any input must end in OK or a clear error,
// never a crash; and validation must be a pure function of its inputs.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "daemon/admission/request_validation.h"
#include "daemon/admission/test_inventory.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/gpus.pb.h"

namespace {

gpuprof::v1::ListGpusResponse TwoGpus() {
  return gpuprof::daemon::TwoNvlinkGpus({"radix", "index", "store", "attention", "collective"});
}

}  // namespace

// Decoding errors (invalid UTF-8 in a string field, ...) are expected here; keep the log quiet.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const gpuprof::v1::ListGpusResponse inventory = TwoGpus();
  gpuprof::v1::ExperimentRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;
  // The first byte decides whether test-only fault labels are allowed, so both paths run.
  gpuprof::daemon::ValidationLimits limits;
  limits.allow_test_faults = size > 0 && (data[0] & 1) != 0;
  // Admission's path: defaults and validation with one look-up of the workload's spec.
  gpuprof::v1::ExperimentRequest admitted = request;
  const absl::Status one_step =
      gpuprof::daemon::ApplyDefaultsAndValidate(limits, inventory, admitted);
  gpuprof::daemon::ApplyRequestDefaults(limits, inventory, request);
  const absl::Status first = gpuprof::daemon::ValidateExperimentRequest(request, inventory, limits);
  const absl::Status second =
      gpuprof::daemon::ValidateExperimentRequest(request, inventory, limits);
  if (first != second) {
    std::fprintf(stderr, "validation is not deterministic: '%s' then '%s'\n",
                 first.ToString().c_str(), second.ToString().c_str());
    std::abort();
  }
  // A NaN the client sent (rejected, but still in the message) equals itself here.
  google::protobuf::util::DefaultFieldComparator nan_equal;
  nan_equal.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer same_request;
  same_request.set_field_comparator(&nan_equal);
  if (one_step != first || !same_request.Compare(admitted, request)) {
    std::fprintf(stderr, "the one-step path differs: '%s', the two steps '%s'\n",
                 one_step.ToString().c_str(), first.ToString().c_str());
    std::abort();
  }
  if (!first.ok() && first.message().empty()) {
    std::fprintf(stderr, "a refusal without a message: %s\n", first.ToString().c_str());
    std::abort();
  }
  return 0;
}
