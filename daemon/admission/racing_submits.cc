#include "daemon/admission/racing_submits.h"

#include <atomic>
#include <thread>

#include "absl/strings/match.h"

namespace gpuprof::daemon {

RaceResult RaceSubmits(int threads, absl::string_view refusal,
                       const std::function<absl::Status(int thread)>& submit) {
  std::vector<absl::Status> answers(threads);
  std::atomic<bool> go{false};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      // Spin, not sleep: the threads leave the gate as close together as they can.
      while (!go.load()) std::this_thread::yield();
      answers[t] = submit(t);
    });
  }
  go = true;
  for (std::thread& client : clients) client.join();
  RaceResult result;
  for (const absl::Status& answer : answers) {
    if (answer.ok()) {
      ++result.admitted;
    } else if (absl::IsResourceExhausted(answer) && absl::StrContains(answer.message(), refusal)) {
      ++result.refused;
    } else {
      result.unexpected.push_back(answer.ToString());
    }
  }
  return result;
}

}  // namespace gpuprof::daemon
