// How much of the host's CPU other processes took while a CPU benchmark ran. A CPU figure's
// timed passes agree with each other when the whole run is slowed alike (another process on
// the sibling hyperthread, a compile on a 2-core box), so their spread cannot tell such a run
// from a quiet one; the kernel's own accounting (/proc/stat) can. A run that shared the CPU
// says so, and its noise is not taken as known (workloads/headline).
#ifndef GPUPROF_MEASURE_HOST_CPU_LOAD_H_
#define GPUPROF_MEASURE_HOST_CPU_LOAD_H_

#include <cstdint>
#include <optional>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpuprof::measure {

// Busy and stolen CPU time of the whole host, from the first ("cpu") line of /proc/stat.
struct HostCpuTimes {
  // user + nice + system + irq + softirq, in clock ticks.
  int64_t busy_ticks = 0;
  // Time the hypervisor ran something else while a vCPU wanted to run, in clock ticks.
  int64_t steal_ticks = 0;
};

// Parses /proc/stat's text; nullopt when it has no "cpu" line of at least 8 numbers.
std::optional<HostCpuTimes> ParseProcStat(absl::string_view text);

struct HostCpuLoad {
  // CPUs' worth of time other processes were busy (and vCPUs stolen) on average over the
  // window: 1.0 is one CPU busy all along.
  double other_cpus = 0;
  int online_cpus = 0;
};

// Measures from construction to Stop(). Without /proc/stat (not Linux), Stop() is nullopt.
class HostCpuLoadWindow {
 public:
  HostCpuLoadWindow();
  std::optional<HostCpuLoad> Stop() const;

 private:
  std::optional<HostCpuTimes> start_;
  absl::Time wall_start_;
  double process_cpu_start_seconds_ = 0;
};

// What other processes took, from the host's busy time, this process's CPU time and the wall
// time between two readings: never below 0.
double OtherCpus(const HostCpuTimes& start, const HostCpuTimes& end, double ticks_per_second,
                 double process_cpu_seconds, double wall_seconds);

}  // namespace gpuprof::measure

#endif  // GPUPROF_MEASURE_HOST_CPU_LOAD_H_
