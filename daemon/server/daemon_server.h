// gpuprofd as an object: everything the daemon starts, in the order it starts it, and the order
// it stops it in. gpuprofd_main.cc turns flags into Options; tests start one in-process.
#ifndef GPUPROF_DAEMON_SERVER_DAEMON_SERVER_H_
#define GPUPROF_DAEMON_SERVER_DAEMON_SERVER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/capture/nsight_tools.h"
#include "daemon/admission/access_policy.h"
#include "daemon/experiment_manager.h"
#include "daemon/gpu_health/gpu_health_monitor.h"
#include "daemon/metrics/metrics_exporter.h"
#include "daemon/server/caller_identity.h"
#include "daemon/server/connection_limit.h"
#include "daemon/server/file_change_watcher.h"
#include "daemon/server/health_only_server.h"
#include "daemon/server/profiler_service.h"
#include "daemon/server/tcp_socket_listener.h"
#include "daemon/server/tls_file_mirror.h"
#include "daemon/server/unix_socket_listener.h"
#include "daemon/store/state_dir_lock.h"
#include "daemon/store/store_space_monitor.h"
#include "daemon/sweep_manager.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"

namespace gpuprof::daemon {

class DaemonServer {
 public:
  // One field per gpuprofd flag of the same name (its help text says more), same defaults;
  // all of them but --check_db, which reads the database without starting anything.
  struct Options {
    // Where things are. Empty: the defaults of daemon_config.h.
    std::string state_dir;
    std::string db;
    std::vector<std::string> listen;
    std::string worker_binary;

    // Experiments and workers.
    int worker_nice = 0;
    int cpu_slots = 1;
    absl::Duration default_timeout = absl::Minutes(30);
    absl::Duration max_timeout = absl::Hours(24);
    absl::Duration gpu_reservation_after = absl::Minutes(2);
    absl::Duration worker_idle_timeout = absl::Seconds(60);
    bool measure_copy_bandwidth = true;
    int64_t max_reports_per_experiment = 1'000'000;
    int64_t max_report_bytes_per_experiment = int64_t{1} << 30;
    bool enable_test_faults = false;

    // Custom kernels (docs/custom-kernels.md): the largest source admitted, and what compiling
    // one may take in the worker (wall time, address space added to the compiling child's).
    int64_t custom_kernel_max_source_bytes = int64_t{256} << 10;
    absl::Duration custom_kernel_compile_timeout = absl::Seconds(60);
    int64_t custom_kernel_compile_memory = int64_t{4} << 30;

    // Captures under Nsight tools (docs/nsight.md): ncu and nsys, found on $PATH,
    // /usr/local/cuda/bin and /opt/nvidia when not given; a report larger than this is not kept.
    std::string ncu_path;
    std::string nsys_path;
    int64_t max_capture_report_bytes = kDefaultMaxCaptureReportBytes;

    // Side ports. Empty: none.
    std::string metrics_listen = "127.0.0.1:9464";
    // How long an ended experiment or sweep keeps its own series (annotations, every point's
    // figure), and how many ended ones at most (docs/metrics.md, "Runs").
    absl::Duration metrics_recent_window = RecentSeriesLimits().window;
    int metrics_recent_max = RecentSeriesLimits().max_runs;
    std::string health_listen;

    // Reloading and stopping.
    std::vector<std::string> reload_when_changed;
    absl::Duration reload_poll_interval = absl::Seconds(5);
    absl::Duration shutdown_timeout = absl::Seconds(20);

    // TLS on the TCP addresses: cert, key and client CA together, or none.
    std::string tls_cert;
    std::string tls_key;
    std::string tls_client_ca;
    std::string tls_user_from = "cn";
    bool tls_require_client_cert = true;
    std::string tls_crl_dir;
    absl::Duration tls_reload_interval = absl::Seconds(60);

    // Who may do what.
    std::string policy;
    bool allow_insecure_tcp = false;
    std::string socket_group;

    // Limits on clients (docs/security.md).
    // The largest request gRPC will parse (one limit for every RPC: gRPC 1.51 has no
    // server-side per-method limit). The largest real one, a sweep, is a few hundred KiB at
    // most; every field is then bounded by the RPC boundary's and admission's checks.
    int max_message_bytes = 1 << 20;
    int max_concurrent_streams = 100;
    absl::Duration keepalive_min_ping_interval = absl::Seconds(10);
    int keepalive_max_ping_strikes = 2;
    absl::Duration max_connection_idle = absl::Minutes(30);
    int max_connections = 1000;
    int max_connections_per_user = 256;
    int reserved_local_connections = 64;
    absl::Duration handshake_timeout = absl::Seconds(10);
    int64_t server_memory_bytes = int64_t{512} << 20;
    int max_watchers_per_experiment = 64;
    int max_watchers_per_user_per_experiment = 8;
    int max_watch_streams_per_user = 256;
    int submits_per_minute_per_user = 120;
    int rpc_threads = ProfilerService::kDefaultCallThreads;
    // Event streams (Watch, WatchSweep, Submit's): bytes queued per stream and in total (live
    // events beyond them are read back from the store), and how long a client may take no
    // event before it is cut off with the seq to resume from.
    int64_t watch_buffer_bytes = StreamLimits().buffer_bytes_per_stream;
    int64_t watch_buffer_total_bytes = StreamLimits().buffer_bytes_total;
    absl::Duration watch_stall_timeout = StreamLimits().stall_timeout;

    // GPU health.
    std::string nvml_library = "libnvidia-ml.so.1";
    absl::Duration gpu_health_interval = absl::Seconds(10);

    // Not a flag: hears each step of Stop() as it completes (tests check the order with it).
    std::function<void(absl::string_view step)> on_shutdown_step;
  };

  // The steps of Stop(), in order, as on_shutdown_step names them.
  static constexpr absl::string_view kListenersClosed = "listeners closed";
  static constexpr absl::string_view kSweepsStopped = "sweeps stopped";
  static constexpr absl::string_view kManagerStopped = "manager stopped";
  static constexpr absl::string_view kRpcsEnded = "rpcs ended";
  static constexpr absl::string_view kStoreClosed = "store closed";

  // Values that make no sense on any machine (gpuprofd exits 2 on them); the error names the
  // flag, the value and what is allowed. Start() checks them too.
  static absl::Status ValidateOptions(const Options& options);
  // The database options name: --db, else <state_dir>/gpuprof.db.
  static std::string DatabasePath(const Options& options);

  // Starts the daemon: validates the options, makes the state directory private, locks it and
  // the database against a second daemon (refused: IsHeldByAnotherProcess, state_dir_lock.h,
  // before it reads or writes either), reads the TLS files and the policy, opens the store,
  // then the manager, GPU health, metrics and sweeps, and only then binds the listen addresses
  // and serves. Nothing is bound until the store is open and everything before it has
  // succeeded; a failure stops what was started. An error's message is the line gpuprofd logs
  // after "gpuprofd: ".
  static absl::StatusOr<std::unique_ptr<DaemonServer>> Start(Options options);
  // Stop(), if not done.
  ~DaemonServer();
  DaemonServer(const DaemonServer&) = delete;
  DaemonServer& operator=(const DaemonServer&) = delete;

  // Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and every thread started after it,
  // so that only WaitForSignalsAndStop sees them; main calls it before anything starts.
  static void BlockSignals();
  // Waits for SIGTERM or SIGINT, reloading on each SIGHUP, then stops; past
  // shutdown_timeout the process exits with status 3 (as after kill -9, nothing acknowledged
  // is lost). Needs BlockSignals().
  void WaitForSignalsAndStop();
  // SIGHUP's work: the TLS files and the policy are read again; a bad file leaves the one in
  // use (and a policy reload, done or refused, is audited).
  void Reload();
  // Stops in an order that loses nothing: watchers; listeners (no new connections); the
  // health probes see NOT_SERVING; metrics; sweeps; GPU health; the manager (running
  // experiments INTERRUPTED, their streams end); in-flight RPCs get a short grace; then the
  // store closes. Idempotent.
  void Stop();

  const std::vector<std::string>& addresses() const { return addresses_; }
  const std::string& database_path() const { return db_path_; }
  // Bound ports, 0 when not serving.
  int metrics_port() const { return metrics_ == nullptr ? 0 : metrics_->port(); }
  int health_port() const { return health_only_ == nullptr ? 0 : health_only_->port(); }

 private:
  explicit DaemonServer(Options options);
  absl::Status StartInOrder();
  absl::Status PrepareStateAndFiles();
  absl::Status StartCore();
  // The reports' directory (<state_dir>/reports, 0700, a killed capture's partial files
  // removed) and the Nsight tools found.
  absl::StatusOr<CaptureTools> PrepareCaptureTools();
  absl::Status BindAndServe();
  void StartFileWatchers();
  void RefreshTls(const char* why);
  // The "writes" health service: NOT_SERVING while the store is read-only (a full disk).
  void PublishWriteHealth(bool read_only) ABSL_LOCKS_EXCLUDED(write_health_mutex_);
  // Stops whatever has started, in Stop()'s order; `log` prints the final "stopped".
  void StopStarted(bool log);
  void Step(absl::string_view step);

  const Options options_;
  std::string state_dir_;
  std::string db_path_;
  std::vector<std::string> addresses_;
  std::optional<gid_t> socket_group_;
  bool stopped_ = false;

  // Declared in the order they start; StopStarted() takes them down in its own order.
  std::vector<StateDirLock> state_locks_;  // held until the store has closed
  std::unique_ptr<AccessControl> access_;
  std::optional<TlsFileMirror::Files> tls_files_;
  std::unique_ptr<TlsFileMirror> tls_mirror_;
  std::unique_ptr<ConnectionLimit> connection_limit_;  // sampled by the metrics until they stop
  std::unique_ptr<MetricsExporter> metrics_;           // the manager reports to it to its end
  std::unique_ptr<ExperimentManager> manager_;         // owns the store
  std::unique_ptr<GpuHealthMonitor> health_monitor_;   // reports into the manager
  std::unique_ptr<StoreSpaceMonitor> space_monitor_;   // watches the manager's store
  std::unique_ptr<SweepManager> sweeps_;
  std::unique_ptr<PeerCredentialRegistry> connection_owners_;
  std::unique_ptr<Authenticator> authenticator_;
  std::unique_ptr<ProfilerService> service_;
  std::unique_ptr<grpc::ResourceQuota> memory_quota_;
  std::unique_ptr<grpc::experimental::ExternalConnectionAcceptor> tcp_acceptor_;
  std::vector<std::unique_ptr<UnixSocketListener>> unix_listeners_;
  std::vector<std::unique_ptr<TcpSocketListener>> tcp_listeners_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex write_health_mutex_;
  // server_'s health service from BindAndServe until it shuts down.
  grpc::HealthCheckServiceInterface* write_health_ ABSL_GUARDED_BY(write_health_mutex_) = nullptr;
  std::unique_ptr<HealthOnlyServer> health_only_;
  std::unique_ptr<FileChangeWatcher> tls_watcher_;
  std::unique_ptr<FileChangeWatcher> reload_watcher_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_SERVER_DAEMON_SERVER_H_
