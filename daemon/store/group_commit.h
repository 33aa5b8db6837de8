// The store's two connections to its database file: writes are batched into shared
// transactions (group commit), reads go through a second connection that never waits for a
// commit's fsync.
#ifndef GPUPROF_DAEMON_STORE_GROUP_COMMIT_H_
#define GPUPROF_DAEMON_STORE_GROUP_COMMIT_H_

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {

// A write runs on the write connection inside the batch's transaction.
using Write = absl::FunctionRef<absl::Status(SqliteDatabase& database)>;

// Thread-safe.
class GroupCommit {
 public:
  // `writer` and `reader` are connections to the same file, in WAL mode; `reader` is
  // query-only.
  GroupCommit(std::unique_ptr<SqliteDatabase> writer, std::unique_ptr<SqliteDatabase> reader);

  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;

  // Runs `write` inside a transaction shared with the writes other threads hand in meanwhile,
  // in its own savepoint (its failure undoes only its own changes), and returns once that
  // transaction has committed durably, or failed. One fsync then covers every write of the
  // batch: concurrent callers do not queue for one fsync each. `operation` names the write in
  // errors ("creating an experiment").
  absl::Status Commit(absl::string_view operation, Write write)
      ABSL_LOCKS_EXCLUDED(writer_mutex_, queue_mutex_);

  // Whether the last batch was refused for a full disk (ResourceExhausted), until one
  // commits: the store can be read but not written.
  bool disk_full() const { return disk_full_.load(); }

  // Runs `read` on the read connection: it sees the last commit, without waiting for one
  // that is under way.
  template <typename Read>
  auto OnReader(Read&& read) ABSL_LOCKS_EXCLUDED(reader_mutex_) {
    absl::MutexLock lock(&reader_mutex_);
    return std::forward<Read>(read)(*reader_);
  }

  // Runs `read` on the write connection, between batches: for a read that must not miss a
  // write that another thread's commit is about to acknowledge.
  template <typename Read>
  auto OnWriter(Read&& read) ABSL_LOCKS_EXCLUDED(writer_mutex_) {
    absl::MutexLock lock(&writer_mutex_);
    return std::forward<Read>(read)(*writer_);
  }

 private:
  struct PendingWrite;
  // The batch's transaction: OK once committed (each write's own result is in the batch).
  absl::Status CommitBatch(const std::vector<PendingWrite*>& batch)
      ABSL_LOCKS_EXCLUDED(writer_mutex_);
  // CommitBatch, and once more after a checkpoint if the disk was full: the WAL then starts
  // over in the space it already holds.
  void CommitBatchOrCheckpointAndRetry(const std::vector<PendingWrite*>& batch)
      ABSL_LOCKS_EXCLUDED(writer_mutex_);

  std::atomic<bool> disk_full_{false};

  // The write connection, used by one thread at a time.
  absl::Mutex writer_mutex_;
  std::unique_ptr<SqliteDatabase> writer_ ABSL_GUARDED_BY(writer_mutex_);

  absl::Mutex reader_mutex_;
  std::unique_ptr<SqliteDatabase> reader_ ABSL_GUARDED_BY(reader_mutex_);

  // Writes waiting for the next commit, and whether a thread is committing a batch now.
  absl::Mutex queue_mutex_ ABSL_ACQUIRED_BEFORE(writer_mutex_);
  absl::CondVar batch_committed_;
  std::vector<PendingWrite*> queue_ ABSL_GUARDED_BY(queue_mutex_);
  bool committing_ ABSL_GUARDED_BY(queue_mutex_) = false;
};

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_GROUP_COMMIT_H_
