#include "daemon/server/daemon_server.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "common/write_health.h"
#include "daemon/daemon_config.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/private_state.h"
#include "daemon/store/state_dir_lock.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace gpuprof::daemon {
namespace {

void Log(const std::string& line) { std::fprintf(stderr, "gpuprofd: %s\n", line.c_str()); }

// `refused` with "not starting: " before its message, its payloads kept (gpuprofd's exit
// status reads them).
absl::Status NotStarting(const absl::Status& refused) {
  absl::Status status(refused.code(), absl::StrCat("not starting: ", refused.message()));
  refused.ForEachPayload([&status](absl::string_view url, const absl::Cord& payload) {
    status.SetPayload(url, payload);
  });
  return status;
}

absl::Status PositiveDuration(absl::string_view flag, absl::Duration value,
                              absl::string_view example) {
  if (value > absl::ZeroDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", absl::FormatDuration(value),
                                                 ": must be positive (e.g. ", example, ")"));
}

// The TLS files the options name, checked; none when TCP is plaintext.
absl::StatusOr<std::optional<TlsFileMirror::Files>> CheckedTlsFiles(
    const DaemonServer::Options& options) {
  const std::string& cert = options.tls_cert;
  const std::string& key = options.tls_key;
  const std::string& ca = options.tls_client_ca;
  const std::string& crl_dir = options.tls_crl_dir;
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
  if (options.tls_reload_interval < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--tls_reload_interval: must be at least 1s");
  }
  return TlsFileMirror::Files{cert, key, ca, crl_dir};
}

// Plaintext without `files`; else mutual TLS from the daemon's copies of the files, which gRPC
// re-reads every second: a refreshed copy is used for new connections without a restart. The
// CRLs are copies too; a change to them rewrites the CA copy, so that gRPC builds a new TLS
// context, which reads them afresh (OpenSSL keeps a CRL it has read for a context's life).
std::shared_ptr<grpc::ServerCredentials> TcpCredentials(
    const std::optional<TlsFileMirror::Files>& files, bool require_client_cert) {
  if (!files.has_value()) return grpc::InsecureServerCredentials();
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files->key, files->cert, files->ca, /*refresh_interval_sec=*/1);
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_root_certs();
  options.watch_identity_key_cert_pairs();
  options.set_cert_request_type(require_client_cert
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

ManagerOptions ManagerOptionsFrom(const DaemonServer::Options& options,
                                  const AccessControl* access) {
  ManagerOptions manager;
  manager.worker_binary =
      options.worker_binary.empty() ? DefaultWorkerBinary() : options.worker_binary;
  manager.limits.default_timeout = options.default_timeout;
  manager.limits.max_timeout = options.max_timeout;
  manager.limits.allow_test_faults = options.enable_test_faults;
  manager.limits.custom_kernel_max_source_bytes = options.custom_kernel_max_source_bytes;
  manager.custom_kernel_compile_timeout = options.custom_kernel_compile_timeout;
  manager.custom_kernel_compile_memory_bytes = options.custom_kernel_compile_memory;
  manager.cpu_slots = options.cpu_slots;
  manager.worker_nice = options.worker_nice;
  manager.worker_idle_timeout = options.worker_idle_timeout;
  manager.gpu_reservation_after = options.gpu_reservation_after;
  manager.measure_copy_bandwidth = options.measure_copy_bandwidth;
  manager.version = std::string(GpuprofVersion());
  manager.max_reports_per_experiment = options.max_reports_per_experiment;
  manager.max_report_bytes_per_experiment = options.max_report_bytes_per_experiment;
  manager.access = access;
  manager.max_watchers_per_experiment = options.max_watchers_per_experiment;
  manager.max_watchers_per_user_per_experiment = options.max_watchers_per_user_per_experiment;
  manager.max_watch_streams_per_user = options.max_watch_streams_per_user;
  manager.submits_per_minute_per_user = options.submits_per_minute_per_user;
  return manager;
}

// SIGTERM and SIGINT stop the daemon, SIGHUP reloads it.
sigset_t StopAndReloadSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  return signals;
}

int Milliseconds(absl::Duration duration) {
  return static_cast<int>(absl::ToInt64Milliseconds(duration));
}

}  // namespace

absl::Status DaemonServer::ValidateOptions(const Options& options) {
  RETURN_IF_ERROR(PositiveDuration("shutdown_timeout", options.shutdown_timeout, "20s"));
  RETURN_IF_ERROR(PositiveDuration("gpu_health_interval", options.gpu_health_interval, "10s"));
  RETURN_IF_ERROR(PositiveDuration("reload_poll_interval", options.reload_poll_interval, "5s"));
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max_connections=", options.max_connections,
                                                   ": must be at least 1 (e.g. 1000)"));
  }
  if (options.max_connections_per_user < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_connections_per_user=", options.max_connections_per_user,
                     ": must be >= 0 (0: no cap; e.g. 256)"));
  }
  if (options.reserved_local_connections < 0 ||
      options.reserved_local_connections >= options.max_connections) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reserved_local_connections=", options.reserved_local_connections,
                     ": must be >= 0 and below --max_connections (", options.max_connections, ")"));
  }
  if (options.metrics_recent_window < absl::ZeroDuration() || options.metrics_recent_max < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_recent_window=", absl::FormatDuration(options.metrics_recent_window),
        " --metrics_recent_max=", options.metrics_recent_max,
        ": must be >= 0 (0: no run series; e.g. 15m and 2000)"));
  }
  for (const std::string& path : options.reload_when_changed) {
    if (!FileChangeWatcher::Take(path).exists) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--reload_when_changed: ", path, " does not exist (list files that the daemon reads)"));
    }
  }
  if (options.worker_nice < -20 || options.worker_nice > 19) {
    return absl::InvalidArgumentError(
        absl::StrCat("--worker_nice=", options.worker_nice, ": must be in [-20, 19]"));
  }
  if (options.rpc_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rpc_threads must be at least 1, got ", options.rpc_threads));
  }
  if (options.watch_buffer_bytes < 1 || options.watch_buffer_total_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--watch_buffer_bytes and --watch_buffer_total_bytes must be at least 1, got ",
        options.watch_buffer_bytes, " and ", options.watch_buffer_total_bytes));
  }
  if (options.watch_stall_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--watch_stall_timeout must be positive, got ",
                     absl::FormatDuration(options.watch_stall_timeout)));
  }
  // A source travels in one request message, beside the rest of the request.
  if (options.custom_kernel_max_source_bytes < 1 ||
      options.custom_kernel_max_source_bytes > options.max_message_bytes / 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--custom_kernel_max_source_bytes=", options.custom_kernel_max_source_bytes,
        ": must be in [1, ", options.max_message_bytes / 2,
        "] (half of --max_message_bytes, which the whole request must fit; e.g. 262144)"));
  }
  RETURN_IF_ERROR(PositiveDuration("custom_kernel_compile_timeout",
                                   options.custom_kernel_compile_timeout, "60s"));
  // Below this NVRTC cannot even load.
  constexpr int64_t kMinCompileMemory = int64_t{256} << 20;
  if (options.custom_kernel_compile_memory < kMinCompileMemory) {
    return absl::InvalidArgumentError(
        absl::StrCat("--custom_kernel_compile_memory=", options.custom_kernel_compile_memory,
                     ": must be at least ", kMinCompileMemory, " (256 MiB; e.g. 4294967296)"));
  }
  if (!options.socket_group.empty()) RETURN_IF_ERROR(GroupByName(options.socket_group).status());
  return absl::OkStatus();
}

std::string DaemonServer::DatabasePath(const Options& options) {
  if (!options.db.empty()) return options.db;
  return DefaultDatabasePath(options.state_dir.empty() ? DefaultStateDir() : options.state_dir);
}

void DaemonServer::BlockSignals() {
  const sigset_t signals = StopAndReloadSignals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
}

DaemonServer::DaemonServer(Options options) : options_(std::move(options)) {}

DaemonServer::~DaemonServer() { Stop(); }

absl::StatusOr<std::unique_ptr<DaemonServer>> DaemonServer::Start(Options options) {
  RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<DaemonServer> server(new DaemonServer(std::move(options)));
  if (absl::Status started = server->StartInOrder(); !started.ok()) {
    server->StopStarted(/*log=*/false);
    server->stopped_ = true;
    return started;
  }
  return server;
}

absl::Status DaemonServer::StartInOrder() {
  state_dir_ = options_.state_dir.empty() ? DefaultStateDir() : options_.state_dir;
  db_path_ = DatabasePath(options_);
  addresses_ = options_.listen.empty() ? DefaultListenAddresses(state_dir_) : options_.listen;
  RETURN_IF_ERROR(PrepareStateAndFiles());
  RETURN_IF_ERROR(StartCore());
  RETURN_IF_ERROR(BindAndServe());
  std::fprintf(stderr, "gpuprofd %s listening on %s; database %s\n",
               std::string(GpuprofVersion()).c_str(), absl::StrJoin(addresses_, ", ").c_str(),
               db_path_.c_str());
  StartFileWatchers();
  return absl::OkStatus();
}

// Private state, then what the files and options say about who may connect and how: all
// checked before the store opens and anything is bound.
absl::Status DaemonServer::PrepareStateAndFiles() {
  // The directory 0700, the database and its companions 0600 (gpuprofd's umask keeps
  // everything created later private too).
  auto directory = SecureStateDirectory(state_dir_);
  // One daemon per state directory and database, locked before either is read or written: a
  // second daemon would mark the first one's running experiments INTERRUPTED and run its queue.
  absl::StatusOr<std::vector<StateDirLock>> locks =
      directory.ok() ? LockStateDirAndDatabase(state_dir_, db_path_) : directory.status();
  auto database = locks.ok() ? SecureDatabaseFiles(db_path_) : locks.status();
  if (!database.ok()) return NotStarting(database.status());
  state_locks_ = *std::move(locks);
  for (const auto& changes : {*directory, *database}) {
    for (const std::string& change : changes) Log(change);
  }
  if (!options_.socket_group.empty()) {
    ASSIGN_OR_RETURN(const gid_t group, GroupByName(options_.socket_group));
    socket_group_ = group;
  }
  auto tls_user_from = ParseTlsUserFrom(options_.tls_user_from);
  auto tls_files = CheckedTlsFiles(options_);
  auto access = AccessControl::Create(options_.policy);
  for (const absl::Status& status : {tls_user_from.status(), tls_files.status(), access.status()}) {
    RETURN_IF_ERROR(status);
  }
  access_ = *std::move(access);
  tls_files_ = *tls_files;
  // The TLS files in use are the daemon's copies, refreshed on SIGHUP and when they change.
  if (tls_files_.has_value()) {
    ASSIGN_OR_RETURN(tls_mirror_, TlsFileMirror::Create(*tls_files_, state_dir_ + "/tls-in-use"));
  }
  for (const std::string& address : addresses_) {
    if (absl::StartsWith(address, "unix:") || !options_.tls_cert.empty() ||
        IsLoopbackListenAddress(address) || options_.allow_insecure_tcp) {
      continue;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to serve plaintext TCP on ", address,
        ", reachable from other hosts: give --tls_cert/--tls_key/--tls_client_ca (mutual TLS), "
        "listen on loopback, or accept the risk with --allow_insecure_tcp"));
  }
  connection_owners_ = std::make_unique<PeerCredentialRegistry>();
  authenticator_ = std::make_unique<Authenticator>(
      Authenticator::Options{.tls_user_from = *tls_user_from,
                             .allow_insecure_tcp = options_.allow_insecure_tcp},
      access_.get(), connection_owners_.get());
  return absl::OkStatus();
}

absl::StatusOr<CaptureTools> DaemonServer::PrepareCaptureTools() {
  CaptureTools tools;
  tools.reports_dir = state_dir_ + "/reports";
  tools.max_report_bytes = options_.max_capture_report_bytes;
  std::error_code error;
  std::filesystem::create_directory(tools.reports_dir, error);
  if (!error) {
    std::filesystem::permissions(tools.reports_dir, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::replace, error);
  }
  if (error) {
    return absl::FailedPreconditionError(
        absl::StrCat("not starting: the reports directory ", tools.reports_dir, ": ",
                     error.message()));
  }
  // A capture the daemon's stop (or a kill) cut short leaves its report half-written.
  for (const auto& entry : std::filesystem::directory_iterator(tools.reports_dir, error)) {
    if (absl::StrContains(entry.path().filename().string(), ".partial")) {
      std::filesystem::remove(entry.path(), error);
    }
  }
  tools.ncu = DiscoverNsightTool(v1::NsightCapture::TOOL_NCU, options_.ncu_path);
  tools.nsys = DiscoverNsightTool(v1::NsightCapture::TOOL_NSYS, options_.nsys_path);
  for (const NsightTool* tool : {&tools.ncu, &tools.nsys}) {
    const std::string name = tool == &tools.ncu ? "ncu" : "nsys";
    Log(tool->path.empty()
            ? absl::StrCat(name, ": not found (", tool->flag, "); captures under it are refused")
            : absl::StrCat(name, ": ", tool->path, " (", tool->version, ")",
                           tool->sets.empty() ? ""
                                              : absl::StrCat(", sets ", absl::StrJoin(tool->sets, " "))));
  }
  return tools;
}

// The store, the manager on it, GPU health, metrics and sweeps: everything that serves.
absl::Status DaemonServer::StartCore() {
  auto store = ExperimentStore::Open(db_path_);
  if (!store.ok()) {
    // A damaged or foreign database is never replaced by an empty one: refuse to start.
    return absl::Status(store.status().code(),
                        absl::StrCat("not starting: ", store.status().message()));
  }
  RaiseDescriptorLimitFor(options_.max_connections);
  connection_limit_ = std::make_unique<ConnectionLimit>(
      ConnectionLimit::Options{.max_connections = options_.max_connections,
                               .max_per_owner = options_.max_connections_per_user,
                               .reserved_local = options_.reserved_local_connections});
  if (!options_.metrics_listen.empty()) {
    metrics_ = std::make_unique<MetricsExporter>(
        std::string(GpuprofVersion()), options_.nvml_library,
        RecentSeriesLimits{.window = options_.metrics_recent_window,
                           .max_runs = options_.metrics_recent_max});
  }
  ManagerOptions manager_options = ManagerOptionsFrom(options_, access_.get());
  ASSIGN_OR_RETURN(manager_options.limits.capture_tools, PrepareCaptureTools());
  auto manager = ExperimentManager::Create(std::move(manager_options), *std::move(store),
                                           metrics_ ? metrics_->manager_observer() : nullptr);
  if (!manager.ok()) return absl::Status(manager.status().code(), manager.status().ToString());
  manager_ = *std::move(manager);
  // On a full disk the daemon starts all the same and serves reads: this says so (a log line,
  // the "writes" health service, metrics) and notices when space comes back.
  space_monitor_ = StoreSpaceMonitor::Start(
      manager_->store(), db_path_,
      {.on_change = [this](bool read_only) { PublishWriteHealth(read_only); }});

  // GPU health: NVML's Xid events and memory error counters, reported to the manager. Before
  // metrics and gRPC, so that a GPU waiting for a reset is drained before anyone can lease it.
  const v1::ListGpusResponse inventory = manager_->ListGpus();
  if (!inventory.gpus().empty()) {
    ExperimentManager* const core = manager_.get();
    auto started = GpuHealthMonitor::Start(
        std::vector<v1::GpuInfo>(inventory.gpus().begin(), inventory.gpus().end()),
        options_.nvml_library, options_.gpu_health_interval,
        GpuHealthMonitor::Callbacks{
            .on_fault = [core](const GpuFault& fault) { core->ReportGpuFault(fault); },
            .on_memory_errors =
                [core](int gpu, const v1::GpuMemoryErrors& errors) {
                  core->ReportGpuMemoryErrors(gpu, errors);
                }});
    if (started.ok()) {
      health_monitor_ = *std::move(started);
      manager_->SetGpuHealthWatched(health_monitor_->xid_watched_gpus());
      Log(health_monitor_->summary());
    } else {
      Log(absl::StrCat("GPU health is not watched: ", started.status().ToString()));
    }
  }

  // Metrics serve before gRPC does, so that a daemon that answers health checks can be scraped.
  if (metrics_ != nullptr) {
    metrics_->SampleConnections(connection_limit_.get());
    metrics_->SampleStoreSpace(space_monitor_.get());
    const absl::Status serving = metrics_->Start(manager_.get(), options_.metrics_listen);
    if (!serving.ok()) return absl::Status(serving.code(), serving.ToString());
  }
  auto sweeps =
      SweepManager::Create(manager_.get(), metrics_ ? metrics_->sweep_observer() : nullptr);
  if (!sweeps.ok()) {
    return absl::Status(sweeps.status().code(),
                        absl::StrCat("resuming sweeps: ", sweeps.status().ToString()));
  }
  sweeps_ = *std::move(sweeps);
  // Rows that do not parse were left out of the recovery above instead of stopping it.
  for (const store::DamagedRow& row : manager_->DamagedStoreRows()) {
    Log(absl::StrCat("not recovered: ", row.id, " (table ", row.table, "): ", row.error,
                     "; the rest of the queue runs. To get it back, ", store::kDamagedRowAdvice));
  }
  service_ = std::make_unique<ProfilerService>(manager_.get(), sweeps_.get(), authenticator_.get(),
                                               metrics_ ? metrics_->rpc_observer() : nullptr,
                                               options_.rpc_threads,
                                               StreamLimits{
                                                   .buffer_bytes_per_stream =
                                                       options_.watch_buffer_bytes,
                                                   .buffer_bytes_total =
                                                       options_.watch_buffer_total_bytes,
                                                   .stall_timeout = options_.watch_stall_timeout,
                                               });
  return absl::OkStatus();
}

// Every listening socket is the daemon's own: each accepted connection passes the connection
// cap first, then gRPC gets it. Unix connections also have their peer credentials read; TCP
// ones go through an external connection acceptor with the TCP credentials (mutual TLS or
// plaintext), which handshakes exactly as a port of gRPC's own would.
absl::Status DaemonServer::BindAndServe() {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  for (const std::string& address : addresses_) {
    absl::Status bound;
    if (absl::StartsWith(address, "unix:")) {
      const std::string path(absl::StripPrefix(address, "unix:"));
      auto prepared = PrepareSocketDirectory(path);
      if (prepared.ok()) {
        for (const std::string& change : *prepared) Log(change);
      }
      if (std::filesystem::path(path).parent_path() == std::filesystem::path(state_dir_)) {
        Log(absl::StrCat("the unix socket ", path,
                         " is in the private state directory: only this daemon's account can "
                         "reach it (serve others with --listen unix:/run/gpuprof/gpuprofd.sock "
                         "or loopback TCP)"));
      }
      auto listener = UnixSocketListener::Bind(path, connection_owners_.get(),
                                               connection_limit_.get(), socket_group_);
      if (listener.ok()) unix_listeners_.push_back(*std::move(listener));
      bound = listener.status();
    } else {
      auto listener =
          TcpSocketListener::Bind(address, connection_limit_.get(), connection_owners_.get());
      if (listener.ok()) tcp_listeners_.push_back(*std::move(listener));
      bound = listener.status();
    }
    RETURN_IF_ERROR(bound);
  }
  if (!tcp_listeners_.empty()) {
    tcp_acceptor_ = builder.experimental().AddExternalConnectionAcceptor(
        grpc::ServerBuilder::experimental_type::ExternalConnectionType::FROM_FD,
        TcpCredentials(tls_mirror_ ? std::optional(tls_mirror_->copies()) : std::nullopt,
                       options_.tls_require_client_cert));
  }
  builder.SetMaxReceiveMessageSize(options_.max_message_bytes);
  // Limits against clients that hold resources or flood: see docs/security.md.
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             Milliseconds(options_.keepalive_min_ping_interval));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, options_.keepalive_max_ping_strikes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_IDLE_MS,
                             Milliseconds(options_.max_connection_idle));
  builder.AddChannelArgument(GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
                             Milliseconds(options_.handshake_timeout));
  memory_quota_ = std::make_unique<grpc::ResourceQuota>("gpuprofd");
  memory_quota_->Resize(static_cast<size_t>(options_.server_memory_bytes));
  builder.SetResourceQuota(*memory_quota_);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", absl::StrJoin(addresses_, ", ")));
  }
  {
    absl::MutexLock lock(&write_health_mutex_);
    write_health_ = server_->GetHealthCheckService();
    write_health_->SetServingStatus(kWritesHealthService, !space_monitor_->read_only());
  }
  for (auto& listener : unix_listeners_) listener->Serve(server_.get());
  for (auto& listener : tcp_listeners_) listener->Serve(tcp_acceptor_.get());
  if (!options_.health_listen.empty()) {
    auto started = HealthOnlyServer::Start(options_.health_listen);
    if (!started.ok()) return absl::Status(started.status().code(), started.status().ToString());
    health_only_ = *std::move(started);
    Log(absl::StrCat("health-only port ", health_only_->port()));
  }
  return absl::OkStatus();
}

void DaemonServer::StartFileWatchers() {
  // New TLS files and CRLs are taken when they change on disk (checked every
  // --tls_reload_interval) as on SIGHUP.
  if (tls_mirror_ != nullptr) {
    std::vector<std::string> tls_paths = {tls_files_->cert, tls_files_->key, tls_files_->ca};
    if (!tls_files_->crl_dir.empty()) tls_paths.push_back(tls_files_->crl_dir);
    tls_watcher_ = std::make_unique<FileChangeWatcher>(
        std::move(tls_paths), options_.tls_reload_interval,
        [this](const std::vector<std::string>&) { RefreshTls("changed on disk"); });
  }
  // A changed file reloads exactly as SIGHUP does: the watcher raises it at this process.
  if (!options_.reload_when_changed.empty()) {
    reload_watcher_ = std::make_unique<FileChangeWatcher>(
        options_.reload_when_changed, options_.reload_poll_interval,
        [](const std::vector<std::string>& changed) {
          Log(absl::StrCat("changed on disk: ", absl::StrJoin(changed, ", ")));
          kill(getpid(), SIGHUP);
        });
  }
}

// A file that cannot be read, or a CRL that does not parse, leaves the ones in use.
void DaemonServer::RefreshTls(const char* why) {
  if (tls_mirror_ == nullptr) return;
  const absl::StatusOr<std::vector<std::string>> copied = tls_mirror_->Refresh();
  if (!copied.ok()) {
    Log(absl::StrCat(
        why, ": TLS files not reloaded, the ones in use stay: ", copied.status().message()));
  } else if (!copied->empty()) {
    Log(absl::StrCat(why, ": TLS files reloaded (", absl::StrJoin(*copied, ", "),
                     "); new connections use them"));
  }
}

void DaemonServer::PublishWriteHealth(bool read_only) {
  absl::MutexLock lock(&write_health_mutex_);
  if (write_health_ != nullptr) write_health_->SetServingStatus(kWritesHealthService, !read_only);
}

void DaemonServer::Reload() {
  // Everything the daemon reads from files at run time reloads here.
  Log("SIGHUP: reloading configuration");
  RefreshTls("SIGHUP");
  if (access_->path().empty()) {
    Log("no --policy file was given; no policy to reload");
    return;
  }
  // A bad policy file leaves the one in force.
  const absl::Status reloaded = access_->Reload();
  v1::AuditEntry entry;
  entry.set_actor(UserNameOfUid(geteuid()));
  entry.set_authenticated_by("SIGHUP");
  entry.set_action(reloaded.ok() ? "policy-reload" : "policy-reload-rejected");
  entry.set_detail(reloaded.ok() ? access_->path() : std::string(reloaded.message()));
  manager_->RecordAudit(entry);
  Log(reloaded.ok()
          ? absl::StrCat("policy reloaded from ", access_->path())
          : absl::StrCat("policy reload refused, the previous policy stays: ", reloaded.message()));
}

void DaemonServer::WaitForSignalsAndStop() {
  const sigset_t signals = StopAndReloadSignals();
  int signal_number = 0;
  while (true) {
    sigwait(&signals, &signal_number);
    if (signal_number != SIGHUP) break;
    Reload();
  }
  const absl::Duration shutdown_timeout = options_.shutdown_timeout;
  Log(absl::StrCat(strsignal(signal_number), " received, shutting down (at most ",
                   absl::FormatDuration(shutdown_timeout), ")"));
  // The bound holds whatever below might hang: past it, exit as kill -9 would, which loses
  // nothing acknowledged (every event is committed before it is sent).
  std::thread([shutdown_timeout] {
    absl::SleepFor(shutdown_timeout);
    Log(absl::StrCat("not stopped within --shutdown_timeout=",
                     absl::FormatDuration(shutdown_timeout), "; exiting now"));
    _exit(3);
  }).detach();
  Stop();
}

void DaemonServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  StopStarted(/*log=*/true);
}

void DaemonServer::Step(absl::string_view step) {
  if (options_.on_shutdown_step) options_.on_shutdown_step(step);
}

void DaemonServer::StopStarted(bool log) {
  reload_watcher_.reset();
  tls_watcher_.reset();
  unix_listeners_.clear();
  tcp_listeners_.clear();
  Step(kListenersClosed);
  // Probes see NOT_SERVING first, so the daemon leaves load balancers before it stops.
  if (health_only_ != nullptr) health_only_->SetNotServing();
  {
    absl::MutexLock lock(&write_health_mutex_);
    write_health_ = nullptr;
  }
  if (server_ != nullptr) server_->GetHealthCheckService()->Shutdown();
  if (metrics_ != nullptr) metrics_->Stop();
  // Streams end when the managers end them; in-flight RPCs then get a moment to finish. Sweeps
  // first: a stopping experiment manager interrupts points, which the restart runs again.
  if (sweeps_ != nullptr) sweeps_->Shutdown();
  Step(kSweepsStopped);
  health_monitor_.reset();  // it reports into the manager
  space_monitor_.reset();   // it writes into the manager's store
  if (manager_ != nullptr) manager_->Shutdown();
  Step(kManagerStopped);
  if (server_ != nullptr) {
    const absl::Duration rpc_grace = std::min(absl::Seconds(5), options_.shutdown_timeout / 4);
    server_->Shutdown(absl::ToChronoTime(absl::Now() + rpc_grace));
    server_->Wait();
  }
  Step(kRpcsEnded);
  health_only_.reset();
  server_.reset();
  tcp_acceptor_.reset();
  service_.reset();
  sweeps_.reset();
  manager_.reset();  // closes the store
  Step(kStoreClosed);
  metrics_.reset();
  state_locks_.clear();  // another daemon may take the directory from here on
  if (log) Log("stopped");
}

}  // namespace gpuprof::daemon
