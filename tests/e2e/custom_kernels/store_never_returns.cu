// Never returns: the experiment must end at its timeout, the GPU freed for the next one.
#include <gpuprof/contract.h>

extern "C" __global__ void store_never_returns(const __grid_constant__ gpuprof_store_params p) {
  // The slots are in [0, cache_slots), so this waits for a value that never comes; a volatile
  // load of global memory is not something the compiler may assume constant and drop.
  const volatile int* slot = p.slots;
  while (*slot >= 0) {
  }
}
