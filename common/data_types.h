// The API's data types: size and name, in one table.
#ifndef GPUPROF_COMMON_DATA_TYPES_H_
#define GPUPROF_COMMON_DATA_TYPES_H_

#include <cstdint>
#include <string>

#include "gpuprof/v1/workloads.pb.h"

namespace gpuprof {

// Bytes of one element; 0 for DATA_TYPE_UNSPECIFIED or an unknown value.
int64_t DataTypeBytes(v1::DataType dtype);

// "bf16", "fp8-e4m3", as users type them; "unspecified" for the zero value.
std::string DataTypeName(v1::DataType dtype);

}  // namespace gpuprof

#endif  // GPUPROF_COMMON_DATA_TYPES_H_
