// Never returns: the experiment must end at its timeout, the GPU freed for the next one.
#include <gpuprof/contract.h>

extern "C" __global__ void index_never_returns(const __grid_constant__ gpuprof_index_params p) {
  // The ids are in [0, vocab_size), so this waits for a value that never comes; a volatile load
  // of global memory is not something the compiler may assume constant and drop.
  const volatile int* id = p.ids;
  while (*id >= 0) {
  }
}
