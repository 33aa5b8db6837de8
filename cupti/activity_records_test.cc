#include "cupti/activity_records.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::cupti {
namespace {

namespace api = ::gpuprof::v1;
using ::testing::ElementsAre;

// CUPTI records are plain structs; the tests fill them as CUPTI would.
CUpti_ActivityKernel10 KernelRecord(const char* name, uint64_t start, uint64_t end) {
  CUpti_ActivityKernel10 kernel;
  std::memset(&kernel, 0, sizeof(kernel));
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.name = name;
  kernel.start = start;
  kernel.end = end;
  kernel.deviceId = 1;
  kernel.contextId = 7;
  kernel.streamId = 13;
  kernel.correlationId = 99;
  kernel.gridX = 1024;
  kernel.gridY = 2;
  kernel.gridZ = 1;
  kernel.blockX = 128;
  kernel.blockY = 1;
  kernel.blockZ = 1;
  kernel.registersPerThread = 40;
  kernel.staticSharedMemory = 4096;
  kernel.dynamicSharedMemory = 16384;
  return kernel;
}

const CUpti_Activity& AsActivity(const auto& record) {
  return reinterpret_cast<const CUpti_Activity&>(record);
}

TEST(DemangleKernelNameTest, DemanglesCppNames) {
  EXPECT_EQ(DemangleKernelName("_Z9vectorAddPKfS0_Pfi"),
            "vectorAdd(float const*, float const*, float*, int)");
  EXPECT_EQ(DemangleKernelName("_ZN7gpuprof6kernel4CopyILi16EEEvPKvPvm"),
            "void gpuprof::kernel::Copy<16>(void const*, void*, unsigned long)");
}

TEST(DemangleKernelNameTest, KeepsUnmangledAndBrokenNames) {
  EXPECT_EQ(DemangleKernelName("copy_kernel"), "copy_kernel");
  EXPECT_EQ(DemangleKernelName("_Znot-a-name"), "_Znot-a-name");
  EXPECT_EQ(DemangleKernelName(""), "");
}

TEST(ActivityRecordConverterTest, ConvertsKernelRecord) {
  ActivityRecordConverter converter({5, 6});
  const CUpti_ActivityKernel10 kernel = KernelRecord("_Z4copyPKfPf", 1000, 5000);
  const auto record = converter.Convert(AsActivity(kernel));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->kind(), api::ActivityRecord::KIND_KERNEL);
  EXPECT_EQ(record->name(), "copy(float const*, float*)");
  EXPECT_EQ(record->start_ns(), 1000);
  EXPECT_EQ(record->end_ns(), 5000);
  EXPECT_EQ(record->gpu_id(), 6);  // device 1 -> GPU 6
  EXPECT_EQ(record->stream_id(), 13u);
  EXPECT_EQ(record->correlation_id(), 99u);
  EXPECT_THAT(record->grid(), ElementsAre(1024u, 2u, 1u));
  EXPECT_THAT(record->block(), ElementsAre(128u, 1u, 1u));
  EXPECT_EQ(record->registers_per_thread(), 40);
  EXPECT_EQ(record->static_shared_memory(), 4096);
  EXPECT_EQ(record->dynamic_shared_memory(), 16384);
  EXPECT_EQ(record->phase(), api::PHASE_UNSPECIFIED);
}

TEST(ActivityRecordConverterTest, UnmappedDeviceKeepsItsOrdinal) {
  ActivityRecordConverter converter({});
  const CUpti_ActivityKernel10 kernel = KernelRecord("k", 1, 2);
  EXPECT_EQ(converter.Convert(AsActivity(kernel))->gpu_id(), 1);
}

TEST(ActivityRecordConverterTest, ConvertsMemcpyAndMemset) {
  ActivityRecordConverter converter({3});
  CUpti_ActivityMemcpy6 copy;
  std::memset(&copy, 0, sizeof(copy));
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 1 << 20;
  copy.start = 10;
  copy.end = 30;
  copy.streamId = 2;
  copy.correlationId = 5;
  const auto copied = converter.Convert(AsActivity(copy));
  ASSERT_TRUE(copied.has_value());
  EXPECT_EQ(copied->kind(), api::ActivityRecord::KIND_MEMCPY);
  EXPECT_EQ(copied->name(), "memcpy htod");
  EXPECT_EQ(copied->copy_kind(), "htod");
  EXPECT_EQ(copied->bytes(), 1 << 20);
  EXPECT_EQ(copied->gpu_id(), 3);

  CUpti_ActivityMemset4 memset;
  std::memset(&memset, 0, sizeof(memset));
  memset.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  memset.bytes = 4096;
  memset.start = 40;
  memset.end = 45;
  const auto set = converter.Convert(AsActivity(memset));
  ASSERT_TRUE(set.has_value());
  EXPECT_EQ(set->kind(), api::ActivityRecord::KIND_MEMSET);
  EXPECT_EQ(set->bytes(), 4096);
  EXPECT_EQ(set->end_ns() - set->start_ns(), 5);
}

TEST(ActivityRecordConverterTest, SynchronizationTakesTheDeviceOfItsContext) {
  ActivityRecordConverter converter({4, 9});
  const CUpti_ActivityKernel10 kernel = KernelRecord("k", 1, 2);  // context 7 on device 1
  ASSERT_TRUE(converter.Convert(AsActivity(kernel)).has_value());

  CUpti_ActivitySynchronization2 sync;
  std::memset(&sync, 0, sizeof(sync));
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.contextId = 7;
  sync.streamId = 13;
  sync.start = 100;
  sync.end = 900;
  const auto record = converter.Convert(AsActivity(sync));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->kind(), api::ActivityRecord::KIND_SYNCHRONIZATION);
  EXPECT_EQ(record->name(), "cudaStreamSynchronize");
  EXPECT_EQ(record->gpu_id(), 9);
  EXPECT_EQ(record->stream_id(), 13u);

  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  sync.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
  sync.contextId = 8;  // never seen: device 0
  const auto context_sync = converter.Convert(AsActivity(sync));
  EXPECT_EQ(context_sync->name(), "cudaDeviceSynchronize");
  EXPECT_EQ(context_sync->stream_id(), 0u);
  EXPECT_EQ(context_sync->gpu_id(), 4);
}

TEST(ActivityRecordConverterTest, OverheadOfTheProcessIsTheHosts) {
  ActivityRecordConverter converter({2});
  CUpti_ActivityOverhead3 overhead;
  std::memset(&overhead, 0, sizeof(overhead));
  overhead.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
  overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
  overhead.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  overhead.start = 5;
  overhead.end = 8;
  auto record = converter.Convert(AsActivity(overhead));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->kind(), api::ActivityRecord::KIND_OVERHEAD);
  EXPECT_EQ(record->name(), "CUPTI buffer flush");
  EXPECT_EQ(record->gpu_id(), -1);

  overhead.objectKind = CUPTI_ACTIVITY_OBJECT_DEVICE;
  overhead.objectId.dcs.deviceId = 0;
  overhead.overheadKind = CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER;
  record = converter.Convert(AsActivity(overhead));
  EXPECT_EQ(record->name(), "driver JIT compilation");
  EXPECT_EQ(record->gpu_id(), 2);
}

TEST(ActivityRecordConverterTest, SkipsKindsItDoesNotKeep) {
  ActivityRecordConverter converter({});
  CUpti_ActivityAPI api_record;
  std::memset(&api_record, 0, sizeof(api_record));
  api_record.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  EXPECT_FALSE(converter.Convert(AsActivity(api_record)).has_value());
}

TEST(PhaseTimelineTest, PlacesTimestampsInPhases) {
  PhaseTimeline timeline;
  EXPECT_EQ(timeline.PhaseAt(5), api::PHASE_UNSPECIFIED);
  timeline.Begin(api::PHASE_JIT, 100);
  timeline.Begin(api::PHASE_WARMUP, 200);
  timeline.Begin(api::PHASE_TIMED, 300);
  EXPECT_EQ(timeline.PhaseAt(99), api::PHASE_UNSPECIFIED);
  EXPECT_EQ(timeline.PhaseAt(100), api::PHASE_JIT);
  EXPECT_EQ(timeline.PhaseAt(199), api::PHASE_JIT);
  EXPECT_EQ(timeline.PhaseAt(200), api::PHASE_WARMUP);
  EXPECT_EQ(timeline.PhaseAt(300), api::PHASE_TIMED);
  EXPECT_EQ(timeline.PhaseAt(1'000'000), api::PHASE_TIMED);  // still open
  timeline.End(400);
  EXPECT_EQ(timeline.PhaseAt(399), api::PHASE_TIMED);
  EXPECT_EQ(timeline.PhaseAt(400), api::PHASE_UNSPECIFIED);
  timeline.Begin(api::PHASE_VERIFICATION, 500);
  EXPECT_EQ(timeline.PhaseAt(450), api::PHASE_UNSPECIFIED);  // the gap
  EXPECT_EQ(timeline.PhaseAt(600), api::PHASE_VERIFICATION);
}

TEST(PhaseTimelineTest, MarkersForEndedPhasesOnce) {
  PhaseTimeline timeline;
  timeline.Begin(api::PHASE_WARMUP, 10);
  EXPECT_TRUE(timeline.TakeEndedPhaseMarkers(0).empty());  // warm-up still open
  timeline.Begin(api::PHASE_TIMED, 20);
  timeline.End(35);
  const auto markers = timeline.TakeEndedPhaseMarkers(3);
  ASSERT_EQ(markers.size(), 2u);
  EXPECT_EQ(markers[0].kind(), api::ActivityRecord::KIND_PHASE);
  EXPECT_EQ(markers[0].name(), "warmup");
  EXPECT_EQ(markers[0].phase(), api::PHASE_WARMUP);
  EXPECT_EQ(markers[0].start_ns(), 10);
  EXPECT_EQ(markers[0].end_ns(), 20);
  EXPECT_EQ(markers[1].name(), "timed");
  EXPECT_EQ(markers[1].end_ns(), 35);
  EXPECT_EQ(markers[1].gpu_id(), 3);
  EXPECT_TRUE(timeline.TakeEndedPhaseMarkers(3).empty());
}

TEST(PhaseTimelineTest, BackwardsTimestampsDoNotOverlap) {
  PhaseTimeline timeline;
  timeline.Begin(api::PHASE_WARMUP, 100);
  timeline.Begin(api::PHASE_TIMED, 50);  // clock read out of order
  const auto markers = timeline.TakeEndedPhaseMarkers(0);
  ASSERT_EQ(markers.size(), 1u);
  EXPECT_EQ(markers[0].start_ns(), 100);
  EXPECT_EQ(markers[0].end_ns(), 100);
  EXPECT_EQ(timeline.PhaseAt(100), api::PHASE_TIMED);
}

TEST(ActivityBufferPoolTest, CapsBuffersLentOut) {
  ActivityBufferPool pool(4096, 2);
  uint8_t* first = pool.Acquire();
  uint8_t* second = pool.Acquire();
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % ActivityBufferPool::kAlignment, 0u);
  EXPECT_EQ(pool.lent_out(), 2u);
  EXPECT_EQ(pool.Acquire(), nullptr);
  EXPECT_EQ(pool.refused_requests(), 1u);
  pool.Release(first);
  EXPECT_EQ(pool.lent_out(), 1u);
  uint8_t* reused = pool.Acquire();
  EXPECT_EQ(reused, first);  // freed buffers are reused, not reallocated
  pool.Release(reused);
  pool.Release(second);
  EXPECT_EQ(pool.lent_out(), 0u);
}

TEST(ActivityBufferPoolTest, SizesAreAlignedAndForeignBuffersFreed) {
  ActivityBufferPool pool(5000, 1);
  EXPECT_EQ(pool.buffer_bytes() % ActivityBufferPool::kAlignment, 0u);
  EXPECT_GE(pool.buffer_bytes(), 5000u);
  // A buffer this pool never lent (one CUPTI returns from an earlier tracer) is freed, and the
  // count of buffers lent out is untouched.
  uint8_t* lent = pool.Acquire();
  ASSERT_NE(lent, nullptr);
  auto* foreign = static_cast<uint8_t*>(std::aligned_alloc(ActivityBufferPool::kAlignment, 4096));
  pool.Release(foreign);
  EXPECT_EQ(pool.lent_out(), 1u);
  // Returned, so that the pool frees it (LeakSanitizer found it lost otherwise).
  pool.Release(lent);
}

TEST(ActivityRecordConverterTest, ConvertsManyRecordsWithDistinctNames) {
  ActivityRecordConverter converter({0});
  std::set<std::string> names;
  for (const char* mangled : {"_Z1av", "_Z1bv", "_Z1cv"}) {
    const CUpti_ActivityKernel10 kernel = KernelRecord(mangled, 1, 2);
    names.insert(converter.Convert(AsActivity(kernel))->name());
  }
  EXPECT_EQ(names, (std::set<std::string>{"a()", "b()", "c()"}));
}

TEST(ScaffoldingCorrelationsTest, FlagsTheKernelAndMemsetOfTaggedLaunches) {
  ActivityRecordConverter converter({0, 1});
  ScaffoldingCorrelations scaffolding;
  scaffolding.Tag(99);
  scaffolding.Tag(100);

  // The blocker (correlation 99) and the workload's kernel (101), as CUPTI delivers them.
  CUpti_ActivityKernel10 blocker = KernelRecord("_Z19StreamBlockerKernelILi32EEv6Params", 1, 2);
  CUpti_ActivityKernel10 workload = KernelRecord("_Z19StreamBlockerKernelILi32EEv6Params", 3, 4);
  workload.correlationId = 101;
  CUpti_ActivityMemset4 flush;
  std::memset(&flush, 0, sizeof(flush));
  flush.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  flush.bytes = 100 << 20;
  flush.correlationId = 100;
  api::ActivityRecord blocker_record = *converter.Convert(AsActivity(blocker));
  api::ActivityRecord workload_record = *converter.Convert(AsActivity(workload));
  api::ActivityRecord flush_record = *converter.Convert(AsActivity(flush));
  scaffolding.Flag(blocker_record);
  scaffolding.Flag(workload_record);
  scaffolding.Flag(flush_record);
  EXPECT_TRUE(blocker_record.scaffolding());
  EXPECT_TRUE(flush_record.scaffolding());
  // The same name without the tag is the workload's: the flag comes from the launch only.
  EXPECT_FALSE(workload_record.scaffolding());
  EXPECT_EQ(scaffolding.pending(), 0u);
}

TEST(ScaffoldingCorrelationsTest, IgnoresNoCorrelationAndOtherRecords) {
  ScaffoldingCorrelations scaffolding;
  scaffolding.Tag(0);
  EXPECT_EQ(scaffolding.pending(), 0u);

  // A wait that shares the tagged launch's correlation id is not scaffolding GPU work, and
  // does not use the tag up.
  scaffolding.Tag(7);
  api::ActivityRecord wait;
  wait.set_kind(api::ActivityRecord::KIND_SYNCHRONIZATION);
  wait.set_correlation_id(7);
  scaffolding.Flag(wait);
  EXPECT_FALSE(wait.scaffolding());
  api::ActivityRecord kernel;
  kernel.set_kind(api::ActivityRecord::KIND_KERNEL);
  kernel.set_correlation_id(7);
  scaffolding.Flag(kernel);
  EXPECT_TRUE(kernel.scaffolding());
  // Used up: a second record with the id (a replay of a workload kernel) is not flagged.
  api::ActivityRecord again = kernel;
  again.clear_scaffolding();
  scaffolding.Flag(again);
  EXPECT_FALSE(again.scaffolding());
}

TEST(ScaffoldingCorrelationsTest, ForgetsTheOldestPastTheCap) {
  ScaffoldingCorrelations scaffolding(/*max_pending=*/2);
  for (uint32_t id : {10u, 11u, 12u}) {
    scaffolding.Tag(id);
  }
  EXPECT_EQ(scaffolding.pending(), 2u);
  api::ActivityRecord oldest;
  oldest.set_kind(api::ActivityRecord::KIND_KERNEL);
  oldest.set_correlation_id(10);
  scaffolding.Flag(oldest);
  EXPECT_FALSE(oldest.scaffolding());
  api::ActivityRecord newest = oldest;
  newest.set_correlation_id(12);
  scaffolding.Flag(newest);
  EXPECT_TRUE(newest.scaffolding());
}

CUpti_ActivityAPI ApiRecord(CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint64_t start,
                            uint64_t end, uint32_t thread, uint32_t correlation) {
  CUpti_ActivityAPI call;
  std::memset(&call, 0, sizeof(call));
  call.kind = kind;
  call.cbid = cbid;
  call.start = start;
  call.end = end;
  call.processId = 4000;
  call.threadId = thread;
  call.correlationId = correlation;
  return call;
}

TEST(ActivityRecordConverterTest, LaunchCallsBecomeLaunchRecordsOtherCallsNothing) {
  ActivityRecordConverter converter({5});
  const CUpti_ActivityAPI launch =
      ApiRecord(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                1000, 1400, 77, 99);
  const auto record = converter.Convert(AsActivity(launch));
  ASSERT_TRUE(record.has_value());
  EXPECT_EQ(record->kind(), api::ActivityRecord::KIND_LAUNCH);
  EXPECT_EQ(record->name(), "cudaLaunchKernel");
  EXPECT_EQ(record->start_ns(), 1000);
  EXPECT_EQ(record->end_ns(), 1400);
  EXPECT_EQ(record->thread_id(), 77u);
  EXPECT_EQ(record->correlation_id(), 99u);  // what the kernel record of KernelRecord carries
  EXPECT_EQ(record->gpu_id(), -1);

  const CUpti_ActivityAPI graph = ApiRecord(
      CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, 1, 2, 77, 5);
  EXPECT_EQ(converter.Convert(AsActivity(graph))->name(), "cudaGraphLaunch");
  const CUpti_ActivityAPI driver = ApiRecord(
      CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, 2, 77, 6);
  EXPECT_EQ(converter.Convert(AsActivity(driver))->name(), "cuLaunchKernel");
  // A call that launches nothing, and a driver id read as a runtime one, are not launches.
  const CUpti_ActivityAPI malloc_call = ApiRecord(
      CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 1, 2, 77, 7);
  EXPECT_FALSE(converter.Convert(AsActivity(malloc_call)).has_value());
  const CUpti_ActivityAPI wrong_domain = ApiRecord(
      CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 1, 2, 77, 8);
  EXPECT_FALSE(converter.Convert(AsActivity(wrong_domain)).has_value());
}

TEST(LaunchApisTest, EveryApiHasANameAndIdsAreDistinct) {
  for (const auto apis : {RuntimeLaunchApis(), DriverLaunchApis()}) {
    std::set<CUpti_CallbackId> ids;
    for (const LaunchApi& launch_api : apis) {
      EXPECT_FALSE(launch_api.name.empty());
      EXPECT_TRUE(ids.insert(launch_api.cbid).second) << launch_api.name;
    }
  }
  EXPECT_GE(RuntimeLaunchApis().size(), 4u);
  EXPECT_GE(DriverLaunchApis().size(), 4u);
}

api::ActivityRecord Launch(const std::string& name, int64_t start, int64_t end, uint32_t thread,
                           uint32_t correlation) {
  api::ActivityRecord record;
  record.set_kind(api::ActivityRecord::KIND_LAUNCH);
  record.set_name(name);
  record.set_start_ns(start);
  record.set_end_ns(end);
  record.set_thread_id(thread);
  record.set_correlation_id(correlation);
  return record;
}

std::vector<std::string> Names(const std::vector<api::ActivityRecord>& records) {
  std::vector<std::string> names;
  for (const api::ActivityRecord& record : records) names.push_back(record.name());
  return names;
}

TEST(LaunchRecordFilterTest, DropsTheDriverCallInsideARuntimeLaunchOfItsThread) {
  LaunchRecordFilter filter;
  // CUPTI completes the inner driver call first.
  const std::vector<api::ActivityRecord> kept = filter.Filter(
      {
          Launch("cuLaunchKernel (inside)", 1100, 1300, 7, 11),
          Launch("cudaLaunchKernel", 1000, 1400, 7, 10),
          // The same times on another thread: a launch of its own.
          Launch("cuLaunchKernel (other thread)", 1100, 1300, 8, 12),
          // Overlapping but not inside: kept.
          Launch("cuLaunchKernel (after)", 1350, 1500, 7, 13),
          Launch("cudaGraphLaunch", 2000, 2100, 7, 14),
          Launch("cuLaunchKernel (alone)", 3000, 3100, 7, 15),
      },
      {true, false, true, true, false, true});
  EXPECT_THAT(Names(kept),
              ElementsAre("cudaLaunchKernel", "cuLaunchKernel (other thread)",
                          "cuLaunchKernel (after)", "cudaGraphLaunch", "cuLaunchKernel (alone)"));
  EXPECT_EQ(filter.left_out(), 0);
}

TEST(LaunchRecordFilterTest, CountsWhatIsPastTheCapAcrossBatches) {
  LaunchRecordFilter filter(3);
  EXPECT_EQ(filter.Filter({Launch("a", 1, 2, 1, 1), Launch("b", 3, 4, 1, 2)}, {false, false})
                .size(),
            2u);
  EXPECT_THAT(Names(filter.Filter({Launch("c", 5, 6, 1, 3), Launch("d", 7, 8, 1, 4),
                                   Launch("e", 9, 10, 1, 5)},
                                  {false, false, false})),
              ElementsAre("c"));
  EXPECT_EQ(filter.left_out(), 2);
  EXPECT_TRUE(filter.Filter({Launch("f", 11, 12, 1, 6)}, {}).empty());
  EXPECT_EQ(filter.left_out(), 3);
}

}  // namespace
}  // namespace gpuprof::cupti
