// Gzip (RFC 1952) in memory, on zlib: what `gpuprof trace -o FILE.json.gz` writes, and what
// reads it back in tests. Perfetto and chrome://tracing open gzipped traces as they are.
#ifndef GPUPROF_COMMON_GZIP_H_
#define GPUPROF_COMMON_GZIP_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuprof {

// `data` as one gzip member (default compression level).
absl::StatusOr<std::string> GzipCompress(absl::string_view data);

// The data of gzip input (concatenated members too); DATA_LOSS when it is not gzip or ends
// early.
absl::StatusOr<std::string> GzipDecompress(absl::string_view gzip);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_GZIP_H_
