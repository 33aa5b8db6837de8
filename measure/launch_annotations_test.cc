#include "measure/launch_annotations.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gpuprof::measure {
namespace {

using ::testing::ElementsAre;

class RecordingMarker : public ScaffoldingMarker {
 public:
  void Begin() override { calls.push_back("begin"); }
  void End() override { calls.push_back("end"); }
  std::vector<std::string> calls;
};

TEST(ScopedScaffoldingTest, BracketsTheScope) {
  RecordingMarker marker;
  {
    const ScopedScaffolding scaffolding(&marker);
    marker.calls.push_back("launch");
  }
  EXPECT_THAT(marker.calls, ElementsAre("begin", "launch", "end"));
}

TEST(ScopedScaffoldingTest, NullMarkerIsFine) { const ScopedScaffolding scaffolding(nullptr); }

}  // namespace
}  // namespace gpuprof::measure
