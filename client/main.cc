// gpuprof: the command-line client of gpuprofd. Fills in the environment (terminal, user,
// target, channel) and hands over to RunGpuprof.
#include <pwd.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/commands.h"
#include "client/connection_options.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_interceptor.h"

namespace {

std::string LocalUserName() {
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') return user;
  if (const passwd* entry = getpwuid(geteuid()); entry != nullptr) return entry->pw_name;
  return "unknown";
}

// Adds the local user name to every call: a daemon trusts it only when it was started with
// --allow_insecure_tcp (it identifies everyone else itself).
class ClaimedUserInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ClaimedUserInterceptor(std::string user) : user_(std::move(user)) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"gpuprof-user", user_});
    }
    methods->Proceed();
  }

 private:
  std::string user_;
};

class ClaimedUserInterceptorFactory
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ClaimedUserInterceptorFactory(std::string user) : user_(std::move(user)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new ClaimedUserInterceptor(user_);
  }

 private:
  std::string user_;
};

std::string ReadOrEmpty(const std::string& path) {
  if (path.empty()) return "";
  auto contents = gpuprof::client::ReadFileForFlag(path, "");
  return contents.ok() ? *contents : "";
}

gpuprof::client::DaemonStubs Connect(const gpuprof::client::ConnectionOptions& options) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(gpuprof::client::kMaxReceiveMessageBytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadOrEmpty(options.tls_ca);
    ssl.pem_cert_chain = ReadOrEmpty(options.tls_cert);
    ssl.pem_private_key = ReadOrEmpty(options.tls_key);
    credentials = grpc::SslCredentials(ssl);
    if (!options.token.empty()) {
      // Call credentials only ever travel on a secure channel.
      credentials = grpc::CompositeChannelCredentials(
          credentials, grpc::AccessTokenCredentials(options.token));
    }
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(std::make_unique<ClaimedUserInterceptorFactory>(options.claimed_user));
  auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(
      options.target, credentials, arguments, std::move(interceptors));
  return {gpuprof::v1::Profiler::NewStub(channel), grpc::health::v1::Health::NewStub(channel)};
}

}  // namespace

int main(int argc, char** argv) {
  gpuprof::client::ClientEnvironment env;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.stdout_is_terminal = isatty(STDOUT_FILENO) == 1;
  if (winsize size; env.stdout_is_terminal && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0) {
    env.terminal_width = size.ws_col;
  }
  if (const char* target = std::getenv("GPUPROF_TARGET"); target != nullptr) {
    env.target_from_env = target;
  }
  if (const char* token = std::getenv("GPUPROF_TOKEN"); token != nullptr) {
    env.token_from_env = token;
  }
  env.config_path = gpuprof::client::DefaultClientConfigPath();
  env.local_user = LocalUserName();
  env.time_zone = absl::LocalTimeZone();
  env.now = [] { return absl::Now(); };
  env.connect = Connect;
  return gpuprof::client::RunGpuprof(std::vector<std::string>(argv + 1, argv + argc), env);
}
