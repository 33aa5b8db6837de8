// A real Prometheus server (Debian's `prometheus` package) started by a test: a temporary
// config and storage directory, a free loopback port, a short scrape interval. Queries go
// through its HTTP API (/api/v1/query, /api/v1/query_range).
#ifndef GPUPROF_TESTS_METRICS_PROMETHEUS_SERVER_H_
#define GPUPROF_TESTS_METRICS_PROMETHEUS_SERVER_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "google/protobuf/struct.pb.h"

namespace gpuprof::testing {

// A tool of the prometheus package: $<ENV_VARIABLE> when set, else /usr/bin/<name>.
std::string PrometheusToolPath(const std::string& name, const char* env_variable);

class PrometheusServer {
 public:
  // Starts Prometheus in `work_dir` scraping `targets` ("127.0.0.1:9464") every
  // `scrape_interval`, and waits until it is ready. With `node_of_target`, the targets come
  // through file-based discovery, each labelled node=<its node> (as the Kubernetes
  // relabelling of deploy/k8s does).
  static absl::StatusOr<std::unique_ptr<PrometheusServer>> Start(
      const std::string& work_dir, const std::vector<std::string>& targets,
      absl::Duration scrape_interval,
      const std::map<std::string, std::string>& node_of_target = {});
  // SIGTERM, then SIGKILL if it lingers.
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  int port() const { return port_; }
  std::string Log() const;

  // The `data` object of a successful API answer ({resultType, result}); an error carries
  // Prometheus' errorType and message (a PromQL syntax error, say).
  absl::StatusOr<google::protobuf::Struct> Query(const std::string& promql);
  absl::StatusOr<google::protobuf::Struct> QueryRange(const std::string& promql, absl::Time start,
                                                      absl::Time end, absl::Duration step);
  // Polls `promql` until its first sample is >= `at_least`.
  absl::Status WaitForValue(const std::string& promql, double at_least, absl::Duration timeout);
  // Waits until every scrape target reports health "up".
  absl::Status WaitForTargetsUp(absl::Duration timeout);

 private:
  PrometheusServer(pid_t pid, int port, std::string log_path);
  absl::StatusOr<google::protobuf::Struct> CallApi(const std::string& path_and_query);

  pid_t pid_;
  int port_;
  std::string log_path_;
};

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_METRICS_PROMETHEUS_SERVER_H_
