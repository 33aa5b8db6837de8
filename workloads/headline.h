// The one figure that sums up a finished experiment, with what bounds it and how much it can be
// trusted: `list`, `get`, sweep tables, plots, compare and the daemon's metrics all show this.
// Each workload's spec chooses its headline (WorkloadSpec::headline) from the builders below;
// HeadlineOf (spec_table.h) asks the experiment's spec. CUDA-free: the CLI and the daemon link it.
#ifndef GPUPROF_WORKLOADS_HEADLINE_H_
#define GPUPROF_WORKLOADS_HEADLINE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "gpuprof/v1/experiment.pb.h"

namespace gpuprof::workloads {

// What limits the figure, and so which hint goes with it (as nvbench's summaries do).
enum class HeadlineBound {
  kBandwidth,  // GB/s, and % of the copy bandwidth measured on the GPU (or of a link's peak)
  kCompute,    // TFLOP/s, and % of the GPU's spec peak
  kLatency,    // µs
  kCpuRate,    // operations per second on the CPU
};

// "bandwidth-bound", "compute-bound", "latency-bound", "CPU work".
std::string HeadlineBoundName(HeadlineBound bound);

struct Headline {
  std::string name;  // "bandwidth", "tflops", "busbw", "match_ops"
  std::string unit;  // "GB/s", "TFLOP/s", "op/s", "us"
  double value = 0;
  bool higher_is_better = true;
  // stddev / mean of the samples (or timed passes) behind the value; nullopt when nothing
  // measured it, which is not the same as a noise of 0.
  std::optional<double> relative_noise;
  // Whether the noise also bounds how far another run lands. A GPU kernel's samples do (identical
  // sweeps on an H100 agree within 0.1%); a CPU rate's passes do not: on the same idle VM,
  // identical radix runs came out up to 2x apart with 3-15% spread between their own passes.
  // compare judges such a figure only with a run-to-run noise the user gives it.
  bool noise_covers_runs = true;
  // Why the noise is unknown though samples measured one ("other processes took 1.4 of 2
  // CPUs while it ran"); empty otherwise.
  std::string noise_unknown_because;
  // The samples (GPU) or timed passes (CPU) the value and its noise rest on; 0 when unknown.
  int64_t samples = 0;
  // The median time behind the figure, in microseconds (0 when not timed).
  double median_us = 0;
  HeadlineBound bound = HeadlineBound::kBandwidth;
  // The figure as a percentage of what bounds it (0 when unknown) and what that is: "copy" (the
  // copy bandwidth measured on the GPU), "peak" (the spec peak), a link ("PCIe Gen5 x16").
  double pct_of_bound = 0;
  std::string bound_reference;
  // Attention: "prefill" or "decode"; empty for other workloads.
  std::string phase;
  // Both rates where the run measured them (0 when it did not), whichever is the headline.
  double bandwidth_gbps = 0;
  double tflops = 0;
  // % of the copy bandwidth measured on the GPU (0 when unknown), what `sweep plot --y
  // pct-of-copy` draws.
  double pct_of_copy_bandwidth = 0;
};

// The builders a spec chooses from; nullopt when the result lacks the figure.
// Bytes moved per second by the kernel (index, store, attention decode).
std::optional<Headline> BandwidthHeadline(const v1::Experiment& experiment);
// FLOP/s (attention prefill).
std::optional<Headline> ComputeHeadline(const v1::Experiment& experiment);
// A collective's bus bandwidth at the largest size.
std::optional<Headline> BusBandwidthHeadline(const v1::Experiment& experiment);
// A CPU figure measured while other processes took this many of the host's CPUs on average
// (or more) shared its CPU: its noise is unknown.
inline constexpr double kSharedCpuOtherCpus = 0.5;
// Radix: match_prefix operations per second, with the noise of its timed passes (unknown when
// the CPU was shared, above).
std::optional<Headline> MatchRateHeadline(const v1::Experiment& experiment);
// Copy: bandwidth against the spec peak of the link the bytes crossed.
std::optional<Headline> LinkBandwidthHeadline(const v1::Experiment& experiment);

// For a result whose workload no spec of this build knows: chosen by the result's type.
std::optional<Headline> HeadlineByResultType(const v1::Experiment& experiment);

}  // namespace gpuprof::workloads

#endif  // GPUPROF_WORKLOADS_HEADLINE_H_
