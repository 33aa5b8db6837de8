// A request whose bytes do not parse (a proto3 string holding bytes that are not UTF-8, or a
// broken wire format) must still reach the daemon's checks, so that the client is told what was
// wrong. gRPC 1.51's callback handlers answer a request that fails to deserialize with
// UNIMPLEMENTED and an empty message, before any handler runs. So the daemon's deserializer
// (lenient_request_traits.h) keeps such a request as an empty message that carries the reason,
// and CheckRequestForm refuses it with INVALID_ARGUMENT naming the field.
#ifndef GPUPROF_PROTO_WIRE_UNPARSABLE_REQUEST_H_
#define GPUPROF_PROTO_WIRE_UNPARSABLE_REQUEST_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace gpuprof::wire {

// Why `bytes` do not parse as a `type`: the path of the first string field that is not UTF-8
// ("labels[team]: byte 0xFF at byte 2 is not UTF-8; ...", the same words as the CLI's own
// check), or that the wire format itself is broken.
std::string WhyRequestDoesNotParse(const google::protobuf::Descriptor& type,
                                   absl::string_view bytes);

// Clears `message` and keeps `why` in it (as an unknown field of a number no gpuprof message
// uses), at most kMaxReasonBytes of it.
void MarkUnparsable(google::protobuf::Message& message, absl::string_view why);

// What MarkUnparsable kept, if anything.
std::optional<std::string> UnparsableReason(const google::protobuf::Message& message);

inline constexpr size_t kMaxReasonBytes = 512;

}  // namespace gpuprof::wire

#endif  // GPUPROF_PROTO_WIRE_UNPARSABLE_REQUEST_H_
