#include "workloads/collective/collective_runner.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "comm/bus_bandwidth.h"
#include "comm/collective.h"
#include "comm/collective_buffers.h"
#include "comm/collective_testing.h"
#include "comm/collective_types.h"
#include "comm/nccl_communicator.h"
#include "comm/nccl_tuning_log.h"
#include "common/cuda_raii.h"
#include "common/gpu_links.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "measure/timing_loop.h"
#include "workloads/gpu_driver/rank_group.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::google::protobuf::util::TimeUtil;

absl::StatusOr<comm::CollectiveOp> OpOf(v1::CollectiveOp op) {
  switch (op) {
    case v1::COLLECTIVE_OP_ALL_REDUCE:
      return comm::CollectiveOp::kAllReduce;
    case v1::COLLECTIVE_OP_ALL_GATHER:
      return comm::CollectiveOp::kAllGather;
    case v1::COLLECTIVE_OP_REDUCE_SCATTER:
      return comm::CollectiveOp::kReduceScatter;
    case v1::COLLECTIVE_OP_BROADCAST:
      return comm::CollectiveOp::kBroadcast;
    case v1::COLLECTIVE_OP_ALL_TO_ALL:
      return comm::CollectiveOp::kAllToAll;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("collective.op: got ", v1::CollectiveOp_Name(op)));
  }
}

absl::StatusOr<comm::CollectiveDtype> DtypeOf(v1::DataType dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_FP32:
      return comm::CollectiveDtype::kFloat32;
    case v1::DATA_TYPE_FP16:
      return comm::CollectiveDtype::kFloat16;
    case v1::DATA_TYPE_BF16:
      return comm::CollectiveDtype::kBfloat16;
    case v1::DATA_TYPE_INT8:
      return comm::CollectiveDtype::kInt8;
    case v1::DATA_TYPE_INT32:
      return comm::CollectiveDtype::kInt32;
    case v1::DATA_TYPE_FP8_E4M3:
      return comm::CollectiveDtype::kFloat8E4M3;
    case v1::DATA_TYPE_FP8_E5M2:
      return comm::CollectiveDtype::kFloat8E5M2;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("collective.dtype: got ", v1::DataType_Name(dtype)));
  }
}

absl::StatusOr<comm::BufferMode> BufferModeOf(v1::BufferMode mode) {
  switch (mode) {
    case v1::BUFFER_MODE_DEVICE:
      return comm::BufferMode::kDevice;
    case v1::BUFFER_MODE_REGISTERED:
      return comm::BufferMode::kRegistered;
    case v1::BUFFER_MODE_SYMMETRIC:
    case v1::BUFFER_MODE_WRAPPER:  // its window; the tensors are plain device buffers
      return comm::BufferMode::kSymmetric;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("collective.buffer_mode: got ", v1::BufferMode_Name(mode)));
  }
}

// Every rank's (median us, correct) for one size, gathered over NCCL so that all ranks, and
// the result rank 0 reports, agree on the slowest rank's time.
absl::StatusOr<std::vector<double>> GatherAcrossRanks(comm::NcclCommunicator& communicator,
                                                      const std::vector<double>& mine,
                                                      DeviceBuffer& scratch, cudaStream_t stream,
                                                      absl::Time deadline) {
  const size_t count = mine.size();
  double* send = scratch.data_as<double>();
  double* receive = send + count;
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(send, mine.data(), count * sizeof(double),
                                       cudaMemcpyHostToDevice, stream));
  RETURN_IF_ERROR(communicator.FinishCall(
      ncclAllGather(send, receive, count, ncclFloat64, communicator.get(), stream),
      "gathering the ranks' timings"));
  RETURN_IF_ERROR(comm::WaitWithDeadline(communicator, stream, deadline));
  std::vector<double> all(count * communicator.nranks());
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(all.data(), receive, all.size() * sizeof(double), cudaMemcpyDeviceToHost));
  return all;
}

// Enqueues one collective (or, for the wrapper's staged path, copy in + collective + copy out).
using CollectiveLaunch = std::function<absl::Status(cudaStream_t)>;

// Runs `launch` once on this rank's exact input (written at `pointers.send`, read back from
// `pointers.recv`) after poisoning every buffer in `poisoned`, and compares the output.
absl::StatusOr<bool> CheckOnce(comm::NcclCommunicator& communicator,
                               std::initializer_list<const comm::CollectiveBuffers*> poisoned,
                               const comm::CollectiveRequest& request,
                               const comm::CollectiveLayout& layout,
                               const comm::CollectivePointers& pointers,
                               const CollectiveLaunch& launch, cudaStream_t stream,
                               absl::Time deadline, std::string& mismatch) {
  const size_t element_bytes = comm::DtypeSizeBytes(request.dtype);
  for (const comm::CollectiveBuffers* buffers : poisoned) {
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(buffers->send(), 0xff, buffers->bytes_per_buffer(), stream));
    CUDA_RETURN_IF_ERROR(
        cudaMemsetAsync(buffers->recv(), 0xff, buffers->bytes_per_buffer(), stream));
  }
  const std::vector<uint8_t> input = comm::EncodeInput(request, layout, communicator.rank());
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<void*>(pointers.send), input.data(),
                                       input.size(), cudaMemcpyHostToDevice, stream));
  RETURN_IF_ERROR(launch(stream));
  RETURN_IF_ERROR(comm::WaitWithDeadline(communicator, stream, deadline));
  std::vector<uint8_t> output(layout.recv_elements * element_bytes);
  CUDA_RETURN_IF_ERROR(
      cudaMemcpy(output.data(), pointers.recv, output.size(), cudaMemcpyDeviceToHost));
  const absl::Status checked = comm::CheckOutput(request, layout, communicator.nranks(),
                                                 communicator.rank(), output);
  if (!checked.ok()) mismatch = std::string(checked.message());
  return checked.ok();
}

// The wrapper's staged path: the tensor copied into the window, the collective there, the
// result copied back into the tensor's own receive buffer.
absl::Status LaunchStaged(comm::NcclCommunicator& communicator,
                          const comm::CollectiveRequest& request,
                          const comm::CollectiveLayout& layout,
                          const comm::CollectivePointers& tensor,
                          const comm::CollectivePointers& window, cudaStream_t stream) {
  const size_t element_bytes = comm::DtypeSizeBytes(request.dtype);
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(const_cast<void*>(window.send), tensor.send,
                                       layout.send_elements * element_bytes,
                                       cudaMemcpyDeviceToDevice, stream));
  RETURN_IF_ERROR(comm::EnqueueCollective(communicator, request, window, stream));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(tensor.recv, window.recv,
                                       layout.recv_elements * element_bytes,
                                       cudaMemcpyDeviceToDevice, stream));
  return absl::OkStatus();
}

// Where staging stops paying: the largest size before the first at which the direct path was
// faster (0 when it was from the first size).
int64_t WrapperThresholdBytes(const v1::CollectiveResult& collective) {
  int64_t threshold = 0;
  for (const v1::CollectivePoint& point : collective.points()) {
    if (!point.staged()) break;
    threshold = point.bytes();
  }
  return threshold;
}

}  // namespace

absl::StatusOr<v1::ExperimentResult> RunCollectiveWorkload(const RunContext& context) {
  const auto& assignment = context.assignment;
  const v1::CollectiveSpec& spec = assignment.request().collective();
  if (assignment.gpus_size() < 1) {
    return absl::FailedPreconditionError("collective: no GPU was leased");
  }
  const absl::Time deadline = RankDeadline(assignment);
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  ASSIGN_OR_RETURN(const comm::CollectiveOp op, OpOf(spec.op()));
  ASSIGN_OR_RETURN(const comm::CollectiveDtype dtype, DtypeOf(spec.dtype()));
  ASSIGN_OR_RETURN(const comm::BufferMode mode, BufferModeOf(spec.buffer_mode()));
  RETURN_IF_ERROR(comm::CheckDtypeCompiledIn(dtype));
  const int world_size = std::max(1, assignment.world_size());
  const int rank = assignment.rank();

  context.progress(v1::PHASE_SETUP, 0, 1,
                   absl::StrCat("joining ", world_size, " rank(s) as rank ", rank));
  ASSIGN_OR_RETURN(comm::NcclCommunicator * communicator, RankGroupCommunicator(assignment, deadline));
  ASSIGN_OR_RETURN(const int loaded_version, comm::LoadedNcclVersion());
  RETURN_IF_ERROR(comm::CheckBufferModeSupported(mode, loaded_version));
  context.progress(v1::PHASE_SETUP, 1, 1, communicator->Describe());

  const comm::SizeSweep sweep{.min_bytes = static_cast<size_t>(spec.min_bytes()),
                              .max_bytes = static_cast<size_t>(spec.max_bytes()),
                              .step_factor = spec.step_factor()};
  RETURN_IF_ERROR(comm::ValidateSizeSweep(sweep, world_size));
  ASSIGN_OR_RETURN(const std::vector<size_t> counts,
                   comm::SweepElementCounts(sweep, op, dtype, world_size));
  const comm::BufferPlacement placement =
      spec.in_place() ? comm::BufferPlacement::kInPlace : comm::BufferPlacement::kOutOfPlace;
  auto request_for = [&](size_t count) {
    return comm::CollectiveRequest{
        .op = op, .dtype = dtype, .total_elements = count, .placement = placement,
        .root = spec.root()};
  };

  context.progress(v1::PHASE_ALLOCATION, 0, 1, "allocating the send and receive buffers");
  ASSIGN_OR_RETURN(const comm::CollectiveLayout largest,
                   comm::LayoutFor(request_for(counts.back()), world_size, rank));
  const size_t buffer_bytes = largest.BufferElements() * comm::DtypeSizeBytes(dtype);
  const bool wrapper = spec.buffer_mode() == v1::BUFFER_MODE_WRAPPER;
  // The wrapper's window (symmetric) and, beside it, the tensors' own plain buffers.
  ASSIGN_OR_RETURN(comm::CollectiveBuffers buffers,
                   comm::CollectiveBuffers::Allocate(*communicator, mode, buffer_bytes));
  comm::CollectiveBuffers tensors;
  if (wrapper) {
    ASSIGN_OR_RETURN(tensors, comm::CollectiveBuffers::Allocate(
                                  *communicator, comm::BufferMode::kDevice, buffer_bytes));
  }
  ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
  // Room for GatherAcrossRanks: this rank's values and every rank's (3 per rank).
  ASSIGN_OR_RETURN(DeviceBuffer scratch,
                   DeviceBuffer::Allocate(4 * sizeof(double) * (world_size + 1)));
  context.progress(v1::PHASE_ALLOCATION, 1, 1,
                   wrapper ? absl::StrFormat("2 x %d bytes of tensors, 2 x %d in a symmetric "
                                             "window (wrapper)",
                                             buffer_bytes, buffer_bytes)
                           : absl::StrFormat("2 x %d bytes, %s", buffer_bytes,
                                             comm::BufferModeName(mode)));

  v1::ExperimentResult result;
  v1::CollectiveResult& collective = *result.mutable_collective();
  collective.set_ranks(world_size);
  collective.set_nccl_version(comm::NcclVersionString(loaded_version));
  collective.set_path(DescribeGpuPath(assignment.links()));
  collective.set_eager(spec.eager());
  collective.set_correct(true);
  const v1::GpuInfo& gpu = assignment.gpus(0);
  for (size_t index = 0; index < counts.size(); ++index) {
    const comm::CollectiveRequest request = request_for(counts[index]);
    ASSIGN_OR_RETURN(const comm::CollectiveLayout layout,
                     comm::LayoutFor(request, world_size, rank));
    ASSIGN_OR_RETURN(const comm::CollectivePointers pointers,
                     buffers.PointersFor(layout, request));
    const size_t bytes = comm::AlgorithmBytes(layout, dtype);
    const std::string size_label = absl::StrFormat("%d bytes", bytes);

    // The launches timed at this size: the collective on `pointers`; for the wrapper, the
    // staged path through the window and the direct one on the tensors' buffers.
    comm::CollectivePointers tensor_pointers;
    if (wrapper) {
      ASSIGN_OR_RETURN(tensor_pointers, tensors.PointersFor(layout, request));
    }
    const CollectiveLaunch on_buffers = [&](cudaStream_t on) {
      return comm::EnqueueCollective(*communicator, request, pointers, on);
    };
    const CollectiveLaunch staged = [&](cudaStream_t on) {
      return LaunchStaged(*communicator, request, layout, tensor_pointers, pointers, on);
    };
    const CollectiveLaunch direct = [&](cudaStream_t on) {
      return comm::EnqueueCollective(*communicator, request, tensor_pointers, on);
    };

    context.progress(v1::PHASE_VERIFICATION, index, counts.size(),
                     absl::StrCat("checking ", size_label));
    // Only the checked call's lines count: earlier ones (alignment, gathers) are passed over.
    comm::NcclTuningLog& tuning_log = comm::ProcessNcclTuningLog();
    const std::string nccl_operation = comm::NcclLogOperationName(comm::CollectiveOpName(op));
    tuning_log.LatestChoice(nccl_operation);
    std::string mismatch;
    bool correct = true;
    if (wrapper) {
      for (const auto& [launch, what] : {std::pair{&staged, "staged"}, std::pair{&direct, "direct"}}) {
        ASSIGN_OR_RETURN(const bool path_correct,
                         CheckOnce(*communicator, {&buffers, &tensors}, request, layout,
                                   tensor_pointers, *launch, stream.get(), deadline, mismatch));
        if (!path_correct) mismatch = absl::StrCat(what, " path: ", mismatch);
        correct = correct && path_correct;
      }
    } else {
      ASSIGN_OR_RETURN(correct, CheckOnce(*communicator, {&buffers}, request, layout, pointers,
                                          on_buffers, stream.get(), deadline, mismatch));
    }
    if (!correct) result.add_not_collected(absl::StrCat("rank ", rank, " at ", size_label, ": ", mismatch));
    const std::optional<comm::NcclChoice> nccl_choice = tuning_log.LatestChoice(nccl_operation);

    measure::MeasurementSetup setup{
        .options = assignment.request().measurement(),
        .gpu = gpu,
        .scaffolding_marker =
            context.tracing != nullptr ? context.tracing->scaffolding_marker() : nullptr,
        .wait_for_stream = [communicator, deadline](cudaStream_t on) {
          return comm::WaitWithDeadline(*communicator, on, deadline);
        },
        // A one-element all-reduce: every rank's sample starts once all ranks are there.
        .align_before_sample = [communicator, &scratch](cudaStream_t on) {
          return communicator->FinishCall(
              ncclAllReduce(scratch.data(), scratch.data(), 1, ncclFloat64, ncclSum,
                            communicator->get(), on),
              "aligning the ranks before a sample");
        }};
    auto measure_launch = [&](const CollectiveLaunch& launch)
        -> absl::StatusOr<measure::MeasurementOutcome> {
      const measure::TimedStream timed{.stream = stream.get(), .device = 0, .launch = launch};
      return measure::MeasureStreams(setup, {&timed, 1}, context.progress);
    };
    ASSIGN_OR_RETURN(measure::MeasurementOutcome outcome,
                     measure_launch(wrapper ? staged : on_buffers));
    double direct_median_us = 0;
    measure::MeasurementOutcome direct_outcome;
    if (wrapper) {
      ASSIGN_OR_RETURN(direct_outcome, measure_launch(direct));
      direct_median_us = direct_outcome.measurement.kernel_time().median_us();
    }
    const v1::TimingStats& mine = outcome.measurement.kernel_time();
    // Per rank: median (staged for the wrapper), correct, direct median.
    ASSIGN_OR_RETURN(const std::vector<double> all,
                     GatherAcrossRanks(*communicator,
                                       {mine.median_us(), correct ? 1.0 : 0.0, direct_median_us},
                                       scratch, stream.get(), deadline));
    constexpr int kPerRank = 3;

    v1::CollectivePoint& point = *collective.add_points();
    point.set_bytes(static_cast<int64_t>(bytes));
    point.set_elements(static_cast<int64_t>(counts[index]));
    if (nccl_choice.has_value()) {
      point.set_nccl_algorithm(nccl_choice->algorithm);
      point.set_nccl_protocol(nccl_choice->protocol);
    }
    point.set_correct(true);
    int slowest = 0;
    int slowest_direct = 0;
    for (int r = 0; r < world_size; ++r) {
      const double* of_rank = &all[kPerRank * r];
      point.add_rank_median_us(of_rank[0]);
      if (of_rank[0] > all[kPerRank * slowest]) slowest = r;
      if (of_rank[2] > all[kPerRank * slowest_direct + 2]) slowest_direct = r;
      if (of_rank[1] == 0.0) point.set_correct(false);
    }
    // The slowest rank's median sets the pace; this rank's samples give the spread.
    double median_us = all[kPerRank * slowest];
    *point.mutable_time() = mine;
    if (wrapper) {
      point.set_staged_median_us(median_us);
      point.set_direct_median_us(all[kPerRank * slowest_direct + 2]);
      // Every rank sees the same gathered medians, so all choose the same path.
      point.set_staged(point.staged_median_us() <= point.direct_median_us());
      if (!point.staged()) {
        median_us = point.direct_median_us();
        *point.mutable_time() = direct_outcome.measurement.kernel_time();
      }
    }
    point.mutable_time()->set_median_us(median_us);
    const comm::Bandwidth bandwidth =
        comm::ComputeBandwidth(op, bytes, median_us * 1e-6, world_size);
    point.set_algbw_gbps(bandwidth.algbw_gb_per_s);
    point.set_busbw_gbps(bandwidth.busbw_gb_per_s);
    if (!point.correct()) collective.set_correct(false);
    if (index == 0) {
      *result.mutable_measurement() = outcome.measurement;
      for (const std::string& note : outcome.not_collected) result.add_not_collected(note);
    }
  }
  const v1::CollectivePoint& first = collective.points(0);
  const v1::CollectivePoint& last = collective.points(collective.points_size() - 1);
  collective.set_small_message_latency_us(first.time().median_us());
  collective.set_algbw_gbps(last.algbw_gbps());
  collective.set_busbw_gbps(last.busbw_gbps());
  // The headline measurement is the largest size's, slowest rank.
  result.mutable_measurement()->mutable_kernel_time()->set_median_us(last.time().median_us());
  result.mutable_measurement()->set_bytes_moved(last.bytes());
  v1::Verification& verification = *result.mutable_verification();
  verification.set_checked(true);
  verification.set_passed(collective.correct());
  verification.set_method(
      "every size: each rank's exact small-integer input, the collective once, its output "
      "compared element by element on every rank");
  verification.set_message(absl::StrFormat("%d size(s) on %d rank(s): %s", counts.size(),
                                           world_size,
                                           collective.correct() ? "all exact" : "MISMATCHES"));
  if (wrapper) {
    collective.set_wrapper_threshold_bytes(WrapperThresholdBytes(collective));
    (*result.mutable_kernel_config())["wrapper_threshold_bytes"] =
        absl::StrCat(collective.wrapper_threshold_bytes());
  }
  (*result.mutable_kernel_config())["buffer_mode"] =
      wrapper ? "wrapper" : std::string(comm::BufferModeName(mode));
  (*result.mutable_kernel_config())["placement"] =
      std::string(comm::BufferPlacementName(placement));
  (*result.mutable_kernel_config())["nccl"] = comm::NcclVersionString(loaded_version);
  return result;
}

}  // namespace gpuprof::workloads
