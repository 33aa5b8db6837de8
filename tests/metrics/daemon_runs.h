// Drives a real gpuprofd (started by DaemonProcess) for the metrics tests: runs radix
// experiments through the gRPC API and finds the daemon's metrics port.
#ifndef GPUPROF_TESTS_METRICS_DAEMON_RUNS_H_
#define GPUPROF_TESTS_METRICS_DAEMON_RUNS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpuprof/v1/profiler.grpc.pb.h"

namespace gpuprof::testing {

// Submits a small radix experiment (runs on the CPU in about a tenth of a second) and follows
// its events to the end; returns its final state. `timeout` zero uses the daemon's default.
absl::StatusOr<v1::ExperimentState> RunRadixExperiment(
    v1::Profiler::Stub& stub, const std::map<std::string, std::string>& labels = {},
    absl::Duration timeout = absl::ZeroDuration());

// The port from the daemon's "metrics on http://HOST:PORT/metrics" log line.
absl::StatusOr<int> MetricsPortFromLog(const std::string& log);

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_METRICS_DAEMON_RUNS_H_
