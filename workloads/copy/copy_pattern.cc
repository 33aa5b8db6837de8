#include "workloads/copy/copy_pattern.h"

#include <cstring>

namespace gpuprof::workloads {
namespace {

// SplitMix64's finaliser: consecutive counters give unrelated words.
uint64_t PatternWord(uint64_t tag, uint64_t index) {
  uint64_t z = tag * 0x9e3779b97f4a7c15ULL + index + 1;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

void FillCopyPattern(std::byte* data, int64_t bytes, uint64_t tag) {
  const int64_t words = bytes / 8;
  for (int64_t i = 0; i < words; ++i) {
    const uint64_t word = PatternWord(tag, i);
    std::memcpy(data + 8 * i, &word, 8);
  }
  const uint64_t tail = PatternWord(tag, words);
  std::memcpy(data + 8 * words, &tail, bytes - 8 * words);
}

int64_t FirstCopyPatternMismatch(const std::byte* data, int64_t bytes, uint64_t tag) {
  const int64_t words = bytes / 8;
  for (int64_t i = 0; i <= words; ++i) {
    const int64_t length = i < words ? 8 : bytes - 8 * words;
    const uint64_t word = PatternWord(tag, i);
    if (std::memcmp(data + 8 * i, &word, length) == 0) continue;
    for (int64_t b = 0; b < length; ++b) {
      if (data[8 * i + b] != reinterpret_cast<const std::byte*>(&word)[b]) return 8 * i + b;
    }
  }
  return -1;
}

}  // namespace gpuprof::workloads
