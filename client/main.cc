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
#include "client/node_channel.h"
#include "client/terminal_output.h"

namespace {

std::string LocalUserName() {
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') return user;
  if (const passwd* entry = getpwuid(geteuid()); entry != nullptr) return entry->pw_name;
  return "unknown";
}

gpuprof::client::DaemonStubs Stubs(const std::shared_ptr<grpc::Channel>& channel) {
  return {gpuprof::v1::Profiler::NewStub(channel), grpc::health::v1::Health::NewStub(channel)};
}

gpuprof::client::DaemonStubs Connect(const gpuprof::client::ConnectionOptions& options) {
  return Stubs(
      gpuprof::client::DaemonChannel(options, gpuprof::client::kMaxReceiveMessageBytes));
}

// A node of a fleet: its own CA and client certificate when the fleet file gives them, else
// the TLS files and token every command uses.
gpuprof::client::DaemonStubs ConnectNode(const gpuprof::client::DaemonNode& node,
                                         const gpuprof::client::ConnectionOptions& options) {
  return Stubs(
      gpuprof::client::NodeChannel(node, options, gpuprof::client::kMaxReceiveMessageBytes));
}

}  // namespace

int main(int argc, char** argv) {
  // Whatever a command prints (another user's label, a worker's stderr, a daemon's message)
  // reaches the terminal with its control characters made visible.
  gpuprof::client::ScopedTerminalSafeOutput safe_stdout(std::cout);
  gpuprof::client::ScopedTerminalSafeOutput safe_stderr(std::cerr);
  gpuprof::client::ClientEnvironment env;
  env.out = &std::cout;
  env.err = &std::cerr;
  env.in = &std::cin;
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
  env.connect_node = ConnectNode;
  if (const char* fleet = std::getenv("GPUPROF_FLEET"); fleet != nullptr) env.fleet_from_env = fleet;
  if (const char* home = std::getenv("HOME"); home != nullptr) env.home_dir = home;
  return gpuprof::client::RunGpuprof(std::vector<std::string>(argv + 1, argv + argc), env);
}
