// Run-time specialisation of the kernels with NVRTC, and an on-disk cache of the compiled
// code keyed by kernel, template arguments, GPU architecture, CUDA (NVRTC) version and a
// fingerprint of the kernel sources, so that a changed source never loads stale code.
// Compiling needs no GPU; loading the code is jit_module.h's job.
#ifndef GPUPROF_KERNELS_JIT_JIT_CACHE_H_
#define GPUPROF_KERNELS_JIT_JIT_CACHE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace gpuprof::kernels {

// A kernel source file embedded in the binary (see embedded_kernel_sources in
// kernels/jit/defs.bzl). Each kernel family embeds its own set.
struct KernelSource {
  std::string_view path;  // "kernels/copy/index_kernel.cuh", as the sources #include each other
  std::string_view text;
};

// FNV-1a over every source's path and text.
uint64_t KernelSourcesFingerprint(absl::Span<const KernelSource> sources);

// One instantiation to compile.
struct JitRequest {
  std::string kernel_name;      // "index_gather"
  std::string template_key;     // "row8192_s1_v16_t128_o1_pdl0"
  std::string source_path;      // the file that defines the template
  std::string name_expression;  // "gpuprof::kernels::jit::IndexKernel<8192, ...>"
  // Every file the kernel may include, the defining one among them; their fingerprint is
  // part of the cache key.
  absl::Span<const KernelSource> sources;
};

struct GpuArchitecture {
  int major = 0;
  int minor = 0;
};

struct JitBinary {
  std::string cache_key;
  std::string lowered_name;  // the mangled name to look the kernel up by
  std::string cubin;
  bool cache_hit = false;
  double compile_ms = 0;  // NVRTC time; 0 on a hit
  std::string cache_path;
  // Set when the compiled code could not be written to the cache (the kernel still runs).
  std::string cache_write_error;
};

struct JitCacheContents {
  int64_t entries = 0;
  int64_t bytes = 0;
};

// "13.0", from nvrtcVersion.
std::string NvrtcVersionString();

// "index_gather__row8192_s1_v16_t128_o1_pdl0__sm90__cuda13.0__0123456789abcdef": readable,
// and a valid file name.
std::string JitCacheKey(std::string_view kernel_name, std::string_view template_key,
                        GpuArchitecture arch, std::string_view cuda_version,
                        uint64_t sources_fingerprint);

// Where the cache lives: $GPUPROF_JIT_CACHE_DIR if set; for root /var/cache/gpuprof/jit;
// else $XDG_CACHE_HOME/gpuprof/jit, else $HOME/.cache/gpuprof/jit, else /tmp/gpuprof-jit.
// Pure, for tests; DefaultJitCacheDirectory() reads the process's environment.
std::string JitCacheDirectoryFor(const char* gpuprof_jit_cache_dir, const char* xdg_cache_home,
                                 const char* home, bool is_root);
std::string DefaultJitCacheDirectory();

class JitCache {
 public:
  explicit JitCache(std::string directory) : directory_(std::move(directory)) {}

  const std::string& directory() const { return directory_; }

  // The cached binary when present and readable; otherwise compiles with NVRTC for `arch`
  // (a cubin), stores it (atomically: temporary file and rename) and returns it.
  absl::StatusOr<JitBinary> GetOrCompile(const JitRequest& request, GpuArchitecture arch) const;

  // Entries and bytes; an absent directory is an empty cache.
  absl::StatusOr<JitCacheContents> Contents() const;

 private:
  std::string directory_;
};

// Writes `contents` to `path` in `directory` (created if absent) through a temporary file and
// a rename, so that concurrent workers never read a torn entry. For every cache of compiled
// code under the JIT cache directory.
absl::Status WriteCacheEntryAtomically(const std::string& directory, const std::string& path,
                                       std::string_view contents);

// Compiles without the cache (tests and the cache itself).
absl::StatusOr<JitBinary> CompileWithNvrtc(const JitRequest& request, GpuArchitecture arch);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_JIT_JIT_CACHE_H_
