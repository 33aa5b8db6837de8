// The one way a command reaches several daemons: a Session per node of the fleet, every node
// called at once (a thread each), each node's unary calls ending at the node timeout so that
// one stuck node delays nobody, and how a fleet's answer is judged when some nodes are silent.
#ifndef GPUPROF_CLIENT_NODE_FANOUT_H_
#define GPUPROF_CLIENT_NODE_FANOUT_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/connection_options.h"
#include "client/fleet.h"
#include "client/session.h"
#include "grpcpp/support/status.h"

namespace gpuprof::client {

// What a whole command printed and returned on one node.
struct NodeOutcome {
  int exit_code = kExitOk;
  std::string out;
  std::string err;
};

class Fleet {
 public:
  // `connection`: TLS files, token and claimed user shared by the nodes (each node's target is
  // its address). `user`: --user, which the daemons honour for admins only.
  Fleet(const ClientEnvironment& env, std::vector<DaemonNode> nodes, absl::Duration node_timeout,
        const ConnectionOptions& connection, std::optional<std::string> user);

  size_t size() const { return nodes_.size(); }
  const DaemonNode& node(size_t i) const { return nodes_[i]; }
  const ClientEnvironment& env() const { return env_; }
  absl::Duration node_timeout() const { return node_timeout_; }
  const std::optional<std::string>& user() const { return user_; }
  // Node i's session: output to the fleet's streams, unary calls end at the node timeout.
  Session& session(size_t i) { return sessions_[i]; }

  std::optional<size_t> IndexOf(absl::string_view name) const;
  // "gpu-a, gpu-b".
  std::string Names() const;

  // Calls `call` on every node at once; each returns that node's status.
  std::vector<grpc::Status> OnEveryNode(const std::function<grpc::Status(Session&, size_t)>& call);
  // Runs a whole command on every node at once, each node's output kept apart.
  std::vector<NodeOutcome> RunOnEveryNode(const std::function<int(Session&, size_t)>& run);

  // 0 when every node's exit code is below `failure_code_floor`; the nodes' own code when
  // none is; else kExitPartial, after naming the nodes that are missing from the output.
  int ExitCode(const std::vector<NodeOutcome>& outcomes, int failure_code_floor = kExitUsage) const;
  // `code`, or after a "partial: no answer from ..." line kExitPartial (a failure code stays).
  int WithPartial(const std::vector<std::string>& missing, int code) const;

  // A node's error line without the "error: " prefix and newline.
  static std::string ErrorText(const NodeOutcome& outcome);

 private:
  void ForEachNode(const std::function<void(size_t)>& work);

  const ClientEnvironment& env_;
  std::vector<DaemonNode> nodes_;
  absl::Duration node_timeout_;
  std::optional<std::string> user_;
  std::vector<Session> sessions_;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_NODE_FANOUT_H_
