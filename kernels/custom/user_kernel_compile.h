// Compiling a submitter's own CUDA source with NVRTC, in a child process under a time and
// memory limit (a source can make the compiler run for ever or eat the host), with the
// compiler's messages returned as written, file:line included. Compiled code is cached on disk
// under the same directory as our JIT cache, keyed by the source's hash, the options, the GPU
// architecture and the NVRTC version. Needs no GPU.
#ifndef GPUPROF_KERNELS_CUSTOM_USER_KERNEL_COMPILE_H_
#define GPUPROF_KERNELS_CUSTOM_USER_KERNEL_COMPILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/custom/compile_options.h"
#include "kernels/jit/jit_cache.h"

namespace gpuprof::kernels {

// A header the source may #include by `name` (the contract, "gpuprof/contract.h").
struct ProvidedHeader {
  std::string name;
  std::string text;
};

struct UserKernelCompileRequest {
  std::string source;
  std::string file_name;    // "my_gather.cu": how the compiler's messages name the source
  std::string kernel_name;  // an extern "C" __global__ function of the source
  // Checked by ValidateUserCompileOptions first; the caller adds its own -D macros (shape).
  std::vector<std::string> options;
  std::vector<ProvidedHeader> headers;
  GpuArchitecture arch;
};

struct UserKernelCompileLimits {
  absl::Duration wall_time = absl::Seconds(60);
  // Address space the compiling child may add to what it starts with (it starts as a copy of
  // the caller, whose CUDA context alone reserves far more address space than any compile
  // needs). Not applied in sanitizer builds, whose shadow memory needs a huge address space.
  int64_t memory_bytes = int64_t{4} << 30;
};

struct UserKernelBinary {
  std::string source_sha256;  // hex, of `source` alone
  std::string cache_key;
  std::string cubin;
  std::string lowered_name;  // == kernel_name (extern "C")
  std::string compile_log;   // warnings included; may be empty
  bool cache_hit = false;
  double compile_ms = 0;
  // Set when the compiled code could not be written to the cache (the kernel still runs).
  std::string cache_write_error;
};

// The compile failed because of the source (not the box): kInvalidArgument whose message is
// the compiler's log ("my_gather.cu(12): error: ..."). A compile over the limits is
// kDeadlineExceeded / kResourceExhausted naming the limit. Anything else is the box's fault.
absl::StatusOr<UserKernelBinary> CompileUserKernel(const UserKernelCompileRequest& request,
                                                   const UserKernelCompileLimits& limits,
                                                   const JitCache& cache);


// Hex SHA-256 (lower case) of `bytes`.
std::string Sha256Hex(std::string_view bytes);

// The SASS of `cubin` from the toolkit's disassembler (nvdisasm, found under $CUDA_HOME/bin,
// /usr/local/cuda/bin or PATH): one entry per instruction of `function`, with the source line
// when the cubin has line info. kNotFound when no disassembler is installed.
struct SassInstruction {
  int64_t pc_offset = 0;
  std::string text;
  std::string source_line;  // "my_gather.cu:14" or empty
};
absl::StatusOr<std::vector<SassInstruction>> DisassembleCubin(const std::string& cubin,
                                                              const std::string& function);

// The instructions of `function` in nvdisasm's listing (`-c -g` output), at most
// `max_instructions`. Exposed for tests; DisassembleCubin runs nvdisasm and calls it.
std::vector<SassInstruction> ParseNvdisasmListing(std::string_view listing,
                                                  std::string_view function,
                                                  size_t max_instructions);

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_CUSTOM_USER_KERNEL_COMPILE_H_
