// Does not compile: the compiler's message must come back with this file's name and line.
#include <gpuprof/contract.h>

extern "C" __global__ void store_does_not_compile(const __grid_constant__ gpuprof_store_params p) {
  p.k_cache = p.k;  // the struct is const, and k is const void*
}
