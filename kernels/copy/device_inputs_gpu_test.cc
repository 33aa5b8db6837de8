// The GPU's input fill against the host stream, and the on-GPU cache check against scatters
// done right and wrong.
#include "kernels/copy/device_inputs.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "common/cuda_raii.h"
#include "common/cuda_status.h"
#include "gtest/gtest.h"
#include "kernels/copy/copy_reference.h"

namespace gpuprof::kernels {
namespace {

constexpr uint8_t kFill = 0x5a;

class DeviceInputsGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU";
    cudaDeviceProp properties;
    ASSERT_EQ(cudaGetDeviceProperties(&properties, 0), cudaSuccess);
    sm_count_ = properties.multiProcessorCount;
    auto stream = CudaStream::Create();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }

  std::vector<std::byte> Download(const DeviceBuffer& buffer, size_t bytes) {
    std::vector<std::byte> host(bytes);
    EXPECT_EQ(cudaMemcpy(host.data(), buffer.data(), bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

  int sm_count_ = 0;
  CudaStream stream_;
};

TEST_F(DeviceInputsGpuTest, FillIsTheHostStreamAtEveryLength) {
  // Odd lengths exercise the tail after the last whole word; the large one many blocks.
  for (const int64_t bytes : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{1001},
                              int64_t{3} << 20 | 5}) {
    auto buffer = DeviceBuffer::Allocate(bytes);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(FillDeviceCounterBytes(buffer->data(), bytes, 77, sm_count_, stream_.get()).ok());
    ASSERT_EQ(cudaStreamSynchronize(stream_.get()), cudaSuccess);
    std::vector<std::byte> expected(bytes);
    FillRandomBytes(expected, 77);
    EXPECT_EQ(Download(*buffer, bytes), expected) << bytes << " bytes";
  }
}

// A cache of `slots` rows filled with kFill, then rows of the stream scattered by the host.
struct ScatterCase {
  ElementType element;
  int64_t row_bytes;
};

TEST_F(DeviceInputsGpuTest, CacheCheckPassesARightScatterAndFindsEveryWrongByte) {
  for (const ScatterCase scatter : {ScatterCase{ElementType::kBFloat16, 256},
                                    ScatterCase{ElementType::kFloat32, 12},
                                    ScatterCase{ElementType::kFloat8E4M3, 3}}) {
    constexpr int64_t kSlots = 4096;
    constexpr uint64_t kSeed = 1234;
    const std::vector<int32_t> slots = {5, 4000, 17, 1024, 0};
    std::vector<std::byte> source(slots.size() * scatter.row_bytes);
    FillRandomBytes(source, kSeed);
    std::vector<std::byte> cache(kSlots * scatter.row_bytes, std::byte{kFill});
    ReferenceScatter(source, slots, scatter.row_bytes, cache);
    std::vector<int32_t> slot_tokens(kSlots, -1);
    for (size_t t = 0; t < slots.size(); ++t) slot_tokens[slots[t]] = static_cast<int32_t>(t);

    auto cache_device = DeviceBuffer::Allocate(cache.size());
    auto tokens_device = DeviceBuffer::Allocate(kSlots * sizeof(int32_t));
    ASSERT_TRUE(cache_device.ok() && tokens_device.ok());
    ASSERT_EQ(cudaMemcpy(tokens_device->data(), slot_tokens.data(), kSlots * sizeof(int32_t),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    const ScatteredCache check{.cache = cache_device->data(),
                               .slots = kSlots,
                               .row_bytes = scatter.row_bytes,
                               .element = scatter.element,
                               .slot_tokens = tokens_device->data_as<int32_t>(),
                               .source_seed = kSeed,
                               .fill_byte = kFill};
    const int64_t element_bytes = ElementBytes(scatter.element);

    ASSERT_EQ(cudaMemcpy(cache_device->data(), cache.data(), cache.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    auto right = CheckScatteredCacheOnDevice(check, sm_count_, stream_.get());
    ASSERT_TRUE(right.ok()) << right.status();
    EXPECT_EQ(right->elements, kSlots * scatter.row_bytes / element_bytes);
    EXPECT_EQ(right->mismatches, 0);
    EXPECT_EQ(right->first_mismatch, -1);

    // One byte off in a written row, one in an untouched slot, and a row written to the
    // wrong slot (its own slot keeps the fill; the other slot gets a row it must not hold).
    std::vector<std::byte> wrong = cache;
    const int64_t written_byte = 17 * scatter.row_bytes + scatter.row_bytes - 1;
    wrong[written_byte] ^= std::byte{0x01};
    wrong[3 * scatter.row_bytes] ^= std::byte{0x80};
    std::memcpy(wrong.data() + 6 * scatter.row_bytes, wrong.data() + 1024 * scatter.row_bytes,
                scatter.row_bytes);
    std::memset(wrong.data() + 1024 * scatter.row_bytes, kFill, scatter.row_bytes);
    const std::vector<int64_t> bad_elements = {3 * scatter.row_bytes / element_bytes,
                                               written_byte / element_bytes};
    ASSERT_EQ(cudaMemcpy(cache_device->data(), wrong.data(), wrong.size(), cudaMemcpyHostToDevice),
              cudaSuccess);
    auto found = CheckScatteredCacheOnDevice(check, sm_count_, stream_.get());
    ASSERT_TRUE(found.ok()) << found.status();
    const ComparisonResult on_host = CompareElements(cache, wrong, scatter.element);
    EXPECT_EQ(found->mismatches, on_host.mismatches);
    EXPECT_GE(found->mismatches, 2 + 1);  // at least the two flipped bytes and a moved row
    EXPECT_EQ(found->first_mismatch, bad_elements[0]);
  }
}

}  // namespace
}  // namespace gpuprof::kernels
