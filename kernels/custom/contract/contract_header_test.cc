#include "kernels/custom/contract/contract_header.h"

#include <cstddef>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kernels/custom/contract/gpuprof/contract.h"
#include "kernels/jit/jit_cache.h"

namespace gpuprof::kernels {
namespace {

// The layout the worker fills; the NVRTC probe below asserts the same sizes on the device side
// (NVRTC has no offsetof).
static_assert(sizeof(gpuprof_index_params) == 56);
static_assert(offsetof(gpuprof_index_params, num_tokens) == 24);
static_assert(offsetof(gpuprof_index_params, element_bytes) == 48);
static_assert(sizeof(gpuprof_store_params) == 72);
static_assert(offsetof(gpuprof_store_params, num_tokens) == 40);
static_assert(offsetof(gpuprof_store_params, page_size) == 68);

TEST(ContractHeaderTest, EmbeddedTextIsTheFile) {
  std::ifstream file("kernels/custom/contract/gpuprof/contract.h");
  ASSERT_TRUE(file.good());
  std::stringstream text;
  text << file.rdbuf();
  EXPECT_EQ(ContractHeaderText(), text.str());
}

// A kernel written against the contract compiles with NVRTC, which has no standard headers,
// and sees the structs laid out as the host does.
TEST(ContractHeaderTest, CompilesUnderNvrtcWithTheHostLayout) {
  constexpr std::string_view kProbe = R"(#include <gpuprof/contract.h>
static_assert(sizeof(gpuprof_index_params) == 56, "index params size");
static_assert(sizeof(gpuprof_store_params) == 72, "store params size");
extern "C" __global__ void probe_index(const __grid_constant__ gpuprof_index_params p) {
  if (blockIdx.x < p.num_tokens) static_cast<char*>(p.out)[0] = 1;
}
extern "C" __global__ void probe_store(gpuprof_store_params p) {
  if (blockIdx.x < p.num_tokens) static_cast<char*>(p.k_cache)[p.slots[0]] = 1;
}
)";
  const KernelSource sources[] = {{kContractHeaderName, ContractHeaderText()},
                                  {"probe.cuh", kProbe}};
  for (const char* kernel : {"probe_index", "probe_store"}) {
    const JitRequest request{.kernel_name = kernel,
                             .template_key = "contract_test",
                             .source_path = "probe.cuh",
                             .name_expression = kernel,
                             .sources = sources};
    const absl::StatusOr<JitBinary> binary = CompileWithNvrtc(request, {9, 0});
    ASSERT_TRUE(binary.ok()) << binary.status();
    EXPECT_EQ(binary->lowered_name, kernel);
    EXPECT_FALSE(binary->cubin.empty());
  }
}

}  // namespace
}  // namespace gpuprof::kernels
