#include "workloads/copy/copy_pattern.h"

#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::workloads {
namespace {

TEST(CopyPatternTest, AFilledBufferMatchesItsOwnTagOnly) {
  for (const int64_t bytes : {1, 7, 8, 13, 4096, 4099}) {
    std::vector<std::byte> data(bytes);
    FillCopyPattern(data.data(), bytes, 3);
    EXPECT_EQ(FirstCopyPatternMismatch(data.data(), bytes, 3), -1) << bytes;
    // Another buffer's pattern differs within its first word (a one-byte buffer may agree).
    if (bytes >= 8) {
      EXPECT_LT(FirstCopyPatternMismatch(data.data(), bytes, 4), 8) << bytes;
    }
  }
}

TEST(CopyPatternTest, FindsTheFirstWrongByte) {
  std::vector<std::byte> data(1000);
  FillCopyPattern(data.data(), 1000, 9);
  data[997] ^= std::byte{1};
  data[998] ^= std::byte{1};
  EXPECT_EQ(FirstCopyPatternMismatch(data.data(), 1000, 9), 997);
  data[3] ^= std::byte{0x80};
  EXPECT_EQ(FirstCopyPatternMismatch(data.data(), 1000, 9), 3);
}

TEST(CopyPatternTest, AShortCopyShowsWhereItStopped) {
  std::vector<std::byte> source(256), destination(256, std::byte{0xa5});
  FillCopyPattern(source.data(), 256, 1);
  std::copy(source.begin(), source.begin() + 200, destination.begin());
  EXPECT_EQ(FirstCopyPatternMismatch(destination.data(), 256, 1), 200);
}

}  // namespace
}  // namespace gpuprof::workloads
