#include "daemon/admission/baseline_ownership.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpuprof::daemon {
namespace {

using ::testing::HasSubstr;

const BaselineEditor kAlice{.user = "alice",
                            .authenticated_by = "unix peer credentials (uid 1001)"};
const BaselineEditor kBob{.user = "bob", .authenticated_by = "unix peer credentials (uid 1002)"};
const BaselineEditor kCarolAdmin{
    .user = "carol", .authenticated_by = "TLS client certificate (CN)", .admin = true};

v1::Baseline NewVersion(const std::string& target) {
  v1::Baseline baseline;
  baseline.set_name("main");
  baseline.set_target_id(target);
  baseline.set_description("the release");
  baseline.mutable_created()->set_seconds(1'800'000'000);
  return baseline;
}

v1::Baseline Stored(const std::string& owner, const std::string& target = "exp-000001") {
  v1::Baseline baseline = NewVersion(target);
  baseline.set_owner(owner);
  baseline.set_user(owner);
  return baseline;
}

TEST(BaselineOwnershipTest, AFreeNameBelongsToWhoSavesIt) {
  // Whatever the request claims, the owner and the saver are the authenticated editor.
  v1::Baseline claimed = NewVersion("exp-000001");
  claimed.set_owner("mallory");
  claimed.set_user("mallory");
  auto write = DecideBaselineSave(nullptr, claimed, /*replace=*/false, kAlice);
  ASSERT_TRUE(write.ok()) << write.status();
  ASSERT_TRUE(write->baseline.has_value());
  EXPECT_EQ(write->baseline->owner(), "alice");
  EXPECT_EQ(write->baseline->user(), "alice");
  EXPECT_EQ(write->baseline->target_id(), "exp-000001");
  EXPECT_EQ(write->audit.action(), "baseline-save");
  EXPECT_EQ(write->audit.actor(), "alice");
  EXPECT_EQ(write->audit.authenticated_by(), kAlice.authenticated_by);
  EXPECT_EQ(write->audit.on_behalf_of(), "");
  EXPECT_EQ(write->audit.experiment_id(), "exp-000001");
  EXPECT_EQ(write->audit.detail(), "baseline main -> exp-000001");
  EXPECT_EQ(write->audit.time().seconds(), 1'800'000'000);
}

TEST(BaselineOwnershipTest, ATakenNameNeedsReplace) {
  const v1::Baseline stored = Stored("alice");
  auto write = DecideBaselineSave(&stored, NewVersion("exp-000002"), /*replace=*/false, kAlice);
  EXPECT_EQ(write.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(write.status().message(), HasSubstr("owner alice, naming exp-000001"));
  EXPECT_THAT(write.status().message(), HasSubstr("--replace"));
}

TEST(BaselineOwnershipTest, TheOwnerReplacesAndKeepsIt) {
  const v1::Baseline stored = Stored("alice");
  auto write = DecideBaselineSave(&stored, NewVersion("exp-000002"), /*replace=*/true, kAlice);
  ASSERT_TRUE(write.ok()) << write.status();
  EXPECT_EQ(write->baseline->owner(), "alice");
  EXPECT_EQ(write->baseline->target_id(), "exp-000002");
  EXPECT_EQ(write->audit.action(), "baseline-replace");
  EXPECT_EQ(write->audit.on_behalf_of(), "");
  EXPECT_EQ(write->audit.detail(), "baseline main -> exp-000002 (was exp-000001, saved by alice)");
}

TEST(BaselineOwnershipTest, AnotherUserMayNeitherReplaceNorDelete) {
  const v1::Baseline stored = Stored("alice");
  auto replaced = DecideBaselineSave(&stored, NewVersion("exp-000666"), /*replace=*/true, kBob);
  EXPECT_EQ(replaced.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(replaced.status().message(),
              HasSubstr("baseline \"main\" belongs to alice; only its owner or an admin may "
                        "replace it (you are bob, unix peer credentials (uid 1002))"));
  auto deleted = DecideBaselineDelete(&stored, "main", kBob);
  EXPECT_EQ(deleted.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(deleted.status().message(), HasSubstr("may delete it (you are bob"));
}

TEST(BaselineOwnershipTest, AnAdminChangesItOnTheOwnersBehalf) {
  const v1::Baseline stored = Stored("alice");
  auto write = DecideBaselineSave(&stored, NewVersion("exp-000003"), /*replace=*/true, kCarolAdmin);
  ASSERT_TRUE(write.ok()) << write.status();
  EXPECT_EQ(write->baseline->owner(), "alice");  // the admin repairs it; alice keeps it
  EXPECT_EQ(write->baseline->user(), "carol");
  EXPECT_EQ(write->audit.actor(), "carol");
  EXPECT_EQ(write->audit.on_behalf_of(), "alice");
  auto deleted = DecideBaselineDelete(&stored, "main", kCarolAdmin);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->audit.on_behalf_of(), "alice");
}

TEST(BaselineOwnershipTest, ABaselineWithoutAnOwnerIsForAdminsOnly) {
  // Saved before baselines had owners: its `user` was only the last one to save it.
  v1::Baseline stored = Stored("");
  stored.set_user("mallory");
  for (const BaselineEditor& editor :
       {kBob, BaselineEditor{.user = "mallory", .authenticated_by = "unix"},
        BaselineEditor{.user = "", .authenticated_by = "unix"}}) {
    auto write = DecideBaselineSave(&stored, NewVersion("exp-000002"), /*replace=*/true, editor);
    EXPECT_EQ(write.status().code(), absl::StatusCode::kPermissionDenied) << editor.user;
    EXPECT_THAT(write.status().message(), HasSubstr("has no owner"));
    EXPECT_EQ(DecideBaselineDelete(&stored, "main", editor).status().code(),
              absl::StatusCode::kPermissionDenied);
  }
  auto write = DecideBaselineSave(&stored, NewVersion("exp-000002"), /*replace=*/true, kCarolAdmin);
  ASSERT_TRUE(write.ok()) << write.status();
  EXPECT_EQ(write->baseline->owner(), "");
  EXPECT_EQ(write->audit.on_behalf_of(), "");
}

TEST(BaselineOwnershipTest, DeletingTheOwnBaseline) {
  EXPECT_EQ(DecideBaselineDelete(nullptr, "main", kAlice).status().code(),
            absl::StatusCode::kNotFound);
  const v1::Baseline stored = Stored("alice");
  auto write = DecideBaselineDelete(&stored, "main", kAlice);
  ASSERT_TRUE(write.ok()) << write.status();
  EXPECT_FALSE(write->baseline.has_value());
  EXPECT_EQ(write->audit.action(), "baseline-delete");
  EXPECT_EQ(write->audit.experiment_id(), "exp-000001");
  EXPECT_EQ(write->audit.detail(), "baseline main deleted (it named exp-000001, owner alice)");
}

}  // namespace
}  // namespace gpuprof::daemon
