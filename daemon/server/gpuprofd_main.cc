// gpuprofd: the per-node GPU profiling daemon.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "common/version.h"
#include "daemon/admission/access_policy.h"
#include "daemon/server/caller_identity.h"
#include "daemon/server/connection_limit.h"
#include "daemon/daemon_config.h"
#include "daemon/experiment_manager.h"
#include "daemon/store/experiment_store.h"
#include "daemon/server/file_change_watcher.h"
#include "daemon/gpu_health/gpu_health_monitor.h"
#include "daemon/server/health_only_server.h"
#include "daemon/metrics/metrics_exporter.h"
#include "daemon/store/private_state.h"
#include "daemon/server/profiler_service.h"
#include "daemon/sweep_manager.h"
#include "daemon/server/tcp_socket_listener.h"
#include "daemon/server/tls_file_mirror.h"
#include "daemon/server/unix_socket_listener.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"


ABSL_FLAG(std::string, state_dir, "",
          "Directory for the database and the unix socket (default: /var/lib/gpuprof for root, "
          "else ~/.local/state/gpuprof).");
ABSL_FLAG(std::string, db, "", "SQLite database path (default: <state_dir>/gpuprof.db).");
ABSL_FLAG(std::string, listen, "",
          "Comma-separated gRPC listen addresses (default: 127.0.0.1:7070 and, for root, "
          "unix:/run/gpuprof/gpuprofd.sock, else unix:<state_dir>/gpuprofd.sock, which only the "
          "daemon's account can reach). Use 0.0.0.0:7070 to accept remote clients (with TLS).");
ABSL_FLAG(std::string, worker_binary, "",
          "Path of gpuprof_worker (default: beside gpuprofd).");
ABSL_FLAG(int, cpu_slots, 1, "CPU workloads (radix) that may run at the same time.");
ABSL_FLAG(absl::Duration, default_timeout, absl::Minutes(30),
          "Run-time limit for experiments that set none.");
ABSL_FLAG(absl::Duration, max_timeout, absl::Hours(24), "Largest timeout a request may set.");
ABSL_FLAG(absl::Duration, gpu_reservation_after, absl::Minutes(2),
          "A GPU experiment waiting this long for busy GPUs reserves the next ones that free "
          "up, so a large request is not starved by a stream of small ones.");
ABSL_FLAG(absl::Duration, worker_idle_timeout, absl::Seconds(60),
          "How long an idle worker is kept for reuse on the same GPUs.");
ABSL_FLAG(bool, measure_copy_bandwidth, true,
          "Measure each GPU's device-to-device copy bandwidth at start-up (the practical limit "
          "that results are compared against).");
ABSL_FLAG(int, max_message_bytes, 4 << 20, "Largest request message accepted.");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9464",
          "Address of the Prometheus /metrics endpoint (loopback by default; port 0 picks a free "
          "one); empty disables metrics.");
ABSL_FLAG(std::string, health_listen, "",
          "Address of a plaintext port that serves grpc.health.v1 and nothing else, for "
          "Kubernetes' gRPC probes when the API is behind TLS (e.g. 0.0.0.0:7071); empty: none.");
ABSL_FLAG(std::string, reload_when_changed, "",
          "Comma-separated files (the policy, certificates) whose change on disk triggers the "
          "same reload as SIGHUP; polled every --reload_poll_interval. Mounted ConfigMaps and "
          "Secrets change this way.");
ABSL_FLAG(absl::Duration, reload_poll_interval, absl::Seconds(5),
          "How often the files of --reload_when_changed are checked.");
ABSL_FLAG(absl::Duration, shutdown_timeout, absl::Seconds(20),
          "After SIGTERM/SIGINT the daemon exits within this time: running experiments are "
          "marked INTERRUPTED, streams end, and if anything still holds on when it runs out "
          "the process exits anyway (status 3; the database is safe, as after kill -9). Keep "
          "it below the pod's terminationGracePeriodSeconds / systemd's TimeoutStopSec.");
ABSL_FLAG(int64_t, max_reports_per_experiment, 1'000'000,
          "A worker sending more reports than this for one experiment is killed and the "
          "experiment fails (a runaway worker must not fill the database).");
ABSL_FLAG(int64_t, max_report_bytes_per_experiment, int64_t{1} << 30,
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
ABSL_FLAG(std::string, tls_user_from, "cn",
          "Where the user name comes from in a client certificate: cn (subject common name) or "
          "san (first subject alternative name).");
ABSL_FLAG(bool, tls_require_client_cert, true,
          "Refuse TLS clients without a certificate at the handshake. false lets clients that "
          "cannot hold one in, to authenticate with a bearer token from the policy instead.");
ABSL_FLAG(std::string, tls_crl_dir, "",
          "Directory of CRLs (hashed names, as openssl rehash writes them): revoked client "
          "certificates are refused. Re-read on SIGHUP and when a CRL in it changes; a CRL that "
          "does not parse leaves the ones in use.");
ABSL_FLAG(absl::Duration, tls_reload_interval, absl::Seconds(60),
          "How often the certificate, key and CA files are checked for changes (rotation "
          "without restart); SIGHUP re-reads them at once.");
ABSL_FLAG(std::string, policy, "",
          "Access policy (gpuprof.v1.AccessPolicy textproto): admins, quotas, tokens. Reloaded "
          "on SIGHUP; a file with errors is refused and the policy in force stays.");
ABSL_FLAG(bool, allow_insecure_tcp, false,
          "UNSAFE: serve plaintext TCP on addresses other than loopback, trusting the user name "
          "clients claim. Anyone who can reach the port can act as anyone.");
ABSL_FLAG(int, max_concurrent_streams, 100,
          "Concurrent RPCs (streams) one client connection may have open; more wait.");
ABSL_FLAG(absl::Duration, keepalive_min_ping_interval, absl::Seconds(10),
          "Clients pinging more often than this without sending data get strikes...");
ABSL_FLAG(int, keepalive_max_ping_strikes, 2,
          "...and after this many the connection is closed with GOAWAY (too_many_pings).");
ABSL_FLAG(absl::Duration, max_connection_idle, absl::Minutes(30),
          "A connection with no RPC for this long is closed (GOAWAY), so idle connections do "
          "not accumulate.");
ABSL_FLAG(int, max_connections, 1000,
          "Client connections (unix socket and TCP together) the daemon holds at once. When "
          "every place is taken, a newcomer evicts the oldest connection of whoever holds the "
          "most (if that is someone else holding more), else it is closed as soon as accepted.");
ABSL_FLAG(int, max_connections_per_user, 256,
          "Connections one local account (or one remote host, before TLS names its user) may "
          "hold at once; more are refused. The daemon's own uid is exempt. 0: no cap.");
ABSL_FLAG(int, reserved_local_connections, 64,
          "Places of --max_connections that TCP connections may not take: the unix socket "
          "always has room.");
ABSL_FLAG(std::string, socket_group, "",
          "Group whose members may connect to the unix socket (mode 0660); empty: every local "
          "account may (0666; the kernel tells the daemon who connects).");
ABSL_FLAG(absl::Duration, handshake_timeout, absl::Seconds(10),
          "A TCP client that has not completed its (TLS and HTTP/2) handshake by then is "
          "disconnected.");
ABSL_FLAG(int64_t, server_memory_bytes, int64_t{512} << 20,
          "Memory gRPC may use for buffers across every connection (a resource quota); under "
          "pressure it stops reading from connections instead of growing.");
ABSL_FLAG(int, max_watchers_per_experiment, 64,
          "Live Watch/Submit streams one experiment (or sweep) may have; more are refused "
          "(RESOURCE_EXHAUSTED). Users other than its owner and admins may fill all but "
          "min(--max_watchers_per_user_per_experiment, half of it). 0: no cap.");
ABSL_FLAG(int, max_watchers_per_user_per_experiment, 8,
          "Live streams one user (admins exempt) may hold on one experiment or sweep; more are "
          "refused (RESOURCE_EXHAUSTED). 0: no cap.");
ABSL_FLAG(int, max_watch_streams_per_user, 256,
          "Live Watch/WatchSweep streams one user (admins exempt) may hold over all experiments "
          "and sweeps; more are refused (RESOURCE_EXHAUSTED). 0: no cap.");
ABSL_FLAG(int, submits_per_minute_per_user, 120,
          "Submits one user (admins exempt) may make per minute, in bursts up to the same "
          "number; more are refused (RESOURCE_EXHAUSTED). 0: no limit.");
ABSL_FLAG(std::string, nvml_library, "libnvidia-ml.so.1",
          "The NVML library (the driver's) read for GPU telemetry and health: Xid events and "
          "memory error counters. Loaded at run time; without it neither is watched.");
ABSL_FLAG(absl::Duration, gpu_health_interval, absl::Seconds(10),
          "How often each GPU's ECC, retired-page and remapped-row counters are read (Xid "
          "events arrive as they happen).");
ABSL_FLAG(int, rpc_threads, gpuprof::daemon::ProfilerService::kDefaultCallThreads,
          "Threads that run RPCs' work (submits and cancels wait there for their durable "
          "commit); as many RPCs as this wait for the disk at once and share its commits.");
ABSL_FLAG(bool, enable_test_faults, false,
          "Honour the gpuprof.fault label (crash/hang/exit/cuda-error a worker): for tests only.");

namespace gpuprof::daemon {
namespace {

// Flags that must make sense before any work starts; the error names the flag.
absl::Status ValidateLifecycleFlags(const std::vector<std::string>& watched) {
  if (absl::GetFlag(FLAGS_shutdown_timeout) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shutdown_timeout=", absl::FormatDuration(absl::GetFlag(FLAGS_shutdown_timeout)),
                     ": must be positive (e.g. 20s)"));
  }
  if (absl::GetFlag(FLAGS_gpu_health_interval) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu_health_interval=", absl::FormatDuration(absl::GetFlag(FLAGS_gpu_health_interval)),
        ": must be positive (e.g. 10s)"));
  }
  if (absl::GetFlag(FLAGS_reload_poll_interval) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reload_poll_interval=", absl::FormatDuration(absl::GetFlag(FLAGS_reload_poll_interval)),
        ": must be positive (e.g. 5s)"));
  }
  if (absl::GetFlag(FLAGS_max_connections) < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_connections=", absl::GetFlag(FLAGS_max_connections),
                     ": must be at least 1 (e.g. 1000)"));
  }
  if (absl::GetFlag(FLAGS_max_connections_per_user) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_connections_per_user=", absl::GetFlag(FLAGS_max_connections_per_user),
                     ": must be >= 0 (0: no cap; e.g. 256)"));
  }
  if (absl::GetFlag(FLAGS_reserved_local_connections) < 0 ||
      absl::GetFlag(FLAGS_reserved_local_connections) >= absl::GetFlag(FLAGS_max_connections)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--reserved_local_connections=", absl::GetFlag(FLAGS_reserved_local_connections),
        ": must be >= 0 and below --max_connections (", absl::GetFlag(FLAGS_max_connections),
        ")"));
  }
  for (const std::string& path : watched) {
    if (!FileChangeWatcher::Take(path).exists) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--reload_when_changed: ", path, " does not exist (list files that the daemon reads)"));
    }
  }
  return absl::OkStatus();
}

// The TLS files the flags name, checked; none when TCP is plaintext.
absl::StatusOr<std::optional<TlsFileMirror::Files>> TlsFilesFromFlags() {
  const std::string cert = absl::GetFlag(FLAGS_tls_cert);
  const std::string key = absl::GetFlag(FLAGS_tls_key);
  const std::string ca = absl::GetFlag(FLAGS_tls_client_ca);
  const std::string crl_dir = absl::GetFlag(FLAGS_tls_crl_dir);
  if (cert.empty() && key.empty() && ca.empty()) {
    if (!crl_dir.empty()) {
      return absl::InvalidArgumentError(
          "--tls_crl_dir: CRLs are checked only with TLS; give --tls_cert, --tls_key and "
          "--tls_client_ca too");
    }
    return std::nullopt;
  }
  if (cert.empty() || key.empty() || ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert, --tls_key and --tls_client_ca go together: give all three or none");
  }
  if (!crl_dir.empty() && !std::filesystem::is_directory(crl_dir)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tls_crl_dir: ", crl_dir, " is not a directory"));
  }
  for (const std::string& file : {cert, key, ca}) {
    if (!std::filesystem::is_regular_file(file)) {
      return absl::InvalidArgumentError(absl::StrCat("TLS file ", file, " does not exist"));
    }
  }
  if (absl::GetFlag(FLAGS_tls_reload_interval) < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--tls_reload_interval: must be at least 1s");
  }
  return TlsFileMirror::Files{cert, key, ca, crl_dir};
}

// Plaintext without `files`; else mutual TLS from the daemon's copies of the files, which gRPC
// re-reads every second: a refreshed copy is used for new connections without a restart. The
// CRLs are copies too; a change to them rewrites the CA copy, so that gRPC builds a new TLS
// context, which reads them afresh (OpenSSL keeps a CRL it has read for a context's life).
std::shared_ptr<grpc::ServerCredentials> TcpCredentials(
    const std::optional<TlsFileMirror::Files>& files) {
  if (!files.has_value()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files->key, files->cert, files->ca, /*refresh_interval_sec=*/1);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(absl::GetFlag(FLAGS_tls_require_client_cert)
                                    ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                    : GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!files->crl_dir.empty()) options.set_crl_directory(files->crl_dir);
  return grpc::experimental::TlsServerCredentials(options);
}

// Each connection is a descriptor: the soft limit (often 1024) must leave room for the cap plus
// the database, worker pipes and the metrics server, so raise it towards the hard limit.
void RaiseDescriptorLimitFor(int max_connections) {
  constexpr rlim_t kOtherDescriptors = 512;
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  const rlim_t wanted = static_cast<rlim_t>(max_connections) + kOtherDescriptors;
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < wanted) {
    std::fprintf(stderr,
                 "gpuprofd: the descriptor limit (hard %llu) is below --max_connections=%d plus "
                 "%llu for the daemon itself; connections past it fail at accept\n",
                 static_cast<unsigned long long>(limit.rlim_max), max_connections,
                 static_cast<unsigned long long>(kOtherDescriptors));
  }
}

absl::StatusOr<TlsUserFrom> ParseTlsUserFrom(const std::string& text) {
  if (text == "cn") return TlsUserFrom::kCommonName;
  if (text == "san") return TlsUserFrom::kSubjectAltName;
  return absl::InvalidArgumentError(
      absl::StrCat("--tls_user_from: got \"", text, "\"; must be cn or san"));
}

int Run() {
  const std::vector<std::string> watched = SplitAddresses(absl::GetFlag(FLAGS_reload_when_changed));
  if (const absl::Status valid = ValidateLifecycleFlags(watched); !valid.ok()) {
    std::fprintf(stderr, "gpuprofd: %s\n", std::string(valid.message()).c_str());
    return 2;
  }
  const std::string state_dir =
      absl::GetFlag(FLAGS_state_dir).empty() ? DefaultStateDir() : absl::GetFlag(FLAGS_state_dir);
  const std::string db_path =
      absl::GetFlag(FLAGS_db).empty() ? DefaultDatabasePath(state_dir) : absl::GetFlag(FLAGS_db);
  // Read-only: creates nothing, not even the state directory.
  if (absl::GetFlag(FLAGS_check_db)) {
    const absl::StatusOr<std::string> verdict = ExperimentStore::CheckDatabase(db_path);
    if (!verdict.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", std::string(verdict.status().message()).c_str());
      return 1;
    }
    std::printf("%s\n", verdict->c_str());
    return 0;
  }
  // Private state: the directory 0700, the database and its companions 0600 (the umask set in
  // main keeps everything created later private too).
  {
    auto directory = SecureStateDirectory(state_dir);
    auto database = directory.ok() ? SecureDatabaseFiles(db_path) : directory;
    if (!database.ok()) {
      std::fprintf(stderr, "gpuprofd: not starting: %s\n",
                   std::string(database.status().message()).c_str());
      return 1;
    }
    for (const auto& changes : {*directory, *database}) {
      for (const std::string& change : changes) {
        std::fprintf(stderr, "gpuprofd: %s\n", change.c_str());
      }
    }
  }
  std::optional<gid_t> socket_group;
  if (!absl::GetFlag(FLAGS_socket_group).empty()) {
    auto group = GroupByName(absl::GetFlag(FLAGS_socket_group));
    if (!group.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", std::string(group.status().message()).c_str());
      return 2;
    }
    socket_group = *group;
  }
  std::vector<std::string> addresses = absl::GetFlag(FLAGS_listen).empty()
                                           ? DefaultListenAddresses(state_dir)
                                           : SplitAddresses(absl::GetFlag(FLAGS_listen));

  auto tls_user_from = ParseTlsUserFrom(absl::GetFlag(FLAGS_tls_user_from));
  auto tls_files = TlsFilesFromFlags();
  auto access = AccessControl::Create(absl::GetFlag(FLAGS_policy));
  for (const absl::Status& status :
       {tls_user_from.status(), tls_files.status(), access.status()}) {
    if (!status.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", std::string(status.message()).c_str());
      return 1;
    }
  }
  // The TLS files in use are the daemon's copies, refreshed on SIGHUP and when they change.
  std::unique_ptr<TlsFileMirror> tls_mirror;
  if (tls_files->has_value()) {
    auto mirror = TlsFileMirror::Create(**tls_files, state_dir + "/tls-in-use");
    if (!mirror.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", std::string(mirror.status().message()).c_str());
      return 1;
    }
    tls_mirror = *std::move(mirror);
  }
  const std::shared_ptr<grpc::ServerCredentials> tcp_credentials = TcpCredentials(
      tls_mirror ? std::optional<TlsFileMirror::Files>(tls_mirror->copies()) : std::nullopt);
  const bool tls = absl::GetFlag(FLAGS_tls_cert) != "";
  for (const std::string& address : addresses) {
    if (absl::StartsWith(address, "unix:") || tls || IsLoopbackListenAddress(address) ||
        absl::GetFlag(FLAGS_allow_insecure_tcp)) {
      continue;
    }
    std::fprintf(stderr,
                 "gpuprofd: refusing to serve plaintext TCP on %s, reachable from other hosts: "
                 "give --tls_cert/--tls_key/--tls_client_ca (mutual TLS), listen on loopback, or "
                 "accept the risk with --allow_insecure_tcp\n",
                 address.c_str());
    return 1;
  }

  auto store = ExperimentStore::Open(db_path);
  if (!store.ok()) {
    // A damaged or foreign database is never replaced by an empty one: refuse to start.
    std::fprintf(stderr, "gpuprofd: not starting: %s\n",
                 std::string(store.status().message()).c_str());
    return 1;
  }
  ManagerOptions options;
  options.worker_binary = absl::GetFlag(FLAGS_worker_binary).empty()
                              ? DefaultWorkerBinary()
                              : absl::GetFlag(FLAGS_worker_binary);
  options.limits.default_timeout = absl::GetFlag(FLAGS_default_timeout);
  options.limits.max_timeout = absl::GetFlag(FLAGS_max_timeout);
  options.limits.allow_test_faults = absl::GetFlag(FLAGS_enable_test_faults);
  options.cpu_slots = absl::GetFlag(FLAGS_cpu_slots);
  options.worker_idle_timeout = absl::GetFlag(FLAGS_worker_idle_timeout);
  options.gpu_reservation_after = absl::GetFlag(FLAGS_gpu_reservation_after);
  options.measure_copy_bandwidth = absl::GetFlag(FLAGS_measure_copy_bandwidth);
  options.version = std::string(GpuprofVersion());
  options.max_reports_per_experiment = absl::GetFlag(FLAGS_max_reports_per_experiment);
  options.max_report_bytes_per_experiment = absl::GetFlag(FLAGS_max_report_bytes_per_experiment);
  options.access = access->get();
  options.max_watchers_per_experiment = absl::GetFlag(FLAGS_max_watchers_per_experiment);
  options.max_watchers_per_user_per_experiment =
      absl::GetFlag(FLAGS_max_watchers_per_user_per_experiment);
  options.max_watch_streams_per_user = absl::GetFlag(FLAGS_max_watch_streams_per_user);
  options.submits_per_minute_per_user = absl::GetFlag(FLAGS_submits_per_minute_per_user);
  RaiseDescriptorLimitFor(absl::GetFlag(FLAGS_max_connections));
  // Declared before the metrics, which sample it until they stop.
  ConnectionLimit connection_limit(ConnectionLimit::Options{
      .max_connections = absl::GetFlag(FLAGS_max_connections),
      .max_per_owner = absl::GetFlag(FLAGS_max_connections_per_user),
      .reserved_local = absl::GetFlag(FLAGS_reserved_local_connections)});
  // Declared before the manager, which reports to it until its very end.
  std::unique_ptr<MetricsExporter> metrics;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    metrics = std::make_unique<MetricsExporter>(std::string(GpuprofVersion()),
                                                absl::GetFlag(FLAGS_nvml_library));
  }
  auto manager = ExperimentManager::Create(options, *std::move(store),
                                           metrics ? metrics->manager_observer() : nullptr);
  if (!manager.ok()) {
    std::fprintf(stderr, "gpuprofd: %s\n", manager.status().ToString().c_str());
    return 1;
  }

  // GPU health: NVML's Xid events and memory error counters, reported to the manager. Before
  // metrics and gRPC, so that a GPU waiting for a reset is drained before anyone can lease it.
  std::unique_ptr<GpuHealthMonitor> health_monitor;
  {
    const v1::ListGpusResponse inventory = (*manager)->ListGpus();
    if (!inventory.gpus().empty()) {
      ExperimentManager* const core = manager->get();
      auto started = GpuHealthMonitor::Start(
          std::vector<v1::GpuInfo>(inventory.gpus().begin(), inventory.gpus().end()),
          absl::GetFlag(FLAGS_nvml_library), absl::GetFlag(FLAGS_gpu_health_interval),
          GpuHealthMonitor::Callbacks{
              .on_fault = [core](const GpuFault& fault) { core->ReportGpuFault(fault); },
              .on_memory_errors =
                  [core](int gpu, const v1::GpuMemoryErrors& errors) {
                    core->ReportGpuMemoryErrors(gpu, errors);
                  }});
      if (started.ok()) {
        health_monitor = *std::move(started);
        (*manager)->SetGpuHealthWatched(health_monitor->xid_watched_gpus());
        std::fprintf(stderr, "gpuprofd: %s\n", health_monitor->summary().c_str());
      } else {
        std::fprintf(stderr, "gpuprofd: GPU health is not watched: %s\n",
                     started.status().ToString().c_str());
      }
    }
  }

  // Metrics serve before gRPC does, so that a daemon that answers health checks can be scraped.
  if (metrics != nullptr) {
    metrics->SampleConnections(&connection_limit);
    const absl::Status serving =
        metrics->Start(manager->get(), absl::GetFlag(FLAGS_metrics_listen));
    if (!serving.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", serving.ToString().c_str());
      (*manager)->Shutdown();
      return 1;
    }
  }

  auto sweeps = SweepManager::Create(manager->get());
  if (!sweeps.ok()) {
    std::fprintf(stderr, "gpuprofd: resuming sweeps: %s\n", sweeps.status().ToString().c_str());
    (*manager)->Shutdown();
    return 1;
  }
  // Who owns each accepted connection (unix and loopback TCP), from the kernel.
  PeerCredentialRegistry connection_owners;
  Authenticator authenticator(
      Authenticator::Options{.tls_user_from = *tls_user_from,
                             .allow_insecure_tcp = absl::GetFlag(FLAGS_allow_insecure_tcp)},
      access->get(), &connection_owners);
  if (absl::GetFlag(FLAGS_rpc_threads) < 1) {
    std::fprintf(stderr, "gpuprofd: --rpc_threads must be at least 1, got %d\n",
                 absl::GetFlag(FLAGS_rpc_threads));
    (*manager)->Shutdown();
    return 2;
  }
  ProfilerService service(manager->get(), sweeps->get(), &authenticator,
                          metrics ? metrics->rpc_observer() : nullptr,
                          absl::GetFlag(FLAGS_rpc_threads));
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // Every listening socket is the daemon's own: each accepted connection passes the connection
  // cap first, then gRPC gets it. Unix connections also have their peer credentials read;
  // TCP ones go through an external connection acceptor with the TCP credentials (mutual TLS
  // or plaintext), which handshakes exactly as a port of gRPC's own would.
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> tcp_acceptor;
  std::vector<std::unique_ptr<UnixSocketListener>> unix_listeners;
  std::vector<std::unique_ptr<TcpSocketListener>> tcp_listeners;
  for (const std::string& address : addresses) {
    absl::Status bound;
    if (absl::StartsWith(address, "unix:")) {
      const std::string path(absl::StripPrefix(address, "unix:"));
      auto prepared = PrepareSocketDirectory(path);
      if (prepared.ok()) {
        for (const std::string& change : *prepared) {
          std::fprintf(stderr, "gpuprofd: %s\n", change.c_str());
        }
      }
      if (std::filesystem::path(path).parent_path() == std::filesystem::path(state_dir)) {
        std::fprintf(stderr,
                     "gpuprofd: the unix socket %s is in the private state directory: only "
                     "this daemon's account can reach it (serve others with --listen "
                     "unix:/run/gpuprof/gpuprofd.sock or loopback TCP)\n",
                     path.c_str());
      }
      auto listener = UnixSocketListener::Bind(path, &connection_owners, &connection_limit, socket_group);
      if (listener.ok()) unix_listeners.push_back(*std::move(listener));
      bound = listener.status();
    } else {
      auto listener = TcpSocketListener::Bind(address, &connection_limit, &connection_owners);
      if (listener.ok()) tcp_listeners.push_back(*std::move(listener));
      bound = listener.status();
    }
    if (!bound.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", std::string(bound.message()).c_str());
      (*manager)->Shutdown();
      return 1;
    }
  }
  if (!tcp_listeners.empty()) {
    tcp_acceptor = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        tcp_credentials);
  }
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  // Limits against clients that hold resources or flood: see docs/security.md.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS,
                             absl::GetFlag(FLAGS_max_concurrent_streams));
  builder.AddChannelArgument(
      GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
      static_cast<int>(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_keepalive_min_ping_interval))));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES,
                             absl::GetFlag(FLAGS_keepalive_max_ping_strikes));
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_max_connection_idle))));
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_handshake_timeout))));
  grpc::ResourceQuota memory_quota("gpuprofd");
  memory_quota.Resize(static_cast<size_t>(absl::GetFlag(FLAGS_server_memory_bytes)));
  builder.SetResourceQuota(memory_quota);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "gpuprofd: could not listen on %s\n",
                 absl::StrJoin(addresses, ", ").c_str());
    return 1;
  }
  for (auto& listener : unix_listeners) listener->Serve(server.get());
  for (auto& listener : tcp_listeners) listener->Serve(tcp_acceptor.get());
  std::unique_ptr<HealthOnlyServer> health_only;
  if (!absl::GetFlag(FLAGS_health_listen).empty()) {
    auto started = HealthOnlyServer::Start(absl::GetFlag(FLAGS_health_listen));
    if (!started.ok()) {
      std::fprintf(stderr, "gpuprofd: %s\n", started.status().ToString().c_str());
      // The listeners hand connections to the server: they stop before it goes.
      unix_listeners.clear();
      tcp_listeners.clear();
      (*manager)->Shutdown();
      return 1;
    }
    health_only = *std::move(started);
    std::fprintf(stderr, "gpuprofd: health-only port %d\n", health_only->port());
  }
  std::fprintf(stderr, "gpuprofd %s listening on %s; database %s\n",
               std::string(GpuprofVersion()).c_str(),
               absl::StrJoin(addresses, ", ").c_str(), db_path.c_str());

  // New TLS files and CRLs are taken on SIGHUP, and when they change on disk (checked every
  // --tls_reload_interval); a file that cannot be read, or a CRL that does not parse, leaves
  // the ones in use.
  auto refresh_tls = [&tls_mirror](const char* why) {
    if (tls_mirror == nullptr) return;
    const absl::StatusOr<std::vector<std::string>> copied = tls_mirror->Refresh();
    if (!copied.ok()) {
      std::fprintf(stderr, "gpuprofd: %s: TLS files not reloaded, the ones in use stay: %s\n",
                   why, std::string(copied.status().message()).c_str());
    } else if (!copied->empty()) {
      std::fprintf(stderr, "gpuprofd: %s: TLS files reloaded (%s); new connections use them\n",
                   why, absl::StrJoin(*copied, ", ").c_str());
    }
  };
  std::unique_ptr<FileChangeWatcher> tls_watcher;
  if (tls_mirror != nullptr) {
    const TlsFileMirror::Files& files = **tls_files;
    std::vector<std::string> tls_paths = {files.cert, files.key, files.ca};
    if (!files.crl_dir.empty()) tls_paths.push_back(files.crl_dir);
    tls_watcher = std::make_unique<FileChangeWatcher>(
        std::move(tls_paths), absl::GetFlag(FLAGS_tls_reload_interval),
        [&refresh_tls](const std::vector<std::string>&) { refresh_tls("changed on disk"); });
  }

  // A changed file reloads exactly as SIGHUP does: the watcher raises it at this process.
  std::unique_ptr<FileChangeWatcher> watcher;
  if (!watched.empty()) {
    watcher = std::make_unique<FileChangeWatcher>(
        watched, absl::GetFlag(FLAGS_reload_poll_interval),
        [](const std::vector<std::string>& changed) {
          std::fprintf(stderr, "gpuprofd: changed on disk: %s\n",
                       absl::StrJoin(changed, ", ").c_str());
          kill(getpid(), SIGHUP);
        });
  }

  // Signals were blocked in every thread (see main); this one waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  int signal_number = 0;
  while (true) {
    sigwait(&signals, &signal_number);
    if (signal_number != SIGHUP) break;
    // Everything the daemon reads from files at run time reloads here (SIGHUP, or a file of
    // --reload_when_changed changed).
    std::fprintf(stderr, "gpuprofd: SIGHUP: reloading configuration\n");
    refresh_tls("SIGHUP");
    if ((*access)->path().empty()) {
      std::fprintf(stderr, "gpuprofd: no --policy file was given; no policy to reload\n");
      continue;
    }
    // A bad policy file leaves the one in force.
    const absl::Status reloaded = (*access)->Reload();
    v1::AuditEntry entry;
    entry.set_actor(UserNameOfUid(geteuid()));
    entry.set_authenticated_by("SIGHUP");
    entry.set_action(reloaded.ok() ? "policy-reload" : "policy-reload-rejected");
    entry.set_detail(reloaded.ok() ? (*access)->path() : std::string(reloaded.message()));
    (*manager)->RecordAudit(entry);
    const std::string outcome =
        reloaded.ok() ? absl::StrCat("policy reloaded from ", (*access)->path())
                      : absl::StrCat("policy reload refused, the previous policy stays: ",
                                     reloaded.message());
    std::fprintf(stderr, "gpuprofd: %s\n", outcome.c_str());
  }
  const absl::Duration shutdown_timeout = absl::GetFlag(FLAGS_shutdown_timeout);
  std::fprintf(stderr, "gpuprofd: %s received, shutting down (at most %s)\n",
               strsignal(signal_number), absl::FormatDuration(shutdown_timeout).c_str());
  // The bound holds whatever below might hang: past it, exit as kill -9 would, which loses
  // nothing acknowledged (every event is committed before it is sent).
  std::thread([shutdown_timeout] {
    absl::SleepFor(shutdown_timeout);
    std::fprintf(stderr, "gpuprofd: not stopped within --shutdown_timeout=%s; exiting now\n",
                 absl::FormatDuration(shutdown_timeout).c_str());
    _exit(3);
  }).detach();
  watcher.reset();
  tls_watcher.reset();
  unix_listeners.clear();
  tcp_listeners.clear();
  // Probes see NOT_SERVING first, so the daemon leaves load balancers before it stops.
  if (health_only != nullptr) health_only->SetNotServing();
  server->GetHealthCheckService()->Shutdown();
  if (metrics != nullptr) metrics->Stop();
  // Streams end when the managers end them; give in-flight RPCs a moment to finish. Sweeps
  // first: a stopping experiment manager interrupts points, which the restart runs again.
  (*sweeps)->Shutdown();
  health_monitor.reset();  // it reports into the manager
  (*manager)->Shutdown();
  const absl::Duration rpc_grace = std::min(absl::Seconds(5), shutdown_timeout / 4);
  server->Shutdown(absl::ToChronoTime(absl::Now() + rpc_grace));
  server->Wait();
  health_only.reset();
  std::fprintf(stderr, "gpuprofd: stopped\n");
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
  // Block the shutdown and reload signals before any thread starts, so only sigwait sees them; a worker
  // dying must not kill the daemon through SIGPIPE.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Everything the daemon and its workers create (database, WAL, JIT caches, TLS copies) is
  // private to its account; the socket's mode is set explicitly.
  umask(077);
  return gpuprof::daemon::Run();
}
