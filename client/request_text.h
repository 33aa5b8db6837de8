// Text the CLI puts in a request must be UTF-8: the API's text fields are proto3 strings, and
// gpuprofd cannot parse a request that holds anything else (it refuses it, naming the field).
// These checks refuse such text before anything is sent, naming the flag or field.
#ifndef GPUPROF_CLIENT_REQUEST_TEXT_H_
#define GPUPROF_CLIENT_REQUEST_TEXT_H_

#include <cstddef>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace gpuprof::client {

// INVALID_ARGUMENT "WHAT: byte 0xFF at byte 3 is not UTF-8; ..." when `text` is not UTF-8.
absl::Status CheckUtf8(absl::string_view what, absl::string_view text);

// Every string field of `request` (nested, repeated and map fields included) is UTF-8; the
// error names the field path ("labels[team]", "experiment_id") and says the request was not
// sent.
absl::Status CheckRequestIsUtf8(const google::protobuf::Message& request);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_REQUEST_TEXT_H_
