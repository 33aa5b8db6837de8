// A sweep's points, one row each (sweep id, index, the gpuprof.v1.SweepPoint), apart from the
// sweep's own row: a point's change rewrites that point's row alone, the sweep's row stays a
// few hundred bytes (request, state, counts), and a sweep of 10,000 points is read a page at a
// time. Until schema version 2 the points were embedded in the sweep's proto;
// MoveEmbeddedSweepPoints moves them out once.
#ifndef GPUPROF_DAEMON_STORE_SWEEP_POINT_TABLE_H_
#define GPUPROF_DAEMON_STORE_SWEEP_POINT_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "daemon/store/sqlite_database.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon::store {

// GetSweepRequest.points_page_size: 0 means the default, more than the most means the most.
inline constexpr int kDefaultPointsPageSize = 500;
inline constexpr int kMaxPointsPageSize = 5000;
// A page also ends once its points reach this many bytes, whatever their experiments carry:
// a response stays well below the client's receive limit.
inline constexpr size_t kMaxPointsPageBytes = size_t{4} << 20;

struct SweepPointPage {
  // In index order.
  std::vector<::gpuprof::v1::SweepPoint> points;
  // Empty on the last page.
  std::string next_page_token;
};

// Where a page starts and how many points it holds at most, from a request's page size and
// token: InvalidArgument for a negative size or a token no page gave.
struct SweepPointPageBounds {
  int first_index = 0;
  int size = kDefaultPointsPageSize;
};
absl::StatusOr<SweepPointPageBounds> ParseSweepPointPage(int page_size,
                                                         const std::string& page_token);
// The token of the page that starts at `first_index`.
std::string SweepPointPageToken(int first_index);

// One page of points held in memory in index order (a running sweep's), with the same tokens
// as the stored ones: a client may read the first page of a running sweep and the next one
// after it ended.
absl::StatusOr<SweepPointPage> PageOfSweepPoints(absl::Span<const ::gpuprof::v1::SweepPoint> points,
                                                 int page_size, const std::string& page_token);

// Creates the table if missing (idempotent, run at every open).
absl::Status CreateSweepPointTable(SqliteDatabase& database);

// Inside the caller's transaction: inserts or replaces the point's row, by its index.
absl::Status WriteSweepPoint(SqliteDatabase& database, const std::string& sweep_id,
                             const ::gpuprof::v1::SweepPoint& point);
// WriteSweepPoint for each.
absl::Status WriteSweepPoints(SqliteDatabase& database, const std::string& sweep_id,
                              absl::Span<const ::gpuprof::v1::SweepPoint> points);
absl::Status WriteSweepPoints(
    SqliteDatabase& database, const std::string& sweep_id,
    const google::protobuf::RepeatedPtrField<::gpuprof::v1::SweepPoint>& points);

// One page of the sweep's stored points, in index order (no check that the sweep exists).
absl::StatusOr<SweepPointPage> ReadSweepPointPage(SqliteDatabase& database,
                                                  const std::string& sweep_id, int page_size,
                                                  const std::string& page_token);
// Every stored point of the sweep, in index order: start-up resumes running sweeps whole.
absl::StatusOr<std::vector<::gpuprof::v1::SweepPoint>> ReadAllSweepPoints(
    SqliteDatabase& database, const std::string& sweep_id);

// Inside the caller's transaction: moves the points embedded in sweep rows (schema version 1)
// into the table, each at its position, and rewrites those rows without them, with
// points_total set. Rows without embedded points are left alone, so running it again changes
// nothing. Returns how many sweeps it rewrote.
absl::StatusOr<int64_t> MoveEmbeddedSweepPoints(SqliteDatabase& database);

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_SWEEP_POINT_TABLE_H_
