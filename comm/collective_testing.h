// What the GPU tests and the benchmark share: one thread per rank, and inputs whose collective
// results are exact small integers in every dtype (so a check compares for equality).
#ifndef GPUPROF_COMM_COLLECTIVE_TESTING_H_
#define GPUPROF_COMM_COLLECTIVE_TESTING_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "comm/collective_types.h"

namespace gpuprof::comm {

// Runs `body(rank)` on `nranks` threads at once (a rank's thread sets its own device) and
// returns each rank's status, in rank order.
std::vector<absl::Status> RunOnRankThreads(int nranks,
                                           const std::function<absl::Status(int)>& body);

// OK when every status is; else the first failure, prefixed with its rank.
absl::Status FirstFailure(const std::vector<absl::Status>& statuses);

// Element `index` of `rank`'s send buffer. Reductions get (index + rank) % 3, so sums over up
// to 4 ranks stay exact even in fp8 e5m2; the others get values 1..7 that differ per rank and
// per position (and per destination for all_to_all), so a misplaced chunk shows.
int InputValue(const CollectiveRequest& request, const CollectiveLayout& layout, int rank,
               size_t index);

// Element `index` of `rank`'s receive buffer once the collective is done.
int ExpectedValue(const CollectiveRequest& request, const CollectiveLayout& layout, int nranks,
                  int rank, size_t index);

// The send buffer's bytes for `rank` (layout.send_elements elements).
std::vector<uint8_t> EncodeInput(const CollectiveRequest& request, const CollectiveLayout& layout,
                                 int rank);

// Compares `recv` (layout.recv_elements elements) with ExpectedValue; INTERNAL naming the
// first wrong element and how many were wrong.
absl::Status CheckOutput(const CollectiveRequest& request, const CollectiveLayout& layout,
                         int nranks, int rank, const std::vector<uint8_t>& recv);

}  // namespace gpuprof::comm

#endif  // GPUPROF_COMM_COLLECTIVE_TESTING_H_
