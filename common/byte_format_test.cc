#include "common/byte_format.h"

#include "gtest/gtest.h"

namespace gpuprof {
namespace {

TEST(ByteFormatTest, BinaryUnits) {
  EXPECT_EQ(FormatBinaryBytes(512), "512 B");
  EXPECT_EQ(FormatBinaryBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBinaryBytes(64 << 20), "64.0 MiB");
  EXPECT_EQ(FormatBinaryBytes(int64_t{3} << 29), "1.50 GiB");
}

TEST(ByteFormatTest, DecimalUnits) {
  EXPECT_EQ(FormatDecimalBytes(512), "512 B");
  EXPECT_EQ(FormatDecimalBytes(268435456), "268.4 MB");
  EXPECT_EQ(FormatDecimalBytes(1200000000), "1.2 GB");
}

}  // namespace
}  // namespace gpuprof
