// Arbitrary bytes as what a worker writes on its report pipe: the daemon's reader must return
// each well-formed message and then a clean error (never crash, never allocate past the limit).
// Every message it accepts must survive a round trip through MessageWriter unchanged.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/message_pipe.h"
#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace {

// A memory file holding `bytes`, positioned at its start; -1 if it cannot be made.
int MemoryFile(const void* bytes, size_t size) {
  const int fd = memfd_create("message_pipe_fuzzer", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, static_cast<const char*>(bytes) + written, size - written);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    written += static_cast<size_t>(n);
  }
  lseek(fd, 0, SEEK_SET);
  return fd;
}

// The message's bytes with maps in key order, so two equal messages give equal strings.
std::string Serialized(const google::protobuf::Message& message) {
  std::string bytes;
  google::protobuf::io::StringOutputStream stream(&bytes);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializeToCodedStream(&coded);
  return bytes;
}

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "message_pipe_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

// Decoding errors (invalid UTF-8 in a string field, ...) are expected here; keep the log quiet.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = MemoryFile(data, size);
  if (fd < 0) Fail("memfd_create failed");
  gpuprof::MessageReader reader(fd);
  for (int messages = 0;; ++messages) {
    gpuprof::worker_protocol::WorkerReport report;
    const absl::Status status = reader.Read(&report);
    if (!status.ok()) {
      if (status.code() != absl::StatusCode::kOutOfRange &&
          status.code() != absl::StatusCode::kDataLoss) {
        Fail(status.ToString().c_str());
      }
      break;
    }
    if (messages > static_cast<int>(size)) Fail("more messages than input bytes");
    // Round trip: what the reader accepted, written and read back, is the same message.
    const int copy_fd = memfd_create("message_pipe_fuzzer_copy", MFD_CLOEXEC);
    if (copy_fd < 0) Fail("memfd_create failed");
    const int read_fd = dup(copy_fd);
    {
      gpuprof::MessageWriter writer(copy_fd);
      if (!writer.Write(report).ok()) Fail("writing an accepted message failed");
    }
    lseek(read_fd, 0, SEEK_SET);
    gpuprof::MessageReader copy_reader(read_fd);
    gpuprof::worker_protocol::WorkerReport copy;
    if (!copy_reader.Read(&copy).ok()) Fail("an accepted message did not read back");
    // Compared as bytes, not field by field: a double field may hold a NaN, which is never
    // equal to itself, and the bytes must be the same bit for bit anyway.
    if (Serialized(copy) != Serialized(report)) Fail("an accepted message changed in a round trip");
  }
  return 0;
}
