#include "client/sweep_pages.h"

#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "client/session.h"
#include "gpuprof/v1/sweep.pb.h"
#include "grpcpp/support/status.h"

namespace gpuprof::client {

grpc::Status ForEachSweepPage(Session& session, const std::string& sweep_id,
                              absl::FunctionRef<void(const v1::Sweep& page)> on_page,
                              int page_size) {
  v1::GetSweepRequest request;
  request.set_sweep_id(sweep_id);
  request.set_points_page_size(page_size);
  while (true) {
    v1::Sweep page;
    const grpc::Status status =
        session.Call(&v1::Profiler::StubInterface::GetSweep, request, page);
    if (!status.ok()) return status;
    on_page(page);
    // A daemon from before paging sends every point and no token.
    if (page.next_points_page_token().empty()) return grpc::Status::OK;
    if (page.points().empty() || page.next_points_page_token() == request.points_page_token()) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("the daemon's pages of ", sweep_id,
                                       " do not move on: page token \"",
                                       page.next_points_page_token(), "\" repeats"));
    }
    request.set_points_page_token(page.next_points_page_token());
  }
}

grpc::Status GetWholeSweep(Session& session, const std::string& sweep_id, v1::Sweep& sweep) {
  bool first = true;
  const grpc::Status status = ForEachSweepPage(session, sweep_id, [&](const v1::Sweep& page) {
    if (first) {
      sweep = page;
      first = false;
      return;
    }
    // The first page's state and counts: a running sweep's move on between pages anyway.
    for (const v1::SweepPoint& point : page.points()) *sweep.add_points() = point;
  });
  sweep.clear_next_points_page_token();
  return status;
}

}  // namespace gpuprof::client
