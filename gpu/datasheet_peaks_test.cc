#include "gpu/datasheet_peaks.h"

#include "gtest/gtest.h"

namespace gpuprof::gpu {
namespace {

// Names as CUDA reports them on those products.
TEST(DatasheetPeaksTest, KnownProductsGetTheirSheetsFigure) {
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA H100 80GB HBM3"), 989.4);  // SXM, not 1980 MHz x
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA H200"), 989.4);
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA GH200 480GB"), 989.4);
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA H100 PCIe"), 756.0);
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA H100 NVL"), 835.0);
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA H200 NVL"), 835.0);
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA A100-SXM4-80GB"), 312.0);
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA A100 80GB PCIe"), 312.0);
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA L40S"), 362.0);
}

TEST(DatasheetPeaksTest, UnknownProductsFallBackToTheClock) {
  EXPECT_EQ(DatasheetBf16DenseTflops("NVIDIA GeForce RTX 4090"), std::nullopt);
  EXPECT_EQ(DatasheetBf16DenseTflops(""), std::nullopt);
}

}  // namespace
}  // namespace gpuprof::gpu
