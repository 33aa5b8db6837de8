// The vocabulary of the collective layer: operations, element types, in-place or not, and the
// buffer layout each operation uses. CPU-only, so that validation and the daemon-side checks
// run without a GPU; NCCL's header is included only for its version macros.
#ifndef GPUPROF_COMM_COLLECTIVE_TYPES_H_
#define GPUPROF_COMM_COLLECTIVE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpuprof::comm {

enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kAllToAll };

enum class CollectiveDtype {
  kFloat32,
  kFloat16,
  kBfloat16,
  kInt8,
  kInt32,
  kFloat8E4M3,
  kFloat8E5M2
};

enum class BufferPlacement { kOutOfPlace, kInPlace };

std::span<const CollectiveOp> AllCollectiveOps();
std::span<const CollectiveDtype> AllCollectiveDtypes();

// "all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all".
absl::string_view CollectiveOpName(CollectiveOp op);
absl::StatusOr<CollectiveOp> ParseCollectiveOp(absl::string_view name);

// "fp32", "fp16", "bf16", "int8", "int32", "fp8_e4m3", "fp8_e5m2".
absl::string_view CollectiveDtypeName(CollectiveDtype dtype);
absl::StatusOr<CollectiveDtype> ParseCollectiveDtype(absl::string_view name);

absl::string_view BufferPlacementName(BufferPlacement placement);  // "out_of_place", "in_place"

size_t DtypeSizeBytes(CollectiveDtype dtype);

// True for all_reduce and reduce_scatter (the ops that sum).
bool OpReduces(CollectiveOp op);

// Ops whose buffer splits into one equal chunk per rank, so the element count must divide by
// the number of ranks: all_gather, reduce_scatter, all_to_all.
bool OpSplitsAcrossRanks(CollectiveOp op);

// all_to_all is built from grouped ncclSend/ncclRecv; sending and receiving within one buffer
// would overwrite chunks before they are sent, so it runs out-of-place only.
bool OpSupportsInPlace(CollectiveOp op);

// OK when the NCCL this code was compiled against has the type; UNIMPLEMENTED naming the
// version otherwise (fp8 needs NCCL >= 2.24).
absl::Status CheckDtypeCompiledIn(CollectiveDtype dtype);

// NCCL_VERSION_CODE of the headers, e.g. "2.28.9".
std::string CompiledNcclVersion();
// Formats a code as ncclGetVersion returns it (e.g. 22803 -> "2.28.3").
std::string NcclVersionString(int version_code);

// Element counts of one collective on one rank, in nccl-tests' layout. `total_elements` is
// nccl-tests' "count": the size S that algbw divides (see bus_bandwidth.h).
//   all_reduce, broadcast: send = recv = total; NCCL count = total.
//   all_gather:     send = total/n, recv = total; NCCL sendcount = total/n.
//   reduce_scatter: send = total, recv = total/n; NCCL recvcount = total/n.
//   all_to_all:     send = recv = total; chunk p of the send buffer goes to rank p;
//                   NCCL count per peer = total/n.
// In-place runs keep everything in the receive buffer: all_gather reads its input from chunk
// `rank` of it, reduce_scatter writes its output to chunk `rank` of its input.
struct CollectiveLayout {
  size_t total_elements = 0;
  size_t send_elements = 0;
  size_t recv_elements = 0;
  size_t nccl_count = 0;
  size_t chunk_elements = 0;  // total/n for ops that split, else total
  // Offsets within the receive buffer when in place.
  size_t in_place_send_offset = 0;
  size_t in_place_recv_offset = 0;
  // Elements each of the send and receive buffers must hold (in place: the one buffer).
  size_t BufferElements() const {
    return send_elements > recv_elements ? send_elements : recv_elements;
  }
};

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  CollectiveDtype dtype = CollectiveDtype::kFloat32;
  size_t total_elements = 0;
  BufferPlacement placement = BufferPlacement::kOutOfPlace;
  int root = 0;  // broadcast only
};

// INVALID_ARGUMENT naming the field: nranks < 1, rank outside [0, nranks), no elements, an
// element count that does not divide by nranks where the op splits, a root outside the group,
// in-place all_to_all. UNIMPLEMENTED for a dtype this NCCL lacks.
absl::Status ValidateCollectiveRequest(const CollectiveRequest& request, int nranks, int rank);

absl::StatusOr<CollectiveLayout> LayoutFor(const CollectiveRequest& request, int nranks, int rank);

// Small integers in every dtype, for checks that must be exact. Values must lie in
// [0, MaxExactInteger(dtype)]; the codecs are exact there (no rounding code is needed).
int MaxExactInteger(CollectiveDtype dtype);
void EncodeSmallInteger(CollectiveDtype dtype, int value, void* out);
// Decodes one element; NaN for float NaN patterns, so a sentinel never matches a value.
double DecodeElement(CollectiveDtype dtype, const void* in);

}  // namespace gpuprof::comm

#endif  // GPUPROF_COMM_COLLECTIVE_TYPES_H_
