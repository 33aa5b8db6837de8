// For tests of admission's atomicity: parallel clients racing for the same quota.
#ifndef GPUPROF_DAEMON_ADMISSION_RACING_SUBMITS_H_
#define GPUPROF_DAEMON_ADMISSION_RACING_SUBMITS_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace gpuprof::daemon {

struct RaceResult {
  int admitted = 0;
  // RESOURCE_EXHAUSTED answers whose message holds the refusal text.
  int refused = 0;
  // Every other answer, as text, for the test to show.
  std::vector<std::string> unexpected;
};

// Calls `submit(thread)` on `threads` threads released at the same moment and sorts the
// answers: OK is admitted, a RESOURCE_EXHAUSTED naming `refusal` is refused.
RaceResult RaceSubmits(int threads, absl::string_view refusal,
                       const std::function<absl::Status(int thread)>& submit);

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_ADMISSION_RACING_SUBMITS_H_
