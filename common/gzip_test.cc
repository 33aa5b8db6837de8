#include "common/gzip.h"

#include <string>

#include <gtest/gtest.h>

namespace gpuprof {
namespace {

std::string Sample(size_t size) {
  std::string text;
  for (size_t i = 0; text.size() < size; ++i) {
    text += "{\"name\":\"kernel " + std::to_string(i % 97) + "\",\"ts\":" + std::to_string(i) + "},";
  }
  text.resize(size);
  return text;
}

TEST(GzipTest, RoundTripsEmptySmallAndLargeInput) {
  for (const size_t size : {size_t{0}, size_t{1}, size_t{1000}, size_t{3} << 20}) {
    const std::string data = Sample(size);
    const absl::StatusOr<std::string> compressed = GzipCompress(data);
    ASSERT_TRUE(compressed.ok()) << compressed.status();
    // The gzip magic, and smaller than the input once there is something to compress.
    ASSERT_GE(compressed->size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>((*compressed)[0]), 0x1f);
    EXPECT_EQ(static_cast<unsigned char>((*compressed)[1]), 0x8b);
    if (size >= 1000) {
      EXPECT_LT(compressed->size(), size / 4);
    }
    const absl::StatusOr<std::string> back = GzipDecompress(*compressed);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, data);
  }
}

TEST(GzipTest, ReadsConcatenatedMembers) {
  const std::string joined = *GzipCompress("first,") + *GzipCompress("second");
  EXPECT_EQ(*GzipDecompress(joined), "first,second");
}

TEST(GzipTest, RefusesWhatIsNotGzipOrEndsEarly) {
  EXPECT_EQ(GzipDecompress("{\"plain\":\"json\"}").status().code(), absl::StatusCode::kDataLoss);
  const std::string compressed = *GzipCompress(Sample(10000));
  EXPECT_EQ(GzipDecompress(compressed.substr(0, compressed.size() / 2)).status().code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(GzipDecompress("").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace gpuprof
