// The health-only port over a real socket: SERVING, then NOT_SERVING once the daemon stops;
// unknown services are NOT_FOUND, and no other API answers there.
#include "daemon/server/health_only_server.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gpuprof/v1/profiler.grpc.pb.h"

namespace gpuprof::daemon {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

std::shared_ptr<grpc::Channel> ChannelTo(const HealthOnlyServer& server) {
  return grpc::CreateChannel(absl::StrCat("127.0.0.1:", server.port()),
                             grpc::InsecureChannelCredentials());
}

grpc::Status Check(const HealthOnlyServer& server, const std::string& service,
                   HealthCheckResponse* response) {
  auto stub = grpc::health::v1::Health::NewStub(ChannelTo(server));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  HealthCheckRequest request;
  request.set_service(service);
  return stub->Check(&context, request, response);
}

TEST(HealthOnlyServerTest, ServingUntilToldOtherwise) {
  auto server = HealthOnlyServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);
  for (const std::string service : {"", "gpuprof.v1.Profiler"}) {
    HealthCheckResponse response;
    ASSERT_TRUE(Check(**server, service, &response).ok()) << service;
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << service;
  }
  (*server)->SetNotServing();
  HealthCheckResponse response;
  ASSERT_TRUE(Check(**server, "", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
}

TEST(HealthOnlyServerTest, UnknownServiceIsNotFound) {
  auto server = HealthOnlyServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  HealthCheckResponse response;
  const grpc::Status status = Check(**server, "some.Other", &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(status.error_message().find("some.Other"), std::string::npos);
}

TEST(HealthOnlyServerTest, TheApiIsNotServedThere) {
  auto server = HealthOnlyServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Profiler::NewStub(ChannelTo(**server));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::ListGpusResponse response;
  EXPECT_EQ(stub->ListGpus(&context, v1::ListGpusRequest(), &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST(HealthOnlyServerTest, ABusyAddressIsAClearError) {
  auto first = HealthOnlyServer::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = HealthOnlyServer::Start(absl::StrCat("127.0.0.1:", (*first)->port()));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("--health_listen"), std::string::npos);
}

}  // namespace
}  // namespace gpuprof::daemon
