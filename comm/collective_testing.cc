#include "comm/collective_testing.h"

#include <thread>

#include "absl/strings/str_cat.h"

namespace gpuprof::comm {
namespace {

int ReductionInput(int rank, size_t index) { return static_cast<int>((index + rank) % 3); }

// 1..7: exact in every dtype, never 0 (so a buffer left zeroed shows).
int PlacementInput(int rank, size_t position, int destination) {
  return static_cast<int>((position + 2 * rank + 3 * destination) % 7) + 1;
}

}  // namespace

std::vector<absl::Status> RunOnRankThreads(int nranks,
                                           const std::function<absl::Status(int)>& body) {
  std::vector<absl::Status> statuses(nranks);
  std::vector<std::thread> threads;
  threads.reserve(nranks);
  for (int rank = 0; rank < nranks; ++rank) {
    threads.emplace_back([&statuses, &body, rank] { statuses[rank] = body(rank); });
  }
  for (std::thread& thread : threads) thread.join();
  return statuses;
}

absl::Status FirstFailure(const std::vector<absl::Status>& statuses) {
  for (size_t rank = 0; rank < statuses.size(); ++rank) {
    if (!statuses[rank].ok()) {
      return absl::Status(statuses[rank].code(),
                          absl::StrCat("rank ", rank, ": ", statuses[rank].message()));
    }
  }
  return absl::OkStatus();
}

int InputValue(const CollectiveRequest& request, const CollectiveLayout& layout, int rank,
               size_t index) {
  switch (request.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kReduceScatter:
      return ReductionInput(rank, index);
    case CollectiveOp::kAllGather:
    case CollectiveOp::kBroadcast:
      return PlacementInput(rank, index, 0);
    case CollectiveOp::kAllToAll:
      return PlacementInput(rank, index % layout.chunk_elements,
                            static_cast<int>(index / layout.chunk_elements));
  }
  return 0;
}

int ExpectedValue(const CollectiveRequest& request, const CollectiveLayout& layout, int nranks,
                  int rank, size_t index) {
  switch (request.op) {
    case CollectiveOp::kAllReduce: {
      int sum = 0;
      for (int r = 0; r < nranks; ++r) sum += ReductionInput(r, index);
      return sum;
    }
    case CollectiveOp::kReduceScatter: {
      int sum = 0;
      for (int r = 0; r < nranks; ++r)
        sum += ReductionInput(r, rank * layout.chunk_elements + index);
      return sum;
    }
    case CollectiveOp::kAllGather:
      return PlacementInput(static_cast<int>(index / layout.chunk_elements),
                            index % layout.chunk_elements, 0);
    case CollectiveOp::kBroadcast:
      return PlacementInput(request.root, index, 0);
    case CollectiveOp::kAllToAll:
      // Chunk p came from rank p, which sent its chunk `rank`.
      return PlacementInput(static_cast<int>(index / layout.chunk_elements),
                            index % layout.chunk_elements, rank);
  }
  return 0;
}

std::vector<uint8_t> EncodeInput(const CollectiveRequest& request, const CollectiveLayout& layout,
                                 int rank) {
  const size_t element_bytes = DtypeSizeBytes(request.dtype);
  std::vector<uint8_t> bytes(layout.send_elements * element_bytes);
  for (size_t i = 0; i < layout.send_elements; ++i) {
    EncodeSmallInteger(request.dtype, InputValue(request, layout, rank, i),
                       bytes.data() + i * element_bytes);
  }
  return bytes;
}

absl::Status CheckOutput(const CollectiveRequest& request, const CollectiveLayout& layout,
                         int nranks, int rank, const std::vector<uint8_t>& recv) {
  const size_t element_bytes = DtypeSizeBytes(request.dtype);
  if (recv.size() < layout.recv_elements * element_bytes) {
    return absl::InternalError(absl::StrCat("receive buffer holds ", recv.size(), " bytes, need ",
                                            layout.recv_elements * element_bytes));
  }
  size_t wrong = 0;
  std::string first;
  for (size_t i = 0; i < layout.recv_elements; ++i) {
    const double got = DecodeElement(request.dtype, recv.data() + i * element_bytes);
    const int expected = ExpectedValue(request, layout, nranks, rank, i);
    if (got != expected) {  // NaN (the sentinel) never equals
      if (wrong++ == 0) {
        first = absl::StrCat("element ", i, " is ", got, ", expected ", expected);
      }
    }
  }
  if (wrong == 0) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(CollectiveOpName(request.op), " ", CollectiveDtypeName(request.dtype), " ",
                   BufferPlacementName(request.placement), " of ", layout.total_elements,
                   " elements: ", wrong, " of ", layout.recv_elements, " wrong; ", first));
}

}  // namespace gpuprof::comm
