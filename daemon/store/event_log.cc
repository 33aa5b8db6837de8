#include "daemon/store/event_log.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {
namespace {

constexpr char kPageTokenPrefix[] = "before-seq:";

// The page token is the number of the page's last (oldest) entity; the next page holds the
// ones created before it. Base64 keeps clients from relying on its form.
std::string EncodePageToken(int64_t last_seq) {
  return absl::WebSafeBase64Escape(absl::StrCat(kPageTokenPrefix, last_seq));
}

absl::StatusOr<int64_t> DecodePageToken(const std::string& page_token) {
  std::string decoded;
  int64_t last_seq = 0;
  absl::string_view number;
  if (absl::WebSafeBase64Unescape(page_token, &decoded)) number = decoded;
  if (!absl::ConsumePrefix(&number, kPageTokenPrefix) || !absl::SimpleAtoi(number, &last_seq) ||
      last_seq <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid page_token \"", page_token, "\": pass the next_page_token of a previous page"));
  }
  return last_seq;
}

absl::Status Bind(SqliteStatement& statement, int index,
                  const std::variant<int64_t, std::string>& value) {
  if (const int64_t* number = std::get_if<int64_t>(&value)) {
    return statement.BindInt64(index, *number);
  }
  return statement.BindText(index, std::get<std::string>(value));
}

// "SELECT seq, proto, id FROM <table> [WHERE ...]"; values are bound from parameter 1 on.
std::string SelectWhere(absl::string_view table, const std::vector<Condition>& conditions) {
  std::string sql = absl::StrCat("SELECT seq, proto, id FROM ", table);
  if (conditions.empty()) return sql;
  std::vector<std::string> fragments;
  for (const Condition& condition : conditions) fragments.push_back(condition.sql);
  absl::StrAppend(&sql, " WHERE ", absl::StrJoin(fragments, " AND "));
  return sql;
}

absl::StatusOr<int> BindConditions(SqliteStatement& statement,
                                   const std::vector<Condition>& conditions) {
  int parameter = 0;
  for (const Condition& condition : conditions) {
    for (const auto& value : condition.values) RETURN_IF_ERROR(Bind(statement, ++parameter, value));
  }
  return parameter;
}

}  // namespace

absl::StatusOr<int64_t> EventLogTable::NextNumber(SqliteDatabase& database) const {
  return database.QueryInt64(
      absl::StrFormat("SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = '%s'), "
                      "0), COALESCE((SELECT MAX(seq) FROM %s), 0)) + 1",
                      tables_.entity_table, tables_.entity_table),
      absl::StrCat("choosing ", tables_.noun_with_article, " id"));
}

std::string EventLogTable::IdOf(int64_t number) const {
  return absl::StrFormat("%s%06d", tables_.id_prefix, number);
}

absl::Status EventLogTable::InsertEntity(SqliteDatabase& database, int64_t number,
                                         const std::string& id, const std::vector<Column>& columns,
                                         absl::string_view proto) const {
  std::vector<std::string> names = {"seq", "id"};
  std::vector<std::string> placeholders = {"?1", "?2"};
  for (const Column& column : columns) {
    names.push_back(column.name);
    placeholders.push_back(absl::StrCat("?", placeholders.size() + 1));
  }
  names.push_back("proto");
  placeholders.push_back(absl::StrCat("?", placeholders.size() + 1));
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   database.Prepare(absl::StrCat("INSERT INTO ", tables_.entity_table, " (",
                                                 absl::StrJoin(names, ", "), ") VALUES (",
                                                 absl::StrJoin(placeholders, ", "), ")"),
                                    absl::StrCat("inserting ", tables_.noun, " ", id)));
  int parameter = 0;
  RETURN_IF_ERROR(insert.BindInt64(++parameter, number));
  RETURN_IF_ERROR(insert.BindText(++parameter, id));
  for (const Column& column : columns) RETURN_IF_ERROR(Bind(insert, ++parameter, column.value));
  RETURN_IF_ERROR(insert.BindBlob(++parameter, proto));
  return insert.Run();
}

absl::Status EventLogTable::UpdateEntity(SqliteDatabase& database, const std::string& id,
                                         const std::vector<Column>& columns,
                                         absl::string_view proto) const {
  std::vector<std::string> assignments;
  for (const Column& column : columns) {
    assignments.push_back(absl::StrCat(column.name, " = ?", assignments.size() + 1));
  }
  assignments.push_back(absl::StrCat("proto = ?", assignments.size() + 1));
  ASSIGN_OR_RETURN(SqliteStatement update,
                   database.Prepare(absl::StrCat("UPDATE ", tables_.entity_table, " SET ",
                                                 absl::StrJoin(assignments, ", "), " WHERE id = ?",
                                                 assignments.size() + 1),
                                    absl::StrCat("updating ", tables_.noun, " ", id)));
  int parameter = 0;
  for (const Column& column : columns) RETURN_IF_ERROR(Bind(update, ++parameter, column.value));
  RETURN_IF_ERROR(update.BindBlob(++parameter, proto));
  RETURN_IF_ERROR(update.BindText(++parameter, id));
  RETURN_IF_ERROR(update.Run());
  if (database.ChangedRows() == 0) {
    return absl::NotFoundError(absl::StrCat(tables_.noun, " ", id, " not found"));
  }
  return absl::OkStatus();
}

absl::Status EventLogTable::InsertEvent(SqliteDatabase& database, const std::string& id,
                                        int64_t seq, absl::string_view proto) const {
  ASSIGN_OR_RETURN(
      SqliteStatement insert,
      database.Prepare(absl::StrCat("INSERT INTO ", tables_.event_table, " (", tables_.owner_column,
                                    ", seq, proto) VALUES (?1, ?2, ?3)"),
                       absl::StrCat("inserting ", tables_.noun, " event")));
  RETURN_IF_ERROR(insert.BindText(1, id));
  RETURN_IF_ERROR(insert.BindInt64(2, seq));
  RETURN_IF_ERROR(insert.BindBlob(3, proto));
  absl::Status status = insert.Run();
  if (absl::IsAlreadyExists(status)) {
    return absl::AlreadyExistsError(
        absl::StrCat(tables_.noun, " ", id, " already has an event with seq ", seq));
  }
  return status;
}

absl::Status EventLogTable::ReadEntity(SqliteDatabase& database, const std::string& id,
                                       Row row) const {
  ASSIGN_OR_RETURN(SqliteStatement select,
                   database.Prepare(absl::StrCat("SELECT proto, seq FROM ", tables_.entity_table,
                                                 " WHERE id = ?1"),
                                    absl::StrCat("reading ", tables_.noun, " ", id)));
  RETURN_IF_ERROR(select.BindText(1, id));
  ASSIGN_OR_RETURN(bool found, select.Step());
  if (!found) return absl::NotFoundError(absl::StrCat(tables_.noun, " ", id, " not found"));
  return row(select.ColumnInt64(1), select);
}

absl::Status EventLogTable::ReadEvents(SqliteDatabase& database, const std::string& id,
                                       int64_t from_seq, EventPageLimit limit, Row row) const {
  {
    ASSIGN_OR_RETURN(
        SqliteStatement exists,
        database.Prepare(absl::StrCat("SELECT 1 FROM ", tables_.entity_table, " WHERE id = ?1"),
                         absl::StrCat("looking up ", tables_.noun, " ", id)));
    RETURN_IF_ERROR(exists.BindText(1, id));
    ASSIGN_OR_RETURN(bool found, exists.Step());
    if (!found) return absl::NotFoundError(absl::StrCat(tables_.noun, " ", id, " not found"));
  }
  ASSIGN_OR_RETURN(
      SqliteStatement select,
      database.Prepare(absl::StrCat("SELECT seq, proto FROM ", tables_.event_table, " WHERE ",
                                    tables_.owner_column,
                                    " = ?1 AND seq >= ?2 ORDER BY seq LIMIT ?3"),
                       absl::StrCat("reading events of ", tables_.noun, " ", id)));
  RETURN_IF_ERROR(select.BindText(1, id));
  RETURN_IF_ERROR(select.BindInt64(2, from_seq));
  // SQLite reads a negative LIMIT as none.
  RETURN_IF_ERROR(select.BindInt64(3, limit.max_events));
  int64_t bytes = 0;
  while (limit.max_bytes < 0 || bytes < limit.max_bytes) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) return absl::OkStatus();
    bytes += static_cast<int64_t>(select.ColumnBlob(1).size());
    RETURN_IF_ERROR(row(select.ColumnInt64(0), select));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> EventLogTable::ReadPage(SqliteDatabase& database,
                                                    const std::vector<Condition>& conditions,
                                                    int page_size, const std::string& page_token,
                                                    Row row) const {
  if (page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must not be negative, got ", page_size));
  }
  if (page_size == 0) page_size = kDefaultPageSize;
  if (page_size > kMaxPageSize) page_size = kMaxPageSize;
  std::vector<Condition> paged = conditions;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(int64_t before_seq, DecodePageToken(page_token));
    paged.push_back({"seq < ?", {before_seq}});
  }
  // Built from fixed fragments only; every value is a bound parameter. One row more than the
  // page tells whether another page follows.
  ASSIGN_OR_RETURN(SqliteStatement select,
                   database.Prepare(absl::StrCat(SelectWhere(tables_.entity_table, paged),
                                                 " ORDER BY seq DESC LIMIT ?"),
                                    absl::StrCat("listing ", tables_.entity_table)));
  ASSIGN_OR_RETURN(int parameter, BindConditions(select, paged));
  RETURN_IF_ERROR(select.BindInt64(parameter + 1, page_size + 1));
  int rows = 0;
  int64_t last_seq = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) return std::string();
    if (rows == page_size) return EncodePageToken(last_seq);
    ++rows;
    last_seq = select.ColumnInt64(0);
    RETURN_IF_ERROR(row(last_seq, select));
  }
}

absl::Status EventLogTable::ReadAll(SqliteDatabase& database,
                                    const std::vector<Condition>& conditions,
                                    absl::string_view operation, Row row) const {
  ASSIGN_OR_RETURN(
      SqliteStatement select,
      database.Prepare(absl::StrCat(SelectWhere(tables_.entity_table, conditions), " ORDER BY seq"),
                       std::string(operation)));
  RETURN_IF_ERROR(BindConditions(select, conditions).status());
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) return absl::OkStatus();
    RETURN_IF_ERROR(row(select.ColumnInt64(0), select));
  }
}

}  // namespace gpuprof::daemon::store
