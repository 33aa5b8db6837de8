#include "common/data_types.h"

#include "common/enum_names.h"

namespace gpuprof {

int64_t DataTypeBytes(v1::DataType dtype) {
  switch (dtype) {
    case v1::DATA_TYPE_FP32:
    case v1::DATA_TYPE_INT32:
      return 4;
    case v1::DATA_TYPE_FP16:
    case v1::DATA_TYPE_BF16:
      return 2;
    case v1::DATA_TYPE_FP8_E4M3:
    case v1::DATA_TYPE_FP8_E5M2:
    case v1::DATA_TYPE_INT8:
      return 1;
    case v1::DATA_TYPE_UNSPECIFIED:
    default:
      return 0;
  }
}

std::string DataTypeName(v1::DataType dtype) {
  return dtype == v1::DATA_TYPE_UNSPECIFIED ? "unspecified" : EnumShortName(dtype);
}

}  // namespace gpuprof
