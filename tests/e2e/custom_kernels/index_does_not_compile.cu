// Does not compile: the compiler's message must come back with this file's name and line.
#include <gpuprof/contract.h>

extern "C" __global__ void index_does_not_compile(const __grid_constant__ gpuprof_index_params p) {
  static_cast<char*>(p.out)[0] = undeclared_variable;
}
