#include "tests/metrics/prometheus_server.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/metrics/http_client.h"
#include "tests/metrics/json_struct.h"

extern char** environ;

namespace gpuprof::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// Prometheus takes durations as "1s", "250ms".
std::string PromDuration(absl::Duration duration) {
  return absl::StrCat(absl::ToInt64Milliseconds(duration), "ms");
}

// Starts `argv` with stdout and stderr appended to `log_path`.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_path.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<char*> c_args;
  for (std::string& arg : args) c_args.push_back(arg.data());
  c_args.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, c_args[0], &actions, nullptr, c_args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start ", argv[0], ": ", std::strerror(error)));
  }
  return pid;
}

bool Exited(pid_t pid) {
  int status = 0;
  return waitpid(pid, &status, WNOHANG) == pid;
}

}  // namespace

std::string PrometheusToolPath(const std::string& name, const char* env_variable) {
  const char* configured = std::getenv(env_variable);
  if (configured != nullptr && *configured != '\0') return configured;
  return "/usr/bin/" + name;
}

absl::StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const std::string& work_dir, const std::vector<std::string>& targets,
    absl::Duration scrape_interval, const std::map<std::string, std::string>& node_of_target) {
  const std::string binary = PrometheusToolPath("prometheus", "PROMETHEUS_BINARY");
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        binary, " not found: install Debian's prometheus package (tools/setup.sh does)"));
  }
  const std::string config_path = work_dir + "/prometheus.yml";
  {
    std::ofstream config(config_path);
    config << "global:\n"
           << "  scrape_interval: " << PromDuration(scrape_interval) << "\n"
           << "  scrape_timeout: " << PromDuration(scrape_interval) << "\n"
           << "  evaluation_interval: " << PromDuration(scrape_interval) << "\n"
           << "scrape_configs:\n"
           << "  - job_name: gpuprof\n";
    if (node_of_target.empty()) {
      config << "    static_configs:\n"
             << "      - targets: ['" << absl::StrJoin(targets, "', '") << "']\n";
    } else {
      config << "    file_sd_configs:\n"
             << "      - files: ['" << work_dir << "/targets.json']\n"
             << "        refresh_interval: " << PromDuration(scrape_interval) << "\n";
      std::vector<std::string> groups;
      for (const std::string& target : targets) {
        const auto node = node_of_target.find(target);
        groups.push_back(absl::StrCat(
            R"({"targets": [")", target, R"("], "labels": {"node": ")",
            node == node_of_target.end() ? "" : node->second, R"("}})"));
      }
      std::ofstream(work_dir + "/targets.json") << "[" << absl::StrJoin(groups, ", ") << "]\n";
    }
  }
  const std::string log_path = work_dir + "/prometheus.log";
  // The port is free when picked but may be taken before Prometheus binds it: try again.
  absl::Status last_error = absl::UnknownError("not started");
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<int> port = PickFreeLoopbackPort();
    if (!port.ok()) return port.status();
    absl::StatusOr<pid_t> pid =
        Spawn({binary, "--config.file=" + config_path,
               "--storage.tsdb.path=" + work_dir + "/data-" + std::to_string(attempt),
               absl::StrCat("--web.listen-address=127.0.0.1:", *port), "--log.level=info"},
              log_path);
    if (!pid.ok()) return pid.status();
    std::unique_ptr<PrometheusServer> server(new PrometheusServer(*pid, *port, log_path));
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      if (Exited(*pid)) {
        server->pid_ = -1;
        break;
      }
      absl::StatusOr<HttpResponse> ready = HttpGet(*port, "/-/ready", absl::Seconds(2));
      if (ready.ok() && ready->status_code == 200) return server;
      absl::SleepFor(absl::Milliseconds(100));
    }
    last_error =
        absl::UnavailableError(absl::StrCat("Prometheus did not become ready:\n", server->Log()));
  }
  return last_error;
}

PrometheusServer::PrometheusServer(pid_t pid, int port, std::string log_path)
    : pid_(pid), port_(port), log_path_(std::move(log_path)) {}

PrometheusServer::~PrometheusServer() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!Exited(pid_)) {
    if (absl::Now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      break;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

std::string PrometheusServer::Log() const { return ReadFile(log_path_); }

absl::StatusOr<google::protobuf::Struct> PrometheusServer::CallApi(
    const std::string& path_and_query) {
  absl::StatusOr<HttpResponse> response = HttpGet(port_, path_and_query);
  if (!response.ok()) return response.status();
  absl::StatusOr<google::protobuf::Struct> answer = ParseJsonObject(response->body);
  if (!answer.ok()) return answer.status();
  if (StringField(*answer, "status") != "success") {
    return absl::InvalidArgumentError(absl::StrCat("HTTP ", response->status_code, " ",
                                                   StringField(*answer, "errorType"), ": ",
                                                   StringField(*answer, "error")));
  }
  return StructField(*answer, "data");
}

absl::StatusOr<google::protobuf::Struct> PrometheusServer::Query(const std::string& promql) {
  return CallApi("/api/v1/query?query=" + UrlEncode(promql));
}

absl::StatusOr<google::protobuf::Struct> PrometheusServer::QueryRange(const std::string& promql,
                                                                      absl::Time start,
                                                                      absl::Time end,
                                                                      absl::Duration step) {
  return CallApi(absl::StrCat(
      "/api/v1/query_range?query=", UrlEncode(promql), "&start=", absl::ToUnixSeconds(start),
      "&end=", absl::ToUnixSeconds(end), "&step=", absl::ToDoubleSeconds(step)));
}

absl::Status PrometheusServer::WaitForValue(const std::string& promql, double at_least,
                                            absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no answer";
  while (absl::Now() < deadline) {
    absl::StatusOr<google::protobuf::Struct> data = Query(promql);
    if (!data.ok()) return data.status();
    const auto& result = ListField(*data, "result");
    if (result.values_size() > 0) {
      // A vector sample is {"metric": {...}, "value": [time, "value"]}.
      const auto& value = ListField(result.values(0).struct_value(), "value");
      if (value.values_size() == 2) {
        last = value.values(1).string_value();
        if (std::strtod(last.c_str(), nullptr) >= at_least) return absl::OkStatus();
      }
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(promql, " stayed below ", at_least, " (last: ", last, ")"));
}

absl::Status PrometheusServer::WaitForTargetsUp(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last;
  while (absl::Now() < deadline) {
    absl::StatusOr<google::protobuf::Struct> data = CallApi("/api/v1/targets?state=active");
    if (!data.ok()) return data.status();
    const auto& targets = ListField(*data, "activeTargets");
    bool all_up = targets.values_size() > 0;
    last.clear();
    for (const auto& target : targets.values()) {
      const std::string health = StringField(target.struct_value(), "health");
      absl::StrAppend(&last, StringField(target.struct_value(), "scrapeUrl"), " ", health, " ",
                      StringField(target.struct_value(), "lastError"), "; ");
      if (health != "up") all_up = false;
    }
    if (all_up) return absl::OkStatus();
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::DeadlineExceededError(absl::StrCat("scrape targets not up: ", last));
}

}  // namespace gpuprof::testing
