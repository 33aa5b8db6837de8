#include "measure/host_cpu_load.h"

#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace gpuprof::measure {
namespace {

TEST(HostCpuLoad, ParsesTheAggregateLineOfProcStat) {
  const std::optional<HostCpuTimes> times = ParseProcStat(
      "cpu  100 5 30 9000 40 2 3 7 0 0\n"
      "cpu0 50 2 15 4500 20 1 1 3 0 0\n"
      "intr 12345\n");
  ASSERT_TRUE(times.has_value());
  EXPECT_EQ(times->busy_ticks, 100 + 5 + 30 + 2 + 3);  // idle and iowait are not busy
  EXPECT_EQ(times->steal_ticks, 7);
  EXPECT_FALSE(ParseProcStat("cpu0 1 2 3 4 5 6 7 8\n").has_value());
  EXPECT_FALSE(ParseProcStat("cpu 1 2 3\n").has_value());
  EXPECT_FALSE(ParseProcStat("cpu 1 2 x 4 5 6 7 8\n").has_value());
}

TEST(HostCpuLoad, OthersAreTheHostsBusyTimeLessThisProcesssAndStolenTimeCounts) {
  const HostCpuTimes start{.busy_ticks = 1000, .steal_ticks = 10};
  const HostCpuTimes end{.busy_ticks = 1300, .steal_ticks = 60};
  // 2 s: the host was busy 3 s, this process 1 s of it, 0.5 s stolen.
  EXPECT_DOUBLE_EQ(OtherCpus(start, end, 100, 1.0, 2.0), (3.0 - 1.0 + 0.5) / 2.0);
  // Tick rounding can make this process's own time exceed the host's: never below 0.
  EXPECT_DOUBLE_EQ(OtherCpus(start, start, 100, 0.2, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(OtherCpus(start, end, 100, 1.0, 0.0), 0.0);
}

double OwnCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// A real reading: a thread of this process spinning is this process's time, not others'.
TEST(HostCpuLoad, ThisProcesssOwnWorkIsNotCountedAsOthers) {
  const double own_start = OwnCpuSeconds();
  const auto wall_start = std::chrono::steady_clock::now();
  HostCpuLoadWindow window;
  std::atomic<bool> stop{false};
  std::thread spinner([&stop] {
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  spinner.join();
  const std::optional<HostCpuLoad> load = window.Stop();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  const double own_cpus = (OwnCpuSeconds() - own_start) / wall;
  ASSERT_TRUE(load.has_value());
  EXPECT_GE(load->online_cpus, 1);
  EXPECT_GE(load->other_cpus, 0.0);
  // Whatever else runs on the host, the CPUs this process used (the spinner, as much of a CPU
  // as a busy host lets it have) are not in the figure: others had at most the rest, plus the
  // rounding of /proc/stat's 10 ms ticks over 0.3 s.
  EXPECT_LE(load->other_cpus, load->online_cpus - own_cpus + 0.15)
      << "this process used " << own_cpus << " CPUs over the window";
}

}  // namespace
}  // namespace gpuprof::measure
