#include "radix/token_compare.h"

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpuprof::radix {
namespace {

using CompareFunction = size_t (*)(const int32_t*, const int32_t*, size_t);

// Every implementation the dispatcher may pick, plus the dispatcher itself.
std::vector<CompareFunction> ImplementationsToTest() {
  std::vector<CompareFunction> functions = {&CommonPrefixLengthScalar, &CommonPrefixLengthSse2,
                                            &CommonPrefixLength};
  if (CpuSupportsAvx2()) functions.push_back(&CommonPrefixLengthAvx2);
  return functions;
}

TEST(TokenCompareTest, EmptyInputMatchesNothing) {
  const int32_t a[] = {1};
  const int32_t b[] = {1};
  for (CompareFunction compare : ImplementationsToTest()) {
    EXPECT_EQ(compare(a, b, 0), 0u);
  }
}

TEST(TokenCompareTest, FindsEveryMismatchPositionForEveryLength) {
  // Lengths cover the scalar tail, one and several SSE2/AVX2 blocks, and
  // the 16-wide unrolled AVX2 loop with every remainder.
  for (size_t length = 0; length <= 70; ++length) {
    std::vector<int32_t> a(length);
    for (size_t i = 0; i < length; ++i) a[i] = static_cast<int32_t>(i) * 7 - 100;
    for (CompareFunction compare : ImplementationsToTest()) {
      EXPECT_EQ(compare(a.data(), a.data(), length), length) << "length " << length;
      for (size_t mismatch = 0; mismatch < length; ++mismatch) {
        std::vector<int32_t> b = a;
        b[mismatch] ^= 1 << 30;  // Differ in a high bit only.
        EXPECT_EQ(compare(a.data(), b.data(), length), mismatch)
            << "length " << length << " mismatch " << mismatch;
        // A later mismatch must not hide the first one.
        if (mismatch + 1 < length) b[length - 1] = -b[length - 1] - 1;
        EXPECT_EQ(compare(a.data(), b.data(), length), mismatch)
            << "length " << length << " mismatch " << mismatch;
      }
    }
  }
}

TEST(TokenCompareTest, IgnoresTokensPastTheLimit) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<int32_t> b = a;
  b[10] = 0;
  for (CompareFunction compare : ImplementationsToTest()) {
    EXPECT_EQ(compare(a.data(), b.data(), 10), 10u);
    EXPECT_EQ(compare(a.data(), b.data(), 11), 10u);
  }
}

TEST(TokenCompareTest, HandlesUnalignedPointers) {
  std::vector<int32_t> a(200);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<int32_t>(i);
  std::vector<int32_t> b = a;
  b[150] = -1;
  for (size_t offset = 0; offset < 9; ++offset) {
    for (CompareFunction compare : ImplementationsToTest()) {
      EXPECT_EQ(compare(a.data() + offset, b.data() + offset, 190 - offset), 150 - offset)
          << "offset " << offset;
    }
  }
}

TEST(TokenCompareTest, AgreesWithScalarOnRandomInputs) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const size_t length = rng() % 300;
    std::vector<int32_t> a(length);
    for (int32_t& token : a) token = static_cast<int32_t>(rng());
    std::vector<int32_t> b = a;
    // Mostly one mismatch, sometimes none.
    if (length > 0 && rng() % 4 != 0) b[rng() % length] += 1;
    const size_t expected = CommonPrefixLengthScalar(a.data(), b.data(), length);
    for (CompareFunction compare : ImplementationsToTest()) {
      ASSERT_EQ(compare(a.data(), b.data(), length), expected) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace gpuprof::radix
