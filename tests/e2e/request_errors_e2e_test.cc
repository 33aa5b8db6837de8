// Requests a careless or hostile client sends, over the real socket to a real gpuprofd: each
// gets a short, clear refusal naming the field, and none of them is stored. The CLI refuses
// what it can itself; a raw stub sends what the CLI would not.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

class RequestErrorsE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new DaemonProcess(MakeTempDir("gpuprofd"));
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started << "\n" << daemon_->Log();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  // Nothing any test here sent was queued.
  void TearDown() override {
    const CommandResult listed = daemon_->Cli({"list", "--all", "--json"});
    EXPECT_EQ(listed.exit_code, 0) << listed.err;
    EXPECT_THAT(listed.out, Not(HasSubstr("exp-")));
  }

  static grpc::Status GetExperiment(const std::string& id) {
    auto stub = daemon_->NewStub();
    grpc::ClientContext context;
    v1::GetExperimentRequest request;
    request.set_experiment_id(id);
    v1::Experiment ignored;
    return stub->GetExperiment(&context, request, &ignored);
  }

  // Submit through the stub; the status the stream ends with (no event is expected).
  static grpc::Status Submit(const v1::ExperimentRequest& request) {
    auto stub = daemon_->NewStub();
    grpc::ClientContext context;
    auto reader = stub->Submit(&context, request);
    v1::ExperimentEvent event;
    EXPECT_FALSE(reader->Read(&event)) << event.DebugString();
    return reader->Finish();
  }

  static DaemonProcess* daemon_;
};

DaemonProcess* RequestErrorsE2eTest::daemon_ = nullptr;

TEST_F(RequestErrorsE2eTest, AHugeIdGetsAShortInvalidArgumentNotAMetadataOverflow) {
  const std::string id = "exp-" + std::string(10'000, '1');
  const grpc::Status status = GetExperiment(id);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("experiment_id: got \"exp-1111"), HasSubstr("(10004 bytes)"),
                    HasSubstr("must be exp- followed by 6-19 digits (at most 23 bytes)")));
  EXPECT_LT(status.error_message().size(), 300u);

  // The same through the CLI: the refusal, not RESOURCE_EXHAUSTED on the metadata.
  const CommandResult get = daemon_->Cli({"get", id});
  EXPECT_EQ(get.exit_code, 2) << get.err;
  EXPECT_THAT(get.err, HasSubstr("error: INVALID_ARGUMENT: experiment_id: got \"exp-1111"));
  EXPECT_THAT(get.err, Not(HasSubstr("metadata")));

  // A 3 MB id is over the daemon's 1 MiB request limit: gRPC refuses it before it is parsed.
  const grpc::Status large = GetExperiment("exp-" + std::string(3 << 20, '2'));
  EXPECT_EQ(large.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << large.error_message();
  EXPECT_THAT(large.error_message(), HasSubstr("Received message larger than max"));
  // Under it, the id is refused by its form, before any look-up.
  const grpc::Status below = GetExperiment("exp-" + std::string(512 << 10, '2'));
  EXPECT_EQ(below.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(below.error_message(), HasSubstr("\"... (524292 bytes); must be exp-"));
  // A well-formed id that names nothing is still NOT_FOUND.
  EXPECT_EQ(GetExperiment("exp-999999").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(RequestErrorsE2eTest, TextThatIsNotUtf8) {
  // The CLI refuses it before sending, naming the flag.
  const CommandResult cli = daemon_->Cli({"submit", "radix", "--label", "team=ml\xff"});
  EXPECT_EQ(cli.exit_code, 2) << cli.err;
  EXPECT_THAT(cli.err,
              HasSubstr("--label: byte 0xFF at byte 7 is not UTF-8; text sent to gpuprofd must "
                        "be UTF-8"));
  const CommandResult cancel = daemon_->Cli({"cancel", "exp-000001", "--reason", "oops\xc3"});
  EXPECT_EQ(cancel.exit_code, 2) << cancel.err;
  EXPECT_THAT(cancel.err, HasSubstr("reason: byte 0xC3 at byte 4 is not UTF-8"));
  EXPECT_THAT(cancel.err, HasSubstr("(the request was not sent)"));

  // A raw client sends what the CLI would not. Protobuf cannot parse it (a proto3 string must
  // be UTF-8); the daemon still answers INVALID_ARGUMENT naming the field, and stores nothing.
  v1::ExperimentRequest request;
  request.mutable_radix();
  (*request.mutable_labels())["team"] = "ml\xff";
  const grpc::Status raw = Submit(request);
  EXPECT_EQ(raw.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << raw.error_message();
  EXPECT_EQ(raw.error_message(),
            "labels[team]: byte 0xFF at byte 2 is not UTF-8; text sent to gpuprofd must be UTF-8 "
            "(proto3 strings), the request was not parsed");
  v1::GetExperimentRequest get;
  get.set_experiment_id("exp-00000\xc3");
  auto stub = daemon_->NewStub();
  grpc::ClientContext context;
  v1::Experiment ignored;
  const grpc::Status raw_get = stub->GetExperiment(&context, get, &ignored);
  EXPECT_EQ(raw_get.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(raw_get.error_message(),
              HasSubstr("experiment_id: byte 0xC3 at byte 9 is not UTF-8"));
  EXPECT_EQ(GetExperiment("exp-999999").error_code(), grpc::StatusCode::NOT_FOUND);
}

// Every method of the service, sent bytes that are no protobuf message at all (a field whose
// length runs past the end), answers INVALID_ARGUMENT saying so, never gRPC's UNIMPLEMENTED
// with no message; a method added to the service without its request's lenient parsing
// (proto/wire/lenient_request_traits.h) fails here.
TEST_F(RequestErrorsE2eTest, EveryMethodExplainsARequestThatDoesNotParse) {
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          "gpuprof.v1.Profiler");
  ASSERT_NE(service, nullptr);
  auto channel = grpc::CreateChannel(daemon_->target(), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  const std::string broken = "\x0a\x7f";  // field 1, 127 bytes long, and then nothing
  for (int i = 0; i < service->method_count(); ++i) {
    const google::protobuf::MethodDescriptor& method = *service->method(i);
    grpc::Slice slice(broken.data(), broken.size());
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    absl::Notification done;
    grpc::Status status;
    // One message and a half-close: how a server-streaming method is called, too.
    stub.UnaryCall(&context, absl::StrCat("/", service->full_name(), "/", method.name()),
                   grpc::StubOptions(), &request, &response, [&](grpc::Status result) {
                     status = std::move(result);
                     done.Notify();
                   });
    ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60))) << method.name();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method.name();
    EXPECT_EQ(status.error_message(),
              absl::StrCat("the request is not a valid ", method.input_type()->full_name(),
                           " message (its protobuf wire format is broken)"))
        << method.name();
  }
  // The daemon goes on serving.
  EXPECT_EQ(GetExperiment("exp-999999").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(RequestErrorsE2eTest, MeasurementOptionsOfACpuWorkloadAreValidated) {
  const CommandResult warmup = daemon_->Cli({"submit", "radix", "--warmup", "-1"});
  EXPECT_EQ(warmup.exit_code, 2) << warmup.err;
  EXPECT_THAT(warmup.err,
              HasSubstr("INVALID_ARGUMENT: measurement.warmup_iterations: got -1; must be in "
                        "[0, 100000]"));
  const CommandResult noise = daemon_->Cli({"submit", "radix", "--noise", "1.5"});
  EXPECT_EQ(noise.exit_code, 2) << noise.err;
  EXPECT_THAT(noise.err, HasSubstr("measurement.noise_target: got 1.5; must be in [0, 1)"));
}

TEST_F(RequestErrorsE2eTest, InvalidDurationsAreRefused) {
  v1::ExperimentRequest request;
  request.mutable_radix();
  request.mutable_timeout()->set_seconds(5);
  request.mutable_timeout()->set_nanos(-1);
  const grpc::Status timeout = Submit(request);
  EXPECT_EQ(timeout.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(timeout.error_message(),
            "timeout: got a Duration of seconds 5, nanos -1; must not be negative, with seconds "
            "in [0, 315576000000] and nanos in [0, 999999999]");

  request.clear_timeout();
  request.mutable_measurement()->mutable_time_budget()->set_nanos(1'000'000'000);
  const grpc::Status budget = Submit(request);
  EXPECT_EQ(budget.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(budget.error_message(),
              HasSubstr("measurement.time_budget: got a Duration of seconds 0, nanos 1000000000"));
}

TEST_F(RequestErrorsE2eTest, UnknownEnumsInListFiltersAreRefused) {
  auto stub = daemon_->NewStub();
  grpc::ClientContext context;
  v1::ListExperimentsRequest request;
  request.add_states(v1::QUEUED);
  request.add_states(static_cast<v1::ExperimentState>(42));
  v1::ListExperimentsResponse response;
  const grpc::Status status = stub->ListExperiments(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(),
              AllOf(HasSubstr("states[1]: got 42, which gpuprof.v1.ExperimentState does not "
                              "name; must be one of EXPERIMENT_STATE_UNSPECIFIED, QUEUED"),
                    HasSubstr("PREEMPTED")));

  grpc::ClientContext workload_context;
  v1::ListExperimentsRequest by_workload;
  by_workload.set_workload(static_cast<v1::Workload>(77));
  const grpc::Status workload = stub->ListExperiments(&workload_context, by_workload, &response);
  EXPECT_EQ(workload.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(workload.error_message(), HasSubstr("workload: got 77"));
}

}  // namespace
}  // namespace gpuprof::testing
