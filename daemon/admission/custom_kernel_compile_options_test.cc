// Admission refuses a custom kernel's compiler options by the same rules as the worker's
// compile (kernels::ValidateUserCompileOptions), so that an admitted request never fails on
// its options after waiting in the queue, and a refused one would not have compiled.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/admission/custom_kernel_validation.h"
#include "kernels/custom/user_kernel_compile.h"

namespace gpuprof::daemon {
namespace {

TEST(CustomKernelCompileOptions, AdmissionAndTheCompilerAgreeOnEveryOption) {
  const std::vector<std::string> options = {
      "-lineinfo", "--use_fast_math", "-maxrregcount=16", "-maxrregcount=255",
      "-maxrregcount=15", "-maxrregcount=256", "-maxrregcount=", "-maxrregcount=+32",
      "-maxrregcount=0x20", "-maxrregcount=064", "-DTILE", "-DTILE=4", "-D_X=a.b+c-d",
      "-DTILE=", "-D", "-D=4", "-D2X", "-DX Y", "-DX=a b", "-DX=\"s\"", "-DX=a;b", "-DX=$(id)",
      "-I/etc", "--include-path=/", "-Xptxas", "-G", "--use_fast_math ", " -lineinfo", "",
      "-lineinfo=1", "--gpu-architecture=sm_90", "-default-device", "--pre-include=x.h",
      std::string("-DX=") + std::string(300, 'a'), std::string("-D") + std::string(250, 'A'),
      "-DX=\xc3\xa9", "-DX=\x1b[2J"};
  for (const std::string& option : options) {
    const bool admitted = CheckCustomCompileOptions({option}).ok();
    const bool compiled = kernels::ValidateUserCompileOptions({option}).ok();
    EXPECT_EQ(admitted, compiled) << "\"" << option << "\": admission "
                                  << CheckCustomCompileOptions({option}) << ", compiler "
                                  << kernels::ValidateUserCompileOptions({option});
  }
}

TEST(CustomKernelCompileOptions, AdmissionAndTheCompilerAgreeOnTheCount) {
  for (size_t count : {size_t{kMaxCustomCompileOptions}, size_t{kMaxCustomCompileOptions} + 1}) {
    const std::vector<std::string> options(count, "-lineinfo");
    EXPECT_EQ(CheckCustomCompileOptions(options).ok(),
              kernels::ValidateUserCompileOptions(options).ok())
        << count << " options";
  }
}

}  // namespace
}  // namespace gpuprof::daemon
