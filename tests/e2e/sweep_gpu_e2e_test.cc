// A real sweep of the copy kernels on the GPU machine, through the real daemon and CLI: index
// and store over tokens x hidden size (or KV heads) spread over every GPU the host has, each
// point verified, and the plot written next to the test's outputs. Tagged gpu: CI skips it.
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "google/protobuf/util/json_util.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;

std::string OutputDir() {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  return dir != nullptr ? dir : ::testing::TempDir();
}

class SweepGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd"));
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
  }

  v1::Sweep RunSweep(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"sweep"};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const char* flag : {"--follow", "--format", "csv"}) argv.push_back(flag);
    const CommandResult run = daemon_->Cli(argv, "tester", absl::Minutes(30));
    EXPECT_EQ(run.exit_code, 0) << run.err << daemon_->Log();
    const std::string id = run.err.substr(10, run.err.find(':') - 10);
    const CommandResult got = daemon_->Cli({"sweep", "get", id, "--json"});
    v1::Sweep sweep;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(got.out, &sweep).ok()) << got.out;
    return sweep;
  }

  void CheckAndPlot(const v1::Sweep& sweep, const std::string& name) {
    ASSERT_EQ(sweep.state(), v1::SWEEP_FINISHED);
    std::set<int> gpus;
    for (const v1::SweepPoint& point : sweep.points()) {
      EXPECT_GT(point.experiment().result().measurement().bandwidth_gbps(), 0) << point.index();
      EXPECT_TRUE(point.experiment().result().verification().passed()) << point.index();
      for (int gpu : point.experiment().gpu_ids()) gpus.insert(gpu);
    }
    // Points spread over the free GPUs: on a 2-GPU machine both were used.
    RecordProperty(name + "_gpus_used", static_cast<int>(gpus.size()));
    // GPU machines may lack gnuplot (sweep_plot_test checks the plots on every CI run); the
    // % of copy bandwidth exists only where the daemon measured the copy bandwidth.
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
      RecordProperty(name + "_plot", "not drawn: no gnuplot on this machine");
    } else {
      bool has_copy_share = false;
      for (const v1::SweepPoint& point : sweep.points()) {
        has_copy_share = has_copy_share ||
            point.experiment().result().measurement().pct_of_measured_copy_bandwidth() > 0;
      }
      for (const char* y : {"figure", "pct-of-copy"}) {
        if (std::string(y) == "pct-of-copy" && !has_copy_share) continue;
        const std::string path = OutputDir() + "/" + name + "_" + y + ".svg";
        const CommandResult plot =
            daemon_->Cli({"sweep", "plot", sweep.id(), "-o", path, "--y", y});
        EXPECT_EQ(plot.exit_code, 0) << plot.err;
      }
    }
    const CommandResult table = daemon_->Cli({"sweep", "get", sweep.id(), "--format", "markdown"});
    std::FILE* file = std::fopen((OutputDir() + "/" + name + ".md").c_str(), "w");
    if (file != nullptr) {
      std::fputs(table.out.c_str(), file);
      std::fclose(file);
    }
  }

  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(SweepGpuTest, IndexOverTokensAndHiddenSizes) {
  CheckAndPlot(RunSweep({"index", "--tokens", "1,64,512,4Ki,16Ki,64Ki", "--hidden",
                         "2048,4096,5120,8192", "--dtype", "bf16", "--gpu-count", "1",
                         "--trace", "off"}),
               "index_sweep");
}

TEST_F(SweepGpuTest, StoreOverTokensAndKvHeads) {
  CheckAndPlot(RunSweep({"store", "--tokens", "1,64,512,4Ki,16Ki,64Ki", "--kv-heads", "8,32",
                         "--head-dim", "128", "--gpu-count", "1", "--trace", "off"}),
               "store_sweep");
}

}  // namespace
}  // namespace gpuprof::testing
