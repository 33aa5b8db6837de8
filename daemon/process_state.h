// What a process is doing, as the kernel says (/proc/PID/stat): used to explain which rank of
// a timed-out experiment held the others up (a rank stopped by a signal or a debugger reads
// "stopped", one stuck in the driver "in uninterruptible sleep").
#ifndef GPUPROF_DAEMON_PROCESS_STATE_H_
#define GPUPROF_DAEMON_PROCESS_STATE_H_

#include <sys/types.h>

#include <string>

namespace gpuprof {

// "running", "sleeping", "in uninterruptible sleep (D)", "stopped (by a signal or a
// debugger)", "a zombie", ...; "gone" when the process no longer exists.
std::string DescribeProcessState(pid_t pid);

}  // namespace gpuprof

#endif  // GPUPROF_DAEMON_PROCESS_STATE_H_
