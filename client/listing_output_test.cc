#include "client/listing_output.h"

#include "gpuprof/v1/experiment.pb.h"
#include "gtest/gtest.h"

namespace gpuprof::client {
namespace {

ParsedArgs Args(const std::vector<std::string>& words) {
  std::vector<FlagSpec> specs = ListingStyleFlags();
  specs.push_back({.name = "json", .is_switch = true});
  return *ParseArgs(words, specs);
}

TEST(ListingStyleTest, FlagsPickTheStyle) {
  EXPECT_EQ(*ListingStyleOf(Args({})), ListingStyle::kTable);
  EXPECT_EQ(*ListingStyleOf(Args({"--json"})), ListingStyle::kJsonLines);
  EXPECT_EQ(*ListingStyleOf(Args({"--quiet"})), ListingStyle::kIdsOnly);
  EXPECT_EQ(*ListingStyleOf(Args({"--no-headers"})), ListingStyle::kNoHeaders);
  EXPECT_FALSE(ListingStyleOf(Args({"--json", "--quiet"})).ok());
}

TEST(ListingStyleTest, EachStyleRendersTheItems) {
  google::protobuf::RepeatedPtrField<v1::Experiment> items;
  items.Add()->set_id("exp-000002");
  items.Add()->set_id("exp-000001");
  const std::string table = "ID\nexp-000002\nexp-000001\n";
  const std::vector<std::string> ids = {"exp-000002", "exp-000001"};
  EXPECT_EQ(RenderListing(ListingStyle::kTable, items, table, ids), table);
  EXPECT_EQ(RenderListing(ListingStyle::kNoHeaders, items, table, ids),
            "exp-000002\nexp-000001\n");
  EXPECT_EQ(RenderListing(ListingStyle::kIdsOnly, items, table, ids), "exp-000002\nexp-000001\n");
  // NDJSON: one object per item and line, not one wrapper.
  EXPECT_EQ(RenderListing(ListingStyle::kJsonLines, items, table, ids),
            "{\"id\":\"exp-000002\"}\n{\"id\":\"exp-000001\"}\n");
}

TEST(ListingStyleTest, PagingHintOnlyWithAToken) {
  EXPECT_EQ(PagingHint("", true), "");
  EXPECT_EQ(PagingHint("abc", true), "more: add --page-token abc (or --all)\n");
  EXPECT_EQ(PagingHint("abc", false), "more: add --page-token abc\n");
}

}  // namespace
}  // namespace gpuprof::client
