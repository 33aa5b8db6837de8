#include "daemon/store/event_fan_out.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/admission/watch_slots.h"
#include "daemon/store/stream_sink.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Event {
  int64_t seq = 0;
};

class RecordingSink : public StreamSink<Event> {
 public:
  void OnEvent(const Event& event) override { seqs.push_back(event.seq); }
  void OnEnd() override { ended = true; }
  std::vector<int64_t> seqs;
  bool ended = false;
};

// The log under test: events 1..stored_, served from from_seq on.
class EventFanOutTest : public testing::Test {
 protected:
  absl::StatusOr<std::vector<Event>> Replay(int64_t from_seq, int64_t max_events) {
    if (!replay_error_.ok()) return replay_error_;
    std::vector<Event> events;
    for (int64_t seq = std::max<int64_t>(from_seq, 1);
         seq <= stored_ && static_cast<int64_t>(events.size()) < max_events; ++seq) {
      events.push_back({seq});
    }
    return events;
  }
  absl::StatusOr<CatchUp> CatchUpTo(const std::shared_ptr<RecordingSink>& sink, int64_t from_seq,
                                    const std::string& user, int64_t& handle, bool live = true) {
    return fan_out_.CatchUpTo(
        "exp-000001", "alice", live ? &live_ : nullptr, from_seq,
        [&](int64_t from, int64_t max_events) { return Replay(from, max_events); }, sink,
        Watcher{.user = user}, handle);
  }
  // One catch-up of a fresh stream: its handle (0 when the subject had ended).
  absl::StatusOr<int64_t> Subscribe(const std::shared_ptr<RecordingSink>& sink, int64_t from_seq,
                                    const std::string& user, bool live = true) {
    int64_t handle = 0;
    absl::StatusOr<CatchUp> outcome = CatchUpTo(sink, from_seq, user, handle, live);
    if (!outcome.ok()) return outcome.status();
    EXPECT_NE(*outcome, CatchUp::kBehind);
    return handle;
  }

  WatchSlots slots_{WatchLimits{.per_subject = 4, .per_user_per_subject = 2, .per_user = 0}};
  std::vector<absl::Status> refusals_;
  EventFanOut<Event> fan_out_{
      "experiment", slots_, [this](const absl::Status& refusal) { refusals_.push_back(refusal); }};
  Subscribers<Event> live_;
  int64_t stored_ = 3;
  absl::Status replay_error_;
};

TEST_F(EventFanOutTest, ReplaysFromSeqThenDeliversLiveEventsWithoutGapOrDuplicate) {
  auto sink = std::make_shared<RecordingSink>();
  absl::StatusOr<int64_t> subscription = Subscribe(sink, 2, "alice");
  ASSERT_TRUE(subscription.ok()) << subscription.status();
  EXPECT_GT(*subscription, 0);
  EventFanOut<Event>::Publish(live_, {4});
  EventFanOut<Event>::EndAll(live_);
  EXPECT_THAT(sink->seqs, ElementsAre(2, 3, 4));
  EXPECT_TRUE(sink->ended);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 1);
  fan_out_.Unsubscribe(&live_, *subscription);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 0);
  EXPECT_THAT(live_, IsEmpty());
}

TEST_F(EventFanOutTest, AnEndedSubjectIsReplayedAndEndedWithoutAPlace) {
  auto sink = std::make_shared<RecordingSink>();
  absl::StatusOr<int64_t> subscription = Subscribe(sink, 0, "bob", /*live=*/false);
  ASSERT_TRUE(subscription.ok()) << subscription.status();
  EXPECT_EQ(*subscription, 0);
  EXPECT_THAT(sink->seqs, ElementsAre(1, 2, 3));
  EXPECT_TRUE(sink->ended);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 0);
}

TEST_F(EventFanOutTest, ACapRefusalIsCountedAndSendsNothing) {
  for (int i = 0; i < 2; ++i)
    ASSERT_TRUE(Subscribe(std::make_shared<RecordingSink>(), 0, "bob").ok());
  auto refused = std::make_shared<RecordingSink>();
  const absl::Status third = Subscribe(refused, 0, "bob").status();
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.message(), HasSubstr("exp-000001"));
  ASSERT_EQ(refusals_.size(), 1u);
  EXPECT_EQ(refusals_[0], third);
  EXPECT_THAT(refused->seqs, IsEmpty());
  EXPECT_FALSE(refused->ended);
  // The owner still gets in: places are kept for the owner.
  EXPECT_TRUE(Subscribe(std::make_shared<RecordingSink>(), 0, "alice").ok());
}

TEST_F(EventFanOutTest, AFailedReplayFreesThePlaceAndRegistersNothing) {
  replay_error_ = absl::DataLossError("stored event does not parse");
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_EQ(Subscribe(sink, 0, "alice").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 0);
  EXPECT_THAT(live_, IsEmpty());
  EXPECT_FALSE(sink->ended);
}

TEST_F(EventFanOutTest, ANegativeFromSeqIsRefusedNamingTheField) {
  const absl::Status refused = Subscribe(std::make_shared<RecordingSink>(), -1, "alice").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.message(), "from_seq: got -1; must be >= 0");
}

TEST_F(EventFanOutTest, UnsubscribeAfterTheSubjectEndedStillFreesThePlace) {
  absl::StatusOr<int64_t> subscription = Subscribe(std::make_shared<RecordingSink>(), 0, "alice");
  ASSERT_TRUE(subscription.ok());
  live_.clear();  // the subject ended and its streams were dropped
  fan_out_.Unsubscribe(nullptr, *subscription);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 0);
}

TEST_F(EventFanOutTest, ALongHistoryIsBehindWithNothingSentButThePlaceKept) {
  stored_ = EventFanOut<Event>::kMaxCatchUpEvents + 1;
  auto sink = std::make_shared<RecordingSink>();
  int64_t handle = 0;
  absl::StatusOr<CatchUp> outcome = CatchUpTo(sink, 1, "alice", handle);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, CatchUp::kBehind);
  EXPECT_THAT(sink->seqs, IsEmpty());
  EXPECT_THAT(live_, IsEmpty());
  // The stream keeps its place while it pages through the store...
  EXPECT_GT(handle, 0);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 1);
  // ...and, having read up to the last few, is registered under the same place.
  const int64_t first_handle = handle;
  outcome = CatchUpTo(sink, 3, "alice", handle);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(*outcome, CatchUp::kLive);
  EXPECT_EQ(handle, first_handle);
  EXPECT_EQ(sink->seqs.front(), 3);
  EXPECT_EQ(sink->seqs.back(), stored_);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 1);
  EXPECT_EQ(live_.count(handle), 1u);
}

TEST_F(EventFanOutTest, CatchingUpAgainWhileRegisteredKeepsOneRegistration) {
  auto sink = std::make_shared<RecordingSink>();
  int64_t handle = 0;
  ASSERT_TRUE(CatchUpTo(sink, 1, "alice", handle).ok());
  ASSERT_TRUE(CatchUpTo(sink, 3, "alice", handle).ok());
  EXPECT_EQ(live_.size(), 1u);
  EXPECT_EQ(slots_.LiveOn("exp-000001"), 1);
}

}  // namespace
}  // namespace gpuprof::daemon
