#include "workloads/custom_kernel/decode_contract_plan.h"

#include <cstddef>
#include <string_view>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpuprof/v1/experiment.pb.h"
#include "kernels/custom/contract/contract_header.h"
#include "kernels/custom/contract/gpuprof/contract.h"
#include "kernels/jit/jit_cache.h"

namespace gpuprof::workloads {
namespace {

namespace v1 = ::gpuprof::v1;
using ::testing::HasSubstr;

// The layout the worker fills; the NVRTC probe below asserts the same on the device side.
static_assert(sizeof(gpuprof_decode_params) == 112);
static_assert(offsetof(gpuprof_decode_params, o) == 24);
static_assert(offsetof(gpuprof_decode_params, kv_lens) == 48);
static_assert(offsetof(gpuprof_decode_params, num_pages) == 56);
static_assert(offsetof(gpuprof_decode_params, scale) == 80);
static_assert(offsetof(gpuprof_decode_params, scale_log2) == 84);
static_assert(offsetof(gpuprof_decode_params, batch_size) == 88);
static_assert(offsetof(gpuprof_decode_params, page_size) == 104);

// A decode request as the daemon stores it (defaults applied).
v1::ExperimentRequest DecodeRequest() {
  v1::ExperimentRequest request;
  v1::AttentionSpec& spec = *request.mutable_attention();
  spec.set_phase(v1::ATTENTION_PHASE_DECODE);
  spec.set_batch_size(4);
  spec.set_q_len(1);
  spec.set_kv_len(300);
  spec.set_num_qo_heads(32);
  spec.set_num_kv_heads(8);
  spec.set_head_dim(128);
  spec.set_page_size(16);
  spec.set_dtype(v1::DATA_TYPE_BF16);
  spec.set_backend(v1::ATTENTION_BACKEND_GPUPROF);
  request.mutable_custom_kernel()->set_kernel_name("decode_paged");
  return request;
}

TEST(DecodeContractTest, TakesDecodeWithOneQueryPerSequence) {
  EXPECT_TRUE(CheckDecodeContractRequest(DecodeRequest()).ok());
  v1::ExperimentRequest unset_phase = DecodeRequest();
  unset_phase.mutable_attention()->clear_phase();
  EXPECT_TRUE(CheckDecodeContractRequest(unset_phase).ok());
}

TEST(DecodeContractTest, RefusesPrefillNamingThePhase) {
  v1::ExperimentRequest request = DecodeRequest();
  request.mutable_attention()->set_phase(v1::ATTENTION_PHASE_PREFILL);
  const absl::Status status = CheckDecodeContractRequest(request);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("attention.phase: got prefill"));
  EXPECT_THAT(status.message(), HasSubstr("decode only"));
}

TEST(DecodeContractTest, RefusesDraftTokens) {
  v1::ExperimentRequest uniform = DecodeRequest();
  uniform.mutable_attention()->set_q_len(4);
  EXPECT_THAT(CheckDecodeContractRequest(uniform).message(),
              HasSubstr("attention.q_len: got 4; a custom decode kernel takes one query token"));

  v1::ExperimentRequest ragged = DecodeRequest();
  for (int q_len : {1, 2}) ragged.mutable_attention()->add_q_lens(q_len);
  for (int kv_len : {100, 200}) ragged.mutable_attention()->add_kv_lens(kv_len);
  ragged.mutable_attention()->set_batch_size(2);
  EXPECT_THAT(CheckDecodeContractRequest(ragged).message(),
              HasSubstr("attention.q_lens[1]: got 2"));
}

TEST(DecodeContractTest, RefusesFp8NamingTheDtype) {
  v1::ExperimentRequest request = DecodeRequest();
  request.mutable_attention()->set_dtype(v1::DATA_TYPE_FP8_E4M3);
  EXPECT_THAT(
      CheckDecodeContractRequest(request).message(),
      HasSubstr("attention.dtype: got fp8-e4m3; a custom decode kernel takes bf16 or fp16"));
  request.mutable_attention()->set_dtype(v1::DATA_TYPE_FP16);
  EXPECT_TRUE(CheckDecodeContractRequest(request).ok());
}

TEST(DecodeContractTest, RefusesOtherBackendsAndTensorParallelism) {
  v1::ExperimentRequest cudnn = DecodeRequest();
  cudnn.mutable_attention()->set_backend(v1::ATTENTION_BACKEND_CUDNN);
  EXPECT_THAT(CheckDecodeContractRequest(cudnn).message(), HasSubstr("attention.backend"));

  v1::ExperimentRequest split = DecodeRequest();
  split.set_tp_degree(2);
  EXPECT_THAT(CheckDecodeContractRequest(split).message(),
              HasSubstr("tp_degree: got 2; a custom decode kernel runs on one GPU"));
}

TEST(DecodeContractTest, NamesOutputElementsBySequenceHeadAndElement) {
  // o [batch, 32 heads, 128]: element 3 * 32 * 128 + 7 * 128 + 12.
  EXPECT_EQ(DecodeOutputElementName(3 * 32 * 128 + 7 * 128 + 12, 32, 128),
            "sequence 3, head 7, element 12");
  EXPECT_EQ(DecodeOutputElementName(0, 8, 64), "sequence 0, head 0, element 0");
}

// A kernel written against the decode contract compiles under NVRTC, which has no standard
// headers, and sees the struct laid out as the host does.
TEST(DecodeContractTest, StructCompilesUnderNvrtcWithTheHostLayout) {
  constexpr std::string_view kProbe = R"(#include <gpuprof/contract.h>
static_assert(sizeof(gpuprof_decode_params) == 112, "decode params size");
static_assert(__alignof__(gpuprof_decode_params) == 8, "decode params alignment");
extern "C" __global__ void probe_decode(const __grid_constant__ gpuprof_decode_params p) {
  if (blockIdx.x < p.batch_size * p.num_kv_heads && p.kv_lens[0] > 0) {
    static_cast<unsigned short*>(p.o)[0] = static_cast<unsigned short>(p.scale_log2);
  }
}
)";
  const kernels::KernelSource sources[] = {
      {kernels::kContractHeaderName, kernels::ContractHeaderText()}, {"probe.cuh", kProbe}};
  const kernels::JitRequest request{.kernel_name = "probe_decode",
                                    .template_key = "decode_contract_test",
                                    .source_path = "probe.cuh",
                                    .name_expression = "probe_decode",
                                    .sources = sources};
  const absl::StatusOr<kernels::JitBinary> binary = kernels::CompileWithNvrtc(request, {9, 0});
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ(binary->lowered_name, "probe_decode");
  EXPECT_FALSE(binary->cubin.empty());
}

}  // namespace
}  // namespace gpuprof::workloads
