#include "kernels/custom/user_kernel_compile.h"

#include <linux/landlock.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

extern "C" void __asan_init() __attribute__((weak));
extern "C" void __tsan_init() __attribute__((weak));

namespace gpuprof::kernels {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ContainsRegex;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr GpuArchitecture kHopper{9, 0};

std::string FreshDirectory(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string directory = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(directory);
  return directory;
}

// The contract header a submitted source includes, as the worker provides it.
const ProvidedHeader kContractHeader{"gpuprof/test_contract.h",
                                     "struct GatherParams { const float* in; const int* rows; "
                                     "float* out; int count; };\n"};

constexpr char kGoodSource[] =
    "#include <gpuprof/test_contract.h>\n"
    "extern \"C\" __global__ void gather_rows(const __grid_constant__ GatherParams p) {\n"
    "  const int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  int unused;\n"
    "  if (i < p.count) p.out[i] = p.in[p.rows[i]] * SCALE;\n"
    "}\n";

UserKernelCompileRequest GoodRequest() {
  return UserKernelCompileRequest{.source = kGoodSource,
                                  .file_name = "my_gather.cu",
                                  .kernel_name = "gather_rows",
                                  .options = {"-lineinfo", "-DSCALE=2.0f"},
                                  .headers = {kContractHeader},
                                  .arch = kHopper};
}

// No child of this process is left, running or a zombie.
bool NoChildLeft() {
  int status = 0;
  return waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD;
}

TEST(Sha256HexTest, MatchesKnownVectors) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Two blocks of padding (56 bytes) and a message longer than one block.
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(Sha256Hex(std::string(1000, 'a')),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(CompileUserKernelTest, CompilesThenHitsTheCache) {
  const JitCache cache(FreshDirectory("compile_then_hit"));
  auto first = CompileUserKernel(GoodRequest(), {}, cache);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->cache_hit);
  EXPECT_GT(first->compile_ms, 0);
  EXPECT_EQ(first->cubin.substr(0, 4), "\177ELF");
  EXPECT_EQ(first->lowered_name, "gather_rows");
  EXPECT_EQ(first->source_sha256, Sha256Hex(kGoodSource));
  EXPECT_THAT(
      first->cache_key,
      ContainsRegex("^user__my_gather__gather_rows__sm90__cuda[0-9]+\\.[0-9]+__[0-9a-f]{64}$"));
  // Warnings are kept, as NVRTC writes them.
  EXPECT_THAT(first->compile_log, HasSubstr("my_gather.cu(4): warning"));
  EXPECT_THAT(first->cache_write_error, IsEmpty());
  EXPECT_TRUE(NoChildLeft());

  auto second = CompileUserKernel(GoodRequest(), {}, cache);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->cache_hit);
  EXPECT_EQ(second->compile_ms, 0);
  EXPECT_EQ(second->cubin, first->cubin);
  EXPECT_EQ(second->compile_log, first->compile_log);
  EXPECT_EQ(second->cache_key, first->cache_key);

  // Option order does not matter; an option, a header or the architecture does.
  UserKernelCompileRequest reordered = GoodRequest();
  std::swap(reordered.options[0], reordered.options[1]);
  auto third = CompileUserKernel(reordered, {}, cache);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(third->cache_hit);
  UserKernelCompileRequest changed = GoodRequest();
  changed.options[1] = "-DSCALE=3.0f";
  EXPECT_NE(CompileUserKernel(changed, {}, cache)->cache_key, first->cache_key);
  changed = GoodRequest();
  changed.headers[0].text += "// changed\n";
  EXPECT_NE(CompileUserKernel(changed, {}, cache)->cache_key, first->cache_key);
  changed = GoodRequest();
  changed.arch = {8, 0};
  EXPECT_NE(CompileUserKernel(changed, {}, cache)->cache_key, first->cache_key);
}

TEST(CompileUserKernelTest, DamagedCacheFileIsCompiledAgain) {
  const JitCache cache(FreshDirectory("damaged_cache"));
  auto first = CompileUserKernel(GoodRequest(), {}, cache);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string path = absl::StrCat(cache.directory(), "/", first->cache_key, ".cubin");
  std::string contents;
  {
    std::ifstream file(path, std::ios::binary);
    contents.assign(std::istreambuf_iterator<char>(file), {});
  }
  ASSERT_FALSE(contents.empty());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << contents.substr(0, contents.size() / 2);
  auto second = CompileUserKernel(GoodRequest(), {}, cache);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->cache_hit);
  EXPECT_EQ(second->cubin, first->cubin);
}

TEST(CompileUserKernelTest, SourceErrorIsTheCompilersMessage) {
  UserKernelCompileRequest request = GoodRequest();
  request.source =
      "extern \"C\" __global__ void gather_rows(int* out) {\n"
      "  out[0] = 1\n"
      "}\n";
  const JitCache cache(FreshDirectory("source_error"));
  auto binary = CompileUserKernel(request, {}, cache);
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(binary.status().message(), HasSubstr("my_gather.cu(3): error: expected a \";\""));
  EXPECT_THAT(binary.status().message(), Not(HasSubstr("__nv_name_map")));
  EXPECT_TRUE(NoChildLeft());
}

// The compiler's messages are cut to a size an RPC and the store take (NVRTC stops after 100
// errors, but not after any number of warnings).
TEST(CompileUserKernelTest, FloodOfMessagesIsCut) {
  UserKernelCompileRequest request = GoodRequest();
  request.source = "extern \"C\" __global__ void gather_rows(int* out) {\n";
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&request.source, "  int unused_", i, ";\n");
  request.source += "}\n";
  const JitCache cache(FreshDirectory("flood"));
  auto binary = CompileUserKernel(request, {}, cache);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_THAT(binary->compile_log, HasSubstr("my_gather.cu(2): warning"));
  EXPECT_THAT(binary->compile_log, HasSubstr("more bytes of compiler messages left out"));
  EXPECT_LT(binary->compile_log.size(), 70'000u);
}

TEST(CompileUserKernelTest, UnknownKernelNameIsRefusedClearly) {
  UserKernelCompileRequest request = GoodRequest();
  request.kernel_name = "scatter_rows";
  const JitCache cache(FreshDirectory("unknown_name"));
  auto binary = CompileUserKernel(request, {}, cache);
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(binary.status().message(),
            "my_gather.cu defines no extern \"C\" __global__ function named scatter_rows");

  // A __device__ function of that name is not a kernel either.
  request.source =
      absl::StrCat(kGoodSource, "extern \"C\" __device__ int scatter_rows(int x) { return x; }\n");
  binary = CompileUserKernel(request, {}, cache);
  EXPECT_THAT(binary.status().message(), HasSubstr("defines no extern \"C\" __global__"));
}

TEST(CompileUserKernelTest, KernelWithoutExternCIsRefused) {
  UserKernelCompileRequest request = GoodRequest();
  request.source = "__global__ void gather_rows(int* out) { out[0] = 1; }\n";
  const JitCache cache(FreshDirectory("mangled"));
  auto binary = CompileUserKernel(request, {}, cache);
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(binary.status().message(), HasSubstr("without extern \"C\""));
}

TEST(CompileUserKernelTest, RefusesBadNamesAndOptionsBeforeCompiling) {
  const JitCache cache(FreshDirectory("bad_request"));
  UserKernelCompileRequest request = GoodRequest();
  request.kernel_name = "gather_rows; #pragma x";
  EXPECT_EQ(CompileUserKernel(request, {}, cache).status().code(),
            absl::StatusCode::kInvalidArgument);
  request = GoodRequest();
  request.options.push_back("-I/etc");
  EXPECT_EQ(CompileUserKernel(request, {}, cache).status().code(),
            absl::StatusCode::kInvalidArgument);
  request = GoodRequest();
  request.source.clear();
  EXPECT_EQ(CompileUserKernel(request, {}, cache).status().code(),
            absl::StatusCode::kInvalidArgument);
}

bool KernelHasLandlock() {
  return syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION) > 0;
}

TEST(CompileUserKernelTest, SourceCannotIncludeTheHostsFiles) {
  if (!KernelHasLandlock()) GTEST_SKIP() << "this kernel has no Landlock";
  const std::string secret_path = FreshDirectory("secret.h");
  std::ofstream(secret_path) << "int leaked_secret_7f3a = 1;\n";
  UserKernelCompileRequest request = GoodRequest();
  request.source = absl::StrCat("#include \"", secret_path, "\"\n", kGoodSource);
  const JitCache cache(FreshDirectory("include_host_file"));
  auto binary = CompileUserKernel(request, {}, cache);
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(binary.status().message(),
              AllOf(HasSubstr("my_gather.cu(1): catastrophic error: cannot open source file"),
                    Not(HasSubstr("leaked_secret_7f3a"))));
}

// Some 3,600 class instantiations: most of a second of compiling, far past the limit below.
constexpr char kSlowSource[] =
    "template <int A, int B> struct Grid {\n"
    "  static constexpr long long value =\n"
    "      (Grid<A - 1, B>::value + Grid<A, B - 1>::value) % 1000003;\n"
    "};\n"
    "template <int A> struct Grid<A, 0> { static constexpr long long value = 1; };\n"
    "template <int B> struct Grid<0, B> { static constexpr long long value = 1; };\n"
    "extern \"C\" __global__ void slow(long long* out) { *out = Grid<60, 60>::value; }\n";

TEST(CompileUserKernelTest, CompilePastTheWallLimitIsKilledAndReaped) {
  const UserKernelCompileRequest request{
      .source = kSlowSource, .file_name = "slow.cu", .kernel_name = "slow", .arch = kHopper};
  const JitCache cache(FreshDirectory("wall_limit"));
  auto binary = CompileUserKernel(request, {.wall_time = absl::Milliseconds(50)}, cache);
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(binary.status().message(), "compiling slow.cu took longer than the 50 ms limit");
  EXPECT_TRUE(NoChildLeft());
  auto contents = cache.Contents();
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->entries, 0);
}

bool RunningUnderSanitizer() {
  // Weak references: resolved when a sanitizer's runtime is linked in.
  return &__asan_init != nullptr || &__tsan_init != nullptr;
}

TEST(CompileUserKernelTest, CompilePastTheMemoryLimitIsResourceExhausted) {
  if (RunningUnderSanitizer()) GTEST_SKIP() << "no address-space limit under a sanitizer";
  const UserKernelCompileRequest request{
      .source = kSlowSource, .file_name = "slow.cu", .kernel_name = "slow", .arch = kHopper};
  const JitCache cache(FreshDirectory("memory_limit"));
  auto binary = CompileUserKernel(request, {.memory_bytes = int64_t{16} << 20}, cache);
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kResourceExhausted) << binary.status();
  EXPECT_THAT(binary.status().message(), HasSubstr("16.0 MiB memory limit"));
  EXPECT_TRUE(NoChildLeft());
}

TEST(ParseNvdisasmListingTest, TakesTheFunctionsInstructionsAndLines) {
  constexpr char kListing[] =
      "\t.section\t.text.other,\"ax\",@progbits\n"
      "other:\n"
      ".text.other:\n"
      "        /*0000*/                   LDC R1, c[0x0][0x28] ;\n"
      "        /*0010*/                   EXIT ;\n"
      "\t.section\t.text.gather_rows,\"ax\",@progbits\n"
      "\t.sectioninfo\t@\"SHI_REGISTERS=12\"\n"
      "gather_rows:\n"
      ".text.gather_rows:\n"
      "\t//## File \"/my_gather.cu\", line 3\n"
      "        /*0000*/                   LDC R1, c[0x0][0x28] ;    /* 0x00000a00ff017b82 */\n"
      "                                                             /* 0x000fe40000000800 */\n"
      "\t//## File \"my_gather.cu\", line 5 inlined at \"my_gather.cu\", line 9\n"
      "        /*0010*/              @!P0 EXIT ;\n"
      ".L_x_0:\n"
      "        /*0020*/                   BRA `(.L_x_0);\n"
      "        /*0030*/                   NOP;\n"
      "        /*0040*/                   NOP;\n"
      ".L_x_1:\n";
  const std::vector<SassInstruction> sass = ParseNvdisasmListing(kListing, "gather_rows", 100);
  ASSERT_EQ(sass.size(), 3u);
  EXPECT_EQ(sass[0].pc_offset, 0);
  EXPECT_EQ(sass[0].text, "LDC R1, c[0x0][0x28]");
  EXPECT_EQ(sass[0].source_line, "my_gather.cu:3");
  EXPECT_EQ(sass[1].pc_offset, 0x10);
  EXPECT_EQ(sass[1].text, "@!P0 EXIT");
  EXPECT_EQ(sass[1].source_line, "my_gather.cu:5");
  EXPECT_EQ(sass[2].pc_offset, 0x20);
  EXPECT_EQ(sass[2].text, "BRA `(.L_x_0)");
  EXPECT_EQ(ParseNvdisasmListing(kListing, "gather_rows", 2).size(), 2u);
  EXPECT_THAT(ParseNvdisasmListing(kListing, "other", 100),
              AllOf(::testing::SizeIs(2), Contains(Field(&SassInstruction::text, "EXIT"))));
  EXPECT_THAT(ParseNvdisasmListing(kListing, "missing", 100), IsEmpty());
}

TEST(DisassembleCubinTest, ListsTheCompiledKernelsInstructions) {
  const JitCache cache(FreshDirectory("disassemble"));
  auto binary = CompileUserKernel(GoodRequest(), {}, cache);
  ASSERT_TRUE(binary.ok()) << binary.status();
  auto sass = DisassembleCubin(binary->cubin, "gather_rows");
  if (absl::IsNotFound(sass.status()) &&
      absl::StrContains(sass.status().message(), "no nvdisasm")) {
    GTEST_SKIP() << sass.status();
  }
  ASSERT_TRUE(sass.ok()) << sass.status();
  EXPECT_THAT(*sass, Contains(Field(&SassInstruction::text, HasSubstr("EXIT"))));
  // Compiled with -lineinfo: instructions name their source line.
  EXPECT_THAT(*sass, Contains(Field(&SassInstruction::source_line,
                                    ContainsRegex("^my_gather\\.cu:[0-9]+$"))));
  EXPECT_TRUE(NoChildLeft());
}

}  // namespace
}  // namespace gpuprof::kernels
