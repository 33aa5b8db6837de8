// gRPC's serialization of the Profiler service's request messages, with one change: a request
// that does not parse is handed to the handler as an empty message carrying the reason
// (unparsable_request.h) instead of failing the call with gRPC 1.51's UNIMPLEMENTED and no
// message. The daemon's first check of every request (CheckRequestForm) then answers
// INVALID_ARGUMENT naming the field. Serialization and the parsing of good requests are gRPC's.
//
// An explicit specialization must be seen before any use of SerializationTraits<Request>, so
// this header is included by the generated profiler.grpc.pb.h itself (tools/build/proto.bzl).
#ifndef GPUPROF_PROTO_WIRE_LENIENT_REQUEST_TRAITS_H_
#define GPUPROF_PROTO_WIRE_LENIENT_REQUEST_TRAITS_H_

#include <string>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "gpuprof/v1/profiler.pb.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/slice.h"
#include "proto/wire/unparsable_request.h"

namespace gpuprof::wire {

template <typename Request>
class LenientRequestTraits {
 public:
  static grpc::Status Serialize(const grpc::protobuf::MessageLite& message,
                                grpc::ByteBuffer* buffer, bool* own_buffer) {
    return grpc::GenericSerialize<grpc::ProtoBufferWriter, Request>(message, buffer, own_buffer);
  }

  static grpc::Status Deserialize(grpc::ByteBuffer* buffer, grpc::protobuf::MessageLite* lite) {
    if (buffer == nullptr) return grpc::Status(grpc::StatusCode::INTERNAL, "No payload");
    auto* message = static_cast<Request*>(lite);
    bool parsed = false;
    {
      grpc::ProtoBufferReader reader(buffer);
      if (!reader.status().ok()) return reader.status();
      // Protobuf logs every string that is not UTF-8; the client is told instead.
      google::protobuf::LogSilencer quiet;
      parsed = message->ParseFromZeroCopyStream(&reader);
    }
    if (!parsed) {
      std::vector<grpc::Slice> slices;
      std::string bytes;
      if (buffer->Dump(&slices).ok()) {
        for (const grpc::Slice& slice : slices) {
          bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
        }
      }
      MarkUnparsable(*message, WhyRequestDoesNotParse(*Request::descriptor(), bytes));
    }
    buffer->Clear();
    return grpc::Status::OK;
  }
};

}  // namespace gpuprof::wire

// Every request type of service gpuprof.v1.Profiler (proto/gpuprof/v1/profiler.proto);
// //tests/e2e:request_errors_e2e_test sends each of them a request that does not parse.
#define GPUPROF_LENIENT_REQUEST(Type)                             \
  template <>                                                     \
  class grpc::SerializationTraits<::gpuprof::v1::Type, void>      \
      : public ::gpuprof::wire::LenientRequestTraits<::gpuprof::v1::Type> {};
GPUPROF_LENIENT_REQUEST(ExperimentRequest)
GPUPROF_LENIENT_REQUEST(WatchRequest)
GPUPROF_LENIENT_REQUEST(CancelRequest)
GPUPROF_LENIENT_REQUEST(GetExperimentRequest)
GPUPROF_LENIENT_REQUEST(ListExperimentsRequest)
GPUPROF_LENIENT_REQUEST(ListGpusRequest)
GPUPROF_LENIENT_REQUEST(SweepRequest)
GPUPROF_LENIENT_REQUEST(WatchSweepRequest)
GPUPROF_LENIENT_REQUEST(GetSweepRequest)
GPUPROF_LENIENT_REQUEST(ListSweepsRequest)
GPUPROF_LENIENT_REQUEST(CancelSweepRequest)
GPUPROF_LENIENT_REQUEST(SaveBaselineRequest)
GPUPROF_LENIENT_REQUEST(ListBaselinesRequest)
GPUPROF_LENIENT_REQUEST(DeleteBaselineRequest)
GPUPROF_LENIENT_REQUEST(WhoAmIRequest)
GPUPROF_LENIENT_REQUEST(GetQuotaRequest)
GPUPROF_LENIENT_REQUEST(ListAuditRequest)
GPUPROF_LENIENT_REQUEST(ClearGpuHealthRequest)
GPUPROF_LENIENT_REQUEST(GetCaptureReportRequest)
#undef GPUPROF_LENIENT_REQUEST

#endif  // GPUPROF_PROTO_WIRE_LENIENT_REQUEST_TRAITS_H_
