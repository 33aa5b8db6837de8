#include "kernels/custom/user_kernel_compile.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <nvrtc.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "common/byte_format.h"
#include "common/status_macros.h"

extern char** environ;

// Weak references: resolved when a sanitizer's runtime is linked in (the TSan build hides
// __SANITIZE_THREAD__ from the code, see .bazelrc), null otherwise.
extern "C" void __asan_init() __attribute__((weak));
extern "C" void __tsan_init() __attribute__((weak));
extern "C" void __msan_init() __attribute__((weak));

namespace gpuprof::kernels {
namespace {

namespace fs = std::filesystem;

// First line of every cache file of a submitted kernel; bump it when the format changes.
constexpr char kCacheFileMagic[] = "GPUPROF-USER-KERNEL 1\n";
constexpr char kCacheFileSuffix[] = ".cubin";  // as the JIT cache's, so Contents() counts ours
constexpr char kNameExpressionFile[] = "__nv_name_map";  // where NVRTC reports name expressions
constexpr int kMaxCallerCompileOptions = 32;
// What a compile's child may send back (cubin and log); a source can ask for a huge cubin.
constexpr uint64_t kMaxChildOutputBytes = uint64_t{256} << 20;
constexpr size_t kMaxSassInstructions = 50'000;
// The compiler's messages kept: enough for people, small enough for an RPC and the store.
constexpr size_t kMaxCompileLogBytes = 64 << 10;
constexpr uint64_t kMaxDisassemblyBytes = uint64_t{64} << 20;
constexpr absl::Duration kDisassemblyTimeout = absl::Seconds(30);

bool BuiltWithSanitizer() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
  return true;
#endif
#endif
  return &__asan_init != nullptr || &__tsan_init != nullptr || &__msan_init != nullptr;
}

// "60 s", "50 ms": how the limits read in messages.
std::string FormatLimit(absl::Duration duration) {
  const int64_t ms = absl::ToInt64Milliseconds(duration);
  if (ms % 1000 == 0) return absl::StrCat(ms / 1000, " s");
  return absl::StrCat(ms, " ms");
}

// --- SHA-256 (FIPS 180-4) ------------------------------------------------------------------

class Sha256 {
 public:
  void Update(absl::string_view bytes) {
    for (unsigned char byte : bytes) {
      block_[block_size_++] = byte;
      if (block_size_ == 64) {
        Compress();
        block_size_ = 0;
      }
    }
    length_bytes_ += bytes.size();
  }

  std::string HexDigest() {
    const uint64_t length_bits = length_bytes_ * 8;
    block_[block_size_++] = 0x80;
    if (block_size_ > 56) {
      while (block_size_ < 64) block_[block_size_++] = 0;
      Compress();
      block_size_ = 0;
    }
    while (block_size_ < 56) block_[block_size_++] = 0;
    for (int i = 7; i >= 0; --i)
      block_[block_size_++] = static_cast<uint8_t>(length_bits >> (8 * i));
    Compress();
    std::string hex;
    hex.reserve(64);
    for (uint32_t word : state_) absl::StrAppend(&hex, absl::Hex(word, absl::kZeroPad8));
    return hex;
  }

 private:
  static uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

  void Compress() {
    static constexpr uint32_t kRound[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2};
    uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (uint32_t{block_[4 * i]} << 24) | (uint32_t{block_[4 * i + 1]} << 16) |
             (uint32_t{block_[4 * i + 2]} << 8) | uint32_t{block_[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state_[0], b = state_[1], c = state_[2], d = state_[3];
    uint32_t e = state_[4], f = state_[5], g = state_[6], h = state_[7];
    for (int i = 0; i < 64; ++i) {
      const uint32_t t1 =
          h + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + kRound[i] + w[i];
      const uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state_[0] += a;
    state_[1] += b;
    state_[2] += c;
    state_[3] += d;
    state_[4] += e;
    state_[5] += f;
    state_[6] += g;
    state_[7] += h;
  }

  std::array<uint32_t, 8> state_ = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  std::array<uint8_t, 64> block_{};
  size_t block_size_ = 0;
  uint64_t length_bytes_ = 0;
};

// --- The cache -----------------------------------------------------------------------------

// Keeps what a file name may hold, at most `max_size` characters.
std::string FileNamePart(absl::string_view text, size_t max_size) {
  std::string part;
  for (char c : text) {
    if (part.size() == max_size) break;
    part += absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.' ? c : '_';
  }
  return part.empty() ? "_" : part;
}

// "user__my_gather__gather_rows__sm90__cuda13.0__<sha256>": readable, a valid file name, and
// every input of the compile behind the hash (each field length-prefixed, so that no two
// requests share a byte stream).
std::string UserKernelCacheKey(const UserKernelCompileRequest& request,
                               const std::vector<std::string>& options,
                               absl::string_view nvrtc_version) {
  Sha256 hash;
  auto field = [&hash](absl::string_view bytes) {
    hash.Update(absl::StrCat(bytes.size(), ":"));
    hash.Update(bytes);
  };
  field("gpuprof-user-kernel 1");
  field(request.source);
  field(request.file_name);
  field(request.kernel_name);
  std::vector<std::string> sorted_options = options;
  std::sort(sorted_options.begin(), sorted_options.end());
  field(absl::StrCat(sorted_options.size()));
  for (const std::string& option : sorted_options) field(option);
  std::vector<const ProvidedHeader*> headers;
  for (const ProvidedHeader& header : request.headers) headers.push_back(&header);
  std::sort(headers.begin(), headers.end(),
            [](const ProvidedHeader* a, const ProvidedHeader* b) { return a->name < b->name; });
  field(absl::StrCat(headers.size()));
  for (const ProvidedHeader* header : headers) {
    field(header->name);
    field(header->text);
  }
  field(absl::StrCat(request.arch.major, ".", request.arch.minor));
  field(nvrtc_version);
  absl::string_view stem = request.file_name;
  if (const size_t dot = stem.rfind('.'); dot != absl::string_view::npos)
    stem = stem.substr(0, dot);
  return absl::StrFormat("user__%s__%s__sm%d%d__cuda%s__%s", FileNamePart(stem, 40),
                         FileNamePart(request.kernel_name, 60), request.arch.major,
                         request.arch.minor, FileNamePart(nvrtc_version, 16), hash.HexDigest());
}

// A cache file: the magic line, then the key, the lowered name and the sizes of the log and the
// cubin, one a line, then the log and the cubin. A file is used only when all of it agrees
// (key, sizes, an ELF cubin): anything else is a miss and is compiled again.
bool ReadCacheFile(const std::string& path, const std::string& key, UserKernelBinary& binary) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::stringstream contents;
  contents << file.rdbuf();
  const std::string data = contents.str();
  absl::string_view rest = data;
  if (!absl::ConsumePrefix(&rest, kCacheFileMagic)) return false;
  std::array<absl::string_view, 4> lines;  // key, lowered name, log size, cubin size
  for (absl::string_view& line : lines) {
    const size_t end = rest.find('\n');
    if (end == absl::string_view::npos) return false;
    line = rest.substr(0, end);
    rest.remove_prefix(end + 1);
  }
  uint64_t log_size = 0;
  uint64_t cubin_size = 0;
  if (lines[0] != key || lines[1].empty() || !absl::SimpleAtoi(lines[2], &log_size) ||
      !absl::SimpleAtoi(lines[3], &cubin_size) || rest.size() != log_size + cubin_size ||
      !absl::StartsWith(rest.substr(log_size), "\177ELF")) {
    return false;
  }
  binary.lowered_name = std::string(lines[1]);
  binary.compile_log = std::string(rest.substr(0, log_size));
  binary.cubin = std::string(rest.substr(log_size));
  return true;
}

// The cache entry: the magic, the key, the lowered name, the log's and the cubin's sizes, then
// the log and the cubin (ReadCacheFile checks every part).
std::string CacheFileContents(const UserKernelBinary& binary) {
  return absl::StrCat(kCacheFileMagic, binary.cache_key, "\n", binary.lowered_name, "\n",
                      binary.compile_log.size(), "\n", binary.cubin.size(), "\n",
                      binary.compile_log, binary.cubin);
}

// --- Child processes -----------------------------------------------------------------------

class ScopedFd {
 public:
  explicit ScopedFd(int fd = -1) : fd_(fd) {}
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  ~ScopedFd() { Close(); }
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

enum class ReadEnd { kEndOfFile, kDeadline, kTooLarge, kError };

// Reads `fd` until its writer closes it, the deadline passes or more than `max_bytes` came.
ReadEnd ReadUntilClosed(int fd, absl::Time deadline, uint64_t max_bytes, std::string& out) {
  char buffer[1 << 16];
  while (true) {
    const int64_t left_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left_ms <= 0) return ReadEnd::kDeadline;
    pollfd poll_fd{.fd = fd, .events = POLLIN, .revents = 0};
    const int ready = poll(&poll_fd, 1, static_cast<int>(std::min<int64_t>(left_ms, 1'000'000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return ReadEnd::kError;
    }
    if (ready == 0) continue;  // the loop's top sees the deadline
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadEnd::kError;
    }
    if (got == 0) return ReadEnd::kEndOfFile;
    if (out.size() + static_cast<uint64_t>(got) > max_bytes) return ReadEnd::kTooLarge;
    out.append(buffer, static_cast<size_t>(got));
  }
}

// The child's wait status, after killing it first when `kill_first`; -1 when someone else
// reaped it (SIGCHLD ignored, or a waitpid(-1) elsewhere in the process).
int Reap(pid_t pid, bool kill_first) {
  if (kill_first) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

std::string DescribeWaitStatus(int status) {
  if (status == -1) return "ended (reaped elsewhere)";
  if (WIFSIGNALED(status)) {
    const int signal_number = WTERMSIG(status);
    return absl::StrCat("was killed by signal ", signal_number, " (", strsignal(signal_number),
                        ")");
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

// What a compile's child reports, as one byte stream on its pipe.
enum class ChildOutcome : uint32_t {
  kCompiled = 1,
  kCompileError = 2,  // the source's fault: the log says why
  kNvrtcFailure = 3,  // NVRTC failed otherwise: `detail` names the call and its error
};

struct ChildReport {
  ChildOutcome outcome = ChildOutcome::kNvrtcFailure;
  int32_t nvrtc_result = 0;
  std::string log;
  std::string lowered_name;
  std::string cubin;
  std::string detail;
};

void AppendU64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(value >> (8 * i));
}

bool ConsumeU64(absl::string_view& in, uint64_t& value) {
  if (in.size() < 8) return false;
  value = 0;
  for (int i = 0; i < 8; ++i) value |= uint64_t{static_cast<uint8_t>(in[i])} << (8 * i);
  in.remove_prefix(8);
  return true;
}

std::string SerializeReport(const ChildReport& report) {
  std::string out;
  AppendU64(out, static_cast<uint64_t>(report.outcome));
  AppendU64(out, static_cast<uint64_t>(static_cast<uint32_t>(report.nvrtc_result)));
  for (const std::string* text :
       {&report.log, &report.lowered_name, &report.cubin, &report.detail}) {
    AppendU64(out, text->size());
    out += *text;
  }
  return out;
}

bool ParseReport(absl::string_view in, ChildReport& report) {
  uint64_t outcome = 0;
  uint64_t result = 0;
  if (!ConsumeU64(in, outcome) || !ConsumeU64(in, result)) return false;
  if (outcome < 1 || outcome > 3) return false;
  report.outcome = static_cast<ChildOutcome>(outcome);
  report.nvrtc_result = static_cast<int32_t>(result);
  for (std::string* text : {&report.log, &report.lowered_name, &report.cubin, &report.detail}) {
    uint64_t size = 0;
    if (!ConsumeU64(in, size) || size > in.size()) return false;
    *text = std::string(in.substr(0, size));
    in.remove_prefix(size);
  }
  return in.empty();
}

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);
  return log;
}

// Everything NVRTC is given, prepared before fork so that the child only compiles.
struct PreparedCompile {
  std::string source;
  std::string file_name;
  std::string kernel_name;
  std::vector<std::string> options;
  std::vector<const char*> option_pointers;
  std::vector<const char*> header_texts;
  std::vector<const char*> header_names;
};

ChildReport CompileInChild(const PreparedCompile& compile) {
  ChildReport report;
  auto failed = [&report](const char* call, nvrtcResult result) {
    report.outcome = ChildOutcome::kNvrtcFailure;
    report.nvrtc_result = result;
    report.detail = absl::StrCat(call, " failed: ", nvrtcGetErrorString(result));
    return report;
  };
  nvrtcProgram program = nullptr;
  nvrtcResult result =
      nvrtcCreateProgram(&program, compile.source.c_str(), compile.file_name.c_str(),
                         static_cast<int>(compile.header_texts.size()), compile.header_texts.data(),
                         compile.header_names.data());
  if (result != NVRTC_SUCCESS) return failed("nvrtcCreateProgram", result);
  // The process ends right after: no need to destroy the program.
  result = nvrtcAddNameExpression(program, compile.kernel_name.c_str());
  if (result != NVRTC_SUCCESS) return failed("nvrtcAddNameExpression", result);
  result = nvrtcCompileProgram(program, static_cast<int>(compile.option_pointers.size()),
                               compile.option_pointers.data());
  report.log = ProgramLog(program);
  if (result == NVRTC_ERROR_COMPILATION) {
    report.outcome = ChildOutcome::kCompileError;
    report.nvrtc_result = result;
    return report;
  }
  if (result != NVRTC_SUCCESS) return failed("nvrtcCompileProgram", result);
  const char* lowered = nullptr;
  result = nvrtcGetLoweredName(program, compile.kernel_name.c_str(), &lowered);
  if (result != NVRTC_SUCCESS) return failed("nvrtcGetLoweredName", result);
  report.lowered_name = lowered != nullptr ? lowered : "";
  size_t cubin_size = 0;
  result = nvrtcGetCUBINSize(program, &cubin_size);
  if (result != NVRTC_SUCCESS) return failed("nvrtcGetCUBINSize", result);
  report.cubin.resize(cubin_size);
  result = nvrtcGetCUBIN(program, report.cubin.data());
  if (result != NVRTC_SUCCESS) return failed("nvrtcGetCUBIN", result);
  report.outcome = ChildOutcome::kCompiled;
  return report;
}

// The child's current address space, from /proc/self/statm (its first field, in pages).
int64_t AddressSpaceBytes() {
  const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char text[64] = {};
  const ssize_t got = read(fd, text, sizeof(text) - 1);
  close(fd);
  if (got <= 0) return -1;
  int64_t pages = 0;
  for (ssize_t i = 0; i < got && text[i] >= '0' && text[i] <= '9'; ++i) {
    pages = pages * 10 + (text[i] - '0');
  }
  return pages * sysconf(_SC_PAGESIZE);
}

// Denies the child every file access from here on (opening, listing, executing, creating,
// removing) with Landlock: NVRTC would otherwise #include any file the worker can read, and show
// its lines in the compile errors ('#include "/etc/shadow"'). NVRTC needs no file once its
// builtins are mapped (PreloadNvrtcBuiltins) and the provided headers are in memory. False
// where the kernel has no Landlock (before Linux 5.13, or disabled): the compile then runs
// without it.
bool DenyFileAccess() {
  landlock_ruleset_attr ruleset{};
  // Every right of Landlock's first ABI, which each later one keeps.
  ruleset.handled_access_fs =
      LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
      LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
      LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
      LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
      LANDLOCK_ACCESS_FS_MAKE_SYM;
  const long ruleset_fd = syscall(SYS_landlock_create_ruleset, &ruleset, sizeof(ruleset), 0);
  if (ruleset_fd < 0) return false;
  const bool restricted = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
                          syscall(SYS_landlock_restrict_self, ruleset_fd, 0) == 0;
  close(static_cast<int>(ruleset_fd));
  return restricted;
}

void WriteAll(int fd, absl::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
}

// Runs in the forked child; never returns.
[[noreturn]] void RunCompileChild(const PreparedCompile& compile, int64_t memory_bytes,
                                  pid_t parent, int report_fd) {
  // Dies with the thread that waits for it, instead of compiling on for nobody.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(120);
  const rlimit no_core{0, 0};  // a compile killed past its memory limit dumps no multi-GiB core
  setrlimit(RLIMIT_CORE, &no_core);
  if (!BuiltWithSanitizer()) {
    // The child starts with the caller's whole address space (a CUDA context reserves tens of
    // GiB of it): the limit is what the compile may add.
    const int64_t now = AddressSpaceBytes();
    if (now >= 0) {
      const rlim_t limit = static_cast<rlim_t>(now + memory_bytes);
      const rlimit address_space{limit, limit};
      setrlimit(RLIMIT_AS, &address_space);
    }
  }
  // NVRTC records the compile's directory in the line info: the root, for every worker alike
  // (DisassembleCubin shows the names relative to it).
  if (chdir("/") != 0) _exit(122);
  DenyFileAccess();
  try {
    WriteAll(report_fd, SerializeReport(CompileInChild(compile)));
  } catch (...) {
    _exit(121);  // std::bad_alloc past the limit: the parent reads a short report
  }
  _exit(0);
}

// NVRTC opens its builtins library at the first compile; opening it here, in the caller, maps
// it once for every child to inherit, so that a child's memory limit counts only its compile.
void PreloadNvrtcBuiltins() {
  static std::once_flag once;
  std::call_once(once, [] {
    int major = 0;
    int minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return;
    const std::string name = absl::StrCat("libnvrtc-builtins.so.", major, ".", minor);
    dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);  // on failure NVRTC reports it at compile
  });
}

// The log's first kMaxCompileLogBytes, cut at a line's end, and how much was left out.
std::string BoundedLog(std::string log) {
  if (log.size() <= kMaxCompileLogBytes) return log;
  size_t cut = log.rfind('\n', kMaxCompileLogBytes);
  cut = cut == std::string::npos ? kMaxCompileLogBytes : cut + 1;
  const size_t left_out = log.size() - cut;
  log.resize(cut);
  absl::StrAppend(&log, "[", left_out, " more bytes of compiler messages left out]\n");
  return log;
}

// True when the log's errors all come from the kernel-name lookup, none from the source.
bool OnlyNameExpressionErrors(absl::string_view log) {
  int name_errors = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, "): error") && !absl::StrContains(line, "): catastrophic error")) {
      continue;
    }
    if (!absl::StartsWith(line, kNameExpressionFile)) return false;
    ++name_errors;
  }
  return name_errors > 0;
}

absl::StatusOr<UserKernelBinary> CompileInChildProcess(const UserKernelCompileRequest& request,
                                                       const std::vector<std::string>& options,
                                                       const UserKernelCompileLimits& limits) {
  PreparedCompile compile;
  compile.source = request.source;
  compile.file_name = request.file_name;
  compile.kernel_name = request.kernel_name;
  compile.options = options;
  compile.options.push_back(
      absl::StrFormat("--gpu-architecture=sm_%d%d", request.arch.major, request.arch.minor));
  compile.options.push_back("-std=c++17");
  for (const std::string& option : compile.options)
    compile.option_pointers.push_back(option.c_str());
  for (const ProvidedHeader& header : request.headers) {
    compile.header_texts.push_back(header.text.c_str());
    compile.header_names.push_back(header.name.c_str());
  }
  PreloadNvrtcBuiltins();

  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  ScopedFd read_end(pipe_fds[0]);
  ScopedFd write_end(pipe_fds[1]);
  const pid_t parent = getpid();
  const auto start = std::chrono::steady_clock::now();
  const absl::Time deadline = absl::Now() + limits.wall_time;
  // fork without exec, in a process that may have other threads: the child has only this
  // thread, and calls nothing but NVRTC (a self-contained compiler library: no driver, no
  // threads of its own), setrlimit, write and _exit. glibc's fork leaves malloc and stdio
  // usable in the child. What is not covered: another thread inside NVRTC at the moment of the
  // fork could leave one of NVRTC's locks held in the child, which then hangs until the wall
  // limit kills it; callers compile one kernel at a time. Exec of a helper binary would avoid
  // that, at the price of a binary to ship and find beside every caller.
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    close(pipe_fds[0]);
    RunCompileChild(compile, limits.memory_bytes, parent, pipe_fds[1]);
  }
  write_end.Close();
  std::string bytes;
  const ReadEnd end = ReadUntilClosed(read_end.get(), deadline, kMaxChildOutputBytes, bytes);
  const int read_errno = errno;
  const int wait_status = Reap(pid, /*kill_first=*/end != ReadEnd::kEndOfFile);
  const auto stop = std::chrono::steady_clock::now();
  switch (end) {
    case ReadEnd::kDeadline:
      return absl::DeadlineExceededError(absl::StrCat("compiling ", request.file_name,
                                                      " took longer than the ",
                                                      FormatLimit(limits.wall_time), " limit"));
    case ReadEnd::kTooLarge:
      return absl::ResourceExhaustedError(
          absl::StrCat("compiling ", request.file_name, " produced more than ",
                       FormatBinaryBytes(kMaxChildOutputBytes), " of code and messages"));
    case ReadEnd::kError:
      return absl::InternalError(
          absl::StrCat("reading the compile of ", request.file_name, ": ", strerror(read_errno)));
    case ReadEnd::kEndOfFile:
      break;
  }
  const std::string memory_limit = FormatBinaryBytes(limits.memory_bytes);
  ChildReport report;
  if (!ParseReport(bytes, report)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "compiling ", request.file_name, " failed: the compiler ", DescribeWaitStatus(wait_status),
        ", most likely past the ", memory_limit, " memory limit"));
  }
  report.log = BoundedLog(std::move(report.log));
  switch (report.outcome) {
    case ChildOutcome::kCompiled:
      break;
    case ChildOutcome::kCompileError:
      if (absl::StrContains(report.log, "): catastrophic error: out of memory")) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "compiling ", request.file_name, " ran out of the ", memory_limit, " memory limit"));
      }
      if (OnlyNameExpressionErrors(report.log)) {
        return absl::InvalidArgumentError(absl::StrCat(request.file_name,
                                                       " defines no extern \"C\" __global__ "
                                                       "function named ",
                                                       request.kernel_name));
      }
      return absl::InvalidArgumentError(report.log);
    case ChildOutcome::kNvrtcFailure:
      if (report.nvrtc_result == NVRTC_ERROR_OUT_OF_MEMORY) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "compiling ", request.file_name, " ran out of the ", memory_limit, " memory limit"));
      }
      return absl::InternalError(
          absl::StrCat("compiling ", request.file_name, ": ", report.detail, "\n", report.log));
  }
  if (report.lowered_name != request.kernel_name) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.file_name, " defines ", request.kernel_name,
                     " as a __global__ function without extern \"C\" (its name is mangled to ",
                     report.lowered_name, "); declare it extern \"C\" __global__"));
  }
  if (report.cubin.empty()) {
    return absl::InternalError(absl::StrCat("compiling ", request.file_name, ": empty cubin"));
  }
  UserKernelBinary binary;
  binary.cubin = std::move(report.cubin);
  binary.lowered_name = std::move(report.lowered_name);
  binary.compile_log = std::move(report.log);
  binary.compile_ms = std::chrono::duration<double, std::milli>(stop - start).count();
  return binary;
}

// --- nvdisasm -------------------------------------------------------------------------------

std::string FindNvdisasm() {
  std::vector<std::string> candidates;
  if (const char* cuda_home = std::getenv("CUDA_HOME"); cuda_home != nullptr && *cuda_home) {
    candidates.push_back(absl::StrCat(cuda_home, "/bin/nvdisasm"));
  }
  candidates.push_back("/usr/local/cuda/bin/nvdisasm");
  if (const char* path = std::getenv("PATH"); path != nullptr) {
    for (absl::string_view directory : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      candidates.push_back(absl::StrCat(directory, "/nvdisasm"));
    }
  }
  for (const std::string& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Removes the file on destruction.
class TemporaryFile {
 public:
  TemporaryFile() = default;
  TemporaryFile(const TemporaryFile&) = delete;
  TemporaryFile& operator=(const TemporaryFile&) = delete;
  ~TemporaryFile() {
    if (!path_.empty()) unlink(path_.c_str());
  }

  absl::Status Create(absl::string_view contents) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/gpuprof-sass-XXXXXX.cubin");
    const int fd = mkstemps(pattern.data(), 6);
    if (fd < 0) {
      return absl::InternalError(absl::StrCat("mkstemps ", pattern, ": ", strerror(errno)));
    }
    path_ = pattern;
    ScopedFd owned(fd);
    absl::string_view rest = contents;
    while (!rest.empty()) {
      const ssize_t written = write(fd, rest.data(), rest.size());
      if (written < 0 && errno == EINTR) continue;
      if (written <= 0) {
        return absl::InternalError(absl::StrCat("writing ", path_, ": ", strerror(errno)));
      }
      rest.remove_prefix(static_cast<size_t>(written));
    }
    return absl::OkStatus();
  }

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// `//## File "my_gather.cu", line 14` (with -gi, `... inlined at "...", line N` follows):
// "my_gather.cu:14", the innermost location, relative to the compile's directory (the root,
// see RunCompileChild).
std::string LineInfoComment(absl::string_view line) {
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(line);
  if (!absl::ConsumePrefix(&rest, "//## File \"")) return "";
  const size_t quote = rest.find('"');
  if (quote == absl::string_view::npos) return "";
  absl::string_view file = rest.substr(0, quote);
  while (absl::ConsumePrefix(&file, "/")) {
  }
  rest.remove_prefix(quote + 1);
  if (!absl::ConsumePrefix(&rest, ", line ")) return "";
  size_t digits = 0;
  while (digits < rest.size() && absl::ascii_isdigit(rest[digits])) ++digits;
  if (digits == 0) return "";
  return absl::StrCat(file, ":", rest.substr(0, digits));
}

}  // namespace

// --- Public API ----------------------------------------------------------------------------

std::string Sha256Hex(std::string_view bytes) {
  Sha256 hash;
  hash.Update(absl::string_view(bytes.data(), bytes.size()));
  return hash.HexDigest();
}

absl::StatusOr<UserKernelBinary> CompileUserKernel(const UserKernelCompileRequest& request,
                                                   const UserKernelCompileLimits& limits,
                                                   const JitCache& cache) {
  if (request.source.empty()) return absl::InvalidArgumentError("the kernel source is empty");
  if (request.source.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("the kernel source contains a NUL byte");
  }
  if (!IsCIdentifier(request.kernel_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel name \"", request.kernel_name, "\" is not a C identifier"));
  }
  if (request.file_name.empty() ||
      std::any_of(request.file_name.begin(), request.file_name.end(),
                  [](char c) { return absl::ascii_iscntrl(c) || c == '"'; })) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel file name \"", absl::CHexEscape(request.file_name),
                     "\" is empty or holds control characters or quotes"));
  }
  // The submitter's options passed ValidateUserCompileOptions; the caller adds its own macros.
  if (request.options.size() > kMaxUserCompileOptions + kMaxCallerCompileOptions) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.options.size(), " compile options are too many"));
  }
  for (const std::string& option : request.options) {
    RETURN_IF_ERROR(ValidateUserCompileOptions({option}));
  }
  if (limits.wall_time <= absl::ZeroDuration() || limits.memory_bytes <= 0) {
    return absl::InvalidArgumentError("the compile's time and memory limits must be positive");
  }

  const std::string key = UserKernelCacheKey(request, request.options, NvrtcVersionString());
  const std::string path = absl::StrCat(cache.directory(), "/", key, kCacheFileSuffix);
  UserKernelBinary binary;
  if (ReadCacheFile(path, key, binary) && binary.lowered_name == request.kernel_name) {
    binary.source_sha256 = Sha256Hex(request.source);
    binary.cache_key = key;
    binary.cache_hit = true;
    binary.compile_ms = 0;
    return binary;
  }
  ASSIGN_OR_RETURN(binary, CompileInChildProcess(request, request.options, limits));
  binary.source_sha256 = Sha256Hex(request.source);
  binary.cache_key = key;
  if (const absl::Status written =
          WriteCacheEntryAtomically(cache.directory(), path, CacheFileContents(binary));
      !written.ok()) {
    binary.cache_write_error = std::string(written.message());
  }
  return binary;
}

std::vector<SassInstruction> ParseNvdisasmListing(std::string_view listing_view,
                                                  std::string_view function,
                                                  size_t max_instructions) {
  const absl::string_view listing(listing_view.data(), listing_view.size());
  std::vector<SassInstruction> instructions;
  const std::string section = absl::StrCat(".text.", std::string(function));
  bool in_function = false;
  std::string source_line;
  for (absl::string_view line : absl::StrSplit(listing, '\n')) {
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    // A code section starts with its `.section .text.NAME,...` directive or `.text.NAME:` label.
    absl::string_view directive = stripped;
    if (absl::ConsumePrefix(&directive, ".section")) {
      directive = absl::StripLeadingAsciiWhitespace(directive);
      const absl::string_view name = directive.substr(0, directive.find_first_of(", \t"));
      in_function = name == section;
      source_line.clear();
      continue;
    }
    if (absl::EndsWith(stripped, ":") && absl::StartsWith(stripped, ".text.")) {
      in_function = stripped.substr(0, stripped.size() - 1) == section;
      source_line.clear();
      continue;
    }
    if (!in_function) continue;
    if (absl::StartsWith(stripped, "//##")) {
      source_line = LineInfoComment(stripped);
      continue;
    }
    // `/*0040*/   @P0 BRA `(.L_x_1) ;   /* 0x... */`
    absl::string_view rest = stripped;
    if (!absl::ConsumePrefix(&rest, "/*")) continue;
    const size_t close = rest.find("*/");
    if (close == absl::string_view::npos) continue;
    int64_t pc = 0;
    if (!absl::SimpleHexAtoi(rest.substr(0, close), &pc)) continue;  // `/* 0x... */` encodings
    rest = absl::StripLeadingAsciiWhitespace(rest.substr(close + 2));
    const size_t semicolon = rest.find(';');
    if (semicolon != absl::string_view::npos) rest = rest.substr(0, semicolon);
    rest = absl::StripAsciiWhitespace(rest);
    if (rest.empty()) continue;
    if (instructions.size() == max_instructions) break;
    instructions.push_back(
        {.pc_offset = pc, .text = std::string(rest), .source_line = source_line});
  }
  // The NOPs that pad the function to its section's alignment never run.
  while (!instructions.empty() && instructions.back().text == "NOP") instructions.pop_back();
  return instructions;
}

absl::StatusOr<std::vector<SassInstruction>> DisassembleCubin(const std::string& cubin,
                                                              const std::string& function) {
  const std::string nvdisasm = FindNvdisasm();
  if (nvdisasm.empty()) {
    return absl::NotFoundError(
        "no nvdisasm (looked in $CUDA_HOME/bin, /usr/local/cuda/bin and PATH)");
  }
  TemporaryFile file;
  RETURN_IF_ERROR(file.Create(cubin));
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  ScopedFd read_end(pipe_fds[0]);
  ScopedFd write_end(pipe_fds[1]);
  // -c: code sections only; -g: the source line of each instruction, when the cubin has them.
  std::vector<std::string> arguments = {nvdisasm, "-c", "-g", file.path()};
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return absl::InternalError(absl::StrCat("starting ", nvdisasm, ": ", strerror(spawned)));
  }
  write_end.Close();
  std::string listing;
  const ReadEnd end = ReadUntilClosed(read_end.get(), absl::Now() + kDisassemblyTimeout,
                                      kMaxDisassemblyBytes, listing);
  const int read_errno = errno;
  const int wait_status = Reap(pid, /*kill_first=*/end != ReadEnd::kEndOfFile);
  if (end == ReadEnd::kDeadline) {
    return absl::DeadlineExceededError(
        absl::StrCat("nvdisasm took longer than ", FormatLimit(kDisassemblyTimeout)));
  }
  if (end == ReadEnd::kError) {
    return absl::InternalError(absl::StrCat("reading nvdisasm's output: ", strerror(read_errno)));
  }
  // kTooLarge: the listing so far is parsed; the instruction cap bounds it anyway.
  if (end == ReadEnd::kEndOfFile && wait_status != -1 &&
      !(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)) {
    return absl::InternalError(absl::StrCat("nvdisasm ", DescribeWaitStatus(wait_status)));
  }
  std::vector<SassInstruction> instructions =
      ParseNvdisasmListing(listing, function, kMaxSassInstructions);
  if (instructions.empty()) {
    return absl::NotFoundError(
        absl::StrCat("nvdisasm lists no instructions of a function named ", function));
  }
  return instructions;
}

}  // namespace gpuprof::kernels
