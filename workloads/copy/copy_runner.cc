#include "workloads/copy/copy_runner.h"

#include <cuda_runtime_api.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/byte_format.h"
#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "common/statistics.h"
#include "common/status_macros.h"
#include "gpu/device_facts.h"
#include "measure/stop_criteria.h"
#include "measure/timing_loop.h"
#include "workloads/copy/copy_pattern.h"
#include "workloads/copy/copy_routes.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using Clock = std::chrono::steady_clock;

// Written over a destination before its checked copy, so that bytes not copied show.
constexpr int kPoisonByte = 0xa5;

constexpr size_t kHugePageBytes = size_t{2} << 20;

// Host memory: pinned (portable: every device's copy engines reach it directly) or pageable.
class HostBuffer {
 public:
  static absl::StatusOr<HostBuffer> Allocate(int64_t bytes, bool pinned) {
    HostBuffer buffer;
    buffer.pinned_ = pinned;
    if (pinned) {
      void* data = nullptr;
      CUDA_RETURN_IF_ERROR(cudaHostAlloc(&data, bytes, cudaHostAllocPortable));
      buffer.data_ = static_cast<std::byte*>(data);
    } else {
      // As PyTorch's CPU allocator gives a large tensor (2 MiB aligned, huge pages advised),
      // so that the figure is what a serving engine's pageable tensor sees.
      const size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
      buffer.data_ = static_cast<std::byte*>(std::aligned_alloc(kHugePageBytes, rounded));
      if (buffer.data_ == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("copy: could not allocate ", FormatBinaryBytes(bytes), " of host memory"));
      }
      (void)madvise(buffer.data_, rounded, MADV_HUGEPAGE);  // advice: no huge pages is fine
    }
    return buffer;
  }

  HostBuffer() = default;
  HostBuffer(HostBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), pinned_(other.pinned_) {}
  HostBuffer& operator=(HostBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(pinned_, other.pinned_);
    return *this;
  }
  ~HostBuffer() {
    if (data_ == nullptr) return;
    if (pinned_) {
      CUDA_LOG_IF_ERROR(cudaFreeHost(data_));
    } else {
      std::free(data_);
    }
  }

  std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  bool pinned_ = false;
};

// One leased GPU's buffers: a source and a destination on the device, and the host buffers
// its host copies read and write.
struct GpuBuffers {
  DeviceBuffer source;
  DeviceBuffer destination;
  HostBuffer host_source;
  HostBuffer host_destination;
};

// Pattern tags: each source buffer its own.
uint64_t DeviceSourceTag(int device) { return 2 * static_cast<uint64_t>(device) + 1; }
uint64_t HostSourceTag(int device) { return 2 * static_cast<uint64_t>(device) + 2; }

class CopyRun {
 public:
  explicit CopyRun(const RunContext& context)
      : context_(context),
        assignment_(context.assignment),
        spec_(assignment_.request().copy()),
        bytes_(spec_.bytes()),
        pageable_(spec_.host_memory() == v1::HOST_MEMORY_PAGEABLE) {}

  absl::StatusOr<v1::ExperimentResult> Run() {
    const int gpus = assignment_.gpus_size();
    if (gpus < 1) return absl::FailedPreconditionError("copy: no GPU was leased");
    int visible = 0;
    CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&visible));
    if (visible < gpus) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "copy: %d GPUs were leased but this worker sees %d CUDA devices", gpus, visible));
    }
    context_.progress(v1::PHASE_SETUP, 0, 1, "planning the routes");
    std::vector<LinkPeak> pcie;
    for (const v1::GpuInfo& gpu : assignment_.gpus()) pcie.push_back(PcieLinkPeak(gpu));
    const std::vector<v1::GpuInfo> leased(assignment_.gpus().begin(), assignment_.gpus().end());
    const std::vector<v1::GpuLink> links(assignment_.links().begin(), assignment_.links().end());
    routes_ = PlanCopyRoutes(spec_, leased, links, pcie);
    RETURN_IF_ERROR(EnablePeerAccess());
    context_.progress(v1::PHASE_SETUP, 1, 1,
                      absl::StrCat(routes_.each.size() + (routes_.together ? 1 : 0), " routes"));

    context_.progress(v1::PHASE_ALLOCATION, 0, 1, "allocating and filling the buffers");
    RETURN_IF_ERROR(Allocate());
    context_.progress(v1::PHASE_ALLOCATION, 1, 1,
                      absl::StrCat(FormatBinaryBytes(bytes_), " per buffer on ", gpus, " GPU(s)"));

    v1::ExperimentResult result;
    v1::CopyResult& copy = *result.mutable_copy();
    copy.set_direction(spec_.direction());
    copy.set_bidirectional(spec_.bidirectional());
    copy.set_host_memory(spec_.host_memory());
    std::vector<const CopyRoute*> timed;
    if (routes_.together.has_value()) timed.push_back(&*routes_.together);
    for (const CopyRoute& route : routes_.each) timed.push_back(&route);
    for (const CopyRoute* route : timed) {
      ASSIGN_OR_RETURN(measure::MeasurementOutcome outcome, TimeRoute(*route));
      v1::CopyPoint& point = *copy.add_points();
      point.set_route(route->label);
      for (int index : route->gpu_indices) point.add_gpus(index);
      *point.mutable_measurement() = outcome.measurement;
      point.set_link_peak_gbps(route->peak.gbps);
      point.set_link(route->peak.label);
      point.set_peer_access(PeerAccess(*route));
      for (const std::string& note : outcome.not_collected) {
        // "% of copy" is this workload's own figure (CopyResult), not the probe's reference.
        if (absl::StartsWith(note, "pct_of_measured_copy_bandwidth")) continue;
        if (std::find(result.not_collected().begin(), result.not_collected().end(), note) ==
            result.not_collected().end()) {
          result.add_not_collected(note);
        }
      }
      (*result.mutable_kernel_config())[absl::StrCat("route ", route->label)] = absl::StrFormat(
          "%.1f GB/s, %.1f%% of %s %.1f GB/s", outcome.measurement.bandwidth_gbps(),
          outcome.measurement.pct_of_spec_peak_bandwidth(), route->peak.label, route->peak.gbps);
    }
    SetHeadline(result);
    if (context_.tracing != nullptr &&
        context_.tracing->level() >= v1::TracingOptions::LEVEL_METRICS) {
      result.add_not_collected(
          "hardware metrics: copies run on the copy engines; there is no kernel to profile");
    }
    auto& config = *result.mutable_kernel_config();
    config["engine"] = "copy engines (cudaMemcpyAsync, cudaMemcpyPeerAsync)";
    config["bytes"] = absl::StrCat(bytes_);
    config["timing"] = pageable_ ? "host clock (pageable copies wait for their stream)"
                                 : "CUDA events behind the stream blocker";
    const int64_t l2_bytes = assignment_.gpus(0).l2_cache_bytes();
    if (spec_.direction() == v1::COPY_DIRECTION_DEVICE_TO_DEVICE &&
        assignment_.request().measurement().l2_mode() != v1::MeasurementOptions::L2_MODE_COLD &&
        2 * bytes_ <= l2_bytes) {
      // Hot, both buffers stay in L2 between samples: the figure can pass HBM's peak.
      config["l2"] = absl::StrCat("source and destination fit in the ", FormatBinaryBytes(l2_bytes),
                                  " L2 and it stays hot: L2 bandwidth, not HBM's (--l2 cold)");
    }

    context_.progress(v1::PHASE_VERIFICATION, 0, routes_.each.size(),
                      "checking every destination against its source's pattern");
    RETURN_IF_ERROR(Verify(*result.mutable_verification()));
    context_.progress(v1::PHASE_VERIFICATION, routes_.each.size(), routes_.each.size(),
                      result.verification().passed() ? "passed" : "FAILED");
    return result;
  }

 private:
  absl::Status EnablePeerAccess() {
    const int gpus = assignment_.gpus_size();
    peer_access_.assign(gpus, std::vector<bool>(gpus, false));
    if (spec_.direction() != v1::COPY_DIRECTION_PEER) return absl::OkStatus();
    for (int a = 0; a < gpus; ++a) {
      for (int b = 0; b < gpus; ++b) {
        if (a == b) continue;
        int can = 0;
        CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&can, a, b));
        if (can == 0) continue;  // the driver stages such copies through the host
        CUDA_RETURN_IF_ERROR(cudaSetDevice(a));
        const cudaError_t enabled = cudaDeviceEnablePeerAccess(b, 0);
        // A reused worker enabled it for an earlier experiment.
        if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
          (void)cudaGetLastError();
        } else {
          CUDA_RETURN_IF_ERROR(enabled);
        }
        peer_access_[a][b] = true;
      }
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
    return absl::OkStatus();
  }

  bool PeerAccess(const CopyRoute& route) const {
    if (spec_.direction() != v1::COPY_DIRECTION_PEER) return false;
    for (const CopyLeg& leg : route.legs) {
      if (!peer_access_[leg.source][leg.destination]) return false;
    }
    return true;
  }

  // What each GPU and the host hold, refused before anything is taken when it does not fit.
  absl::Status Allocate() {
    const bool host_copy = spec_.direction() == v1::COPY_DIRECTION_HOST_TO_DEVICE ||
                           spec_.direction() == v1::COPY_DIRECTION_DEVICE_TO_HOST;
    const int gpus = assignment_.gpus_size();
    const int64_t device_bytes = 2 * bytes_;
    // Host: each GPU's source and destination, plus one staging buffer to fill and check.
    const int64_t host_bytes = (host_copy ? 2 * gpus : 0) * bytes_ + bytes_;
    for (int d = 0; d < gpus; ++d) {
      CUDA_RETURN_IF_ERROR(cudaSetDevice(d));
      ASSIGN_OR_RETURN(const int64_t free_bytes, gpu::FreeDeviceMemoryBytes());
      RETURN_IF_ERROR(gpu::CheckFitsInFreeMemory(
          "copy", device_bytes,
          absl::StrCat("source and destination ", FormatBinaryBytes(bytes_), " each"), free_bytes,
          assignment_.gpus(d).index()));
    }
    RETURN_IF_ERROR(gpu::CheckFitsInHostMemory(
        "copy", host_bytes,
        host_copy ? "the host buffers and the staging buffer"
                  : "the staging buffer that fills and checks the GPUs"));
    ASSIGN_OR_RETURN(staging_, HostBuffer::Allocate(bytes_, /*pinned=*/false));
    buffers_.resize(gpus);
    for (int d = 0; d < gpus; ++d) {
      CUDA_RETURN_IF_ERROR(cudaSetDevice(d));
      GpuBuffers& buffers = buffers_[d];
      ASSIGN_OR_RETURN(buffers.source, DeviceBuffer::Allocate(bytes_));
      ASSIGN_OR_RETURN(buffers.destination, DeviceBuffer::Allocate(bytes_));
      FillCopyPattern(staging_.data(), bytes_, DeviceSourceTag(d));
      CUDA_RETURN_IF_ERROR(
          cudaMemcpy(buffers.source.data(), staging_.data(), bytes_, cudaMemcpyHostToDevice));
      if (host_copy) {
        ASSIGN_OR_RETURN(buffers.host_source, HostBuffer::Allocate(bytes_, !pageable_));
        ASSIGN_OR_RETURN(buffers.host_destination, HostBuffer::Allocate(bytes_, !pageable_));
        FillCopyPattern(buffers.host_source.data(), bytes_, HostSourceTag(d));
        // Touch every page now, so that the first timed copy does not fault them in.
        std::memset(buffers.host_destination.data(), 0, bytes_);
      }
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
    return absl::OkStatus();
  }

  void* Source(const CopyLeg& leg) const {
    return leg.source == kHost ? static_cast<void*>(buffers_[leg.destination].host_source.data())
                               : buffers_[leg.source].source.data();
  }
  void* Destination(const CopyLeg& leg) const {
    return leg.destination == kHost
               ? static_cast<void*>(buffers_[leg.source].host_destination.data())
               : buffers_[leg.destination].destination.data();
  }
  uint64_t SourceTag(const CopyLeg& leg) const {
    return leg.source == kHost ? HostSourceTag(leg.destination) : DeviceSourceTag(leg.source);
  }

  absl::Status Enqueue(const CopyLeg& leg, cudaStream_t stream) const {
    if (leg.source != kHost && leg.destination != kHost && leg.source != leg.destination) {
      return CudaStatus(cudaMemcpyPeerAsync(Destination(leg), leg.destination, Source(leg),
                                            leg.source, bytes_, stream),
                        "cudaMemcpyPeerAsync");
    }
    const cudaMemcpyKind kind = leg.source == kHost        ? cudaMemcpyHostToDevice
                                : leg.destination == kHost ? cudaMemcpyDeviceToHost
                                                           : cudaMemcpyDeviceToDevice;
    return CudaStatus(cudaMemcpyAsync(Destination(leg), Source(leg), bytes_, kind, stream),
                      "cudaMemcpyAsync");
  }

  // A stream on each leg's device, as the timing loop and the check use them.
  absl::StatusOr<std::vector<CudaStream>> LegStreams(const CopyRoute& route) const {
    std::vector<CudaStream> streams;
    for (const CopyLeg& leg : route.legs) {
      CUDA_RETURN_IF_ERROR(cudaSetDevice(leg.device()));
      ASSIGN_OR_RETURN(CudaStream stream, CudaStream::Create());
      streams.push_back(std::move(stream));
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
    return streams;
  }

  absl::StatusOr<measure::MeasurementOutcome> TimeRoute(const CopyRoute& route) const {
    ASSIGN_OR_RETURN(const std::vector<CudaStream> streams, LegStreams(route));
    std::vector<measure::TimedStream> timed;
    for (size_t i = 0; i < route.legs.size(); ++i) {
      const CopyLeg leg = route.legs[i];
      timed.push_back({.stream = streams[i].get(),
                       .device = leg.device(),
                       .launch = [this, leg](cudaStream_t on) { return Enqueue(leg, on); }});
    }
    measure::MeasurementSetup setup{
        .options = assignment_.request().measurement(),
        .bytes_per_launch = route.bytes,
        .gpu = assignment_.gpus(0),
        .scaffolding_marker =
            context_.tracing != nullptr ? context_.tracing->scaffolding_marker() : nullptr};
    // "% of peak" is against the links the route crosses; "% of copy" is this workload's own.
    setup.gpu.set_spec_peak_bandwidth_gbps(route.peak.gbps);
    setup.gpu.set_measured_copy_bandwidth_gbps(0);
    context_.progress(v1::PHASE_TIMED, 0, 1, route.label);
    if (pageable_) return TimeOnHost(setup, timed.front());
    return measure::MeasureStreams(setup, timed, context_.progress);
  }

  // A pageable copy returns once it is done (or staged), so it cannot wait behind the stream
  // blocker: each sample is the host's time for a batch of copies, each synchronised.
  absl::StatusOr<measure::MeasurementOutcome> TimeOnHost(const measure::MeasurementSetup& setup,
                                                         const measure::TimedStream& timed) const {
    const v1::MeasurementOptions& options = setup.options;
    const int units = std::max(1, options.eager_launches_per_sample());
    auto copy_batch = [&]() -> absl::Status {
      for (int i = 0; i < units; ++i) {
        RETURN_IF_ERROR(timed.launch(timed.stream));
        CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(timed.stream));
      }
      return absl::OkStatus();
    };
    CUDA_RETURN_IF_ERROR(cudaSetDevice(timed.device));
    context_.progress(v1::PHASE_WARMUP, 0, options.warmup_iterations(), "warming up");
    for (int i = 0; i < options.warmup_iterations(); ++i) RETURN_IF_ERROR(copy_batch());
    const auto criteria = measure::StopCriteriaFor(options);
    const int64_t max_samples = measure::MaxSamplesFor(options);
    std::vector<double> samples_us;
    RunningNoise running;
    const auto timed_start = Clock::now();
    std::string stop_reason;
    measure::SamplingState state;
    while (stop_reason.empty()) {
      const auto start = Clock::now();
      RETURN_IF_ERROR(copy_batch());
      const auto now = Clock::now();
      const double sample = std::chrono::duration<double, std::micro>(now - start).count() / units;
      samples_us.push_back(sample);
      running.Add(sample);
      state.samples = running.count();
      state.relative_noise = running.relative_noise();
      state.elapsed = absl::FromChrono(now - timed_start);
      state.measured += absl::FromChrono(now - start);
      stop_reason = measure::FirstStopReason(criteria, state);
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
    measure::MeasurementOutcome outcome;
    v1::GpuMeasurement& measurement = outcome.measurement;
    *measurement.mutable_kernel_time() = measure::ComputeTimingStats(samples_us);
    measurement.set_stop_reason(measure::DescribeStop(stop_reason, state, options));
    measurement.set_launches_per_sample(units);
    measurement.set_l2_mode(v1::MeasurementOptions::L2_MODE_HOT);
    measure::FillBandwidth(setup.bytes_per_launch, measurement.kernel_time().median_us(),
                           setup.gpu.spec_peak_bandwidth_gbps(), 0, measurement);
    context_.progress(v1::PHASE_TIMED, samples_us.size(), max_samples, measurement.stop_reason());
    outcome.not_collected.push_back(
        "event timing: pageable copies are timed on the host clock (each copy synchronised), "
        "launch and the driver's staging included; no throttling check, L2 not flushed");
    return outcome;
  }

  // The headline: every GPU at once where that ran, else the slowest route.
  void SetHeadline(v1::ExperimentResult& result) const {
    v1::CopyResult& copy = *result.mutable_copy();
    int headline = 0;
    if (routes_.together.has_value()) {
      copy.set_headline("every leased GPU at once");
    } else {
      for (int i = 1; i < copy.points_size(); ++i) {
        if (copy.points(i).measurement().bandwidth_gbps() <
            copy.points(headline).measurement().bandwidth_gbps()) {
          headline = i;
        }
      }
      copy.set_headline(copy.points_size() == 1
                            ? "the only route"
                            : absl::StrCat("the slowest of ", copy.points_size(), " routes"));
    }
    const v1::CopyPoint& point = copy.points(headline);
    *result.mutable_measurement() = point.measurement();
    copy.set_link(point.link());
    copy.set_link_peak_gbps(point.link_peak_gbps());
    // The first GPU alone against what the daemon's probe measured on it.
    const double probe = assignment_.gpus(0).measured_copy_bandwidth_gbps();
    if (spec_.direction() == v1::COPY_DIRECTION_DEVICE_TO_DEVICE && probe > 0) {
      const int first_alone = routes_.together.has_value() ? 1 : 0;
      copy.set_probe_copy_bandwidth_gbps(probe);
      copy.set_pct_of_probe_copy_bandwidth(
          100.0 * copy.points(first_alone).measurement().bandwidth_gbps() / probe);
    }
  }

  // Every route once more: destinations poisoned, the legs run together, each destination
  // compared byte for byte with its source's pattern.
  absl::Status Verify(v1::Verification& verification) const {
    int64_t mismatches = 0;
    std::string first_mismatch;
    int64_t checked = 0;
    for (const CopyRoute& route : routes_.each) {
      ASSIGN_OR_RETURN(const std::vector<CudaStream> streams, LegStreams(route));
      for (const CopyLeg& leg : route.legs) {
        if (leg.destination == kHost) {
          std::memset(Destination(leg), kPoisonByte, bytes_);
        } else {
          CUDA_RETURN_IF_ERROR(cudaSetDevice(leg.destination));
          CUDA_RETURN_IF_ERROR(cudaMemset(Destination(leg), kPoisonByte, bytes_));
          // The legs' streams do not wait for the default stream the memset ran on.
          CUDA_RETURN_IF_ERROR(cudaDeviceSynchronize());
        }
      }
      for (size_t i = 0; i < route.legs.size(); ++i) {
        CUDA_RETURN_IF_ERROR(cudaSetDevice(route.legs[i].device()));
        RETURN_IF_ERROR(Enqueue(route.legs[i], streams[i].get()));
      }
      for (const CudaStream& stream : streams) RETURN_IF_ERROR(stream.Synchronize());
      for (const CopyLeg& leg : route.legs) {
        const std::byte* copied = static_cast<const std::byte*>(Destination(leg));
        if (leg.destination != kHost) {
          CUDA_RETURN_IF_ERROR(
              cudaMemcpy(staging_.data(), Destination(leg), bytes_, cudaMemcpyDeviceToHost));
          copied = staging_.data();
        }
        ++checked;
        const int64_t offset = FirstCopyPatternMismatch(copied, bytes_, SourceTag(leg));
        if (offset < 0) continue;
        ++mismatches;
        if (first_mismatch.empty()) {
          first_mismatch = absl::StrCat(route.label, " differs from its source at byte ", offset);
        }
      }
    }
    CUDA_RETURN_IF_ERROR(cudaSetDevice(0));
    verification.set_checked(true);
    verification.set_passed(mismatches == 0);
    verification.set_method(
        "every route once more with its destinations poisoned, each destination compared byte "
        "for byte with its source's counter-based pattern");
    verification.set_mismatches(mismatches);
    verification.set_message(
        mismatches == 0
            ? absl::StrFormat("%d of %d copies exact", checked, checked)
            : absl::StrFormat("%d of %d copies differ; %s", mismatches, checked, first_mismatch));
    return absl::OkStatus();
  }

  const RunContext& context_;
  const worker_protocol::ExperimentAssignment& assignment_;
  const v1::CopySpec& spec_;
  const int64_t bytes_;
  const bool pageable_;
  CopyRoutes routes_;
  std::vector<std::vector<bool>> peer_access_;
  HostBuffer staging_;
  std::vector<GpuBuffers> buffers_;
};

}  // namespace

absl::StatusOr<v1::ExperimentResult> RunCopyWorkload(const RunContext& context) {
  // Activated first, so that every buffer is freed while a device is current.
  ASSIGN_OR_RETURN(ScopedCudaDevice device, ScopedCudaDevice::Activate(0));
  CopyRun run(context);
  return run.Run();
}

}  // namespace gpuprof::workloads
