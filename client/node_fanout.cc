#include "client/node_fanout.h"

#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace gpuprof::client {

Fleet::Fleet(const ClientEnvironment& env, std::vector<DaemonNode> nodes,
             absl::Duration node_timeout, const ConnectionOptions& connection,
             std::optional<std::string> user)
    : env_(env), nodes_(std::move(nodes)), node_timeout_(node_timeout), user_(std::move(user)) {
  ClientEnvironment node_env = env;
  node_env.unary_rpc_deadline = node_timeout;
  for (const DaemonNode& node : nodes_) {
    ConnectionOptions options = connection;
    options.target = node.address;
    sessions_.emplace_back(node_env, std::move(options), user_, node);
  }
}

std::optional<size_t> Fleet::IndexOf(absl::string_view name) const {
  for (size_t i = 0; i < size(); ++i) {
    if (nodes_[i].name == name) return i;
  }
  return std::nullopt;
}

std::string Fleet::Names() const {
  std::vector<std::string> names;
  for (const DaemonNode& node : nodes_) names.push_back(node.name);
  return absl::StrJoin(names, ", ");
}

void Fleet::ForEachNode(const std::function<void(size_t)>& work) {
  std::vector<std::thread> threads;
  for (size_t i = 0; i < size(); ++i) threads.emplace_back(work, i);
  for (std::thread& thread : threads) thread.join();
}

std::vector<grpc::Status> Fleet::OnEveryNode(
    const std::function<grpc::Status(Session&, size_t)>& call) {
  std::vector<grpc::Status> statuses(size());
  ForEachNode([&](size_t i) { statuses[i] = call(sessions_[i], i); });
  return statuses;
}

std::vector<NodeOutcome> Fleet::RunOnEveryNode(const std::function<int(Session&, size_t)>& run) {
  std::vector<NodeOutcome> outcomes(size());
  ForEachNode([&](size_t i) {
    std::ostringstream out, err;
    Session session = sessions_[i].WithOutput(&out, &err);
    outcomes[i].exit_code = run(session, i);
    outcomes[i].out = out.str();
    outcomes[i].err = err.str();
  });
  return outcomes;
}

std::string Fleet::ErrorText(const NodeOutcome& outcome) {
  std::string text(absl::StripSuffix(absl::StripPrefix(outcome.err, "error: "), "\n"));
  return text.empty() ? absl::StrCat("exit code ", outcome.exit_code) : text;
}

int Fleet::ExitCode(const std::vector<NodeOutcome>& outcomes, int failure_code_floor) const {
  std::vector<std::string> missing;
  int first_failure = kExitOk;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].exit_code < failure_code_floor) continue;
    missing.push_back(absl::StrCat(nodes_[i].name, " (", ErrorText(outcomes[i]), ")"));
    if (first_failure == kExitOk) first_failure = outcomes[i].exit_code;
  }
  if (missing.empty()) return kExitOk;
  *env_.err << (missing.size() == outcomes.size() ? "error: no node answered: "
                                                  : "partial: no answer from ")
            << absl::StrJoin(missing, "; ") << "\n";
  return missing.size() == outcomes.size() ? first_failure : kExitPartial;
}

int Fleet::WithPartial(const std::vector<std::string>& missing, int code) const {
  if (missing.empty()) return code;
  *env_.err << "partial: no answer from " << absl::StrJoin(missing, "; ") << "\n";
  return code == kExitOk || code == kExitNotFinished ? kExitPartial : code;
}

}  // namespace gpuprof::client
