#include "measure/host_cpu_load.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace gpuprof::measure {
namespace {

std::optional<HostCpuTimes> ReadProcStat() {
  std::ifstream file("/proc/stat");
  if (!file) return std::nullopt;
  std::stringstream text;
  text << file.rdbuf();
  return ParseProcStat(text.str());
}

double ProcessCpuSeconds() {
  timespec now{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now) != 0) return 0;
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

}  // namespace

std::optional<HostCpuTimes> ParseProcStat(absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (fields.empty() || fields[0] != "cpu") continue;
    // cpu user nice system idle iowait irq softirq steal [guest guest_nice]
    if (fields.size() < 9) return std::nullopt;
    int64_t values[8] = {};
    for (int i = 0; i < 8; ++i) {
      if (!absl::SimpleAtoi(fields[i + 1], &values[i])) return std::nullopt;
    }
    HostCpuTimes times;
    times.busy_ticks = values[0] + values[1] + values[2] + values[5] + values[6];
    times.steal_ticks = values[7];
    return times;
  }
  return std::nullopt;
}

double OtherCpus(const HostCpuTimes& start, const HostCpuTimes& end, double ticks_per_second,
                 double process_cpu_seconds, double wall_seconds) {
  if (wall_seconds <= 0 || ticks_per_second <= 0) return 0;
  const double busy =
      static_cast<double>(end.busy_ticks - start.busy_ticks) / ticks_per_second;
  const double stolen =
      static_cast<double>(end.steal_ticks - start.steal_ticks) / ticks_per_second;
  // The kernel counts in ticks (10 ms): a short window's figure is that coarse.
  return std::max(0.0, busy - process_cpu_seconds + stolen) / wall_seconds;
}

HostCpuLoadWindow::HostCpuLoadWindow()
    : start_(ReadProcStat()),
      wall_start_(absl::Now()),
      process_cpu_start_seconds_(ProcessCpuSeconds()) {}

std::optional<HostCpuLoad> HostCpuLoadWindow::Stop() const {
  const std::optional<HostCpuTimes> end = ReadProcStat();
  if (!start_.has_value() || !end.has_value()) return std::nullopt;
  HostCpuLoad load;
  load.other_cpus = OtherCpus(*start_, *end, static_cast<double>(sysconf(_SC_CLK_TCK)),
                              ProcessCpuSeconds() - process_cpu_start_seconds_,
                              absl::ToDoubleSeconds(absl::Now() - wall_start_));
  load.online_cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  return load;
}

}  // namespace gpuprof::measure
