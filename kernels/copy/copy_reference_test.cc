#include "kernels/copy/copy_reference.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/copy/counter_bytes.h"

namespace gpuprof::kernels {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FillRandomBytesTest, ReproducibleNotZeroAndCoversOddLengths) {
  std::vector<std::byte> a(1001), b(1001), c(1001);
  FillRandomBytes(a, 7);
  FillRandomBytes(b, 7);
  FillRandomBytes(c, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GT(std::count(a.begin(), a.end(), std::byte{0}), 0);  // bytes, not only non-zero
  EXPECT_LT(std::count(a.begin(), a.end(), std::byte{0}), 50);
}

TEST(FillCounterBytesTest, AnyWindowIsTheSameSliceOfTheStream) {
  std::vector<std::byte> stream(301);
  FillRandomBytes(stream, 42);
  for (const int64_t offset : {0, 1, 7, 8, 13, 64, 250}) {
    for (const int64_t length : {1, 3, 8, 17, 51}) {
      std::vector<std::byte> window(length);
      FillCounterBytes(42, offset, window);
      EXPECT_TRUE(std::equal(window.begin(), window.end(), stream.begin() + offset))
          << "offset " << offset << " length " << length;
    }
  }
}

TEST(CounterBytesAtTest, ElementsAreLittleEndianSlicesOfTheStream) {
  std::vector<std::byte> stream(64);
  FillRandomBytes(stream, 9);
  for (const int width : {1, 2, 4, 8}) {
    for (int offset = 0; offset + width <= 64; offset += width) {
      uint64_t expected = 0;
      std::memcpy(&expected, stream.data() + offset, width);
      EXPECT_EQ(CounterBytesAt(9, offset, width), expected) << width << "@" << offset;
    }
  }
}

TEST(ReferenceGatherGeneratedTest, MatchesTheGatherOverTheWholeTable) {
  constexpr int64_t kRowBytes = 6;  // not a multiple of the 8-byte word
  constexpr int64_t kRows = 50;
  std::vector<std::byte> table(kRows * kRowBytes);
  FillRandomBytes(table, 5);
  const std::vector<int32_t> ids = {0, 49, 7, 7, 23, 60, 3};
  for (const bool masked : {false, true}) {
    const int64_t start = masked ? 3 : 0;
    const int64_t end = masked ? 30 : kRows;
    // A masked table holds only rows [start, end), so its stream starts at its first row.
    std::vector<std::byte> local((end - start) * kRowBytes);
    FillRandomBytes(local, 5);
    std::vector<int32_t> in_range;
    for (int32_t id : ids) {
      if (masked || id < kRows) in_range.push_back(id);
    }
    std::vector<std::byte> expected(in_range.size() * kRowBytes);
    std::vector<std::byte> generated(in_range.size() * kRowBytes);
    ReferenceGather(masked ? local : table, in_range, kRowBytes, masked, start, end, expected);
    ReferenceGatherGenerated(5, in_range, kRowBytes, masked, start, end, generated);
    EXPECT_EQ(generated, expected) << (masked ? "masked" : "unmasked");
  }
}

TEST(GenerateTokenIdsTest, InRange) {
  const auto ids = GenerateTokenIds(10000, 37, 1);
  EXPECT_EQ(ids.size(), 10000u);
  EXPECT_EQ(*std::min_element(ids.begin(), ids.end()), 0);
  EXPECT_EQ(*std::max_element(ids.begin(), ids.end()), 36);
}

TEST(GenerateSlotsTest, SequentialFillsPagesInOrder) {
  auto slots = GenerateSlots(SlotPattern::kSequential, 5, 64, 4, 1);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_THAT(*slots, ElementsAre(0, 1, 2, 3, 4));
}

TEST(GenerateSlotsTest, RandomIsAPermutationWithoutDuplicates) {
  auto slots = GenerateSlots(SlotPattern::kRandom, 1000, 1000, 1, 3);
  ASSERT_TRUE(slots.ok()) << slots.status();
  std::set<int32_t> distinct(slots->begin(), slots->end());
  EXPECT_EQ(distinct.size(), 1000u);
  EXPECT_EQ(*distinct.begin(), 0);
  EXPECT_EQ(*distinct.rbegin(), 999);
  EXPECT_FALSE(std::is_sorted(slots->begin(), slots->end()));
}

TEST(GenerateSlotsTest, PagedRandomKeepsTokensContiguousWithinAPage) {
  auto slots = GenerateSlots(SlotPattern::kRandom, 100, 1 << 20, 16, 5);
  ASSERT_TRUE(slots.ok()) << slots.status();
  std::set<int32_t> distinct(slots->begin(), slots->end());
  EXPECT_EQ(distinct.size(), 100u);
  for (int t = 0; t < 100; ++t) {
    EXPECT_EQ((*slots)[t] % 16, t % 16);
    if (t % 16 != 0) {
      EXPECT_EQ((*slots)[t], (*slots)[t - 1] + 1);
    }
  }
}

TEST(GenerateSlotsTest, SortedIsAscendingAndDistinct) {
  auto slots = GenerateSlots(SlotPattern::kSorted, 4096, int64_t{1} << 31, 1, 9);
  ASSERT_TRUE(slots.ok()) << slots.status();
  EXPECT_TRUE(std::is_sorted(slots->begin(), slots->end()));
  EXPECT_EQ(std::adjacent_find(slots->begin(), slots->end()), slots->end());
  EXPECT_GE(*slots->begin(), 0);
}

TEST(GenerateSlotsTest, RefusesWhatDoesNotFit) {
  EXPECT_THAT(GenerateSlots(SlotPattern::kRandom, 65, 64, 1, 1).status().message(),
              HasSubstr("num_tokens: got 65"));
  EXPECT_THAT(GenerateSlots(SlotPattern::kRandom, 1, 64, 5, 1).status().message(),
              HasSubstr("page_size: got 5"));
}

TEST(ReferenceGatherTest, MaskedRowsOutsideTheShardAreZero) {
  // Two local rows of 4 bytes for vocabulary rows [10, 12).
  const std::vector<std::byte> table = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4},
                                        std::byte{5}, std::byte{6}, std::byte{7}, std::byte{8}};
  const std::vector<int32_t> ids = {11, 3, 10};
  std::vector<std::byte> out(12, std::byte{0xee});
  ReferenceGather(table, ids, 4, /*masked=*/true, 10, 12, out);
  EXPECT_EQ(out[0], std::byte{5});
  EXPECT_EQ(out[3], std::byte{8});
  EXPECT_EQ(out[4], std::byte{0});
  EXPECT_EQ(out[7], std::byte{0});
  EXPECT_EQ(out[8], std::byte{1});

  const std::vector<int32_t> unmasked = {1, 0};
  std::vector<std::byte> plain(8);
  ReferenceGather(table, unmasked, 4, /*masked=*/false, 0, 0, plain);
  EXPECT_EQ(plain[0], std::byte{5});
  EXPECT_EQ(plain[4], std::byte{1});
}

TEST(ReferenceScatterTest, WritesRowsToSlots) {
  const std::vector<std::byte> source = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  const std::vector<int32_t> slots = {2, 0};
  std::vector<std::byte> cache(6, std::byte{9});
  ReferenceScatter(source, slots, 2, cache);
  EXPECT_THAT(cache, ElementsAre(std::byte{3}, std::byte{4}, std::byte{9}, std::byte{9},
                                 std::byte{1}, std::byte{2}));
}

TEST(CompareElementsTest, CountsMismatchingElementsAndTheirError) {
  std::vector<std::byte> expected(8), actual(8);
  const uint16_t values[4] = {0x3f80, 0x4000, 0x4040, 0x4080};  // bf16 1, 2, 3, 4
  std::memcpy(expected.data(), values, 8);
  std::memcpy(actual.data(), values, 8);
  EXPECT_EQ(CompareElements(expected, actual, ElementType::kBFloat16).mismatches, 0);
  const uint16_t five = 0x40a0;  // bf16 5 instead of 3
  std::memcpy(actual.data() + 4, &five, 2);
  const ComparisonResult result = CompareElements(expected, actual, ElementType::kBFloat16);
  EXPECT_EQ(result.elements, 4);
  EXPECT_EQ(result.mismatches, 1);
  EXPECT_EQ(result.first_mismatch, 2);
  EXPECT_DOUBLE_EQ(result.max_abs_error, 2.0);
}

TEST(ElementValueTest, DecodesEachType) {
  const uint16_t half_one_and_half = 0x3e00;
  EXPECT_DOUBLE_EQ(
      ElementValue(reinterpret_cast<const std::byte*>(&half_one_and_half), ElementType::kFloat16),
      1.5);
  const uint8_t fp8_one = 0x38;
  EXPECT_DOUBLE_EQ(
      ElementValue(reinterpret_cast<const std::byte*>(&fp8_one), ElementType::kFloat8E4M3), 1.0);
  const float minus_two = -2.0f;
  EXPECT_DOUBLE_EQ(
      ElementValue(reinterpret_cast<const std::byte*>(&minus_two), ElementType::kFloat32), -2.0);
}

}  // namespace
}  // namespace gpuprof::kernels
