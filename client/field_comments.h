// The comments of the API's proto fields, embedded at build time (field_comments_gen.py reads
// the .proto files), so that help can describe a flag with the words its field was documented
// with.
#ifndef GPUPROF_CLIENT_FIELD_COMMENTS_H_
#define GPUPROF_CLIENT_FIELD_COMMENTS_H_

#include "absl/strings/string_view.h"

namespace gpuprof::client {

// The comment of the field "gpuprof.v1.IndexSpec.num_splits" (lines joined by spaces); empty
// when it has none.
absl::string_view FieldComment(absl::string_view full_name);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_FIELD_COMMENTS_H_
