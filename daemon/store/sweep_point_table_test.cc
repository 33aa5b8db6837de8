// A sweep's points in rows of their own: paged reads of a 10,000-point sweep, a point's update
// rewriting its row alone, and the move of a version-1 file's embedded points.
#include "daemon/store/sweep_point_table.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/store_test_support.h"
#include "gpuprof/v1/sweep.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using store_testing::ExperimentStoreTest;
using store_testing::RawQuery;

v1::Sweep SweepOf(int points, const std::string& padding = "") {
  v1::Sweep sweep;
  sweep.set_user("alice");
  sweep.set_state(v1::SWEEP_RUNNING);
  sweep.set_points_total(points);
  sweep.set_points_queued(points);
  for (int index = 0; index < points; ++index) {
    v1::SweepPoint& point = *sweep.add_points();
    point.set_index(index);
    point.set_state(v1::QUEUED);
    (*point.mutable_parameters())["num_tokens"] = absl::StrCat(index, padding);
  }
  return sweep;
}

v1::SweepEvent Created(const v1::Sweep& sweep) {
  v1::SweepEvent first;
  first.set_seq(1);
  first.set_points_total(sweep.points_total());
  return first;
}

// Every page of the stored sweep, `page_size` at a time: the indices in the order read.
std::vector<int> ReadEveryPage(ExperimentStore& store, const std::string& id, int page_size,
                               int* pages) {
  std::vector<int> indices;
  std::string token;
  *pages = 0;
  do {
    absl::StatusOr<v1::Sweep> page = store.GetSweepPage(id, page_size, token);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok()) break;
    ++*pages;
    for (const v1::SweepPoint& point : page->points()) indices.push_back(point.index());
    token = page->next_points_page_token();
  } while (!token.empty() && *pages < 100'000);
  return indices;
}

std::vector<int> Range(int count) {
  std::vector<int> indices;
  for (int index = 0; index < count; ++index) indices.push_back(index);
  return indices;
}

TEST_F(ExperimentStoreTest, TenThousandPointsArePagedWithoutGapsOrDuplicates) {
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(SweepOf(10'000), Created(SweepOf(0))));
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM sweep_point_protos"), "10000");
  // The sweep's own row holds no point: it stays small whatever the sweep's size.
  EXPECT_LT(std::stoi(RawQuery(path_, "SELECT length(proto) FROM sweeps")), 200);

  int pages = 0;
  EXPECT_EQ(ReadEveryPage(*store_, id, 0, &pages), Range(10'000));
  EXPECT_EQ(pages, 10'000 / store::kDefaultPointsPageSize);
  EXPECT_EQ(ReadEveryPage(*store_, id, 777, &pages), Range(10'000));
  EXPECT_EQ(pages, 13);  // 12 full pages and 676 points
  // More than the most a page holds is the most.
  EXPECT_EQ(ReadEveryPage(*store_, id, 1'000'000, &pages), Range(10'000));
  EXPECT_EQ(pages, 10'000 / store::kMaxPointsPageSize);

  ASSERT_OK_AND_ASSIGN(const v1::Sweep row, store_->GetSweep(id));
  EXPECT_EQ(row.points_size(), 0);
  EXPECT_EQ(row.points_total(), 10'000);
  ASSERT_OK_AND_ASSIGN(SweepPage listed, store_->ListSweeps("", 0, ""));
  ASSERT_EQ(listed.sweeps.size(), 1u);
  EXPECT_EQ(listed.sweeps[0].points_size(), 0);
  ASSERT_OK_AND_ASSIGN(auto running, store_->ListSweepsByState(v1::SWEEP_RUNNING));
  ASSERT_EQ(running.size(), 1u);
  EXPECT_EQ(running[0].points_size(), 10'000);  // start-up resumes it whole
}

TEST_F(ExperimentStoreTest, AnUpdateRewritesTheChangedPointOnly) {
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(SweepOf(1'200), Created(SweepOf(0))));
  ASSERT_OK_AND_ASSIGN(v1::Sweep sweep, store_->GetSweep(id));
  v1::SweepPoint changed = SweepOf(1'200).points(742);
  changed.set_state(v1::FINISHED);
  changed.set_experiment_id("exp-000743");
  sweep.set_points_queued(1'199);
  sweep.set_points_finished(1);
  sweep.set_last_seq(2);
  v1::SweepEvent event;
  event.set_seq(2);
  *event.mutable_point() = changed;
  ASSERT_OK(store_->UpdateSweep(sweep, event, {changed}));

  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM sweep_point_protos"), "1200");
  ASSERT_OK_AND_ASSIGN(const v1::Sweep page,
                       store_->GetSweepPage(id, 500, store::SweepPointPageToken(500)));
  ASSERT_EQ(page.points_size(), 500);
  EXPECT_EQ(page.points_finished(), 1);
  for (const v1::SweepPoint& point : page.points()) {
    EXPECT_EQ(point.state(), point.index() == 742 ? v1::FINISHED : v1::QUEUED) << point.index();
  }
  EXPECT_EQ(page.points(242).experiment_id(), "exp-000743");
}

TEST_F(ExperimentStoreTest, PagesOfPointsInMemoryUseTheStoredPagesTokens) {
  const v1::Sweep sweep = SweepOf(1'000);
  const std::vector<v1::SweepPoint> points(sweep.points().begin(), sweep.points().end());
  ASSERT_OK_AND_ASSIGN(store::SweepPointPage first, store::PageOfSweepPoints(points, 300, ""));
  ASSERT_EQ(first.points.size(), 300u);
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(sweep, Created(SweepOf(0))));
  // The token of a page read from memory continues in the store, and the other way round.
  ASSERT_OK_AND_ASSIGN(const v1::Sweep second, store_->GetSweepPage(id, 300, first.next_page_token));
  EXPECT_EQ(second.points(0).index(), 300);
  ASSERT_OK_AND_ASSIGN(store::SweepPointPage third,
                       store::PageOfSweepPoints(points, 300, second.next_points_page_token()));
  EXPECT_EQ(third.points.front().index(), 600);
  ASSERT_OK_AND_ASSIGN(store::SweepPointPage last,
                       store::PageOfSweepPoints(points, 300, third.next_page_token));
  EXPECT_EQ(last.points.size(), 100u);
  EXPECT_EQ(last.points.front().index(), 900);
  EXPECT_TRUE(last.next_page_token.empty());
}

TEST_F(ExperimentStoreTest, APageStopsAtItsByteBound) {
  // 2,000 points of 4 KiB: 8 MiB, more than one page's bound holds.
  const v1::Sweep sweep = SweepOf(2'000, std::string(4096, 'x'));
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(sweep, Created(SweepOf(0))));
  ASSERT_OK_AND_ASSIGN(const v1::Sweep first, store_->GetSweepPage(id, 5'000, ""));
  EXPECT_LT(first.points_size(), 2'000);
  EXPECT_GT(first.points_size(), 500);
  EXPECT_LE(first.ByteSizeLong(), store::kMaxPointsPageBytes + 16384);
  int pages = 0;
  EXPECT_EQ(ReadEveryPage(*store_, id, 5'000, &pages), Range(2'000));
  EXPECT_GE(pages, 2);
}

TEST_F(ExperimentStoreTest, BadPointPagingIsInvalidArgument) {
  ASSERT_OK_AND_ASSIGN(const std::string id, store_->CreateSweep(SweepOf(3), Created(SweepOf(0))));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->GetSweepPage(id, -1, "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(store_->GetSweepPage(id, 0, "not-a-token").status()));
  // A page past the end is empty and last.
  ASSERT_OK_AND_ASSIGN(const v1::Sweep past, store_->GetSweepPage(id, 0, store::SweepPointPageToken(7)));
  EXPECT_EQ(past.points_size(), 0);
  EXPECT_TRUE(past.next_points_page_token().empty());
  EXPECT_TRUE(absl::IsNotFound(store_->GetSweepPage("swp-000042", 0, "").status()));
}

// A sweep row as schema version 1 wrote it: every point embedded in its proto.
void WriteVersionOneSweep(const std::string& path, const v1::Sweep& sweep) {
  v1::Sweep old = sweep;
  old.clear_points_total();  // version 1 had no such field
  RawQuery(path, absl::StrCat("INSERT INTO sweeps (id, user, state, created_unix_ns, proto) "
                              "VALUES ('", sweep.id(), "', 'alice', 1, 0, X'",
                              absl::BytesToHexString(old.SerializeAsString()), "')"));
}

TEST_F(ExperimentStoreTest, AVersionOneFilesEmbeddedPointsMoveToTheirRowsOnce) {
  v1::Sweep old = SweepOf(1'234);
  old.set_id("swp-000001");
  old.mutable_points(5)->set_state(v1::FAILED);
  WriteVersionOneSweep(path_, old);
  RawQuery(path_, "PRAGMA user_version = 1");
  const std::string embedded_length = RawQuery(path_, "SELECT length(proto) FROM sweeps");
  EXPECT_GT(std::stoi(embedded_length), 10'000);

  Reopen();
  EXPECT_EQ(RawQuery(path_, "PRAGMA user_version"),
            std::to_string(ExperimentStore::kSchemaVersion));
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM sweep_point_protos"), "1234");
  EXPECT_LT(std::stoi(RawQuery(path_, "SELECT length(proto) FROM sweeps")), 200);
  ASSERT_OK_AND_ASSIGN(const v1::Sweep row, store_->GetSweep("swp-000001"));
  EXPECT_EQ(row.points_total(), 1'234);
  int pages = 0;
  EXPECT_EQ(ReadEveryPage(*store_, "swp-000001", 0, &pages), Range(1'234));
  ASSERT_OK_AND_ASSIGN(const v1::Sweep first, store_->GetSweepPage("swp-000001", 10, ""));
  EXPECT_EQ(first.points(5).state(), v1::FAILED);
  EXPECT_EQ(first.points(5).parameters().at("num_tokens"), "5");

  // Opening again moves nothing more and changes nothing.
  Reopen();
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM sweep_point_protos"), "1234");
  EXPECT_EQ(ReadEveryPage(*store_, "swp-000001", 0, &pages), Range(1'234));
}

TEST_F(ExperimentStoreTest, AVersionTwoFileIsNotMigratedAgain) {
  // Only a version-1 file is scanned: a current one opens without reading every sweep.
  v1::Sweep odd = SweepOf(3);
  odd.set_id("swp-000001");
  WriteVersionOneSweep(path_, odd);
  const std::string length = RawQuery(path_, "SELECT length(proto) FROM sweeps");
  Reopen();
  EXPECT_EQ(RawQuery(path_, "SELECT length(proto) FROM sweeps"), length);
  EXPECT_EQ(RawQuery(path_, "SELECT count(*) FROM sweep_point_protos"), "0");
}

}  // namespace
}  // namespace gpuprof::daemon
