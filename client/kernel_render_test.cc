#include "client/kernel_render.h"

#include <string>

#include "client/render.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::Experiment Parse(const std::string& text) {
  v1::Experiment experiment;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &experiment));
  return experiment;
}

constexpr char kChecked[] = R"pb(
  id: "exp-000007" state: FINISHED
  request {
    index { hidden_dim: 7168 }
    custom_kernel { source: "SECRET SOURCE" file_name: "my_gather.cu" kernel_name: "my_gather"
                    dynamic_shared_bytes: 1024 }
  }
  result {
    custom_kernel {
      source_sha256: "3f2a9c0d1e4b5a6978695a4b3c2d1e0f00112233445566778899aabbccddeeff"
      kernel_name: "my_gather" registers_per_thread: 40 local_bytes_per_thread: 16
      static_shared_bytes: 2048 block_threads: 256 blocks: 4096 blocks_per_sm: 6
      theoretical_occupancy: 0.75 occupancy_limiter: "registers"
      checks { checked: true passed: true method: "exact reference, seed 1" }
      checks { checked: true passed: false mismatches: 3 message: "first mismatch at row 5 column 2: got 1, want 2" }
      guard_bytes_overwritten: 0
    }
  })pb";

TEST(RenderKernelBlock, SaysEverythingAboutTheKernel) {
  EXPECT_EQ(RenderKernelBlock(Parse(kChecked)),
            "kernel:\n"
            "  name:         my_gather\n"
            "  file:         my_gather.cu (13 bytes)\n"
            "  sha256:       3f2a9c0d1e4b\n"
            "  mode:         benchmark\n"
            "  launch:       256 threads x 4096 blocks, 1024 B dynamic shared\n"
            "  resources:    40 registers, 16 B spills (local) SPILLS, 2048 B static shared\n"
            "  occupancy:    6 blocks/SM, 75.0% (limited by registers)\n"
            "  checks:       input 1: passed\n"
            "                after timing: FAILED, 3 mismatches: first mismatch at row 5 column 2: "
            "got 1, want 2\n"
            "  guard bytes:  none overwritten\n");
  EXPECT_EQ(RenderKernelBlock(Parse(R"pb(id: "x" request { index {} })pb")), "");
}

TEST(RenderKernelBlock, GetShowsTheBlockButNotTheSource) {
  const std::string get = RenderExperiment(Parse(kChecked), absl::UnixEpoch(), absl::UTCTimeZone());
  EXPECT_THAT(get, HasSubstr("kernel:\n  name:         my_gather\n"));
  EXPECT_THAT(get, Not(HasSubstr("SECRET SOURCE")));
  EXPECT_THAT(get, HasSubstr("file_name: \"my_gather.cu\""));
}

TEST(RenderKernelBlock, SanitizerAndCompilerLines) {
  const v1::Experiment sanitized = Parse(R"pb(
    id: "exp-1" state: FINISHED
    request { store {} custom_kernel { source: "s" file_name: "s.cu" mode: MODE_SANITIZE
                                        sanitizer_tool: "racecheck" } }
    result { custom_kernel { registers_per_thread: 20 sanitizer_errors: 1
                             sanitizer_report: "========= RACECHECK\n========= ERROR SUMMARY: 1 error\n" } })pb");
  const std::string block = RenderKernelBlock(sanitized);
  EXPECT_THAT(block, HasSubstr("  mode:         sanitize (racecheck)\n"));
  EXPECT_THAT(block, HasSubstr("  sanitizer:    1 errors\n"
                               "                ========= RACECHECK\n"
                               "                ========= ERROR SUMMARY: 1 error\n"));
  const v1::Experiment broken = Parse(R"pb(
    id: "exp-2" state: FAILED
    request { index {} custom_kernel { source: "s" file_name: "bad.cu" } }
    result { custom_kernel { compile_log: "bad.cu(3): error: expected a \";\"\nbad.cu(9): error: x\n" } })pb");
  EXPECT_THAT(RenderKernelBlock(broken),
              HasSubstr("  compiler:  bad.cu(3): error: expected a \";\"\n"
                        "             bad.cu(9): error: x\n"));
  const v1::Experiment by_reason = Parse(R"pb(
    id: "exp-3" state: FAILED
    reason: "index: INVALID_ARGUMENT: bad.cu(3): error: x\nbad.cu(4): error: y"
    request { index {} custom_kernel { source: "s" file_name: "bad.cu" } })pb");
  EXPECT_THAT(RenderKernelBlock(by_reason),
              HasSubstr("  compiler:  index: INVALID_ARGUMENT: bad.cu(3): error: x\n"
                        "             bad.cu(4): error: y\n"));
  EXPECT_EQ(KernelLabel(Parse(kChecked)), "my_gather@3f2a9c0d1e4b (my_gather.cu)");
  EXPECT_EQ(KernelLabel(Parse(R"pb(request { index {} })pb")), "ours");
}

TEST(KernelSummary, OneLineForTheResult) {
  EXPECT_EQ(KernelSummary(Parse(kChecked).result().custom_kernel()),
            "my_gather@3f2a9c0d1e4b, 40 registers, 16 B spills, 6 blocks/SM (75.0%, limited by "
            "registers), checks 1/2 passed, guard bytes intact");
  EXPECT_THAT(RenderResult(Parse(kChecked).result()),
              HasSubstr("kernel:  my_gather@3f2a9c0d1e4b, 40 registers"));
}

TEST(RenderSass, OffsetsInstructionsSourceSamplesAndTheHottestMarked) {
  v1::ExperimentResult result;
  for (int i = 0; i < 7; ++i) {
    v1::SassLine* line = result.add_sass();
    line->set_pc_offset(16 * i);
    line->set_text(i == 6 ? "EXIT ;" : "LDG.E R2, [R4.64] ;");
    line->set_source_line(i < 2 ? "g.cu:14" : "g.cu:15");
    line->set_samples(i);
    if (i > 0) line->set_top_stall("long_scoreboard");
  }
  const std::string sass = RenderSass(result);
  EXPECT_THAT(sass, HasSubstr("   0000    LDG.E R2, [R4.64] ;  g.cu:14\n"));
  EXPECT_THAT(sass, HasSubstr(">  0060    EXIT ;               g.cu:15  6 (28.6%)  long_scoreboard\n"));
  EXPECT_THAT(sass, Not(HasSubstr(">  0010")));  // 1 sample: not among the 5 hottest
  EXPECT_THAT(sass, HasSubstr(">  0020"));
  EXPECT_THAT(sass, HasSubstr("21 PC samples"));
  v1::ExperimentResult plain;
  plain.add_sass()->set_text("EXIT ;");
  EXPECT_EQ(RenderSass(plain), "OFFSET  INSTRUCTION\n0000    EXIT ;\n");
  EXPECT_EQ(RenderSass(v1::ExperimentResult()), "");
}

TEST(NoSassReason, SaysWhy) {
  EXPECT_THAT(NoSassReason(Parse(R"pb(id: "e" request { index {} })pb")),
              HasSubstr("e ran our kernel"));
  EXPECT_THAT(NoSassReason(Parse(R"pb(id: "e" request { index {} custom_kernel { source: "s" } }
                                      result { custom_kernel { registers_per_thread: 8 }
                                               not_collected: "SASS: no nvdisasm on this box" })pb")),
              HasSubstr("e has no SASS: SASS: no nvdisasm on this box"));
}

}  // namespace
}  // namespace gpuprof::client
