// How a listing (list, sweep list, baseline list, audit) prints: a table for people, the same
// table without its header line (--no-headers), the ids alone (-q), or NDJSON (--json: one
// JSON object per item and line, so that jq, pandas and `while read` take it as it comes).
// Whatever is not an item (damaged rows, the next page's token) goes to stderr.
#ifndef GPUPROF_CLIENT_LISTING_OUTPUT_H_
#define GPUPROF_CLIENT_LISTING_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "client/command_line.h"
#include "client/render.h"
#include "google/protobuf/repeated_field.h"

namespace gpuprof::client {

enum class ListingStyle { kTable, kNoHeaders, kIdsOnly, kJsonLines };

// --no-headers and --quiet (-q), to add to a listing's flags beside its --json.
std::vector<FlagSpec> ListingStyleFlags();

// The style the flags ask for; InvalidArgument when two of --json, -q, --no-headers are given.
absl::StatusOr<ListingStyle> ListingStyleOf(const ParsedArgs& args);

// `table` without its first line.
std::string WithoutHeaderLine(absl::string_view table);

// One JSON object per item, a line each (proto3 JSON mapping, as JsonLine).
template <typename Item>
std::string JsonLines(const google::protobuf::RepeatedPtrField<Item>& items) {
  std::string lines;
  for (const Item& item : items) {
    lines += JsonLine(item);
    lines += '\n';
  }
  return lines;
}

// The listing in `style`: `table` is the rendered table (header first), `ids` each item's id.
template <typename Item>
std::string RenderListing(ListingStyle style, const google::protobuf::RepeatedPtrField<Item>& items,
                          absl::string_view table, const std::vector<std::string>& ids) {
  switch (style) {
    case ListingStyle::kJsonLines:
      return JsonLines(items);
    case ListingStyle::kIdsOnly: {
      std::string lines;
      for (const std::string& id : ids) {
        lines += id;
        lines += '\n';
      }
      return lines;
    }
    case ListingStyle::kNoHeaders:
      return WithoutHeaderLine(table);
    case ListingStyle::kTable:
      return std::string(table);
  }
  return "";
}

// For stderr: "more: add --page-token TOKEN (or --all)"; empty when there is no next page.
std::string PagingHint(absl::string_view next_page_token, bool offer_all);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_LISTING_OUTPUT_H_
