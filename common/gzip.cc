#include "common/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <limits>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace gpuprof {
namespace {

// zlib's window bits: 15 (the largest window) plus 16 to write a gzip header, or plus 32 to
// read either a gzip or a zlib header.
constexpr int kWriteGzip = 15 + 16;
constexpr int kReadGzip = 15 + 32;
// zlib counts in uInt; larger inputs go through in pieces of this size.
constexpr size_t kMaxPiece = std::numeric_limits<uInt>::max() / 2;

absl::Status ZlibError(absl::string_view what, int code, const z_stream& stream) {
  return absl::DataLossError(absl::StrCat(what, ": ", stream.msg != nullptr ? stream.msg : "",
                                          " (zlib error ", code, ")"));
}

}  // namespace

absl::StatusOr<std::string> GzipCompress(absl::string_view data) {
  z_stream stream{};
  if (const int code = deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kWriteGzip,
                                    /*memLevel=*/8, Z_DEFAULT_STRATEGY);
      code != Z_OK) {
    return absl::InternalError(absl::StrCat("deflateInit2 failed (zlib error ", code, ")"));
  }
  absl::Cleanup end = [&stream] { deflateEnd(&stream); };
  std::string out;
  out.resize(deflateBound(&stream, static_cast<uLong>(std::min(data.size(), kMaxPiece))) + 64);
  size_t written = 0;
  size_t consumed = 0;
  int code = Z_OK;
  do {
    const size_t piece = std::min(data.size() - consumed, kMaxPiece);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + consumed));
    stream.avail_in = static_cast<uInt>(piece);
    const bool last = consumed + piece == data.size();
    do {
      if (written == out.size()) out.resize(out.size() * 2);
      stream.next_out = reinterpret_cast<Bytef*>(out.data() + written);
      stream.avail_out = static_cast<uInt>(std::min(out.size() - written, kMaxPiece));
      const uInt room = stream.avail_out;
      code = deflate(&stream, last ? Z_FINISH : Z_NO_FLUSH);
      if (code == Z_STREAM_ERROR) return ZlibError("deflate", code, stream);
      written += room - stream.avail_out;
    } while (stream.avail_out == 0 || (last && code != Z_STREAM_END));
    consumed += piece;
  } while (consumed < data.size());
  out.resize(written);
  return out;
}

absl::StatusOr<std::string> GzipDecompress(absl::string_view gzip) {
  z_stream stream{};
  if (const int code = inflateInit2(&stream, kReadGzip); code != Z_OK) {
    return absl::InternalError(absl::StrCat("inflateInit2 failed (zlib error ", code, ")"));
  }
  absl::Cleanup end = [&stream] { inflateEnd(&stream); };
  std::string out;
  char buffer[1 << 16];
  size_t consumed = 0;
  int code = Z_OK;
  while (consumed < gzip.size()) {
    const size_t piece = std::min(gzip.size() - consumed, kMaxPiece);
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gzip.data() + consumed));
    stream.avail_in = static_cast<uInt>(piece);
    do {
      stream.next_out = reinterpret_cast<Bytef*>(buffer);
      stream.avail_out = sizeof(buffer);
      code = inflate(&stream, Z_NO_FLUSH);
      if (code != Z_OK && code != Z_STREAM_END && code != Z_BUF_ERROR) {
        return ZlibError("not gzip data", code, stream);
      }
      out.append(buffer, sizeof(buffer) - stream.avail_out);
      // Another member may follow (what `cat a.gz b.gz` makes).
      if (code == Z_STREAM_END && stream.avail_in > 0) {
        if (inflateReset(&stream) != Z_OK) return ZlibError("inflateReset", code, stream);
      }
      if (code == Z_BUF_ERROR && stream.avail_out != 0) break;  // needs more input
    } while (stream.avail_in > 0 || stream.avail_out == 0);
    consumed += piece;
  }
  if (code != Z_STREAM_END) return absl::DataLossError("gzip data ends early");
  return out;
}

}  // namespace gpuprof
