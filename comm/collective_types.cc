#include "comm/collective_types.h"

#include <nccl.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpuprof::comm {
namespace {

constexpr std::array kAllOps = {CollectiveOp::kAllReduce, CollectiveOp::kAllGather,
                                CollectiveOp::kReduceScatter, CollectiveOp::kBroadcast,
                                CollectiveOp::kAllToAll};
constexpr std::array kAllDtypes = {CollectiveDtype::kFloat32,   CollectiveDtype::kFloat16,
                                   CollectiveDtype::kBfloat16,  CollectiveDtype::kInt8,
                                   CollectiveDtype::kInt32,     CollectiveDtype::kFloat8E4M3,
                                   CollectiveDtype::kFloat8E5M2};

// ncclFloat8e4m3 / ncclFloat8e5m2 first shipped in NCCL 2.24.
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
constexpr bool kNcclHasFp8 = true;
#else
constexpr bool kNcclHasFp8 = false;
#endif

// A normal float's exponent (unbiased) and its top mantissa bits, for the exact small-integer
// codecs below. value > 0.
void SplitFloat(int value, int* exponent, uint32_t* mantissa23) {
  const uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(value));
  *exponent = static_cast<int>((bits >> 23) & 0xff) - 127;
  *mantissa23 = bits & 0x7fffff;
}

// Minifloat with `exponent_bits`/`mantissa_bits`, bias 2^(e-1)-1; exact for the integers that
// MaxExactInteger allows.
uint32_t EncodeMinifloat(int value, int exponent_bits, int mantissa_bits) {
  if (value == 0) return 0;
  int exponent = 0;
  uint32_t mantissa23 = 0;
  SplitFloat(value, &exponent, &mantissa23);
  const int bias = (1 << (exponent_bits - 1)) - 1;
  return (static_cast<uint32_t>(exponent + bias) << mantissa_bits) |
         (mantissa23 >> (23 - mantissa_bits));
}

double DecodeMinifloat(uint32_t bits, int exponent_bits, int mantissa_bits, bool e4m3_nan_rule) {
  const uint32_t sign = bits >> (exponent_bits + mantissa_bits);
  const uint32_t exponent = (bits >> mantissa_bits) & ((1u << exponent_bits) - 1);
  const uint32_t mantissa = bits & ((1u << mantissa_bits) - 1);
  const uint32_t max_exponent = (1u << exponent_bits) - 1;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  // e4m3 has no infinities: only S.1111.111 is NaN. IEEE-like types: all-ones exponent.
  const bool is_nan = e4m3_nan_rule
                          ? (exponent == max_exponent && mantissa == (1u << mantissa_bits) - 1)
                          : exponent == max_exponent;
  if (is_nan) return std::numeric_limits<double>::quiet_NaN();
  const double fraction = static_cast<double>(mantissa) / (1u << mantissa_bits);
  const double magnitude = exponent == 0
                               ? std::ldexp(fraction, 1 - bias)
                               : std::ldexp(1.0 + fraction, static_cast<int>(exponent) - bias);
  return sign ? -magnitude : magnitude;
}

}  // namespace

std::span<const CollectiveOp> AllCollectiveOps() { return kAllOps; }
std::span<const CollectiveDtype> AllCollectiveDtypes() { return kAllDtypes; }

absl::string_view CollectiveOpName(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "all_reduce";
    case CollectiveOp::kAllGather:
      return "all_gather";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kAllToAll:
      return "all_to_all";
  }
  return "unknown_op";
}

absl::StatusOr<CollectiveOp> ParseCollectiveOp(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (CollectiveOp op : kAllOps) {
    if (CollectiveOpName(op) == name) return op;
    names.push_back(CollectiveOpName(op));
  }
  return absl::InvalidArgumentError(absl::StrCat("op: unknown collective '", name, "' (one of ",
                                                 absl::StrJoin(names, ", "), ")"));
}

absl::string_view CollectiveDtypeName(CollectiveDtype dtype) {
  switch (dtype) {
    case CollectiveDtype::kFloat32:
      return "fp32";
    case CollectiveDtype::kFloat16:
      return "fp16";
    case CollectiveDtype::kBfloat16:
      return "bf16";
    case CollectiveDtype::kInt8:
      return "int8";
    case CollectiveDtype::kInt32:
      return "int32";
    case CollectiveDtype::kFloat8E4M3:
      return "fp8_e4m3";
    case CollectiveDtype::kFloat8E5M2:
      return "fp8_e5m2";
  }
  return "unknown_dtype";
}

absl::StatusOr<CollectiveDtype> ParseCollectiveDtype(absl::string_view name) {
  std::vector<absl::string_view> names;
  for (CollectiveDtype dtype : kAllDtypes) {
    if (CollectiveDtypeName(dtype) == name) return dtype;
    names.push_back(CollectiveDtypeName(dtype));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype: unknown '", name, "' (one of ", absl::StrJoin(names, ", "), ")"));
}

absl::string_view BufferPlacementName(BufferPlacement placement) {
  return placement == BufferPlacement::kInPlace ? "in_place" : "out_of_place";
}

size_t DtypeSizeBytes(CollectiveDtype dtype) {
  switch (dtype) {
    case CollectiveDtype::kFloat32:
    case CollectiveDtype::kInt32:
      return 4;
    case CollectiveDtype::kFloat16:
    case CollectiveDtype::kBfloat16:
      return 2;
    case CollectiveDtype::kInt8:
    case CollectiveDtype::kFloat8E4M3:
    case CollectiveDtype::kFloat8E5M2:
      return 1;
  }
  return 1;
}

bool OpReduces(CollectiveOp op) {
  return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter;
}

bool OpSplitsAcrossRanks(CollectiveOp op) {
  return op == CollectiveOp::kAllGather || op == CollectiveOp::kReduceScatter ||
         op == CollectiveOp::kAllToAll;
}

bool OpSupportsInPlace(CollectiveOp op) { return op != CollectiveOp::kAllToAll; }

std::string NcclVersionString(int code) {
  // NCCL_VERSION: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after.
  if (code >= 10000) return absl::StrCat(code / 10000, ".", (code / 100) % 100, ".", code % 100);
  return absl::StrCat(code / 1000, ".", (code / 100) % 10, ".", code % 100);
}

std::string CompiledNcclVersion() { return NcclVersionString(NCCL_VERSION_CODE); }

absl::Status CheckDtypeCompiledIn(CollectiveDtype dtype) {
  const bool fp8 = dtype == CollectiveDtype::kFloat8E4M3 || dtype == CollectiveDtype::kFloat8E5M2;
  if (fp8 && !kNcclHasFp8) {
    return absl::UnimplementedError(absl::StrCat("dtype: ", CollectiveDtypeName(dtype),
                                                 " needs NCCL >= 2.24; built against NCCL ",
                                                 CompiledNcclVersion()));
  }
  return absl::OkStatus();
}

absl::Status ValidateCollectiveRequest(const CollectiveRequest& request, int nranks, int rank) {
  if (nranks < 1) return absl::InvalidArgumentError(absl::StrCat("nranks: ", nranks, " < 1"));
  if (rank < 0 || rank >= nranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: ", rank, " is outside [0, ", nranks, ")"));
  }
  if (request.total_elements == 0) {
    return absl::InvalidArgumentError("total_elements: must be > 0");
  }
  if (OpSplitsAcrossRanks(request.op) && request.total_elements % nranks != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("total_elements: ", request.total_elements, " does not divide by ", nranks,
                     " ranks (", CollectiveOpName(request.op), " gives each rank an equal chunk)"));
  }
  if (request.op == CollectiveOp::kBroadcast && (request.root < 0 || request.root >= nranks)) {
    return absl::InvalidArgumentError(
        absl::StrCat("root: ", request.root, " is outside [0, ", nranks, ")"));
  }
  if (request.placement == BufferPlacement::kInPlace && !OpSupportsInPlace(request.op)) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement: ", CollectiveOpName(request.op),
                     " runs out-of-place only (grouped "
                     "send/recv within one buffer would overwrite chunks before they are sent)"));
  }
  return CheckDtypeCompiledIn(request.dtype);
}

absl::StatusOr<CollectiveLayout> LayoutFor(const CollectiveRequest& request, int nranks, int rank) {
  if (absl::Status status = ValidateCollectiveRequest(request, nranks, rank); !status.ok()) {
    return status;
  }
  const size_t total = request.total_elements;
  const size_t chunk = OpSplitsAcrossRanks(request.op) ? total / nranks : total;
  CollectiveLayout layout;
  layout.total_elements = total;
  layout.chunk_elements = chunk;
  switch (request.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kBroadcast:
      layout.send_elements = layout.recv_elements = layout.nccl_count = total;
      break;
    case CollectiveOp::kAllGather:
      layout.send_elements = chunk;
      layout.recv_elements = total;
      layout.nccl_count = chunk;
      layout.in_place_send_offset = chunk * rank;
      break;
    case CollectiveOp::kReduceScatter:
      layout.send_elements = total;
      layout.recv_elements = chunk;
      layout.nccl_count = chunk;
      layout.in_place_recv_offset = chunk * rank;
      break;
    case CollectiveOp::kAllToAll:
      layout.send_elements = layout.recv_elements = total;
      layout.nccl_count = chunk;
      break;
  }
  return layout;
}

int MaxExactInteger(CollectiveDtype dtype) {
  switch (dtype) {
    case CollectiveDtype::kFloat32:
      return 1 << 24;
    case CollectiveDtype::kInt32:
      return std::numeric_limits<int32_t>::max();
    case CollectiveDtype::kFloat16:
      return 2048;
    case CollectiveDtype::kBfloat16:
      return 256;
    case CollectiveDtype::kInt8:
      return 127;
    case CollectiveDtype::kFloat8E4M3:
      return 16;
    case CollectiveDtype::kFloat8E5M2:
      return 8;
  }
  return 0;
}

void EncodeSmallInteger(CollectiveDtype dtype, int value, void* out) {
  switch (dtype) {
    case CollectiveDtype::kFloat32: {
      const float f = static_cast<float>(value);
      std::memcpy(out, &f, 4);
      return;
    }
    case CollectiveDtype::kInt32: {
      const int32_t i = value;
      std::memcpy(out, &i, 4);
      return;
    }
    case CollectiveDtype::kInt8: {
      const int8_t i = static_cast<int8_t>(value);
      std::memcpy(out, &i, 1);
      return;
    }
    case CollectiveDtype::kBfloat16: {
      // bf16 is the top half of a float; exact for the integers allowed here.
      const uint16_t bits =
          static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(value)) >> 16);
      std::memcpy(out, &bits, 2);
      return;
    }
    case CollectiveDtype::kFloat16: {
      const uint16_t bits = static_cast<uint16_t>(EncodeMinifloat(value, 5, 10));
      std::memcpy(out, &bits, 2);
      return;
    }
    case CollectiveDtype::kFloat8E4M3: {
      const uint8_t bits = static_cast<uint8_t>(EncodeMinifloat(value, 4, 3));
      std::memcpy(out, &bits, 1);
      return;
    }
    case CollectiveDtype::kFloat8E5M2: {
      const uint8_t bits = static_cast<uint8_t>(EncodeMinifloat(value, 5, 2));
      std::memcpy(out, &bits, 1);
      return;
    }
  }
}

double DecodeElement(CollectiveDtype dtype, const void* in) {
  switch (dtype) {
    case CollectiveDtype::kFloat32: {
      float f;
      std::memcpy(&f, in, 4);
      return f;
    }
    case CollectiveDtype::kInt32: {
      int32_t i;
      std::memcpy(&i, in, 4);
      return i;
    }
    case CollectiveDtype::kInt8: {
      int8_t i;
      std::memcpy(&i, in, 1);
      return i;
    }
    case CollectiveDtype::kBfloat16: {
      uint16_t bits;
      std::memcpy(&bits, in, 2);
      return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
    }
    case CollectiveDtype::kFloat16: {
      uint16_t bits;
      std::memcpy(&bits, in, 2);
      return DecodeMinifloat(bits, 5, 10, /*e4m3_nan_rule=*/false);
    }
    case CollectiveDtype::kFloat8E4M3: {
      uint8_t bits;
      std::memcpy(&bits, in, 1);
      return DecodeMinifloat(bits, 4, 3, /*e4m3_nan_rule=*/true);
    }
    case CollectiveDtype::kFloat8E5M2: {
      uint8_t bits;
      std::memcpy(&bits, in, 1);
      return DecodeMinifloat(bits, 5, 2, /*e4m3_nan_rule=*/false);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace gpuprof::comm
