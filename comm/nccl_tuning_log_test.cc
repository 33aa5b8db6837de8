#include "comm/nccl_tuning_log.h"

#include <stdlib.h>

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::comm {
namespace {

// Lines as NCCL 2.28.3 wrote them on 2 x H200 with NCCL_DEBUG_SUBSYS=TUNING.
constexpr char kAllReduceLl[] =
    "vm:9206:9226 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}";
constexpr char kAllReduceSimple[] =
    "vm:9206:9226 [0] NCCL INFO AllReduce: 2097152 Bytes -> Algo RING proto SIMPLE "
    "channel{Lo..Hi}={0..23}";
constexpr char kBroadcast[] =
    "vm:9206:9236 [0] NCCL INFO Broadcast: 128 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}";
constexpr char kTable[] =
    "vm:9206:9237 [0] NCCL INFO   Algorithm   |      Tree      |      Ring      |";

TEST(ParseNcclTuningLineTest, AlgorithmAndProtocolOfTheNamedOperation) {
  auto choice = ParseNcclTuningLine(kAllReduceLl, "AllReduce");
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->algorithm, "RING");
  EXPECT_EQ(choice->protocol, "LL");
  choice = ParseNcclTuningLine(kAllReduceSimple, "AllReduce");
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->protocol, "SIMPLE");
  // Another operation's line, the tuning table and an empty name do not count.
  EXPECT_FALSE(ParseNcclTuningLine(kBroadcast, "AllReduce").has_value());
  EXPECT_FALSE(ParseNcclTuningLine(kTable, "AllReduce").has_value());
  EXPECT_FALSE(ParseNcclTuningLine(kAllReduceLl, "").has_value());
  EXPECT_FALSE(ParseNcclTuningLine("x NCCL INFO AllReduce: 8 Bytes -> Algo RING", "AllReduce")
                   .has_value());
}

TEST(NcclLogOperationNameTest, TunedOperationsOnly) {
  EXPECT_EQ(NcclLogOperationName("all_reduce"), "AllReduce");
  EXPECT_EQ(NcclLogOperationName("all_gather"), "AllGather");
  EXPECT_EQ(NcclLogOperationName("reduce_scatter"), "ReduceScatter");
  EXPECT_EQ(NcclLogOperationName("broadcast"), "Broadcast");
  EXPECT_EQ(NcclLogOperationName("all_to_all"), "");
}

TEST(NcclTuningLogTest, ReadsWhatWasAppendedSinceTheLastCallThroughTheProcPath) {
  unsetenv("NCCL_DEBUG");
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  NcclTuningLog log = NcclTuningLog::EnableForThisProcess();
  ASSERT_TRUE(log.enabled());
  EXPECT_STREQ(getenv("NCCL_DEBUG"), "INFO");
  EXPECT_STREQ(getenv("NCCL_DEBUG_SUBSYS"), "TUNING");
  // Written as NCCL writes it: a stream opened on the path it was given.
  FILE* nccl = std::fopen(getenv("NCCL_DEBUG_FILE"), "w");
  ASSERT_NE(nccl, nullptr);
  std::fprintf(nccl, "%s\n%s\n", kTable, kAllReduceLl);
  std::fflush(nccl);
  auto choice = log.LatestChoice("AllReduce");
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->protocol, "LL");
  // Nothing new: no choice. A line written in two parts counts once it is whole.
  EXPECT_FALSE(log.LatestChoice("AllReduce").has_value());
  std::fprintf(nccl, "vm:9206:9226 [0] NCCL INFO AllReduce: 2097152 Bytes -> Algo ");
  std::fflush(nccl);
  EXPECT_FALSE(log.LatestChoice("AllReduce").has_value());
  std::fprintf(nccl, "RING proto SIMPLE channel{Lo..Hi}={0..23}\n");
  std::fflush(nccl);
  choice = log.LatestChoice("AllReduce");
  ASSERT_TRUE(choice.has_value());
  EXPECT_EQ(choice->protocol, "SIMPLE");
  std::fclose(nccl);
}

TEST(NcclTuningLogTest, TheUsersOwnNcclDebugSettingWins) {
  setenv("NCCL_DEBUG", "WARN", 1);
  unsetenv("NCCL_DEBUG_SUBSYS");
  unsetenv("NCCL_DEBUG_FILE");
  NcclTuningLog log = NcclTuningLog::EnableForThisProcess();
  EXPECT_FALSE(log.enabled());
  EXPECT_STREQ(getenv("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(getenv("NCCL_DEBUG_FILE"), nullptr);
  EXPECT_FALSE(log.LatestChoice("AllReduce").has_value());
  unsetenv("NCCL_DEBUG");
}

}  // namespace
}  // namespace gpuprof::comm
