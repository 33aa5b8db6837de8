// Length-delimited protobuf messages over a pair of file descriptors: the daemon <-> worker
// channel. Each message is a varint byte count followed by the serialized message.
#ifndef GPUPROF_COMMON_MESSAGE_PIPE_H_
#define GPUPROF_COMMON_MESSAGE_PIPE_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/message_lite.h"

namespace gpuprof {

// A worker's activity batches stay far below this; anything larger is a corrupt stream. It is
// also what one report can cost the daemon in memory, and what gRPC lets a reply carry.
inline constexpr int64_t kMaxPipeMessageBytes = 64ll << 20;

// Reads messages from a file descriptor it owns. Not thread-safe: one reader thread.
class MessageReader {
 public:
  explicit MessageReader(int fd);
  ~MessageReader();
  MessageReader(const MessageReader&) = delete;
  MessageReader& operator=(const MessageReader&) = delete;

  // OutOfRange at a clean end of stream (the writer closed), DataLoss on a torn or
  // oversized message.
  absl::Status Read(google::protobuf::MessageLite* message);

 private:
  int fd_;
  google::protobuf::io::FileInputStream input_;
};

// Writes messages to a file descriptor it owns. Thread-safe: whole messages never interleave.
class MessageWriter {
 public:
  explicit MessageWriter(int fd);
  ~MessageWriter();
  MessageWriter(const MessageWriter&) = delete;
  MessageWriter& operator=(const MessageWriter&) = delete;

  // Unavailable once the reader has gone (broken pipe).
  absl::Status Write(const google::protobuf::MessageLite& message) ABSL_LOCKS_EXCLUDED(mutex_);
  // Closes the descriptor so the reader sees end of stream.
  void Close() ABSL_LOCKS_EXCLUDED(mutex_);

 private:
  absl::Mutex mutex_;
  int fd_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_MESSAGE_PIPE_H_
