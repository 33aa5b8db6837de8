// gpuprofd: the per-node GPU profiling daemon. This file only turns flags into
// DaemonServer::Options (daemon/server/daemon_server.h, where the daemon starts and stops).
#include <signal.h>
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/daemon_config.h"
#include "daemon/server/daemon_server.h"
#include "daemon/server/profiler_service.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/state_dir_lock.h"

namespace {

// The flags' defaults are the options' own.
const gpuprof::daemon::DaemonServer::Options& Defaults() {
  static const auto* const defaults = new gpuprof::daemon::DaemonServer::Options();
  return *defaults;
}

}  // namespace

ABSL_FLAG(std::string, state_dir, "",
          "Directory for the database and the unix socket (default: /var/lib/gpuprof for root, "
          "else ~/.local/state/gpuprof). One daemon per directory: a second one exits with "
          "status 4, naming the first one's pid (it holds <state_dir>/gpuprofd.lock).");
ABSL_FLAG(std::string, db, "",
          "SQLite database path (default: <state_dir>/gpuprof.db). One daemon per database: "
          "it holds <db>.lock.");
ABSL_FLAG(std::string, listen, "",
          "Comma-separated gRPC listen addresses (default: 127.0.0.1:7070 and, for root, "
          "unix:/run/gpuprof/gpuprofd.sock, else unix:<state_dir>/gpuprofd.sock, which only the "
          "daemon's account can reach). Use 0.0.0.0:7070 to accept remote clients (with TLS).");
ABSL_FLAG(std::string, worker_binary, "", "Path of gpuprof_worker (default: beside gpuprofd).");
ABSL_FLAG(int, worker_nice, Defaults().worker_nice,
          "Niceness (-20..19) of the workers the daemon starts, whatever its own: a daemon run "
          "at a higher priority than the users' work (deploy/systemd/gpuprofd.service: "
          "Nice=-10, so that a compile on the box does not hold up the RPCs) keeps experiments "
          "at 0. A value below the daemon's own needs CAP_SYS_NICE; without it workers keep "
          "the daemon's.");
ABSL_FLAG(int, cpu_slots, Defaults().cpu_slots,
          "CPU workloads (radix) that may run at the same time.");
ABSL_FLAG(absl::Duration, default_timeout, Defaults().default_timeout,
          "Run-time limit for experiments that set none.");
ABSL_FLAG(absl::Duration, max_timeout, Defaults().max_timeout,
          "Largest timeout a request may set.");
ABSL_FLAG(absl::Duration, gpu_reservation_after, Defaults().gpu_reservation_after,
          "A GPU experiment waiting this long for busy GPUs reserves the next ones that free "
          "up, so a large request is not starved by a stream of small ones.");
ABSL_FLAG(absl::Duration, worker_idle_timeout, Defaults().worker_idle_timeout,
          "How long an idle worker is kept for reuse on the same GPUs.");
ABSL_FLAG(bool, measure_copy_bandwidth, Defaults().measure_copy_bandwidth,
          "Measure each GPU's device-to-device copy bandwidth at start-up (the practical limit "
          "that results are compared against).");
ABSL_FLAG(int, max_message_bytes, Defaults().max_message_bytes,
          "Largest request message accepted.");
ABSL_FLAG(std::string, metrics_listen, Defaults().metrics_listen,
          "Address of the Prometheus /metrics endpoint (loopback by default; port 0 picks a free "
          "one); empty disables metrics.");
ABSL_FLAG(absl::Duration, metrics_recent_window, Defaults().metrics_recent_window,
          "How long an ended experiment or sweep keeps its own metric series (Grafana "
          "annotations, every sweep point's figure); 0 gives runs no series of their own.");
ABSL_FLAG(int, metrics_recent_max, Defaults().metrics_recent_max,
          "Ended experiments and sweeps that keep their own metric series at most; beyond it "
          "the first to end lose theirs early.");
ABSL_FLAG(std::string, health_listen, "",
          "Address of a plaintext port that serves grpc.health.v1 and nothing else, for "
          "Kubernetes' gRPC probes when the API is behind TLS (e.g. 0.0.0.0:7071); empty: none.");
ABSL_FLAG(std::string, reload_when_changed, "",
          "Comma-separated files (the policy, certificates) whose change on disk triggers the "
          "same reload as SIGHUP; polled every --reload_poll_interval. Mounted ConfigMaps and "
          "Secrets change this way.");
ABSL_FLAG(absl::Duration, reload_poll_interval, Defaults().reload_poll_interval,
          "How often the files of --reload_when_changed are checked.");
ABSL_FLAG(absl::Duration, shutdown_timeout, Defaults().shutdown_timeout,
          "After SIGTERM/SIGINT the daemon exits within this time: running experiments are "
          "marked INTERRUPTED, streams end, and if anything still holds on when it runs out "
          "the process exits anyway (status 3; the database is safe, as after kill -9). Keep "
          "it below the pod's terminationGracePeriodSeconds / systemd's TimeoutStopSec.");
ABSL_FLAG(int64_t, max_reports_per_experiment, Defaults().max_reports_per_experiment,
          "A worker sending more reports than this for one experiment is killed and the "
          "experiment fails (a runaway worker must not fill the database).");
ABSL_FLAG(int64_t, max_report_bytes_per_experiment, Defaults().max_report_bytes_per_experiment,
          "Like --max_reports_per_experiment, in bytes of reports.");
ABSL_FLAG(bool, check_db, false,
          "Check the database and exit without serving: SQLite's integrity_check, that the file "
          "is gpuprof's and that every stored record parses. Exit 0 if intact, 1 if not.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate (chain) the daemon presents on its TCP addresses; with --tls_key and "
          "--tls_client_ca every TCP address speaks mutual TLS. Re-read on SIGHUP and when the "
          "file changes.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle that client certificates must be signed by. Re-read on SIGHUP and when "
          "it changes.");
ABSL_FLAG(std::string, tls_user_from, Defaults().tls_user_from,
          "Where the user name comes from in a client certificate: cn (subject common name) or "
          "san (first subject alternative name).");
ABSL_FLAG(bool, tls_require_client_cert, Defaults().tls_require_client_cert,
          "Refuse TLS clients without a certificate at the handshake. false lets clients that "
          "cannot hold one in, to authenticate with a bearer token from the policy instead.");
ABSL_FLAG(std::string, tls_crl_dir, "",
          "Directory of CRLs (hashed names, as openssl rehash writes them): revoked client "
          "certificates are refused. Re-read on SIGHUP and when a CRL in it changes; a CRL that "
          "does not parse leaves the ones in use.");
ABSL_FLAG(absl::Duration, tls_reload_interval, Defaults().tls_reload_interval,
          "How often the certificate, key and CA files are checked for changes (rotation "
          "without restart); SIGHUP re-reads them at once.");
ABSL_FLAG(std::string, policy, "",
          "Access policy (gpuprof.v1.AccessPolicy textproto): admins, quotas, tokens. Reloaded "
          "on SIGHUP; a file with errors is refused and the policy in force stays.");
ABSL_FLAG(bool, allow_insecure_tcp, Defaults().allow_insecure_tcp,
          "UNSAFE: serve plaintext TCP on addresses other than loopback, trusting the user name "
          "clients claim. Anyone who can reach the port can act as anyone.");
ABSL_FLAG(int, max_concurrent_streams, Defaults().max_concurrent_streams,
          "Concurrent RPCs (streams) one client connection may have open; more wait.");
ABSL_FLAG(absl::Duration, keepalive_min_ping_interval, Defaults().keepalive_min_ping_interval,
          "Clients pinging more often than this without sending data get strikes...");
ABSL_FLAG(int, keepalive_max_ping_strikes, Defaults().keepalive_max_ping_strikes,
          "...and after this many the connection is closed with GOAWAY (too_many_pings).");
ABSL_FLAG(absl::Duration, max_connection_idle, Defaults().max_connection_idle,
          "A connection with no RPC for this long is closed (GOAWAY), so idle connections do "
          "not accumulate.");
ABSL_FLAG(int, max_connections, Defaults().max_connections,
          "Client connections (unix socket and TCP together) the daemon holds at once. When "
          "every place is taken, a newcomer evicts the oldest connection of whoever holds the "
          "most (if that is someone else holding more), else it is closed as soon as accepted.");
ABSL_FLAG(int, max_connections_per_user, Defaults().max_connections_per_user,
          "Connections one local account (or one remote host, before TLS names its user) may "
          "hold at once; more are refused. The daemon's own uid is exempt. 0: no cap.");
ABSL_FLAG(int, reserved_local_connections, Defaults().reserved_local_connections,
          "Places of --max_connections that TCP connections may not take: the unix socket "
          "always has room.");
ABSL_FLAG(std::string, socket_group, "",
          "Group whose members may connect to the unix socket (mode 0660); empty: every local "
          "account may (0666; the kernel tells the daemon who connects).");
ABSL_FLAG(absl::Duration, handshake_timeout, Defaults().handshake_timeout,
          "A TCP client that has not completed its (TLS and HTTP/2) handshake by then is "
          "disconnected.");
ABSL_FLAG(int64_t, server_memory_bytes, Defaults().server_memory_bytes,
          "Memory gRPC may use for buffers across every connection (a resource quota); under "
          "pressure it stops reading from connections instead of growing.");
ABSL_FLAG(int, max_watchers_per_experiment, Defaults().max_watchers_per_experiment,
          "Live Watch/Submit streams one experiment (or sweep) may have; more are refused "
          "(RESOURCE_EXHAUSTED). Users other than its owner and admins may fill all but "
          "min(--max_watchers_per_user_per_experiment, half of it). 0: no cap.");
ABSL_FLAG(int, max_watchers_per_user_per_experiment,
          Defaults().max_watchers_per_user_per_experiment,
          "Live streams one user (admins exempt) may hold on one experiment or sweep; more are "
          "refused (RESOURCE_EXHAUSTED). 0: no cap.");
ABSL_FLAG(int, max_watch_streams_per_user, Defaults().max_watch_streams_per_user,
          "Live Watch/WatchSweep streams one user (admins exempt) may hold over all experiments "
          "and sweeps; more are refused (RESOURCE_EXHAUSTED). 0: no cap.");
ABSL_FLAG(int, submits_per_minute_per_user, Defaults().submits_per_minute_per_user,
          "Submits one user (admins exempt) may make per minute, in bursts up to the same "
          "number; more are refused (RESOURCE_EXHAUSTED). 0: no limit.");
ABSL_FLAG(std::string, nvml_library, Defaults().nvml_library,
          "The NVML library (the driver's) read for GPU telemetry and health: Xid events and "
          "memory error counters. Loaded at run time; without it neither is watched.");
ABSL_FLAG(absl::Duration, gpu_health_interval, Defaults().gpu_health_interval,
          "How often each GPU's ECC, retired-page and remapped-row counters are read (Xid "
          "events arrive as they happen).");
ABSL_FLAG(int, rpc_threads, Defaults().rpc_threads,
          "Threads that run RPCs' work (submits and cancels wait there for their durable "
          "commit); as many RPCs as this wait for the disk at once and share its commits.");
ABSL_FLAG(int64_t, watch_buffer_bytes, Defaults().watch_buffer_bytes,
          "Bytes of events queued for one Watch/WatchSweep client; live events beyond them "
          "are read back from the store once the client has taken the rest (nothing is lost).");
ABSL_FLAG(int64_t, watch_buffer_total_bytes, Defaults().watch_buffer_total_bytes,
          "The same bound over every stream together.");
ABSL_FLAG(absl::Duration, watch_stall_timeout, Defaults().watch_stall_timeout,
          "A watching client that takes no event for this long is cut off (RESOURCE_EXHAUSTED, "
          "with the seq to watch again from), and its place under the watch caps is freed.");
ABSL_FLAG(int64_t, custom_kernel_max_source_bytes, Defaults().custom_kernel_max_source_bytes,
          "Largest custom kernel source (ExperimentRequest.custom_kernel.source) admitted, in "
          "bytes; larger ones are refused before anything is stored. At most half of "
          "--max_message_bytes.");
ABSL_FLAG(absl::Duration, custom_kernel_compile_timeout, Defaults().custom_kernel_compile_timeout,
          "Wall-clock limit on compiling one custom kernel in the worker (NVRTC in a child "
          "process, killed at the limit).");
ABSL_FLAG(int64_t, custom_kernel_compile_memory, Defaults().custom_kernel_compile_memory,
          "Address space, in bytes, that the child process compiling a custom kernel may add "
          "to what it starts with (a copy of the worker).");
ABSL_FLAG(std::string, ncu_path, Defaults().ncu_path,
          "Nsight Compute's ncu, which `submit --capture ncu` runs experiments under. Unset: "
          "looked for on $PATH, in /usr/local/cuda/bin and /opt/nvidia/nsight-compute/*/.");
ABSL_FLAG(std::string, nsys_path, Defaults().nsys_path,
          "Nsight Systems' nsys, which `submit --capture nsys` runs experiments under. Unset: "
          "looked for on $PATH, in /usr/local/cuda/bin and /opt/nvidia/nsight-systems/*/bin/.");
ABSL_FLAG(int64_t, max_capture_report_bytes, Defaults().max_capture_report_bytes,
          "Largest Nsight report kept (<state_dir>/reports); a larger one is deleted and its "
          "experiment fails saying so.");
ABSL_FLAG(bool, enable_test_faults, Defaults().enable_test_faults,
          "Honour the gpuprof.fault label (crash/hang/exit/cuda-error a worker): for tests only.");

namespace gpuprof::daemon {
namespace {

// Every option but the two lists is the flag of its name.
#define FROM_FLAG(name) options.name = absl::GetFlag(FLAGS_##name)
DaemonServer::Options OptionsFromFlags() {
  DaemonServer::Options options;
  // clang-format off
  FROM_FLAG(state_dir); FROM_FLAG(db); FROM_FLAG(worker_binary); FROM_FLAG(cpu_slots);
  FROM_FLAG(worker_nice);
  FROM_FLAG(default_timeout); FROM_FLAG(max_timeout); FROM_FLAG(gpu_reservation_after);
  FROM_FLAG(worker_idle_timeout); FROM_FLAG(measure_copy_bandwidth); FROM_FLAG(max_message_bytes);
  FROM_FLAG(metrics_listen); FROM_FLAG(metrics_recent_window); FROM_FLAG(metrics_recent_max);
  FROM_FLAG(health_listen); FROM_FLAG(reload_poll_interval);
  FROM_FLAG(shutdown_timeout); FROM_FLAG(max_reports_per_experiment);
  FROM_FLAG(max_report_bytes_per_experiment); FROM_FLAG(tls_cert); FROM_FLAG(tls_key);
  FROM_FLAG(tls_client_ca); FROM_FLAG(tls_user_from); FROM_FLAG(tls_require_client_cert);
  FROM_FLAG(tls_crl_dir); FROM_FLAG(tls_reload_interval); FROM_FLAG(policy);
  FROM_FLAG(allow_insecure_tcp); FROM_FLAG(max_concurrent_streams);
  FROM_FLAG(keepalive_min_ping_interval); FROM_FLAG(keepalive_max_ping_strikes);
  FROM_FLAG(max_connection_idle); FROM_FLAG(max_connections); FROM_FLAG(max_connections_per_user);
  FROM_FLAG(reserved_local_connections); FROM_FLAG(socket_group); FROM_FLAG(handshake_timeout);
  FROM_FLAG(server_memory_bytes); FROM_FLAG(max_watchers_per_experiment);
  FROM_FLAG(max_watchers_per_user_per_experiment); FROM_FLAG(max_watch_streams_per_user);
  FROM_FLAG(submits_per_minute_per_user); FROM_FLAG(nvml_library); FROM_FLAG(gpu_health_interval);
  FROM_FLAG(rpc_threads); FROM_FLAG(enable_test_faults); FROM_FLAG(watch_buffer_bytes);
  FROM_FLAG(watch_buffer_total_bytes); FROM_FLAG(watch_stall_timeout);
  FROM_FLAG(custom_kernel_max_source_bytes); FROM_FLAG(custom_kernel_compile_timeout);
  FROM_FLAG(custom_kernel_compile_memory); FROM_FLAG(ncu_path); FROM_FLAG(nsys_path);
  FROM_FLAG(max_capture_report_bytes);
  // clang-format on
  if (!absl::GetFlag(FLAGS_listen).empty()) {
    options.listen = SplitAddresses(absl::GetFlag(FLAGS_listen));
  }
  options.reload_when_changed = SplitAddresses(absl::GetFlag(FLAGS_reload_when_changed));
  return options;
}
#undef FROM_FLAG

// Exit status: 0 stopped on a signal (or --check-db found the database intact), 1 could not
// start (or the database is damaged), 2 a flag that makes no sense, 3 the shutdown overran,
// 4 another gpuprofd holds the state directory or the database (nothing was changed).
constexpr int kExitHeldByAnotherDaemon = 4;
int Run() {
  const DaemonServer::Options options = OptionsFromFlags();
  if (const absl::Status valid = DaemonServer::ValidateOptions(options); !valid.ok()) {
    std::fprintf(stderr, "gpuprofd: %s\n", std::string(valid.message()).c_str());
    return 2;
  }
  // Read-only: creates nothing, not even the state directory, and takes no lock: SQLite's read
  // transaction sees a consistent database beside a running daemon.
  if (absl::GetFlag(FLAGS_check_db)) {
    const absl::StatusOr<std::string> verdict =
        ExperimentStore::CheckDatabase(DaemonServer::DatabasePath(options));
    if (!verdict.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", std::string(verdict.status().message()).c_str());
      return 1;
    }
    std::printf("%s\n", verdict->c_str());
    return 0;
  }
  absl::StatusOr<std::unique_ptr<DaemonServer>> server = DaemonServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "gpuprofd: %s\n", std::string(server.status().message()).c_str());
    return IsHeldByAnotherProcess(server.status()) ? kExitHeldByAnotherDaemon : 1;
  }
  (*server)->WaitForSignalsAndStop();
  return 0;
}

}  // namespace
}  // namespace gpuprof::daemon

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "gpuprofd: the gpuprof daemon. Owns this node's GPUs, queues experiments submitted with "
      "the gpuprof CLI, runs them in supervised worker processes and keeps their results.");
  // `--check-db` is how the command is documented; abseil spells flags with underscores.
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--check-db") argv[i] = const_cast<char*>("--check_db");
  }
  absl::ParseCommandLine(argc, argv);
  // Before any thread starts, so that only the server's sigwait sees them; a worker dying must
  // not kill the daemon through SIGPIPE.
  gpuprof::daemon::DaemonServer::BlockSignals();
  signal(SIGPIPE, SIG_IGN);
  // Everything the daemon and its workers create (database, WAL, JIT caches, TLS copies) is
  // private to its account; the socket's mode is set explicitly.
  umask(077);
  // Debian's abseil is built without NDEBUG, so every lock would also update a graph of lock
  // orders (about 2% of the daemon's CPU under load, docs/reliability.md). The tests keep it:
  // they link the same code without this line.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return gpuprof::daemon::Run();
}
