#include "proto/wire/unparsable_request.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpuprof/v1/profiler.grpc.pb.h"
#include "gpuprof/v1/profiler.pb.h"

namespace gpuprof::wire {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

template <typename Message>
std::string WhyNot(const Message& message) {
  return WhyRequestDoesNotParse(*Message::descriptor(), message.SerializeAsString());
}

TEST(UnparsableRequest, NamesTheStringFieldThatIsNotUtf8) {
  v1::ExperimentRequest request;
  request.mutable_radix();
  request.set_description("fine \xc3\xa9");
  (*request.mutable_labels())["ok"] = "yes";
  (*request.mutable_labels())["team"] = "ml\xff";
  v1::ExperimentRequest parsed;
  ASSERT_FALSE(parsed.ParseFromString(request.SerializeAsString()));
  EXPECT_EQ(WhyNot(request),
            "labels[team]: byte 0xFF at byte 2 is not UTF-8; text sent to gpuprofd must be UTF-8 "
            "(proto3 strings), the request was not parsed");

  v1::ExperimentRequest bad_key;
  (*bad_key.mutable_labels())["t\xc3"] = "v";
  EXPECT_THAT(WhyNot(bad_key), StartsWith("labels (a key): byte 0xC3 at byte 1 is not UTF-8"));

  v1::CancelRequest cancel;
  cancel.set_experiment_id("exp-000001");
  cancel.set_reason("caf\xe9");
  EXPECT_THAT(WhyNot(cancel), StartsWith("reason: byte 0xE9 at byte 3 is not UTF-8"));
}

TEST(UnparsableRequest, LooksIntoNestedAndRepeatedMessages) {
  v1::SweepRequest sweep;
  (*sweep.mutable_base()->mutable_labels())["team"] = "ok";
  sweep.mutable_base()->set_user("\xed\xa0\x80");  // a surrogate
  EXPECT_THAT(WhyNot(sweep), StartsWith("base.user: byte 0xED at byte 0 is not UTF-8"));

  v1::SweepRequest axes;
  axes.add_axes()->set_field("index.num_tokens");
  axes.add_axes()->set_field("index.\xff");
  EXPECT_THAT(WhyNot(axes), StartsWith("axes[1].field: byte 0xFF at byte 6 is not UTF-8"));
}

TEST(UnparsableRequest, SaysWhenTheWireFormatItselfIsBroken) {
  EXPECT_EQ(WhyRequestDoesNotParse(*v1::ExperimentRequest::descriptor(), "\x0a\x7f"),
            "the request is not a valid gpuprof.v1.ExperimentRequest message (its protobuf "
            "wire format is broken)");
}

TEST(UnparsableRequest, TheReasonTravelsInTheEmptiedMessage) {
  v1::ExperimentRequest request;
  request.set_description("partly parsed");
  EXPECT_EQ(UnparsableReason(request), std::nullopt);
  MarkUnparsable(request, "labels[team]: byte 0xFF");
  EXPECT_EQ(request.description(), "");
  EXPECT_EQ(UnparsableReason(request), "labels[team]: byte 0xFF");
  // What a client could put there itself comes back bounded and escaped.
  v1::ExperimentRequest forged;
  MarkUnparsable(forged, std::string(10000, 'x') + "\x1b[2J");
  ASSERT_TRUE(UnparsableReason(forged).has_value());
  EXPECT_EQ(UnparsableReason(forged)->size(), kMaxReasonBytes);
  v1::ExperimentRequest escaped;
  MarkUnparsable(escaped, "\x1b[2J");
  EXPECT_EQ(UnparsableReason(escaped), "\\x1b[2J");
}

// The generated service code uses gpuprof's SerializationTraits for its requests: what gRPC
// hands the handler for bytes that do not parse is an empty request with the reason.
TEST(UnparsableRequest, TheServicesDeserializerKeepsTheReason) {
  v1::ExperimentRequest request;
  (*request.mutable_labels())["team"] = "ml\xff";
  grpc::ByteBuffer buffer;
  bool own_buffer = false;
  ASSERT_TRUE(grpc::SerializationTraits<v1::ExperimentRequest>::Serialize(request, &buffer,
                                                                          &own_buffer)
                  .ok());
  v1::ExperimentRequest received;
  ASSERT_TRUE(grpc::SerializationTraits<v1::ExperimentRequest>::Deserialize(&buffer, &received)
                  .ok());
  ASSERT_TRUE(UnparsableReason(received).has_value());
  EXPECT_THAT(*UnparsableReason(received), HasSubstr("labels[team]: byte 0xFF at byte 2"));
  EXPECT_EQ(received.labels_size(), 0);

  // A request that parses is gRPC's ordinary result.
  v1::ExperimentRequest good;
  good.mutable_radix();
  good.set_description("fine");
  ASSERT_TRUE(
      grpc::SerializationTraits<v1::ExperimentRequest>::Serialize(good, &buffer, &own_buffer).ok());
  ASSERT_TRUE(grpc::SerializationTraits<v1::ExperimentRequest>::Deserialize(&buffer, &received)
                  .ok());
  EXPECT_EQ(UnparsableReason(received), std::nullopt);
  EXPECT_EQ(received.description(), "fine");
}

}  // namespace
}  // namespace gpuprof::wire
