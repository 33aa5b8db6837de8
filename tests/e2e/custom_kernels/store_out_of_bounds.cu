// Right for every token, and then one write before the start of the V cache: the guard bytes
// before it must catch it.
#include <gpuprof/contract.h>

extern "C" __global__ void store_out_of_bounds(const __grid_constant__ gpuprof_store_params p) {
  const long long token = static_cast<long long>(blockIdx.x) * GPUPROF_ITEMS_PER_BLOCK;
  if (token >= p.num_tokens) return;
  const long long slot = p.slots[token];
  const unsigned char* k = static_cast<const unsigned char*>(p.k) + token * p.row_bytes;
  const unsigned char* v = static_cast<const unsigned char*>(p.v) + token * p.row_bytes;
  unsigned char* k_cache = static_cast<unsigned char*>(p.k_cache) + slot * p.row_bytes;
  unsigned char* v_cache = static_cast<unsigned char*>(p.v_cache) + slot * p.row_bytes;
  for (long long i = threadIdx.x; i < p.row_bytes; i += blockDim.x) {
    k_cache[i] = k[i];
    v_cache[i] = v[i];
  }
  const int lane = static_cast<int>(threadIdx.x);
  if (token == 0 && lane < 8) static_cast<unsigned char*>(p.v_cache)[-1 - lane] = 0x42;
}
