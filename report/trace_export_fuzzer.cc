// Arbitrary activity records (bytes decoded as an ActivityBatch, as the daemon stores them) into
// the Chrome trace exporter: it must not crash, and its output must always be valid JSON that a
// strict parser accepts (what Perfetto would load), whatever names, times or metrics arrive.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gpuprof/v1/experiment.pb.h"
#include "report/trace_export.h"

// Decoding errors (invalid UTF-8 in a string field, ...) are expected here; keep the log quiet.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Layout: 2 bytes (little endian) giving the length of a serialized ExperimentResult, the
  // result, then the rest as a serialized ActivityBatch.
  if (size < 2) return 0;
  const size_t result_size = std::min<size_t>(data[0] | (data[1] << 8), size - 2);
  gpuprof::v1::ExperimentResult result;
  if (!result.ParseFromArray(data + 2, static_cast<int>(result_size))) return 0;
  gpuprof::v1::ActivityBatch batch;
  if (!batch.ParseFromArray(data + 2 + result_size, static_cast<int>(size - 2 - result_size))) {
    return 0;
  }
  const std::vector<gpuprof::v1::ActivityRecord> records(batch.records().begin(),
                                                         batch.records().end());
  const std::string json = gpuprof::report::ExportChromeTrace("exp-fuzz", records, result);
  google::protobuf::Struct parsed;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  if (!status.ok()) {
    std::fprintf(stderr, "trace is not valid JSON (%s):\n%s\n", status.ToString().c_str(),
                 json.substr(0, 4096).c_str());
    std::abort();
  }
  return 0;
}
