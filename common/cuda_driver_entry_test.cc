#include "common/cuda_driver_entry.h"

#include <gtest/gtest.h>

namespace gpuprof {
namespace {

// Without a GPU the runtime finds no driver; with one, the driver has no such function. Either
// way the lookup fails rather than handing back a pointer to call.
TEST(CudaDriverEntryTest, RefusesAFunctionTheDriverLacks) {
  const absl::StatusOr<void (*)()> entry = CudaDriverEntry<void (*)()>("cuNoSuchFunction");
  EXPECT_FALSE(entry.ok());
}

}  // namespace
}  // namespace gpuprof
