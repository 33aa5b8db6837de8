#include "client/listing_output.h"

#include "absl/strings/str_cat.h"
#include "common/terminal_text.h"

namespace gpuprof::client {

std::vector<FlagSpec> ListingStyleFlags() {
  return {{.name = "no-headers",
           .is_switch = true,
           .help = "the table without its header line (for scripts)"},
          {.name = "quiet", .is_switch = true, .help = "only the ids, one per line (-q)"}};
}

absl::StatusOr<ListingStyle> ListingStyleOf(const ParsedArgs& args) {
  const bool json = args.Switch("json");
  const bool quiet = args.Switch("quiet");
  const bool no_headers = args.Switch("no-headers");
  if (json + quiet + no_headers > 1) {
    return absl::InvalidArgumentError("--json, -q and --no-headers exclude each other");
  }
  if (json) return ListingStyle::kJsonLines;
  if (quiet) return ListingStyle::kIdsOnly;
  if (no_headers) return ListingStyle::kNoHeaders;
  return ListingStyle::kTable;
}

std::string WithoutHeaderLine(absl::string_view table) {
  const size_t end = table.find('\n');
  return end == absl::string_view::npos ? "" : std::string(table.substr(end + 1));
}

std::string PagingHint(absl::string_view next_page_token, bool offer_all) {
  if (next_page_token.empty()) return "";
  return absl::StrCat("more: add --page-token ", EscapeForTerminal(next_page_token),
                      offer_all ? " (or --all)" : "", "\n");
}

}  // namespace gpuprof::client
