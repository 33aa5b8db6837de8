// Wrong on purpose: copies every row but flips the low bit of element 5 of token 17's row.
// The check must refuse it, naming token 17, element 5.
#include <gpuprof/contract.h>

extern "C" __global__ void index_wrong(const __grid_constant__ gpuprof_index_params p) {
  const long long token = static_cast<long long>(blockIdx.x) * GPUPROF_ITEMS_PER_BLOCK;
  if (token >= p.num_tokens) return;
  const unsigned char* source =
      static_cast<const unsigned char*>(p.table) + static_cast<long long>(p.ids[token]) * p.row_bytes;
  unsigned char* destination = static_cast<unsigned char*>(p.out) + token * p.row_bytes;
  for (long long i = threadIdx.x; i < p.row_bytes; i += blockDim.x) {
    unsigned char byte = source[i];
    if (token == 17 && i == 5 * p.element_bytes) byte ^= 1;
    destination[i] = byte;
  }
}
