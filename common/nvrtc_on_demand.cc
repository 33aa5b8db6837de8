// NVRTC's C API, loaded from libnvrtc when a program first calls it instead of at every process
// start. Linking libnvrtc made each worker's start cost about 11 ms of CPU more (its loading and
// relocations: 15 of a CPU-only worker's 19.5 ms went to the CUDA libraries, NVRTC alone 11),
// though only bring-your-own-kernel and JIT-compiled copy kernels ever compile anything; the
// daemon starts a worker for every experiment it dispatches, radix ones included.
//
// Each entry point below has NVRTC's own signature and forwards to the loaded library, so the
// callers are plain NVRTC code. When the library cannot be loaded, every call fails with
// NVRTC_ERROR_INTERNAL_ERROR and nvrtcGetErrorString says why.
#include <dlfcn.h>
#include <nvrtc.h>

#include <cuda_runtime_api.h>

#include <string>

#include "absl/base/call_once.h"
#include "absl/strings/str_cat.h"

namespace {

// Every entry point this file forwards.
#define GPUPROF_NVRTC_FUNCTIONS(X) \
  X(nvrtcGetErrorString)           \
  X(nvrtcVersion)                  \
  X(nvrtcCreateProgram)            \
  X(nvrtcDestroyProgram)           \
  X(nvrtcCompileProgram)           \
  X(nvrtcGetCUBINSize)             \
  X(nvrtcGetCUBIN)                 \
  X(nvrtcGetProgramLogSize)        \
  X(nvrtcGetProgramLog)            \
  X(nvrtcAddNameExpression)        \
  X(nvrtcGetLoweredName)

struct LoadedNvrtc {
  std::string error;  // Why loading failed; empty once loaded.
#define GPUPROF_NVRTC_POINTER(name) decltype(::name)* name = nullptr;
  GPUPROF_NVRTC_FUNCTIONS(GPUPROF_NVRTC_POINTER)
#undef GPUPROF_NVRTC_POINTER
};

// Loads the library and resolves every entry point at the first call, all at once: a child
// forked later (the sandboxed compile of bring-your-own-kernel) then needs no loader call.
const LoadedNvrtc& Nvrtc() {
  static absl::once_flag once;
  static LoadedNvrtc* loaded = nullptr;
  absl::call_once(once, [] {
    loaded = new LoadedNvrtc;
    // The soname of the toolkit the program was built with, found through the binary's
    // run path as a linked library would be; then the unversioned development link.
    const std::string versioned = absl::StrCat("libnvrtc.so.", CUDART_VERSION / 1000);
    void* handle = nullptr;
    for (const std::string& name : {versioned, std::string("libnvrtc.so")}) {
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle != nullptr) break;
      if (loaded->error.empty()) {
        const char* error = dlerror();
        loaded->error = absl::StrCat("NVRTC is not available (loading ", name, ": ",
                                     error != nullptr ? error : "unknown error", ")");
      }
    }
    if (handle == nullptr) return;
    loaded->error.clear();
#define GPUPROF_NVRTC_RESOLVE(name) \
  loaded->name = reinterpret_cast<decltype(::name)*>(dlsym(handle, #name));
    GPUPROF_NVRTC_FUNCTIONS(GPUPROF_NVRTC_RESOLVE)
#undef GPUPROF_NVRTC_RESOLVE
  });
  return *loaded;
}

// Calls the library's `name`, or fails as NVRTC does on an internal error when it is missing.
#define GPUPROF_FORWARD_NVRTC(name, ...)                      \
  auto* const function = Nvrtc().name;                        \
  if (function == nullptr) return NVRTC_ERROR_INTERNAL_ERROR; \
  return function(__VA_ARGS__)

}  // namespace

extern "C" {

const char* nvrtcGetErrorString(nvrtcResult result) {
  const LoadedNvrtc& library = Nvrtc();
  if (library.nvrtcGetErrorString == nullptr) {
    return library.error.empty() ? "NVRTC lacks nvrtcGetErrorString" : library.error.c_str();
  }
  return library.nvrtcGetErrorString(result);
}

nvrtcResult nvrtcVersion(int* major, int* minor) {
  GPUPROF_FORWARD_NVRTC(nvrtcVersion, major, minor);
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram* program, const char* source, const char* name,
                               int header_count, const char* const* headers,
                               const char* const* include_names) {
  GPUPROF_FORWARD_NVRTC(nvrtcCreateProgram, program, source, name, header_count, headers,
                        include_names);
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram* program) {
  GPUPROF_FORWARD_NVRTC(nvrtcDestroyProgram, program);
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram program, int option_count,
                                const char* const* options) {
  GPUPROF_FORWARD_NVRTC(nvrtcCompileProgram, program, option_count, options);
}

nvrtcResult nvrtcGetCUBINSize(nvrtcProgram program, size_t* size) {
  GPUPROF_FORWARD_NVRTC(nvrtcGetCUBINSize, program, size);
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram program, char* cubin) {
  GPUPROF_FORWARD_NVRTC(nvrtcGetCUBIN, program, cubin);
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram program, size_t* size) {
  GPUPROF_FORWARD_NVRTC(nvrtcGetProgramLogSize, program, size);
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram program, char* log) {
  GPUPROF_FORWARD_NVRTC(nvrtcGetProgramLog, program, log);
}

nvrtcResult nvrtcAddNameExpression(nvrtcProgram program, const char* const name_expression) {
  GPUPROF_FORWARD_NVRTC(nvrtcAddNameExpression, program, name_expression);
}

nvrtcResult nvrtcGetLoweredName(nvrtcProgram program, const char* const name_expression,
                                const char** lowered_name) {
  GPUPROF_FORWARD_NVRTC(nvrtcGetLoweredName, program, name_expression, lowered_name);
}

}  // extern "C"
