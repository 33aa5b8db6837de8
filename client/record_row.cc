#include "client/record_row.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/terminal_text.h"

namespace gpuprof::client {

std::string RoundTripNumber(double value) {
  if (!std::isfinite(value)) return "";
  // Whole numbers a double holds exactly print as integers.
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrFormat("%.0f", value == 0 ? 0.0 : value);
  }
  for (int precision = 15; precision < 17; ++precision) {
    const std::string text = absl::StrFormat("%.*g", precision, value);
    if (std::strtod(text.c_str(), nullptr) == value) return text;
  }
  return absl::StrFormat("%.17g", value);
}

std::string CsvQuoted(absl::string_view cell) {
  if (cell.find_first_of(",\"\r\n") == absl::string_view::npos) return std::string(cell);
  return absl::StrCat("\"", absl::StrReplaceAll(cell, {{"\"", "\"\""}}), "\"");
}

void RecordRow::AddText(absl::string_view name, absl::string_view text) {
  cells_.push_back({std::string(name), std::string(text)});
}

void RecordRow::AddNumber(absl::string_view name, double value) {
  const std::string text = RoundTripNumber(value);
  cells_.push_back({std::string(name), text, /*is_number=*/true, /*is_empty=*/text.empty()});
}

void RecordRow::AddInteger(absl::string_view name, int64_t value) {
  cells_.push_back({std::string(name), absl::StrCat(value), /*is_number=*/true});
}

void RecordRow::AddOptionalNumber(absl::string_view name, std::optional<double> value) {
  if (value.has_value()) {
    AddNumber(name, *value);
  } else {
    AddEmpty(name);
  }
}

void RecordRow::AddEmpty(absl::string_view name) {
  cells_.push_back({std::string(name), "", /*is_number=*/false, /*is_empty=*/true});
}

std::vector<std::string> RecordRow::ColumnNames() const {
  std::vector<std::string> names;
  for (const Cell& cell : cells_) names.push_back(cell.name);
  return names;
}

// Text in CSV shows its control characters escaped, as on the terminal: a cell holds one line
// and cannot drive whatever displays it. (JSON escapes them itself.)
std::string RecordRow::CsvHeader() const {
  std::vector<std::string> names;
  for (const Cell& cell : cells_) names.push_back(CsvQuoted(EscapeForTerminal(cell.name)));
  return absl::StrCat(absl::StrJoin(names, ","), "\n");
}

std::string RecordRow::Csv() const {
  std::vector<std::string> texts;
  for (const Cell& cell : cells_) texts.push_back(CsvQuoted(EscapeForTerminal(cell.text)));
  return absl::StrCat(absl::StrJoin(texts, ","), "\n");
}

std::string RecordRow::Json() const {
  std::vector<std::string> members;
  for (const Cell& cell : cells_) {
    members.push_back(absl::StrCat(JsonQuoted(cell.name), ":",
                                   cell.is_empty    ? std::string("null")
                                   : cell.is_number ? cell.text
                                                    : JsonQuoted(cell.text)));
  }
  return absl::StrCat("{", absl::StrJoin(members, ","), "}\n");
}

}  // namespace gpuprof::client
