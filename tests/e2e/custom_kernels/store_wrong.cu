// Wrong on purpose: writes K and V to the slot after the one each token names. The check must
// refuse it, naming the first element that differs.
#include <gpuprof/contract.h>

extern "C" __global__ void store_wrong(const __grid_constant__ gpuprof_store_params p) {
  const long long token = static_cast<long long>(blockIdx.x) * GPUPROF_ITEMS_PER_BLOCK;
  if (token >= p.num_tokens) return;
  const long long slot = (p.slots[token] + 1) % p.cache_slots;
  const unsigned char* k = static_cast<const unsigned char*>(p.k) + token * p.row_bytes;
  const unsigned char* v = static_cast<const unsigned char*>(p.v) + token * p.row_bytes;
  unsigned char* k_cache = static_cast<unsigned char*>(p.k_cache) + slot * p.row_bytes;
  unsigned char* v_cache = static_cast<unsigned char*>(p.v_cache) + slot * p.row_bytes;
  for (long long i = threadIdx.x; i < p.row_bytes; i += blockDim.x) {
    k_cache[i] = k[i];
    v_cache[i] = v[i];
  }
}
