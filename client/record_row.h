// A row of a machine-readable table (CSV, JSON lines): named cells, each a text, a number or
// empty, so that CSV and JSON lines carry the same columns. Numbers keep their full
// precision: integers as integers (1454616, not 1.45462e+06), other doubles in the fewest
// digits that read back to the same double; NaN and infinities are empty in CSV and null in
// JSON, never "nan".
#ifndef GPUPROF_CLIENT_RECORD_ROW_H_
#define GPUPROF_CLIENT_RECORD_ROW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace gpuprof::client {

// "1454616", "0.1", "2854.123456789"; "" for NaN and infinities.
std::string RoundTripNumber(double value);

// The cell quoted for CSV when it holds a comma, a quote or a line break.
std::string CsvQuoted(absl::string_view cell);

class RecordRow {
 public:
  void AddText(absl::string_view name, absl::string_view text);
  void AddNumber(absl::string_view name, double value);
  void AddInteger(absl::string_view name, int64_t value);
  // A number when `value` holds one, else an empty cell.
  void AddOptionalNumber(absl::string_view name, std::optional<double> value);
  void AddEmpty(absl::string_view name);

  std::vector<std::string> ColumnNames() const;
  // "name,name,...\n" and "cell,cell,...\n".
  std::string CsvHeader() const;
  std::string Csv() const;
  // {"name":cell,...}\n: texts as JSON strings, numbers as JSON numbers, empty cells as null.
  std::string Json() const;

 private:
  struct Cell {
    std::string name;
    std::string text;
    bool is_number = false;
    bool is_empty = false;
  };
  std::vector<Cell> cells_;
};

}  // namespace gpuprof::client

#endif  // GPUPROF_CLIENT_RECORD_ROW_H_
