// Byte counts as text, in one place with the unit system in the name: memory sizes in binary
// units (what cudaMalloc and /proc/meminfo count) and data volumes in decimal units (the same
// 1e9 that GB/s figures use).
#ifndef GPUPROF_COMMON_BYTE_FORMAT_H_
#define GPUPROF_COMMON_BYTE_FORMAT_H_

#include <cstdint>
#include <string>

namespace gpuprof {

// "512 B", "1.5 KiB", "64.0 MiB", "1.50 GiB".
std::string FormatBinaryBytes(int64_t bytes);

// "512 B", "268.4 MB", "1.2 GB".
std::string FormatDecimalBytes(int64_t bytes);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_BYTE_FORMAT_H_
