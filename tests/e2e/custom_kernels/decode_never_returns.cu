// Never returns: the experiment must end at its timeout, the GPU freed for the next one.
#include <gpuprof/contract.h>

extern "C" __global__ void decode_never_returns(const __grid_constant__ gpuprof_decode_params p) {
  // Volatile, so that the compiler cannot prove the loop endless and drop it.
  volatile long long spins = 0;
  while (spins >= 0) spins = spins + 1;
  static_cast<unsigned short*>(p.o)[0] = 0;
}
