#include "client/request_text.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpuprof/v1/profiler.pb.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;

TEST(RequestText, NamesTheFieldAndSaysNothingWasSent) {
  v1::ExperimentRequest request;
  (*request.mutable_labels())["team"] = "ok";
  request.set_description("fine \xc3\xa9");
  EXPECT_TRUE(CheckRequestIsUtf8(request).ok());

  (*request.mutable_labels())["team"] = "bad\xff";
  absl::Status status = CheckRequestIsUtf8(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "labels[team]: byte 0xFF at byte 3 is not UTF-8; text sent to gpuprofd must be "
            "UTF-8 (the request was not sent)");

  request.clear_labels();
  (*request.mutable_labels())["k\xfe"] = "v";
  EXPECT_THAT(CheckRequestIsUtf8(request).message(), HasSubstr("labels (a key): byte 0xFE"));

  v1::SweepRequest sweep;
  sweep.add_axes()->add_values("1");
  sweep.mutable_axes(0)->add_values("\x80");
  EXPECT_THAT(CheckRequestIsUtf8(sweep).message(), HasSubstr("axes[0].values[1]: byte 0x80"));

  v1::GetExperimentRequest get;
  get.set_experiment_id("exp-\xc3");
  EXPECT_THAT(CheckRequestIsUtf8(get).message(), HasSubstr("experiment_id: byte 0xC3 at byte 4"));
}

}  // namespace
}  // namespace gpuprof::client
