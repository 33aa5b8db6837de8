#include "common/message_pipe.h"

#include <thread>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuprof/worker_protocol/worker_protocol.pb.h"

namespace gpuprof {
namespace {

struct PipePair {
  PipePair() {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    reader = std::make_unique<MessageReader>(fds[0]);
    writer = std::make_unique<MessageWriter>(fds[1]);
  }
  std::unique_ptr<MessageReader> reader;
  std::unique_ptr<MessageWriter> writer;
};

TEST(MessagePipe, RoundTripsMessagesInOrderThenEndOfStream) {
  PipePair pipe_pair;
  std::thread producer([&] {
    for (int i = 0; i < 200; ++i) {
      worker_protocol::WorkerReport report;
      auto* progress = report.mutable_event()->mutable_progress();
      progress->set_done(i);
      progress->set_message(std::string(i * 37, 'x'));  // varied sizes, some > pipe buffer
      ASSERT_TRUE(pipe_pair.writer->Write(report).ok());
    }
    pipe_pair.writer->Close();
  });
  for (int i = 0; i < 200; ++i) {
    worker_protocol::WorkerReport report;
    ASSERT_TRUE(pipe_pair.reader->Read(&report).ok()) << i;
    EXPECT_EQ(report.event().progress().done(), i);
    EXPECT_EQ(report.event().progress().message().size(), static_cast<size_t>(i * 37));
  }
  worker_protocol::WorkerReport last;
  EXPECT_EQ(pipe_pair.reader->Read(&last).code(), absl::StatusCode::kOutOfRange);
  producer.join();
}

TEST(MessagePipe, TornMessageIsDataLoss) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  MessageReader reader(fds[0]);
  const unsigned char torn[] = {0x10, 0x08};  // says 16 bytes, delivers 1
  ASSERT_EQ(write(fds[1], torn, sizeof(torn)), 2);
  close(fds[1]);
  worker_protocol::WorkerReport report;
  EXPECT_EQ(reader.Read(&report).code(), absl::StatusCode::kDataLoss);
}

TEST(MessagePipe, WriteAfterReaderGoneIsUnavailable) {
  signal(SIGPIPE, SIG_IGN);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  MessageWriter writer(fds[1]);
  worker_protocol::WorkerCommand command;
  command.mutable_shutdown();
  EXPECT_EQ(writer.Write(command).code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace gpuprof
