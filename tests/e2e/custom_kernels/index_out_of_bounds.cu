// Right for every token, and then one write past the end of the output: the guard bytes after
// the output must catch it.
#include <gpuprof/contract.h>

extern "C" __global__ void index_out_of_bounds(const __grid_constant__ gpuprof_index_params p) {
  const long long token = static_cast<long long>(blockIdx.x) * GPUPROF_ITEMS_PER_BLOCK;
  if (token >= p.num_tokens) return;
  const unsigned char* source =
      static_cast<const unsigned char*>(p.table) + static_cast<long long>(p.ids[token]) * p.row_bytes;
  unsigned char* destination = static_cast<unsigned char*>(p.out) + token * p.row_bytes;
  for (long long i = threadIdx.x; i < p.row_bytes; i += blockDim.x) destination[i] = source[i];
  // One row too many for the last token: 16 bytes after the end.
  if (token == p.num_tokens - 1 && threadIdx.x < 16) destination[p.row_bytes + threadIdx.x] = 0x42;
}
