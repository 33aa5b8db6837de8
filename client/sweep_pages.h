// A sweep's points a page at a time: GetSweep returns one page of them (500 by default) and a
// token for the next, so that a 10,000-point sweep is never one message. Every command that
// reads a sweep's points goes through here.
#ifndef GPUPROF_CLIENT_SWEEP_PAGES_H_
#define GPUPROF_CLIENT_SWEEP_PAGES_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "client/session.h"
#include "gpuprof/v1/sweep.pb.h"
#include "grpcpp/support/status.h"

namespace gpuprof::client {

// Asks for the sweep's pages in index order and calls `on_page` with each as it arrives (every
// page carries the sweep's own fields; the first page of an empty sweep has no points). Stops
// at the first failed call and returns its status. `page_size` 0: the daemon's default.
grpc::Status ForEachSweepPage(Session& session, const std::string& sweep_id,
                              absl::FunctionRef<void(const v1::Sweep& page)> on_page,
                              int page_size = 0);

// The sweep with every point, from all its pages: for what needs them all at once (a plot, a
// comparison, a fleet's merged table).
grpc::Status GetWholeSweep(Session& session, const std::string& sweep_id, v1::Sweep& sweep);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_SWEEP_PAGES_H_
