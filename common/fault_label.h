// The request label that asks a worker to misbehave, for fault tests: crash, hang, exit,
// cuda-error. The daemon accepts it only when started with --enable_test_faults, and the
// worker acts on it only when the daemon set GPUPROF_ENABLE_TEST_FAULTS=1 in its environment.
#ifndef GPUPROF_COMMON_FAULT_LABEL_H_
#define GPUPROF_COMMON_FAULT_LABEL_H_

namespace gpuprof {

inline constexpr char kFaultLabel[] = "gpuprof.fault";

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_FAULT_LABEL_H_
