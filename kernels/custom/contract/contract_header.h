// The contract header as NVRTC sees it: the text of gpuprof/contract.h, embedded in the binary,
// and the name a submitted source includes it by.
#ifndef GPUPROF_KERNELS_CUSTOM_CONTRACT_CONTRACT_HEADER_H_
#define GPUPROF_KERNELS_CUSTOM_CONTRACT_CONTRACT_HEADER_H_

#include <string_view>

namespace gpuprof::kernels {

// #include <gpuprof/contract.h>
inline constexpr std::string_view kContractHeaderName = "gpuprof/contract.h";

std::string_view ContractHeaderText();

}  // namespace gpuprof::kernels

#endif  // GPUPROF_KERNELS_CUSTOM_CONTRACT_CONTRACT_HEADER_H_
