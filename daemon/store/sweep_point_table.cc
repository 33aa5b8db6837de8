#include "daemon/store/sweep_point_table.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "daemon/store/sqlite_database.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon::store {
namespace {

// (The sweep_points table, older, links a point's attempts to their experiments.)
constexpr char kSweepPointTableSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS sweep_point_protos (
  sweep_id TEXT NOT NULL REFERENCES sweeps (id),
  point_index INTEGER NOT NULL,
  -- The gpuprof.v1.SweepPoint, serialized.
  proto BLOB NOT NULL,
  PRIMARY KEY (sweep_id, point_index)
) WITHOUT ROWID;
)sql";

constexpr char kPageTokenPrefix[] = "from-point:";

// Adds points to `page` while it has room; false once it is full.
bool AddToPage(const v1::SweepPoint& point, int page_size, size_t& page_bytes,
               SweepPointPage& page) {
  if (static_cast<int>(page.points.size()) >= page_size) return false;
  // The first point always fits, so every page moves the reader on.
  if (!page.points.empty() && page_bytes + point.ByteSizeLong() > kMaxPointsPageBytes) {
    return false;
  }
  page_bytes += point.ByteSizeLong();
  page.points.push_back(point);
  return true;
}

}  // namespace

absl::StatusOr<SweepPointPageBounds> ParseSweepPointPage(int page_size,
                                                         const std::string& page_token) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("points_page_size must not be negative, got ", page_size));
  }
  SweepPointPageBounds bounds;
  bounds.size = page_size == 0 ? kDefaultPointsPageSize : std::min(page_size, kMaxPointsPageSize);
  if (page_token.empty()) return bounds;
  std::string decoded;
  absl::string_view number;
  if (absl::WebSafeBase64Unescape(page_token, &decoded)) number = decoded;
  if (!absl::ConsumePrefix(&number, kPageTokenPrefix) ||
      !absl::SimpleAtoi(number, &bounds.first_index) || bounds.first_index <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid points_page_token \"", page_token,
                     "\": pass the next_points_page_token of a previous page"));
  }
  return bounds;
}

std::string SweepPointPageToken(int first_index) {
  // Base64 keeps clients from relying on its form.
  return absl::WebSafeBase64Escape(absl::StrCat(kPageTokenPrefix, first_index));
}

absl::StatusOr<SweepPointPage> PageOfSweepPoints(absl::Span<const v1::SweepPoint> points,
                                                 int page_size, const std::string& page_token) {
  ASSIGN_OR_RETURN(SweepPointPageBounds bounds, ParseSweepPointPage(page_size, page_token));
  SweepPointPage page;
  size_t page_bytes = 0;
  size_t next = static_cast<size_t>(bounds.first_index);
  while (next < points.size() && AddToPage(points[next], bounds.size, page_bytes, page)) ++next;
  if (next < points.size()) page.next_page_token = SweepPointPageToken(static_cast<int>(next));
  return page;
}

absl::Status CreateSweepPointTable(SqliteDatabase& database) {
  return database.Execute(kSweepPointTableSchema, "creating the sweep point table");
}

absl::Status WriteSweepPoint(SqliteDatabase& database, const std::string& sweep_id,
                             const v1::SweepPoint& point) {
  // A statement per point (SqliteStatement has no reset): preparing costs microseconds, the
  // commit's sync milliseconds, and a whole sweep is written in one transaction.
  ASSIGN_OR_RETURN(SqliteStatement insert,
                   database.Prepare("INSERT OR REPLACE INTO sweep_point_protos (sweep_id, "
                                    "point_index, proto) VALUES (?1, ?2, ?3)",
                                    absl::StrCat("writing point ", point.index(), " of sweep ",
                                                 sweep_id)));
  RETURN_IF_ERROR(insert.BindText(1, sweep_id));
  RETURN_IF_ERROR(insert.BindInt64(2, point.index()));
  RETURN_IF_ERROR(insert.BindBlob(3, point.SerializeAsString()));
  return insert.Run();
}

absl::Status WriteSweepPoints(SqliteDatabase& database, const std::string& sweep_id,
                              absl::Span<const v1::SweepPoint> points) {
  for (const v1::SweepPoint& point : points) {
    RETURN_IF_ERROR(WriteSweepPoint(database, sweep_id, point));
  }
  return absl::OkStatus();
}

absl::Status WriteSweepPoints(SqliteDatabase& database, const std::string& sweep_id,
                              const google::protobuf::RepeatedPtrField<v1::SweepPoint>& points) {
  for (const v1::SweepPoint& point : points) {
    RETURN_IF_ERROR(WriteSweepPoint(database, sweep_id, point));
  }
  return absl::OkStatus();
}

absl::StatusOr<SweepPointPage> ReadSweepPointPage(SqliteDatabase& database,
                                                  const std::string& sweep_id, int page_size,
                                                  const std::string& page_token) {
  ASSIGN_OR_RETURN(SweepPointPageBounds bounds, ParseSweepPointPage(page_size, page_token));
  ASSIGN_OR_RETURN(SqliteStatement select,
                   database.Prepare("SELECT point_index, proto FROM sweep_point_protos WHERE "
                                    "sweep_id = ?1 AND point_index >= ?2 ORDER BY point_index "
                                    "LIMIT ?3",
                                    absl::StrCat("reading the points of sweep ", sweep_id)));
  RETURN_IF_ERROR(select.BindText(1, sweep_id));
  RETURN_IF_ERROR(select.BindInt64(2, bounds.first_index));
  // One row more than the page tells whether another page follows.
  RETURN_IF_ERROR(select.BindInt64(3, int64_t{bounds.size} + 1));
  SweepPointPage page;
  size_t page_bytes = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) return page;
    const int64_t index = select.ColumnInt64(0);
    v1::SweepPoint point;
    RETURN_IF_ERROR(
        select.ColumnMessage(1, point, absl::StrCat("point ", index, " of sweep ", sweep_id)));
    if (!AddToPage(point, bounds.size, page_bytes, page)) {
      page.next_page_token = SweepPointPageToken(static_cast<int>(index));
      return page;
    }
  }
}

absl::StatusOr<std::vector<v1::SweepPoint>> ReadAllSweepPoints(SqliteDatabase& database,
                                                               const std::string& sweep_id) {
  ASSIGN_OR_RETURN(SqliteStatement select,
                   database.Prepare("SELECT point_index, proto FROM sweep_point_protos WHERE "
                                    "sweep_id = ?1 ORDER BY point_index",
                                    absl::StrCat("reading the points of sweep ", sweep_id)));
  RETURN_IF_ERROR(select.BindText(1, sweep_id));
  std::vector<v1::SweepPoint> points;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) return points;
    RETURN_IF_ERROR(select.ColumnMessage(
        1, points.emplace_back(),
        absl::StrCat("point ", select.ColumnInt64(0), " of sweep ", sweep_id)));
  }
}

absl::StatusOr<int64_t> MoveEmbeddedSweepPoints(SqliteDatabase& database) {
  // The ids first: rows are rewritten one sweep at a time, not under an open scan of the table.
  std::vector<std::string> ids;
  {
    ASSIGN_OR_RETURN(SqliteStatement select,
                     database.Prepare("SELECT id FROM sweeps ORDER BY seq", "listing sweeps"));
    while (true) {
      ASSIGN_OR_RETURN(bool has_row, select.Step());
      if (!has_row) break;
      ids.push_back(select.ColumnText(0));
    }
  }
  int64_t moved = 0;
  for (const std::string& id : ids) {
    v1::Sweep sweep;
    {
      ASSIGN_OR_RETURN(SqliteStatement select,
                       database.Prepare("SELECT proto FROM sweeps WHERE id = ?1",
                                        absl::StrCat("reading sweep ", id)));
      RETURN_IF_ERROR(select.BindText(1, id));
      ASSIGN_OR_RETURN(bool found, select.Step());
      if (!found) continue;
      RETURN_IF_ERROR(select.ColumnMessage(0, sweep, absl::StrCat("sweep ", id)));
    }
    if (sweep.points_size() == 0) continue;
    // Expansion order is the points' order: the position is the index.
    for (int index = 0; index < sweep.points_size(); ++index) {
      sweep.mutable_points(index)->set_index(index);
    }
    RETURN_IF_ERROR(WriteSweepPoints(database, id, sweep.points()));
    sweep.set_points_total(sweep.points_size());
    sweep.clear_points();
    ASSIGN_OR_RETURN(SqliteStatement update,
                     database.Prepare("UPDATE sweeps SET proto = ?1 WHERE id = ?2",
                                      absl::StrCat("moving the points out of sweep ", id)));
    RETURN_IF_ERROR(update.BindBlob(1, sweep.SerializeAsString()));
    RETURN_IF_ERROR(update.BindText(2, id));
    RETURN_IF_ERROR(update.Run());
    ++moved;
  }
  return moved;
}

}  // namespace gpuprof::daemon::store
