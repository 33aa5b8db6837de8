// The grpc.health.v1 service name under which gpuprofd reports whether it takes writes. The
// whole server ("") stays SERVING while reads are served; this one is NOT_SERVING while the
// disk holding the database is full and the daemon serves reads only.
#ifndef GPUPROF_COMMON_WRITE_HEALTH_H_
#define GPUPROF_COMMON_WRITE_HEALTH_H_

namespace gpuprof {

inline constexpr char kWritesHealthService[] = "gpuprof.v1.Profiler/writes";

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_WRITE_HEALTH_H_
