#include "kernels/jit/jit_cache.h"

#include <nvrtc.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/nvrtc_status.h"
#include "common/status_macros.h"

namespace gpuprof::kernels {
namespace {

namespace fs = std::filesystem;

// First line of every cache file; bump it when the format changes.
constexpr char kCacheFileMagic[] = "GPUPROF-JIT 1\n";
constexpr size_t kCacheFileMagicSize = sizeof(kCacheFileMagic) - 1;
constexpr char kCacheFileSuffix[] = ".cubin";

// Owns an nvrtcProgram.
class NvrtcProgram {
 public:
  explicit NvrtcProgram(nvrtcProgram program) : program_(program) {}
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;
  ~NvrtcProgram() { NVRTC_LOG_IF_ERROR(nvrtcDestroyProgram(&program_)); }
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_;
};

std::string ProgramLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);
  return log;
}

// Reads a cache file; nullopt-like empty binary when absent or not ours.
bool ReadCacheFile(const std::string& path, JitBinary& binary) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::stringstream contents;
  contents << file.rdbuf();
  const std::string data = contents.str();
  if (data.compare(0, kCacheFileMagicSize, kCacheFileMagic, kCacheFileMagicSize) != 0) return false;
  const size_t name_end = data.find('\n', kCacheFileMagicSize);
  if (name_end == std::string::npos || name_end + 1 >= data.size()) return false;
  binary.lowered_name = data.substr(kCacheFileMagicSize, name_end - kCacheFileMagicSize);
  binary.cubin = data.substr(name_end + 1);
  return !binary.lowered_name.empty();
}

}  // namespace

absl::Status WriteCacheEntryAtomically(const std::string& directory, const std::string& path,
                                       std::string_view contents) {
  std::error_code error;
  fs::create_directories(directory, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot create JIT cache directory ", directory, ": ", error.message()));
  }
  // Per thread as well as per process: two threads of a worker may fill the same entry.
  const std::string temporary = absl::StrCat(path, ".tmp.", getpid(), ".", gettid());
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    file.close();
    if (!file) {
      fs::remove(temporary, error);
      return absl::PermissionDeniedError(absl::StrCat("cannot write JIT cache file ", temporary));
    }
  }
  fs::rename(temporary, path, error);
  if (error) {
    fs::remove(temporary, error);
    return absl::PermissionDeniedError(
        absl::StrCat("cannot rename JIT cache file into ", path, ": ", error.message()));
  }
  return absl::OkStatus();
}

uint64_t KernelSourcesFingerprint(absl::Span<const KernelSource> sources) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  auto mix = [&hash](std::string_view bytes) {
    for (unsigned char byte : bytes) {
      hash ^= byte;
      hash *= 0x100000001b3ULL;
    }
  };
  for (const KernelSource& source : sources) {
    mix(source.path);
    mix(std::string_view("\0", 1));
    mix(source.text);
  }
  return hash;
}

std::string NvrtcVersionString() {
  int major = 0;
  int minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return absl::StrCat(major, ".", minor);
}

std::string JitCacheKey(std::string_view kernel_name, std::string_view template_key,
                        GpuArchitecture arch, std::string_view cuda_version,
                        uint64_t sources_fingerprint) {
  return absl::StrFormat("%s__%s__sm%d%d__cuda%s__%016x", std::string(kernel_name),
                         std::string(template_key), arch.major, arch.minor,
                         std::string(cuda_version), sources_fingerprint);
}

std::string JitCacheDirectoryFor(const char* gpuprof_jit_cache_dir, const char* xdg_cache_home,
                                 const char* home, bool is_root) {
  auto set = [](const char* value) { return value != nullptr && value[0] != '\0'; };
  if (set(gpuprof_jit_cache_dir)) return gpuprof_jit_cache_dir;
  if (is_root) return "/var/cache/gpuprof/jit";
  if (set(xdg_cache_home)) return absl::StrCat(xdg_cache_home, "/gpuprof/jit");
  if (set(home)) return absl::StrCat(home, "/.cache/gpuprof/jit");
  return "/tmp/gpuprof-jit";
}

std::string DefaultJitCacheDirectory() {
  return JitCacheDirectoryFor(std::getenv("GPUPROF_JIT_CACHE_DIR"), std::getenv("XDG_CACHE_HOME"),
                              std::getenv("HOME"), geteuid() == 0);
}

absl::StatusOr<JitBinary> CompileWithNvrtc(const JitRequest& request, GpuArchitecture arch) {
  std::vector<const char*> header_texts;
  std::vector<const char*> header_names;
  std::vector<std::string> storage;  // NUL-terminated copies of the embedded sources
  storage.reserve(2 * request.sources.size());
  bool found = false;
  for (const KernelSource& source : request.sources) {
    storage.emplace_back(source.text);
    header_texts.push_back(storage.back().c_str());
    storage.emplace_back(source.path);
    header_names.push_back(storage.back().c_str());
    found = found || source.path == request.source_path;
  }
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("JIT: no embedded kernel source named ", request.source_path));
  }
  const std::string main_source = absl::StrCat("#include \"", request.source_path, "\"\n");
  nvrtcProgram raw_program = nullptr;
  NVRTC_RETURN_IF_ERROR(nvrtcCreateProgram(&raw_program, main_source.c_str(), "gpuprof_jit.cu",
                                           static_cast<int>(header_texts.size()),
                                           header_texts.data(), header_names.data()));
  NvrtcProgram program(raw_program);
  NVRTC_RETURN_IF_ERROR(nvrtcAddNameExpression(program.get(), request.name_expression.c_str()));
  const std::string arch_option =
      absl::StrFormat("--gpu-architecture=sm_%d%d", arch.major, arch.minor);
  const char* options[] = {arch_option.c_str(), "--std=c++20", "--generate-line-info"};
  const auto start = std::chrono::steady_clock::now();
  const nvrtcResult compiled = nvrtcCompileProgram(program.get(), std::size(options), options);
  const auto stop = std::chrono::steady_clock::now();
  if (compiled != NVRTC_SUCCESS) {
    return NvrtcStatus(compiled,
                       absl::StrCat("compiling ", request.name_expression, " for sm_", arch.major,
                                    arch.minor, ":\n", ProgramLog(program.get())));
  }
  JitBinary binary;
  const char* lowered = nullptr;
  NVRTC_RETURN_IF_ERROR(
      nvrtcGetLoweredName(program.get(), request.name_expression.c_str(), &lowered));
  binary.lowered_name = lowered;
  size_t cubin_size = 0;
  NVRTC_RETURN_IF_ERROR(nvrtcGetCUBINSize(program.get(), &cubin_size));
  binary.cubin.resize(cubin_size);
  NVRTC_RETURN_IF_ERROR(nvrtcGetCUBIN(program.get(), binary.cubin.data()));
  binary.compile_ms = std::chrono::duration<double, std::milli>(stop - start).count();
  binary.cache_key = JitCacheKey(request.kernel_name, request.template_key, arch,
                                 NvrtcVersionString(), KernelSourcesFingerprint(request.sources));
  return binary;
}

absl::StatusOr<JitBinary> JitCache::GetOrCompile(const JitRequest& request,
                                                 GpuArchitecture arch) const {
  const std::string key = JitCacheKey(request.kernel_name, request.template_key, arch,
                                      NvrtcVersionString(), KernelSourcesFingerprint(request.sources));
  const std::string path = absl::StrCat(directory_, "/", key, kCacheFileSuffix);
  JitBinary binary;
  if (ReadCacheFile(path, binary)) {
    binary.cache_key = key;
    binary.cache_hit = true;
    binary.cache_path = path;
    return binary;
  }
  ASSIGN_OR_RETURN(binary, CompileWithNvrtc(request, arch));
  binary.cache_path = path;
  // The entry: the magic, the lowered name and its newline, then the cubin (ReadCacheFile).
  const std::string entry = absl::StrCat(kCacheFileMagic, binary.lowered_name, "\n", binary.cubin);
  if (const absl::Status written = WriteCacheEntryAtomically(directory_, path, entry);
      !written.ok()) {
    binary.cache_write_error = std::string(written.message());
  }
  return binary;
}

absl::StatusOr<JitCacheContents> JitCache::Contents() const {
  JitCacheContents contents;
  std::error_code error;
  if (!fs::exists(directory_, error)) return contents;
  for (fs::directory_iterator it(directory_, error), end; !error && it != end;
       it.increment(error)) {
    if (!it->is_regular_file(error) || it->path().extension() != kCacheFileSuffix) continue;
    ++contents.entries;
    contents.bytes += static_cast<int64_t>(it->file_size(error));
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("cannot list JIT cache directory ", directory_, ": ", error.message()));
  }
  return contents;
}

}  // namespace gpuprof::kernels
