// Event streams the daemon cut off because the client took no event for a while (a paused
// terminal, a stopped pipe): the daemon names the seq to watch again from, and the CLI does.
#ifndef GPUPROF_CLIENT_STREAM_RESUME_H_
#define GPUPROF_CLIENT_STREAM_RESUME_H_

#include <cstdint>
#include <optional>

#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace gpuprof::client {

// Cut off this many times in a row without an event in between, the CLI gives up.
inline constexpr int kMaxStreamResumes = 3;

// The seq a stream that ended with `status` named to resume from (the daemon's
// gpuprof-resume-from-seq trailer); nullopt when it was not cut off for reading too slowly.
std::optional<int64_t> ResumeFromSeq(const grpc::ClientContext& context,
                                     const grpc::Status& status);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_STREAM_RESUME_H_
