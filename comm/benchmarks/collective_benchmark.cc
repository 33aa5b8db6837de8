// Collective sweep, nccl-tests style, with our layer and NCCL driven directly side by side.
//
// For each op and each size of the sweep (-b/-e/-f as min_bytes/max_bytes/step_factor) it
// times, one thread per GPU:
//   nccl     a plain loop of the NCCL call on a blocking communicator from ncclCommInitAll and
//            cudaMalloc'ed buffers: what nccl-tests does;
//   <mode>   EnqueueCollective through our NcclCommunicator (collectives on its blocking
//            communicator), for each buffer mode (device, registered, symmetric);
//   <mode>/raw the NCCL call itself in a plain loop, on the same communicator and buffers as
//            <mode>: what our layer adds, separated from what the buffer mode changes in NCCL;
//   device-nb the same with CollectivePath::kNonBlocking: every launch through NCCL's
//            background thread (shows what non-blocking costs).
// SYMMETRIC skips (prints "-") the sizes CheckSymmetricWindowUse refuses.
// Time per op = CUDA-event time of `iters` back-to-back ops divided by iters, the maximum over
// ranks; ranks meet at a barrier before each timed loop. algbw/busbw follow nccl-tests (see
// comm/bus_bandwidth.h). Small-message latency is the time per op at sizes <= 64 KiB.
//
// Keep NCCL_NVLS_ENABLE=0 in the environment on shared machines (no NVLink multicast).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "comm/bus_bandwidth.h"
#include "comm/collective.h"
#include "comm/collective_buffers.h"
#include "comm/collective_testing.h"
#include "comm/collective_types.h"
#include "comm/nccl_communicator.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/nccl_status.h"
#include "common/status_macros.h"

ABSL_FLAG(int64_t, min_bytes, 8, "smallest size (nccl-tests -b)");
ABSL_FLAG(int64_t, max_bytes, int64_t{1} << 30, "largest size (nccl-tests -e)");
ABSL_FLAG(double, step_factor, 2.0, "size multiplier (nccl-tests -f)");
ABSL_FLAG(std::string, ops, "all_reduce,all_gather,reduce_scatter,broadcast,all_to_all",
          "comma-separated collectives");
ABSL_FLAG(std::string, modes, "device,registered,symmetric", "comma-separated buffer modes");
ABSL_FLAG(bool, nonblocking_variant, true,
          "also time device buffers with collectives on the non-blocking communicator");
ABSL_FLAG(std::string, dtype, "fp32", "element type");
ABSL_FLAG(bool, in_place, false, "run in place (not for all_to_all)");
ABSL_FLAG(int, ranks, 0, "GPUs to use (0: all)");
ABSL_FLAG(int, warmup_iters, 5, "untimed ops before each timed loop");
ABSL_FLAG(int, iters, 0, "timed ops per size (0: 200 up to 1 MiB, 50 up to 64 MiB, 20 above)");

namespace gpuprof::comm {
namespace {

constexpr size_t kSmallMessageBytes = 64 << 10;
constexpr size_t kLargeMessageBytes = size_t{64} << 20;
constexpr absl::Duration kWaitTimeout = absl::Seconds(120);

// A failure anywhere ends the run: the other ranks would otherwise wait at a barrier forever.
void ExitOnError(const absl::Status& status, int rank) {
  if (status.ok()) return;
  std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

int IterationsFor(size_t bytes) {
  if (const int iters = absl::GetFlag(FLAGS_iters); iters > 0) return iters;
  if (bytes <= (size_t{1} << 20)) return 200;
  if (bytes <= kLargeMessageBytes) return 50;
  return 20;
}

// NCCL called directly, no status machinery: the peer our layer is held against.
ncclResult_t EnqueueDirect(CollectiveOp op, ncclDataType_t type, const CollectiveLayout& layout,
                           const void* send, void* recv, size_t element_bytes, int root, int nranks,
                           ncclComm_t comm, cudaStream_t stream) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return ncclAllReduce(send, recv, layout.nccl_count, type, ncclSum, comm, stream);
    case CollectiveOp::kAllGather:
      return ncclAllGather(send, recv, layout.nccl_count, type, comm, stream);
    case CollectiveOp::kReduceScatter:
      return ncclReduceScatter(send, recv, layout.nccl_count, type, ncclSum, comm, stream);
    case CollectiveOp::kBroadcast:
      return ncclBroadcast(send, recv, layout.nccl_count, type, root, comm, stream);
    case CollectiveOp::kAllToAll: {
      const size_t chunk_bytes = layout.chunk_elements * element_bytes;
      ncclGroupStart();
      for (int peer = 0; peer < nranks; ++peer) {
        ncclSend(static_cast<const char*>(send) + peer * chunk_bytes, layout.chunk_elements, type,
                 peer, comm, stream);
        ncclRecv(static_cast<char*>(recv) + peer * chunk_bytes, layout.chunk_elements, type, peer,
                 comm, stream);
      }
      return ncclGroupEnd();
    }
  }
  return ncclInvalidArgument;
}

// Results[op][count][variant] -> per-rank seconds.
using RankTimes = std::vector<double>;

struct Variant {
  std::string name;     // "nccl", a buffer mode, "<mode>/raw" or "device-nb"
  bool direct = false;  // the nccl-tests-style peer on its own communicator and buffers
  BufferMode mode = BufferMode::kDevice;
  CollectivePath path = CollectivePath::kBlocking;
  int raw_twin_of = -1;  // >= 0: plain NCCL loop on that variant's communicator and buffers
};

struct Shared {
  int nranks = 0;
  std::vector<CollectiveOp> ops;
  std::vector<Variant> variants;
  CollectiveDtype dtype = CollectiveDtype::kFloat32;
  BufferPlacement placement = BufferPlacement::kOutOfPlace;
  std::map<CollectiveOp, std::vector<size_t>> counts;
  std::vector<ncclComm_t> direct_comms;
  ncclUniqueId our_id{};
  ncclUniqueId nonblocking_id{};  // for the device-nb variant's communicator
  std::barrier<>* barrier = nullptr;
  // times[op index][count index][variant index][rank]
  std::vector<std::vector<std::vector<RankTimes>>> times;
};

void RankMain(Shared& shared, int rank) {
  const int nranks = shared.nranks;
  auto comm_or = NcclCommunicator::Create({.unique_id = shared.our_id,
                                           .nranks = nranks,
                                           .rank = rank,
                                           .device = rank,
                                           .name = "collective_benchmark"});
  ExitOnError(comm_or.status(), rank);
  NcclCommunicator comm = std::move(*comm_or);
  NcclCommunicator nonblocking_comm;
  const bool want_nonblocking = std::any_of(
      shared.variants.begin(), shared.variants.end(),
      [](const Variant& v) { return !v.direct && v.path == CollectivePath::kNonBlocking; });
  if (want_nonblocking) {
    auto created = NcclCommunicator::Create({.unique_id = shared.nonblocking_id,
                                             .nranks = nranks,
                                             .rank = rank,
                                             .device = rank,
                                             .name = "collective_benchmark_nb",
                                             .collective_path = CollectivePath::kNonBlocking});
    ExitOnError(created.status(), rank);
    nonblocking_comm = std::move(*created);
  }
  auto comm_for = [&](const Variant& variant) -> NcclCommunicator& {
    return variant.path == CollectivePath::kNonBlocking ? nonblocking_comm : comm;
  };
  auto our_stream = CudaStream::Create();
  auto direct_stream = CudaStream::Create();
  auto start = CudaEvent::Create();
  auto stop = CudaEvent::Create();
  ExitOnError(our_stream.status(), rank);
  ExitOnError(direct_stream.status(), rank);
  ExitOnError(start.status(), rank);
  ExitOnError(stop.status(), rank);
  const size_t element_bytes = DtypeSizeBytes(shared.dtype);
  auto type = NcclDataTypeFor(shared.dtype);
  ExitOnError(type.status(), rank);

  size_t buffer_bytes = 0;
  for (CollectiveOp op : shared.ops) {
    const size_t count = shared.counts.at(op).back();
    auto layout = LayoutFor(
        {.op = op, .dtype = shared.dtype, .total_elements = count, .placement = shared.placement},
        nranks, rank);
    ExitOnError(layout.status(), rank);
    buffer_bytes = std::max(buffer_bytes, layout->BufferElements() * element_bytes);
  }
  // Same order on every rank: symmetric registration is collective.
  std::vector<CollectiveBuffers> buffers(shared.variants.size());
  std::vector<DeviceBuffer> direct_buffers;
  for (size_t v = 0; v < shared.variants.size(); ++v) {
    if (shared.variants[v].direct) {
      for (int i = 0; i < 2; ++i) {
        auto buffer = DeviceBuffer::Allocate(buffer_bytes);
        ExitOnError(buffer.status(), rank);
        CUDA_LOG_IF_ERROR(cudaMemset(buffer->data(), 0, buffer_bytes));
        direct_buffers.push_back(std::move(*buffer));
      }
      continue;
    }
    if (shared.variants[v].raw_twin_of >= 0) continue;  // uses its twin's buffers
    auto allocated = CollectiveBuffers::Allocate(comm_for(shared.variants[v]),
                                                 shared.variants[v].mode, buffer_bytes);
    ExitOnError(allocated.status(), rank);
    buffers[v] = std::move(*allocated);
    CUDA_LOG_IF_ERROR(cudaMemset(buffers[v].send(), 0, buffers[v].bytes_per_buffer()));
    CUDA_LOG_IF_ERROR(cudaMemset(buffers[v].recv(), 0, buffers[v].bytes_per_buffer()));
  }

  for (size_t o = 0; o < shared.ops.size(); ++o) {
    const CollectiveOp op = shared.ops[o];
    const std::vector<size_t>& counts = shared.counts.at(op);
    for (size_t c = 0; c < counts.size(); ++c) {
      const CollectiveRequest request{.op = op,
                                      .dtype = shared.dtype,
                                      .total_elements = counts[c],
                                      .placement = shared.placement};
      auto layout = LayoutFor(request, nranks, rank);
      ExitOnError(layout.status(), rank);
      const int iters = IterationsFor(AlgorithmBytes(*layout, shared.dtype));
      const int warmup = absl::GetFlag(FLAGS_warmup_iters);
      for (size_t v = 0; v < shared.variants.size(); ++v) {
        const Variant& variant = shared.variants[v];
        cudaStream_t stream = variant.direct ? direct_stream->get() : our_stream->get();
        absl::Status status;
        if (variant.direct) {
          const void* send = direct_buffers[0].data();
          void* recv = direct_buffers[1].data();
          if (shared.placement == BufferPlacement::kInPlace) {
            char* base = static_cast<char*>(direct_buffers[1].data());
            send = base + layout->in_place_send_offset * element_bytes;
            recv = base + layout->in_place_recv_offset * element_bytes;
          }
          auto run = [&] {
            return EnqueueDirect(op, *type, *layout, send, recv, element_bytes, request.root,
                                 nranks, shared.direct_comms[rank], stream);
          };
          for (int i = 0; i < warmup; ++i) ExitOnError(NcclStatus(run(), "direct warm-up"), rank);
          ExitOnError(CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize"), rank);
          shared.barrier->arrive_and_wait();
          ExitOnError(start->Record(stream), rank);
          for (int i = 0; i < iters; ++i) {
            const ncclResult_t result = run();
            if (result != ncclSuccess) ExitOnError(NcclStatus(result, "direct loop"), rank);
          }
          ExitOnError(stop->Record(stream), rank);
          ExitOnError(CudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize"), rank);
        } else {
          NcclCommunicator& variant_comm = comm_for(variant);
          const int buffers_index =
              variant.raw_twin_of >= 0 ? variant.raw_twin_of : static_cast<int>(v);
          auto pointers = buffers[buffers_index].PointersFor(*layout, request);
          if (!pointers.ok() && variant.mode == BufferMode::kSymmetric &&
              !CheckSymmetricWindowUse(request, *layout).ok()) {
            // Refused the same way on every rank, so no rank waits at the barrier.
            shared.times[o][c][v][rank] = std::numeric_limits<double>::quiet_NaN();
            continue;
          }
          ExitOnError(pointers.status(), rank);
          auto run = [&]() -> absl::Status {
            if (variant.raw_twin_of < 0) {
              return EnqueueCollective(variant_comm, request, *pointers, stream);
            }
            const ncclResult_t result =
                EnqueueDirect(op, *type, *layout, pointers->send, pointers->recv, element_bytes,
                              request.root, nranks, variant_comm.get(), stream);
            return result == ncclSuccess ? absl::OkStatus() : NcclStatus(result, "raw loop");
          };
          for (int i = 0; i < warmup; ++i) ExitOnError(run(), rank);
          ExitOnError(WaitWithDeadline(variant_comm, stream, absl::Now() + kWaitTimeout), rank);
          shared.barrier->arrive_and_wait();
          ExitOnError(start->Record(stream), rank);
          for (int i = 0; i < iters; ++i) ExitOnError(run(), rank);
          ExitOnError(stop->Record(stream), rank);
          ExitOnError(WaitWithDeadline(variant_comm, stream, absl::Now() + kWaitTimeout), rank);
        }
        auto milliseconds = ElapsedMilliseconds(*start, *stop);
        ExitOnError(milliseconds.status(), rank);
        shared.times[o][c][v][rank] = *milliseconds * 1e-3 / iters;
      }
    }
  }
  shared.barrier->arrive_and_wait();
  for (CollectiveBuffers& buffer : buffers) buffer.Reset();
  ExitOnError(comm.Close(absl::Now() + absl::Seconds(30)), rank);
  if (want_nonblocking) ExitOnError(nonblocking_comm.Close(absl::Now() + absl::Seconds(30)), rank);
}

// NaN (a skipped size) stays NaN.
double MaxOverRanks(const RankTimes& times) {
  double result = times.front();
  for (double t : times) result = std::isnan(t) ? t : std::max(result, t);
  return result;
}

// Our variant `ours` against `reference` for one op: time difference per op at sizes up to
// 64 KiB, busbw ratio at 64 MiB and above. Sizes either side skipped are left out.
void PrintComparison(const Shared& shared, size_t o, size_t ours, size_t reference) {
  const CollectiveOp op = shared.ops[o];
  const std::vector<size_t>& counts = shared.counts.at(op);
  double delta_sum = 0, delta_max = -1e30, ratio_sum = 0, ratio_min = 1e30;
  int small = 0, large = 0;
  for (size_t c = 0; c < counts.size(); ++c) {
    const double our_seconds = MaxOverRanks(shared.times[o][c][ours]);
    const double reference_seconds = MaxOverRanks(shared.times[o][c][reference]);
    if (std::isnan(our_seconds) || std::isnan(reference_seconds)) continue;
    auto layout = LayoutFor({.op = op,
                             .dtype = shared.dtype,
                             .total_elements = counts[c],
                             .placement = shared.placement},
                            shared.nranks, 0);
    const size_t bytes = AlgorithmBytes(*layout, shared.dtype);
    if (bytes <= kSmallMessageBytes) {
      const double delta_us = (our_seconds - reference_seconds) * 1e6;
      delta_sum += delta_us;
      delta_max = std::max(delta_max, delta_us);
      ++small;
    }
    if (bytes >= kLargeMessageBytes) {
      const double ratio = reference_seconds / our_seconds;  // = busbw ratio
      ratio_sum += ratio;
      ratio_min = std::min(ratio_min, ratio);
      ++large;
    }
  }
  const std::string latency = small ? absl::StrFormat("latency delta mean %+6.2f us max %+6.2f us",
                                                      delta_sum / small, delta_max)
                                    : std::string("latency delta n/a (no size ran)");
  const std::string busbw = large ? absl::StrFormat("busbw ratio mean %6.1f%% min %6.1f%%",
                                                    100 * ratio_sum / large, 100 * ratio_min)
                                  : std::string("busbw ratio n/a (no size ran)");
  std::printf("summary %-15s %-10s vs %-14s %s | %s\n", std::string(CollectiveOpName(op)).c_str(),
              shared.variants[ours].name.c_str(), shared.variants[reference].name.c_str(),
              latency.c_str(), busbw.c_str());
}

void PrintResults(const Shared& shared) {
  for (size_t o = 0; o < shared.ops.size(); ++o) {
    const CollectiveOp op = shared.ops[o];
    std::printf(
        "\n# %s %s %s, %d ranks. time: us per op (CUDA events, max over ranks); "
        "algbw, busbw: GB/s\n",
        std::string(CollectiveOpName(op)).c_str(),
        std::string(CollectiveDtypeName(shared.dtype)).c_str(),
        std::string(BufferPlacementName(shared.placement)).c_str(), shared.nranks);
    std::printf("%12s %12s", "size(B)", "count");
    for (const Variant& variant : shared.variants) {
      std::printf(" | %-13s %8s %7s %7s", variant.name.c_str(), "time", "algbw", "busbw");
    }
    std::printf("\n");
    const std::vector<size_t>& counts = shared.counts.at(op);
    for (size_t c = 0; c < counts.size(); ++c) {
      auto layout = LayoutFor({.op = op,
                               .dtype = shared.dtype,
                               .total_elements = counts[c],
                               .placement = shared.placement},
                              shared.nranks, 0);
      const size_t bytes = AlgorithmBytes(*layout, shared.dtype);
      std::printf("%12zu %12zu", bytes, counts[c]);
      for (size_t v = 0; v < shared.variants.size(); ++v) {
        const double seconds = MaxOverRanks(shared.times[o][c][v]);
        if (std::isnan(seconds)) {
          std::printf(" | %-13s %8s %7s %7s", "", "-", "-", "-");
          continue;
        }
        const Bandwidth bandwidth = ComputeBandwidth(op, bytes, seconds, shared.nranks);
        std::printf(" | %-13s %8.2f %7.2f %7.2f", "", seconds * 1e6, bandwidth.algbw_gb_per_s,
                    bandwidth.busbw_gb_per_s);
      }
      std::printf("\n");
    }
  }
  std::printf(
      "\n# summary. latency delta = time per op minus the reference's at sizes <= 64 KiB "
      "(mean, max); busbw ratio = busbw / the reference's at sizes >= 64 MiB (mean, min)\n");
  for (size_t o = 0; o < shared.ops.size(); ++o) {
    for (size_t v = 0; v < shared.variants.size(); ++v) {
      const Variant& variant = shared.variants[v];
      if (variant.direct || variant.raw_twin_of >= 0) continue;
      PrintComparison(shared, o, v, 0);  // the nccl-tests-style peer
      for (size_t r = 0; r < shared.variants.size(); ++r) {
        if (shared.variants[r].raw_twin_of == static_cast<int>(v)) PrintComparison(shared, o, v, r);
      }
    }
  }
}

int Main() {
  int device_count = 0;
  ExitOnError(CudaStatus(cudaGetDeviceCount(&device_count), "cudaGetDeviceCount"), -1);
  Shared shared;
  shared.nranks = absl::GetFlag(FLAGS_ranks) > 0 ? absl::GetFlag(FLAGS_ranks) : device_count;
  if (shared.nranks < 2 || shared.nranks > device_count) {
    std::fprintf(stderr, "ranks: need 2..%d GPUs, asked for %d\n", device_count, shared.nranks);
    return 1;
  }
  auto dtype = ParseCollectiveDtype(absl::GetFlag(FLAGS_dtype));
  ExitOnError(dtype.status(), -1);
  shared.dtype = *dtype;
  shared.placement =
      absl::GetFlag(FLAGS_in_place) ? BufferPlacement::kInPlace : BufferPlacement::kOutOfPlace;
  for (absl::string_view name : absl::StrSplit(absl::GetFlag(FLAGS_ops), ',', absl::SkipEmpty())) {
    auto op = ParseCollectiveOp(name);
    ExitOnError(op.status(), -1);
    if (shared.placement == BufferPlacement::kInPlace && !OpSupportsInPlace(*op)) continue;
    shared.ops.push_back(*op);
  }
  auto loaded = LoadedNcclVersion();
  ExitOnError(loaded.status(), -1);
  shared.variants.push_back({.name = "nccl", .direct = true});
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_modes), ',', absl::SkipEmpty())) {
    auto mode = ParseBufferMode(name);
    ExitOnError(mode.status(), -1);
    if (absl::Status supported = CheckBufferModeSupported(*mode, *loaded); !supported.ok()) {
      std::printf("# skipping %s\n", supported.ToString().c_str());
      continue;
    }
    shared.variants.push_back({.name = std::string(name), .mode = *mode});
    const int twin = static_cast<int>(shared.variants.size()) - 1;
    shared.variants.push_back(
        {.name = absl::StrCat(name, "/raw"), .mode = *mode, .raw_twin_of = twin});
  }
  if (absl::GetFlag(FLAGS_nonblocking_variant)) {
    shared.variants.push_back(
        {.name = "device-nb", .mode = BufferMode::kDevice, .path = CollectivePath::kNonBlocking});
  }
  const SizeSweep sweep{.min_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_min_bytes)),
                        .max_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_max_bytes)),
                        .step_factor = absl::GetFlag(FLAGS_step_factor)};
  for (CollectiveOp op : shared.ops) {
    auto counts = SweepElementCounts(sweep, op, shared.dtype, shared.nranks);
    ExitOnError(counts.status(), -1);
    shared.counts[op] = *counts;
  }

  std::printf("# collective_benchmark: NCCL loaded %s (headers %s), %d ranks, one thread each\n",
              NcclVersionString(*loaded).c_str(), CompiledNcclVersion().c_str(), shared.nranks);
  for (int device = 0; device < shared.nranks; ++device) {
    cudaDeviceProp properties{};
    ExitOnError(CudaStatus(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties"),
                -1);
    std::printf("# rank %d: device %d %s, pci %04x:%02x:%02x\n", device, device, properties.name,
                properties.pciDomainID, properties.pciBusID, properties.pciDeviceID);
  }
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  std::printf("# NCCL_NVLS_ENABLE=%s\n", nvls ? nvls : "(unset)");

  // The direct peer's communicators, blocking, as nccl-tests makes them.
  shared.direct_comms.resize(shared.nranks);
  std::vector<int> devices(shared.nranks);
  for (int i = 0; i < shared.nranks; ++i) devices[i] = i;
  ExitOnError(NcclStatus(ncclCommInitAll(shared.direct_comms.data(), shared.nranks, devices.data()),
                         "ncclCommInitAll"),
              -1);
  auto id = CreateUniqueId();
  ExitOnError(id.status(), -1);
  shared.our_id = *id;
  auto nonblocking_id = CreateUniqueId();
  ExitOnError(nonblocking_id.status(), -1);
  shared.nonblocking_id = *nonblocking_id;
  std::barrier<> barrier(shared.nranks);
  shared.barrier = &barrier;
  shared.times.resize(shared.ops.size());
  for (size_t o = 0; o < shared.ops.size(); ++o) {
    shared.times[o].assign(
        shared.counts[shared.ops[o]].size(),
        std::vector<RankTimes>(shared.variants.size(), RankTimes(shared.nranks)));
  }
  const absl::Time began = absl::Now();
  const auto statuses = RunOnRankThreads(shared.nranks, [&](int rank) {
    RankMain(shared, rank);
    return absl::OkStatus();
  });
  (void)statuses;
  PrintResults(shared);
  std::printf("# sweep took %s\n", absl::FormatDuration(absl::Now() - began).c_str());
  for (ncclComm_t comm : shared.direct_comms) NCCL_LOG_IF_ERROR(ncclCommDestroy(comm));
  return 0;
}

}  // namespace
}  // namespace gpuprof::comm

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return gpuprof::comm::Main();
}
