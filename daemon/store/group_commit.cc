#include "daemon/store/group_commit.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/metrics/latency_phases.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {

struct GroupCommit::PendingWrite {
  absl::string_view operation;
  Write* write;
  absl::Status result;
  bool done = false;
};

GroupCommit::GroupCommit(std::unique_ptr<SqliteDatabase> writer,
                         std::unique_ptr<SqliteDatabase> reader)
    : writer_(std::move(writer)), reader_(std::move(reader)) {}

absl::Status GroupCommit::Commit(absl::string_view operation, Write write) {
  PhaseTimer wait_timer(StoreCommitPhase::kWait);
  PendingWrite pending{operation, &write};
  absl::MutexLock queue_lock(&queue_mutex_);
  queue_.push_back(&pending);
  while (!pending.done) {
    if (committing_) {
      // Another thread is committing; this write goes into the next batch.
      batch_committed_.Wait(&queue_mutex_);
      continue;
    }
    // Commit everything queued so far, this write included, as one transaction.
    committing_ = true;
    std::vector<PendingWrite*> batch;
    batch.swap(queue_);
    queue_mutex_.Unlock();
    CommitBatchOrCheckpointAndRetry(batch);
    queue_mutex_.Lock();
    for (PendingWrite* write_in_batch : batch) write_in_batch->done = true;
    committing_ = false;
    batch_committed_.SignalAll();
  }
  return pending.result;
}

namespace {

// SQLITE_FULL (SqliteError's ResourceExhausted with SQLite's own text for it), not a write's
// own refusal that happens to share the code.
bool IsDiskFull(const absl::Status& status) {
  return absl::IsResourceExhausted(status) &&
         absl::StrContains(status.message(), "database or disk is full");
}

}  // namespace

void GroupCommit::CommitBatchOrCheckpointAndRetry(const std::vector<PendingWrite*>& batch) {
  absl::Status committed = CommitBatch(batch);
  if (IsDiskFull(committed)) {
    // Nothing of the batch was kept. A WAL that has grown to fill the disk is copied into the
    // database (which reuses its own free pages), and the next transaction writes the WAL from
    // its start again, in space it already holds.
    bool checkpointed = false;
    {
      absl::MutexLock lock(&writer_mutex_);
      checkpointed = writer_->CheckpointWal(/*truncate=*/false).ok();
    }
    if (checkpointed) committed = CommitBatch(batch);
  }
  // A write refused for space inside a batch that committed the others counts too.
  bool refused_for_space = IsDiskFull(committed);
  for (const PendingWrite* pending : batch) refused_for_space |= IsDiskFull(pending->result);
  if (refused_for_space) {
    disk_full_ = true;
  } else if (committed.ok()) {
    disk_full_ = false;
  }
}

absl::Status GroupCommit::CommitBatch(const std::vector<PendingWrite*>& batch) {
  absl::MutexLock lock(&writer_mutex_);
  RecordStoreCommitBatch(static_cast<int>(batch.size()));
  PhaseTimer statements_timer(StoreCommitPhase::kStatements);
  SqliteDatabase& database = *writer_;
  const std::string operation =
      batch.size() == 1 ? std::string(batch[0]->operation)
                        : absl::StrCat(batch.size(), " writes (", batch[0]->operation, ", ...)");
  absl::StatusOr<SqliteTransaction> transaction = SqliteTransaction::Begin(database, operation);
  if (!transaction.ok()) {
    for (PendingWrite* pending : batch) pending->result = transaction.status();
    return transaction.status();
  }
  for (PendingWrite* pending : batch) {
    pending->result = database.RunStatement("SAVEPOINT write", "starting a write");
    if (pending->result.ok()) pending->result = (*pending->write)(database);
    if (!database.InTransaction()) {
      // Some errors (a full disk, I/O) make SQLite roll the whole transaction back: every
      // write of the batch is undone, the ones before this one included.
      const absl::Status undone = pending->result.ok()
                                      ? absl::InternalError("the transaction ended unexpectedly")
                                      : pending->result;
      for (PendingWrite* other : batch) other->result = undone;
      return undone;
    }
    if (!pending->result.ok()) {
      (void)database.RunStatement("ROLLBACK TO write", "undoing a failed write");
    }
    (void)database.RunStatement("RELEASE write", "ending a write");
  }
  // With synchronous=FULL the commit is durable when it returns: only now are the writes
  // acknowledged.
  statements_timer.Stop();
  PhaseTimer commit_timer(StoreCommitPhase::kCommit);
  const absl::Status committed = transaction->Commit();
  commit_timer.Stop();
  if (!committed.ok()) {
    for (PendingWrite* pending : batch) {
      if (pending->result.ok()) pending->result = committed;
    }
  }
  return committed;
}

}  // namespace gpuprof::daemon::store
