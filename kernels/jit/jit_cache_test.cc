#include "kernels/jit/jit_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::kernels {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr GpuArchitecture kHopper{9, 0};

std::string FreshDirectory(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string directory = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(directory);
  return directory;
}

// A small source set of our own: the cache and compiler are tested apart from any kernel family.
constexpr KernelSource kTestSources[] = {
    {"test/fill_params.h", "struct FillParams { int* out; int value; };\n"},
    {"test/fill_kernel.cuh",
     "#include \"test/fill_params.h\"\n"
     "namespace gpuprof::test {\n"
     "template <int kThreads>\n"
     "__global__ void __launch_bounds__(kThreads) FillKernel(const __grid_constant__ FillParams p) {\n"
     "  static_assert(kThreads == 32, \"one warp fills\");\n"
     "  p.out[threadIdx.x] = p.value;\n"
     "}\n"
     "}  // namespace gpuprof::test\n"},
};

JitRequest TestJitRequest() {
  return JitRequest{.kernel_name = "fill",
                    .template_key = "t32",
                    .source_path = "test/fill_kernel.cuh",
                    .name_expression = "gpuprof::test::FillKernel<32>",
                    .sources = kTestSources};
}

TEST(JitCacheDirectoryTest, FollowsOverrideRootXdgAndHome) {
  EXPECT_EQ(JitCacheDirectoryFor("/srv/jit", "/x", "/home/a", true), "/srv/jit");
  EXPECT_EQ(JitCacheDirectoryFor(nullptr, "/x", "/home/a", true), "/var/cache/gpuprof/jit");
  EXPECT_EQ(JitCacheDirectoryFor("", "/x", "/home/a", false), "/x/gpuprof/jit");
  EXPECT_EQ(JitCacheDirectoryFor(nullptr, "", "/home/a", false), "/home/a/.cache/gpuprof/jit");
  EXPECT_EQ(JitCacheDirectoryFor(nullptr, nullptr, nullptr, false), "/tmp/gpuprof-jit");
}

TEST(JitCacheKeyTest, NamesKernelArgumentsArchitectureCudaAndSources) {
  EXPECT_EQ(JitCacheKey("index_gather", "row8192_s1_v16_t128_o1_pdl0", kHopper, "13.0", 0xabc),
            "index_gather__row8192_s1_v16_t128_o1_pdl0__sm90__cuda13.0__0000000000000abc");
  EXPECT_NE(JitCacheKey("k", "a", {8, 0}, "13.0", 1), JitCacheKey("k", "a", kHopper, "13.0", 1));
  EXPECT_NE(JitCacheKey("k", "a", kHopper, "12.8", 1), JitCacheKey("k", "a", kHopper, "13.0", 1));
}

TEST(KernelSourcesTest, FingerprintFollowsPathsAndTexts) {
  const uint64_t fingerprint = KernelSourcesFingerprint(kTestSources);
  EXPECT_NE(fingerprint, 0u);
  EXPECT_EQ(fingerprint, KernelSourcesFingerprint(kTestSources));
  const KernelSource renamed[] = {{"test/other.h", kTestSources[0].text}, kTestSources[1]};
  EXPECT_NE(KernelSourcesFingerprint(renamed), fingerprint);
  const KernelSource edited[] = {kTestSources[0], {kTestSources[1].path, "// changed"}};
  EXPECT_NE(KernelSourcesFingerprint(edited), fingerprint);
}

// NVRTC needs no GPU: the test kernel compiles for the architectures the daemon runs on.
TEST(CompileWithNvrtcTest, CompilesForAmpereAndHopper) {
  for (GpuArchitecture arch : {GpuArchitecture{8, 0}, kHopper}) {
    auto binary = CompileWithNvrtc(TestJitRequest(), arch);
    ASSERT_TRUE(binary.ok()) << binary.status();
    EXPECT_FALSE(binary->cubin.empty());
    EXPECT_THAT(binary->lowered_name, StartsWith("_Z"));
    EXPECT_GT(binary->compile_ms, 0);
  }
}

TEST(CompileWithNvrtcTest, UnknownSourceIsAnError) {
  JitRequest request = TestJitRequest();
  request.source_path = "kernels/missing.cuh";
  EXPECT_THAT(CompileWithNvrtc(request, kHopper).status().message(),
              HasSubstr("no embedded kernel source named kernels/missing.cuh"));
}

TEST(CompileWithNvrtcTest, CompileErrorCarriesTheLog) {
  JitRequest request = TestJitRequest();
  request.name_expression = "gpuprof::test::FillKernel<64>";
  const absl::Status status = CompileWithNvrtc(request, kHopper).status();
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("one warp fills"));
}

TEST(JitCacheTest, MissCompilesAndStoresThenHitLoads) {
  const JitCache cache(FreshDirectory("jit_miss_hit"));
  EXPECT_EQ(cache.Contents()->entries, 0);
  const JitRequest request = TestJitRequest();
  auto first = cache.GetOrCompile(request, kHopper);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit);
  EXPECT_TRUE(first->cache_write_error.empty()) << first->cache_write_error;
  EXPECT_TRUE(std::filesystem::exists(first->cache_path));

  auto second = cache.GetOrCompile(request, kHopper);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->compile_ms, 0);
  EXPECT_EQ(second->cache_key, first->cache_key);
  EXPECT_EQ(second->lowered_name, first->lowered_name);
  EXPECT_EQ(second->cubin, first->cubin);

  // Another architecture is another entry.
  auto ampere = cache.GetOrCompile(request, {8, 0});
  ASSERT_TRUE(ampere.ok()) << ampere.status();
  EXPECT_FALSE(ampere->cache_hit);
  const auto contents = cache.Contents();
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->entries, 2);
  EXPECT_GT(contents->bytes, static_cast<int64_t>(first->cubin.size()));
}

TEST(JitCacheTest, DamagedEntryIsCompiledAgain) {
  const JitCache cache(FreshDirectory("jit_damaged"));
  const JitRequest request = TestJitRequest();
  auto first = cache.GetOrCompile(request, kHopper);
  ASSERT_TRUE(first.ok()) << first.status();
  std::ofstream(first->cache_path, std::ios::trunc) << "not a cache file";
  auto again = cache.GetOrCompile(request, kHopper);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->cache_hit);
  EXPECT_TRUE(cache.GetOrCompile(request, kHopper)->cache_hit);
}

TEST(JitCacheTest, UnwritableDirectoryStillCompiles) {
  const std::string file = FreshDirectory("jit_not_a_directory");
  std::ofstream(file) << "a file where the directory should be";
  const JitCache cache(file + "/jit");
  auto binary = cache.GetOrCompile(TestJitRequest(), kHopper);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_FALSE(binary->cache_write_error.empty());
}

}  // namespace
}  // namespace gpuprof::kernels
