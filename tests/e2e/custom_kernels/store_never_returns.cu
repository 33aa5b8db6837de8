// Never returns: the experiment must end at its timeout, the GPU freed for the next one.
#include <gpuprof/contract.h>

extern "C" __global__ void store_never_returns(const __grid_constant__ gpuprof_store_params p) {
  volatile long long spins = 0;
  while (spins >= 0) spins = spins + 1;
  static_cast<char*>(p.k_cache)[0] = 0;
}
