// A minimal HTTP/1.0 GET client over a plain TCP socket, enough to scrape /metrics and to call
// Prometheus' HTTP API from tests without another dependency.
#ifndef GPUPROF_TESTS_METRICS_HTTP_CLIENT_H_
#define GPUPROF_TESTS_METRICS_HTTP_CLIENT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuprof::testing {

struct HttpResponse {
  int status_code = 0;
  std::string body;
};

// GET http://127.0.0.1:<port><path_and_query>. Transport failures are errors; any HTTP status,
// 4xx and 5xx included, is a response.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path_and_query,
                                     absl::Duration timeout = absl::Seconds(30));

// Percent-encodes everything but RFC 3986's unreserved characters, for query parameters.
std::string UrlEncode(absl::string_view text);

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released).
absl::StatusOr<int> PickFreeLoopbackPort();

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_METRICS_HTTP_CLIENT_H_
