// Faults: writes 64 TiB past the output, where nothing is mapped. The experiment must fail with
// the fault named and the worker must not be reused; the next experiment on the GPU runs in a
// fresh one.
#include <gpuprof/contract.h>

extern "C" __global__ void index_illegal_address(const __grid_constant__ gpuprof_index_params p) {
  char* nowhere = static_cast<char*>(p.out) + (1ll << 46) + p.num_tokens * p.row_bytes;
  nowhere[threadIdx.x] = 1;
}
