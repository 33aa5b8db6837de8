// What the end-to-end tests of submitted kernels share: a CustomKernel read from a source file
// of the repository, and one experiment submitted to a real daemon and followed to its end.
#ifndef GPUPROF_TESTS_TESTING_CUSTOM_KERNEL_RUNS_H_
#define GPUPROF_TESTS_TESTING_CUSTOM_KERNEL_RUNS_H_

#include <string>

#include "absl/status/statusor.h"
#include "gpuprof/v1/experiment.pb.h"
#include "tests/testing/daemon_harness.h"

namespace gpuprof::testing {

// The kernel `name` of the source at `path` (relative to the repository), its file name the
// path's last part; block_threads and items_per_block left unset when 0 (the daemon's defaults).
v1::CustomKernel KernelFromFile(const std::string& path, const std::string& name,
                                int block_threads = 0, int items_per_block = 0);

// Submits `request`, follows its stream to a terminal state and returns the stored experiment;
// the stream's status when admission refused it (no experiment id came).
absl::StatusOr<v1::Experiment> SubmitAndWait(const DaemonProcess& daemon,
                                             const v1::ExperimentRequest& request);

}  // namespace gpuprof::testing

#endif  // GPUPROF_TESTS_TESTING_CUSTOM_KERNEL_RUNS_H_
