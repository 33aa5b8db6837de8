#include "client/stream_resume.h"

#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace gpuprof::client {

std::optional<int64_t> ResumeFromSeq(const grpc::ClientContext& context,
                                     const grpc::Status& status) {
  // The daemon's kResumeFromSeqTrailer (daemon/server/event_stream.h).
  constexpr absl::string_view kTrailer = "gpuprof-resume-from-seq";
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED) return std::nullopt;
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(grpc::string_ref(kTrailer.data(), kTrailer.size()));
  int64_t seq = 0;
  if (it == trailers.end() ||
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &seq) ||
      seq < 1) {
    return std::nullopt;
  }
  return seq;
}

}  // namespace gpuprof::client
