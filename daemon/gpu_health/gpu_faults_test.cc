#include "daemon/gpu_health/gpu_faults.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;

TEST(ClassifyXidTest, ApplicationXidsAreTheProgramsFault) {
  for (int xid : {13, 31, 43, 45, 68, 109}) {
    EXPECT_EQ(ClassifyXid(xid), v1::GPU_FAULT_CLASS_APPLICATION) << xid;
  }
}

TEST(ClassifyXidTest, HardwareXidsAreTheGpusFault) {
  for (int xid : {48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140}) {
    EXPECT_EQ(ClassifyXid(xid), v1::GPU_FAULT_CLASS_HARDWARE) << xid;
  }
}

TEST(ClassifyXidTest, UnknownXidsAreOther) {
  for (int xid : {0, 1, 8, 32, 1000}) EXPECT_EQ(ClassifyXid(xid), v1::GPU_FAULT_CLASS_OTHER) << xid;
}

TEST(DescribeXidTest, SaysWhatTheCodeMeans) {
  EXPECT_THAT(DescribeXid(79), HasSubstr("fallen off the bus"));
  EXPECT_EQ(DescribeXid(4242), "Xid 4242");
  const GpuFault fault = XidFault(3, 48);
  EXPECT_EQ(fault.gpu, 3);
  EXPECT_EQ(fault.xid, 48);
  EXPECT_EQ(fault.fault_class, v1::GPU_FAULT_CLASS_HARDWARE);
  EXPECT_THAT(fault.description, HasSubstr("Xid 48 (double-bit ECC"));
  EXPECT_EQ(FaultClassLabel(v1::GPU_FAULT_CLASS_APPLICATION), "application");
  EXPECT_EQ(FaultClassLabel(v1::GPU_FAULT_CLASS_HARDWARE), "hardware");
  EXPECT_EQ(FaultClassLabel(v1::GPU_FAULT_CLASS_OTHER), "other");
}

v1::GpuMemoryErrors Errors(int64_t uncorrected) {
  v1::GpuMemoryErrors errors;
  errors.set_ecc_uncorrected(uncorrected);
  return errors;
}

TEST(MemoryErrorFaultTest, RisingUncorrectableErrorsAreAHardwareFault) {
  const auto fault = MemoryErrorFault(2, Errors(1), Errors(3));
  ASSERT_TRUE(fault.has_value());
  EXPECT_EQ(fault->gpu, 2);
  EXPECT_EQ(fault->xid, 0);
  EXPECT_EQ(fault->fault_class, v1::GPU_FAULT_CLASS_HARDWARE);
  EXPECT_THAT(fault->description, HasSubstr("uncorrectable ECC errors rose from 1 to 3"));
}

TEST(MemoryErrorFaultTest, OldCountsAndUnreadableCountersAreNotNews) {
  EXPECT_FALSE(MemoryErrorFault(0, std::nullopt, Errors(5)).has_value());
  EXPECT_FALSE(MemoryErrorFault(0, Errors(5), Errors(5)).has_value());
  EXPECT_FALSE(MemoryErrorFault(0, Errors(-1), Errors(-1)).has_value());
}

TEST(MemoryErrorFaultTest, PendingOrFailedRepairsDrainFromTheFirstReading) {
  v1::GpuMemoryErrors pending;
  pending.set_remapping_pending(true);
  auto fault = MemoryErrorFault(1, std::nullopt, pending);
  ASSERT_TRUE(fault.has_value());
  EXPECT_THAT(fault->description, HasSubstr("row remapping waits for a GPU reset"));

  v1::GpuMemoryErrors failed;
  failed.set_remapping_failed(true);
  fault = MemoryErrorFault(1, std::nullopt, failed);
  ASSERT_TRUE(fault.has_value());
  EXPECT_THAT(fault->description, HasSubstr("row remapping failed"));

  v1::GpuMemoryErrors retiring;
  retiring.set_retirement_pending(true);
  fault = MemoryErrorFault(1, std::nullopt, retiring);
  ASSERT_TRUE(fault.has_value());
  EXPECT_THAT(fault->description, HasSubstr("page retirement waits"));
}

}  // namespace
}  // namespace gpuprof::daemon
