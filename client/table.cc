#include "client/table.h"

#include <algorithm>
#include <utility>

#include "common/terminal_text.h"

namespace gpuprof::client {
namespace {

// A cell is one line of visible text: a control character in it (a newline in a label, an
// escape sequence in a description) is shown escaped, and counted as what is shown.
std::vector<std::string> EscapeCells(std::vector<std::string> cells) {
  for (std::string& cell : cells) {
    if (FindUnsafeCharacter(cell).has_value()) cell = EscapeForTerminal(cell);
  }
  return cells;
}

void AppendPadded(std::string& line, absl::string_view cell, size_t width, TextTable::Align align) {
  const size_t padding = width - std::min(width, DisplayWidth(cell));
  if (align == TextTable::Align::kRight) line.append(padding, ' ');
  line.append(cell.data(), cell.size());
  if (align == TextTable::Align::kLeft) line.append(padding, ' ');
}

}  // namespace

size_t DisplayWidth(absl::string_view text) {
  // UTF-8 continuation bytes (10xxxxxx) do not start a new code point.
  return std::count_if(text.begin(), text.end(),
                       [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

TextTable::TextTable(std::vector<std::string> header) : header_(EscapeCells(std::move(header))) {}

void TextTable::SetAlign(size_t column, Align align) {
  if (aligns_.size() <= column) aligns_.resize(column + 1, Align::kLeft);
  aligns_[column] = align;
}

void TextTable::AddRow(std::vector<std::string> cells) {
  rows_.push_back(EscapeCells(std::move(cells)));
}

std::string TextTable::Render(absl::string_view indent) const {
  size_t num_columns = header_.size();
  for (const auto& row : rows_) num_columns = std::max(num_columns, row.size());
  std::vector<size_t> widths(num_columns, 0);
  auto measure = [&widths](const std::vector<std::string>& row) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], DisplayWidth(row[i]));
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);

  std::string out;
  auto render_row = [&](const std::vector<std::string>& row) {
    std::string line(indent);
    for (size_t i = 0; i < num_columns; ++i) {
      if (i > 0) line.append("  ");
      const Align align = i < aligns_.size() ? aligns_[i] : Align::kLeft;
      AppendPadded(line, i < row.size() ? absl::string_view(row[i]) : absl::string_view(),
                   widths[i], align);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out.append(line);
    out.push_back('\n');
  };
  if (!header_.empty()) render_row(header_);
  for (const auto& row : rows_) render_row(row);
  return out;
}

}  // namespace gpuprof::client
