// The gRPC face of the daemon: unpacks requests, calls ExperimentManager, converts the
// absl::Status once at the edge. No policy lives here.
#ifndef GPUPROF_DAEMON_PROFILER_SERVICE_H_
#define GPUPROF_DAEMON_PROFILER_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "daemon/blocking_call_pool.h"
#include "daemon/server/caller_identity.h"
#include "daemon/server/event_stream.h"
#include "daemon/experiment_manager.h"
#include "daemon/sweep_manager.h"
#include "gpuprof/v1/profiler.grpc.pb.h"

namespace gpuprof::daemon {

class ProfilerService final : public v1::Profiler::CallbackService {
 public:
  static constexpr int kDefaultCallThreads = 64;

  // Every RPC first identifies its caller through `authenticator`; null trusts request.user
  // as an admin would be (in-process tests only). The work of every RPC that reaches the
  // managers runs on `call_threads` threads of the service's own (see BlockingCallPool).
  ProfilerService(ExperimentManager* manager, SweepManager* sweeps,
                  const Authenticator* authenticator, RpcObserver observer = nullptr,
                  int call_threads = kDefaultCallThreads, StreamLimits stream_limits = {});

  grpc::ServerWriteReactor<v1::ExperimentEvent>* Submit(
      grpc::CallbackServerContext* context, const v1::ExperimentRequest* request) override;
  grpc::ServerWriteReactor<v1::ExperimentEvent>* Watch(grpc::CallbackServerContext* context,
                                                        const v1::WatchRequest* request) override;
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* context,
                                   const v1::CancelRequest* request,
                                   v1::Experiment* response) override;
  grpc::ServerUnaryReactor* GetExperiment(grpc::CallbackServerContext* context,
                                          const v1::GetExperimentRequest* request,
                                          v1::Experiment* response) override;
  grpc::ServerUnaryReactor* ListExperiments(grpc::CallbackServerContext* context,
                                            const v1::ListExperimentsRequest* request,
                                            v1::ListExperimentsResponse* response) override;
  grpc::ServerUnaryReactor* ListGpus(grpc::CallbackServerContext* context,
                                     const v1::ListGpusRequest* request,
                                     v1::ListGpusResponse* response) override;
  grpc::ServerUnaryReactor* WhoAmI(grpc::CallbackServerContext* context,
                                   const v1::WhoAmIRequest* request,
                                   v1::CallerInfo* response) override;
  grpc::ServerUnaryReactor* GetQuota(grpc::CallbackServerContext* context,
                                     const v1::GetQuotaRequest* request,
                                     v1::QuotaReport* response) override;
  grpc::ServerUnaryReactor* ListAudit(grpc::CallbackServerContext* context,
                                      const v1::ListAuditRequest* request,
                                      v1::ListAuditResponse* response) override;
  grpc::ServerUnaryReactor* ClearGpuHealth(grpc::CallbackServerContext* context,
                                           const v1::ClearGpuHealthRequest* request,
                                           v1::GpuInfo* response) override;
  grpc::ServerUnaryReactor* GetCaptureReport(grpc::CallbackServerContext* context,
                                             const v1::GetCaptureReportRequest* request,
                                             v1::CaptureReportPage* response) override;

  grpc::ServerUnaryReactor* SubmitSweep(grpc::CallbackServerContext* context,
                                        const v1::SweepRequest* request,
                                        v1::Sweep* response) override;
  grpc::ServerWriteReactor<v1::SweepEvent>* WatchSweep(
      grpc::CallbackServerContext* context, const v1::WatchSweepRequest* request) override;
  grpc::ServerUnaryReactor* GetSweep(grpc::CallbackServerContext* context,
                                     const v1::GetSweepRequest* request,
                                     v1::Sweep* response) override;
  grpc::ServerUnaryReactor* ListSweeps(grpc::CallbackServerContext* context,
                                       const v1::ListSweepsRequest* request,
                                       v1::ListSweepsResponse* response) override;
  grpc::ServerUnaryReactor* CancelSweep(grpc::CallbackServerContext* context,
                                        const v1::CancelSweepRequest* request,
                                        v1::Sweep* response) override;
  grpc::ServerUnaryReactor* SaveBaseline(grpc::CallbackServerContext* context,
                                         const v1::SaveBaselineRequest* request,
                                         v1::Baseline* response) override;
  grpc::ServerUnaryReactor* ListBaselines(grpc::CallbackServerContext* context,
                                          const v1::ListBaselinesRequest* request,
                                          v1::ListBaselinesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteBaseline(grpc::CallbackServerContext* context,
                                           const v1::DeleteBaselineRequest* request,
                                           v1::Baseline* response) override;

 private:
  grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                        const std::string& method, const absl::Status& status);
  // Runs `call` on the pool and finishes the RPC with its status there.
  grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, std::string method,
                                     std::function<absl::Status()> call);

  absl::StatusOr<Caller> Identify(grpc::CallbackServerContext* context) const;

  ExperimentManager* const manager_;
  SweepManager* const sweeps_;
  const Authenticator* const authenticator_;
  const RpcObserver observer_;
  // What the event streams share: the bytes they may queue, the stalled-client check.
  StreamBufferBudget stream_budget_;
  StreamWatchdog stream_watchdog_;
  const StreamContext streams_;
  // Last member: destroyed first, it finishes the calls posted to it while the rest is alive.
  BlockingCallPool pool_;
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_PROFILER_SERVICE_H_
