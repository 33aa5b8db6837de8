#include "kernels/copy/copy_reference.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "kernels/copy/counter_bytes.h"

namespace gpuprof::kernels {
namespace {

float HalfToFloat(uint16_t bits) {
  const int sign = bits >> 15;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  float value;
  if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    value = mantissa == 0 ? INFINITY : NAN;
  } else {
    value = std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
  }
  return sign ? -value : value;
}

float Fp8E4m3ToFloat(uint8_t bits) {
  const int sign = bits >> 7;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  float value;
  if (exponent == 15 && mantissa == 7) {
    value = NAN;  // e4m3 has no infinities
  } else if (exponent == 0) {
    value = std::ldexp(static_cast<float>(mantissa), -9);
  } else {
    value = std::ldexp(static_cast<float>(mantissa + 8), exponent - 10);
  }
  return sign ? -value : value;
}

}  // namespace

int ElementBytes(ElementType type) {
  switch (type) {
    case ElementType::kFloat32:
      return 4;
    case ElementType::kFloat16:
    case ElementType::kBFloat16:
      return 2;
    case ElementType::kFloat8E4M3:
      return 1;
  }
  return 1;
}

void FillRandomBytes(std::span<std::byte> bytes, uint64_t seed) {
  FillCounterBytes(seed, 0, bytes);
}

void FillCounterBytes(uint64_t seed, int64_t offset, std::span<std::byte> bytes) {
  static_assert(std::endian::native == std::endian::little, "the stream is little-endian");
  size_t done = 0;
  while (done < bytes.size()) {
    const uint64_t position = offset + done;
    const uint64_t word = CounterWord(seed, position / 8);
    const size_t skip = position % 8;
    const size_t take = std::min<size_t>(8 - skip, bytes.size() - done);
    std::memcpy(bytes.data() + done, reinterpret_cast<const std::byte*>(&word) + skip, take);
    done += take;
  }
}

void ReferenceGatherGenerated(uint64_t seed, std::span<const int32_t> ids, int64_t row_bytes,
                              bool masked, int64_t vocab_start, int64_t vocab_end,
                              std::span<std::byte> out) {
  for (size_t token = 0; token < ids.size(); ++token) {
    const std::span<std::byte> destination = out.subspan(token * row_bytes, row_bytes);
    const int64_t id = ids[token];
    if (masked && (id < vocab_start || id >= vocab_end)) {
      std::memset(destination.data(), 0, row_bytes);
      continue;
    }
    const int64_t row = masked ? id - vocab_start : id;
    FillCounterBytes(seed, row * row_bytes, destination);
  }
}

std::vector<int32_t> GenerateTokenIds(int64_t num_tokens, int64_t vocab_size, uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::uniform_int_distribution<int64_t> id(0, vocab_size - 1);
  std::vector<int32_t> ids(num_tokens);
  for (auto& value : ids) value = static_cast<int32_t>(id(generator));
  return ids;
}

absl::StatusOr<std::vector<int32_t>> GenerateSlots(SlotPattern pattern, int64_t num_tokens,
                                                   int64_t cache_slots, int64_t page_size,
                                                   uint64_t seed) {
  if (page_size < 1 || cache_slots % page_size != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "page_size: got %d; must be >= 1 and divide cache_slots (%d)", page_size, cache_slots));
  }
  if (cache_slots > (int64_t{1} << 31)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("cache_slots: got %d; slots are int32, so at most 2^31", cache_slots));
  }
  const int64_t total_pages = cache_slots / page_size;
  const int64_t pages_needed = (num_tokens + page_size - 1) / page_size;
  if (num_tokens < 1 || pages_needed > total_pages) {
    return absl::InvalidArgumentError(
        absl::StrFormat("num_tokens: got %d; must be in [1, %d] to fit %d pages of %d slots",
                        num_tokens, total_pages * page_size, total_pages, page_size));
  }
  std::vector<int64_t> pages;
  pages.reserve(pages_needed);
  if (pattern == SlotPattern::kSequential) {
    for (int64_t page = 0; page < pages_needed; ++page) pages.push_back(page);
  } else {
    // Floyd's sampling: pages_needed distinct pages in O(pages_needed) memory, however large
    // the cache; then a shuffle, since Floyd's order is not uniform.
    std::mt19937_64 generator(seed);
    absl::flat_hash_set<int64_t> chosen;
    chosen.reserve(pages_needed);
    for (int64_t j = total_pages - pages_needed; j < total_pages; ++j) {
      const int64_t candidate = std::uniform_int_distribution<int64_t>(0, j)(generator);
      const int64_t page = chosen.insert(candidate).second ? candidate : j;
      if (page == j) chosen.insert(j);
      pages.push_back(page);
    }
    if (pattern == SlotPattern::kRandom) {
      std::shuffle(pages.begin(), pages.end(), generator);
    } else {
      std::sort(pages.begin(), pages.end());
    }
  }
  std::vector<int32_t> slots(num_tokens);
  for (int64_t token = 0; token < num_tokens; ++token) {
    slots[token] = static_cast<int32_t>(pages[token / page_size] * page_size + token % page_size);
  }
  return slots;
}

void ReferenceGather(std::span<const std::byte> table, std::span<const int32_t> ids,
                     int64_t row_bytes, bool masked, int64_t vocab_start, int64_t vocab_end,
                     std::span<std::byte> out) {
  for (size_t token = 0; token < ids.size(); ++token) {
    std::byte* destination = out.data() + token * row_bytes;
    const int64_t id = ids[token];
    if (masked && (id < vocab_start || id >= vocab_end)) {
      std::memset(destination, 0, row_bytes);
      continue;
    }
    const int64_t row = masked ? id - vocab_start : id;
    std::memcpy(destination, table.data() + row * row_bytes, row_bytes);
  }
}

void ReferenceScatter(std::span<const std::byte> source, std::span<const int32_t> slots,
                      int64_t row_bytes, std::span<std::byte> cache) {
  for (size_t token = 0; token < slots.size(); ++token) {
    std::memcpy(cache.data() + int64_t{slots[token]} * row_bytes, source.data() + token * row_bytes,
                row_bytes);
  }
}

double ElementValue(const std::byte* element, ElementType type) {
  switch (type) {
    case ElementType::kFloat32: {
      float value;
      std::memcpy(&value, element, 4);
      return value;
    }
    case ElementType::kFloat16: {
      uint16_t bits;
      std::memcpy(&bits, element, 2);
      return HalfToFloat(bits);
    }
    case ElementType::kBFloat16: {
      uint16_t bits;
      std::memcpy(&bits, element, 2);
      return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
    }
    case ElementType::kFloat8E4M3:
      return Fp8E4m3ToFloat(static_cast<uint8_t>(*element));
  }
  return 0;
}

ComparisonResult CompareElements(std::span<const std::byte> expected,
                                 std::span<const std::byte> actual, ElementType type) {
  const int element_bytes = ElementBytes(type);
  ComparisonResult result;
  result.elements = static_cast<int64_t>(std::min(expected.size(), actual.size())) / element_bytes;
  if (expected.size() != actual.size()) {
    result.mismatches = std::max(expected.size(), actual.size()) / element_bytes - result.elements;
  }
  // Fast path: whole buffers equal.
  if (expected.size() == actual.size() &&
      std::memcmp(expected.data(), actual.data(), expected.size()) == 0) {
    return result;
  }
  for (int64_t i = 0; i < result.elements; ++i) {
    const std::byte* want = expected.data() + i * element_bytes;
    const std::byte* got = actual.data() + i * element_bytes;
    if (std::memcmp(want, got, element_bytes) == 0) continue;
    ++result.mismatches;
    if (result.first_mismatch < 0) result.first_mismatch = i;
    const double error = std::fabs(ElementValue(want, type) - ElementValue(got, type));
    if (std::isfinite(error)) result.max_abs_error = std::max(result.max_abs_error, error);
  }
  return result;
}

}  // namespace gpuprof::kernels
