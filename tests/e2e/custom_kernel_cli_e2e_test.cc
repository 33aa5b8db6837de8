// The CLI's side of custom kernels against the real daemon, on a host without GPUs (CI): a
// custom kernel is refused at admission as any GPU work is there (on a GPU host, queued); what
// the CLI checks itself (the file, its size, the kernel's name, a workload that takes no
// kernel) is refused before any RPC, so nothing reaches the daemon; `get --source` and `sass`
// say why an experiment of our own kernel has neither. The GPU half (a compiled kernel's source
// read back byte for byte, its SASS, the board) is in custom_kernel_gpu_e2e_test.
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kGather[] =
    "#include <gpuprof/contract.h>\n"
    "extern \"C\" __global__ void my_gather(const gpuprof::IndexParams p) {}\n";

class CustomKernelCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(MakeTempDir("gpuprofd"),
                                              std::vector<std::string>{"--cpu_slots=1"});
    const absl::Status started = daemon_->Start();
    ASSERT_TRUE(started.ok()) << started;
    files_ = MakeTempDir("kernels");
  }

  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = files_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  // Experiments the daemon holds, as `list -q` prints their ids.
  std::string Listed() {
    const CommandResult listed = daemon_->Cli({"list", "-q"});
    EXPECT_EQ(listed.exit_code, 0) << listed.err;
    return listed.out;
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::string files_;
};

TEST_F(CustomKernelCliTest, LocalChecksRefuseBeforeAnyRpcAndTheDaemonAdmitsAsForGpuWork) {
  const std::string gather = Write("my_gather.cu", kGather);
  const std::string two = Write("two.cu", "extern \"C\" __global__ void a() {}\n"
                                          "extern \"C\" __global__ void b() {}\n");
  const std::string big = Write("big.cu", std::string(256 * 1024 + 1, ' '));
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> local = {
      {{"submit", "index", "--kernel-file", files_ + "/missing.cu"},
       "missing.cu: No such file or directory"},
      {{"submit", "index", "--kernel-file", big},
       "262145 bytes, over the 256 KiB a kernel source may have"},
      {{"submit", "store", "--kernel-file", two},
       "two.cu declares 2 extern \"C\" __global__ functions (a, b): choose one with "
       "--kernel-name"},
      {{"submit", "index", "--kernel-file", gather, "--kernel-name", "c"},
       "--kernel-name c: my_gather.cu has no extern \"C\" __global__ function of that name"},
      {{"submit", "radix", "--kernel-file", gather}, "radix takes no custom kernel"},
      {{"submit", "index", "--block-threads", "128"}, "give its source with --kernel-file PATH"},
      {{"submit", "index", "--kernel-file", gather, "--kernel-option", "-I/etc"},
       "--kernel-option: "},
      {{"submit", "index", "--kernel-file", gather, "--sanitizer", "racecheck"},
       "--sanitizer racecheck needs --mode sanitize"},
      {{"submit", "attention", "--phase", "prefill", "--kernel-file", gather},
       "decode phase only"},
      {{"sweep", "index", "--kernel-file", absl::StrCat(gather, ",", gather)},
       "my_gather.cu is in the list twice"},
  };
  for (const Case& c : local) {
    const CommandResult result = daemon_->Cli(c.args);
    EXPECT_EQ(result.exit_code, 2) << absl::StrJoin(c.args, " ") << "\n" << result.err;
    EXPECT_THAT(result.err, HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
    // The CLI's own words: the daemon never saw the request.
    EXPECT_THAT(result.err, Not(HasSubstr("INVALID_ARGUMENT"))) << absl::StrJoin(c.args, " ");
  }
  EXPECT_EQ(Listed(), "");

  // A kernel the CLI accepts reaches admission, which treats it as the GPU work it is.
  const CommandResult gpus = daemon_->Cli({"gpus", "--json"});
  ASSERT_EQ(gpus.exit_code, 0) << gpus.err;
  const bool host_has_gpus = gpus.out.find("\"uuid\"") != std::string::npos;
  const CommandResult submitted = daemon_->Cli(
      {"submit", "index", "--tokens", "64", "--kernel-file", gather, "--mode", "test"});
  if (host_has_gpus) {
    EXPECT_THAT(submitted.out + submitted.err, HasSubstr("exp-"));
  } else {
    EXPECT_EQ(submitted.exit_code, 2) << submitted.err;
    EXPECT_THAT(submitted.err, HasSubstr("FAILED_PRECONDITION"));
    EXPECT_THAT(submitted.err, HasSubstr("index runs on a GPU and this host has none"));
    EXPECT_EQ(Listed(), "");
  }
}

TEST_F(CustomKernelCliTest, OurKernelHasNoSourceNorSassAndTheBoardRanksOnlyVerifiedRuns) {
  const CommandResult ran =
      daemon_->Cli({"submit", "radix", "--requests", "200", "--users", "2", "--follow"});
  ASSERT_EQ(ran.exit_code, 0) << ran.err;
  const CommandResult source = daemon_->Cli({"get", "exp-000001", "--source"});
  EXPECT_EQ(source.exit_code, 2);
  EXPECT_EQ(source.out, "");
  EXPECT_THAT(source.err, HasSubstr("exp-000001 ran our kernel: it has no source of its own"));
  const CommandResult sass = daemon_->Cli({"sass", "exp-000001"});
  EXPECT_EQ(sass.exit_code, 2);
  EXPECT_THAT(sass.err, HasSubstr("exp-000001 ran our kernel: SASS is shown for custom kernels"));
  // get shows no kernel block for ours.
  const CommandResult got = daemon_->Cli({"get", "exp-000001"});
  EXPECT_EQ(got.exit_code, 0) << got.err;
  EXPECT_THAT(got.out, Not(HasSubstr("kernel:\n")));
  // The board lists through the real List RPC: a shape nothing ran is empty, and a board's
  // shape flags are the workload's own.
  const CommandResult board = daemon_->Cli({"board", "radix", "--requests", "999"});
  EXPECT_EQ(board.exit_code, 0) << board.err;
  EXPECT_EQ(board.out, "no finished, verified radix experiments of this shape\n");
  EXPECT_EQ(daemon_->Cli({"board", "radix", "--tokens", "1"}).exit_code, 2);
  const CommandResult json = daemon_->Cli({"board", "radix", "--json"});
  EXPECT_EQ(json.exit_code, 0) << json.err;
}

}  // namespace
}  // namespace gpuprof::testing
