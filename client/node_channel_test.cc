// A fleet node's TLS settings against a real TLS gRPC server that requires and verifies client
// certificates, with certificates made here by openssl: the right CA and certificate get
// through; no client certificate, another CA's certificate or plaintext do not.
#include "client/node_channel.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"

namespace gpuprof::client {
namespace {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class ServingHealth final : public grpc::health::v1::Health::Service {
  grpc::Status Check(grpc::ServerContext*, const HealthCheckRequest*,
                     HealthCheckResponse* response) override {
    response->set_status(HealthCheckResponse::SERVING);
    return grpc::Status::OK;
  }
};

std::string Read(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// A CA and, signed by it, certificates for `names` (CN and DNS name), in `dir`.
void MakePki(const std::string& dir, const std::string& ca, const std::vector<std::string>& names) {
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  std::string script = absl::StrCat("set -e; cd ", dir, "; openssl req -x509 ", key,
                                    " -keyout ", ca, ".key -out ", ca, ".pem -days 2 -subj /CN=",
                                    ca, " 2>/dev/null;");
  for (const std::string& name : names) {
    absl::StrAppend(&script, "printf 'subjectAltName=DNS:", name, "' > ", name, ".ext;",
                    "openssl req ", key, " -keyout ", name, ".key -out ", name,
                    ".csr -subj /CN=", name, " 2>/dev/null;", "openssl x509 -req -in ", name,
                    ".csr -CA ", ca, ".pem -CAkey ", ca, ".key -CAcreateserial -days 2 -out ",
                    name, ".pem -extfile ", name, ".ext 2>/dev/null;");
  }
  ASSERT_EQ(std::system(absl::StrCat("bash -c \"", script, "\"").c_str()), 0) << script;
}

class NodeChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::getenv("TEST_TMPDIR");
    MakePki(dir_, "lab-ca", {"gpuprofd", "alice"});
    MakePki(dir_, "other-ca", {"mallory"});
    grpc::SslServerCredentialsOptions tls(
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    tls.pem_root_certs = Read(dir_ + "/lab-ca.pem");
    tls.pem_key_cert_pairs.push_back({Read(dir_ + "/gpuprofd.key"), Read(dir_ + "/gpuprofd.pem")});
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(tls), &port_);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

  DaemonNode Node(const std::string& ca, const std::string& user) const {
    DaemonNode node{"gpu-a", absl::StrCat("127.0.0.1:", port_), NodeTlsMaterial{}};
    node.tls->ca_pem = Read(dir_ + "/" + ca + ".pem");
    if (!user.empty()) {
      node.tls->cert_pem = Read(dir_ + "/" + user + ".pem");
      node.tls->key_pem = Read(dir_ + "/" + user + ".key");
    }
    node.tls->server_name = "gpuprofd";
    return node;
  }

  grpc::Status Check(const DaemonNode& node) {
    auto stub = grpc::health::v1::Health::NewStub(NodeChannel(node, 1 << 20));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    HealthCheckResponse response;
    const grpc::Status status = stub->Check(&context, HealthCheckRequest(), &response);
    if (status.ok()) {
      EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
    }
    return status;
  }

  std::string dir_;
  ServingHealth health_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(NodeChannelTest, TheNodesCaAndAClientCertificateGetThrough) {
  const grpc::Status status = Check(Node("lab-ca", "alice"));
  EXPECT_TRUE(status.ok()) << status.error_message();
}

TEST_F(NodeChannelTest, WithoutAClientCertificateTheServerRefuses) {
  EXPECT_FALSE(Check(Node("lab-ca", "")).ok());
}

TEST_F(NodeChannelTest, AnotherCasClientCertificateIsRefused) {
  DaemonNode node = Node("lab-ca", "");
  node.tls->cert_pem = Read(dir_ + "/mallory.pem");
  node.tls->key_pem = Read(dir_ + "/mallory.key");
  EXPECT_FALSE(Check(node).ok());
}

TEST_F(NodeChannelTest, TheClientRefusesAServerItsCaDidNotSign) {
  EXPECT_FALSE(Check(Node("other-ca", "alice")).ok());
}

TEST_F(NodeChannelTest, PlaintextToATlsNodeFails) {
  DaemonNode node = Node("lab-ca", "alice");
  node.tls.reset();
  EXPECT_FALSE(Check(node).ok());
}

}  // namespace
}  // namespace gpuprof::client
