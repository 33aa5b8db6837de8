#include "common/message_pipe.h"

#include <cerrno>
#include <cstring>
#include <string>

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"

namespace gpuprof {

MessageReader::MessageReader(int fd) : fd_(fd), input_(fd) {}

MessageReader::~MessageReader() { close(fd_); }

absl::Status MessageReader::Read(google::protobuf::MessageLite* message) {
  // A CodedInputStream per message: its destructor hands unread bytes back to input_.
  google::protobuf::io::CodedInputStream coded(&input_);
  uint32_t size = 0;
  if (!coded.ReadVarint32(&size)) {
    if (input_.GetErrno() != 0) {
      return absl::UnavailableError(
          absl::StrCat("reading from pipe: ", std::strerror(input_.GetErrno())));
    }
    return absl::OutOfRangeError("end of stream");
  }
  if (size > kMaxPipeMessageBytes) {
    return absl::DataLossError(
        absl::StrCat("pipe message of ", size, " bytes exceeds the limit of ",
                     kMaxPipeMessageBytes));
  }
  coded.SetTotalBytesLimit(static_cast<int>(size) + 16);
  const auto limit = coded.PushLimit(static_cast<int>(size));
  if (!message->ParseFromCodedStream(&coded) || !coded.ConsumedEntireMessage()) {
    return absl::DataLossError(absl::StrCat("torn or malformed pipe message of ", size, " bytes"));
  }
  coded.PopLimit(limit);
  return absl::OkStatus();
}

MessageWriter::MessageWriter(int fd) : fd_(fd) {}

MessageWriter::~MessageWriter() { Close(); }

absl::Status MessageWriter::Write(const google::protobuf::MessageLite& message) {
  std::string buffer;
  {
    google::protobuf::io::StringOutputStream string_stream(&buffer);
    google::protobuf::io::CodedOutputStream coded(&string_stream);
    coded.WriteVarint32(static_cast<uint32_t>(message.ByteSizeLong()));
    if (!message.SerializeToCodedStream(&coded)) {
      return absl::InternalError("serializing pipe message");
    }
  }
  absl::MutexLock lock(&mutex_);
  if (fd_ < 0) return absl::UnavailableError("pipe is closed");
  size_t written = 0;
  while (written < buffer.size()) {
    const ssize_t n = write(fd_, buffer.data() + written, buffer.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("writing to pipe: ", std::strerror(errno)));
    }
    written += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

void MessageWriter::Close() {
  absl::MutexLock lock(&mutex_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

}  // namespace gpuprof
