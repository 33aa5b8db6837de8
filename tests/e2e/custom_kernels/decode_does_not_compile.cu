// Does not compile: the compiler's message must come back with this file's name and line.
#include <gpuprof/contract.h>

extern "C" __global__ void decode_does_not_compile(gpuprof_decode_params p) {
  static_cast<unsigned short*>(p.o)[0] = p.kv_len[0];
}
