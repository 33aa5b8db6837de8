// A plain-text table with aligned columns, for the CLI's terminal output.
#ifndef GPUPROF_CLIENT_TABLE_H_
#define GPUPROF_CLIENT_TABLE_H_

#include <cstddef>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

namespace gpuprof::client {

class TextTable {
 public:
  enum class Align { kLeft, kRight };

  // An empty header renders no header line (for key/value tables).
  explicit TextTable(std::vector<std::string> header = {});

  // Numbers read best right-aligned; every column starts left-aligned.
  void SetAlign(size_t column, Align align);

  // Rows may be shorter than the header (missing cells are empty) or longer (the table widens).
  // Control characters in a cell are shown escaped (EscapeForTerminal): every cell is one line,
  // whoever wrote its text.
  void AddRow(std::vector<std::string> cells);

  size_t num_rows() const { return rows_.size(); }

  // One line per row, each starting with `indent`; columns are separated by two spaces and no
  // line has trailing spaces.
  std::string Render(absl::string_view indent = "") const;

 private:
  std::vector<std::string> header_;
  std::vector<Align> aligns_;
  std::vector<std::vector<std::string>> rows_;
};

// Terminal columns `text` takes: its UTF-8 code points ("µs" is two columns wide, not three).
size_t DisplayWidth(absl::string_view text);

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_TABLE_H_
