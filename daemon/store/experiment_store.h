// Durable storage of experiments and their event streams in one SQLite database, with the
// sweeps, baselines, audit trail and drained GPUs that live beside them: the facade the daemon
// calls, over the pieces in daemon/store/ (the SQLite layer, the group commit, one event log
// for experiments and one for sweeps, and a file per other table).
//
// The store is plain persistence: the daemon core decides states and sequence numbers, the
// store writes what it is told. Every write is one transaction that has committed (and been
// synced to disk) by the time the call returns, so whatever an RPC acknowledged survives a
// daemon killed with -9, and with synchronous=FULL a power loss as well.
#ifndef GPUPROF_DAEMON_STORE_EXPERIMENT_STORE_H_
#define GPUPROF_DAEMON_STORE_EXPERIMENT_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "daemon/store/baselines.h"
#include "daemon/store/drained_gpus.h"
#include "daemon/store/event_log.h"
#include "daemon/store/group_commit.h"
#include "gpuprof/v1/access.pb.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/sweep.pb.h"
#include "gpuprof/v1/workloads.pb.h"

namespace gpuprof::daemon {

// Which experiments List returns; empty / unspecified fields match everything.
struct ExperimentFilter {
  std::string user;
  // Any of these states.
  std::vector<v1::ExperimentState> states;
  v1::Workload workload = v1::WORKLOAD_UNSPECIFIED;
};

struct SweepPage {
  // Newest first, without their points.
  std::vector<v1::Sweep> sweeps;
  std::string next_page_token;
  // Sweeps of the page whose stored row does not parse, left out of `sweeps`.
  std::vector<store::DamagedRow> damaged;
};

struct ExperimentPage {
  // Newest first, as SummarizeForListing leaves them.
  std::vector<v1::Experiment> experiments;
  // Empty on the last page.
  std::string next_page_token;
  // Experiments of the page whose stored row does not parse, left out of `experiments`.
  std::vector<store::DamagedRow> damaged;
};

// What a listing keeps of an experiment (List, a sweep's points): its figures, without the bulk
// that GetExperiment returns: the result's provenance (GPU inventory, request), a custom
// kernel's source and its SASS.
void SummarizeForListing(v1::Experiment& experiment);

// A submission refused because its write failed: `stored`'s code, `what` ("the experiment
// could not be stored, so it was not queued"), why, and on a full disk what the user can do.
absl::Status NotStoredError(const absl::Status& stored, absl::string_view what);

// Thread-safe: writes share commits (store::GroupCommit); reads use their own connection.
class ExperimentStore {
 public:
  // The schema this code reads and writes, kept in PRAGMA user_version.
  // 2: a sweep's points in rows of their own (daemon/store/sweep_point_table.h); a version-1
  // file's embedded points move there at its first open by this version.
  static constexpr int kSchemaVersion = 2;
  static constexpr int kDefaultPageSize = store::EventLogTable::kDefaultPageSize;
  static constexpr int kMaxPageSize = store::EventLogTable::kMaxPageSize;

  // Opens the database at `path`, creating it and its parent directories if needed, creates
  // the schema and switches the database to WAL mode. A database written by a newer schema
  // version or by another application is refused with FailedPrecondition, a damaged one with
  // DataLoss; the messages say what to do.
  static absl::StatusOr<std::unique_ptr<ExperimentStore>> Open(const std::string& path);

  // The full check behind `gpuprofd --check-db`, read-only: SQLite's integrity_check, the
  // file's identity (gpuprof's, not another application's) and that every stored message
  // parses. Returns a one-line summary when intact; DataLoss or FailedPrecondition saying what
  // is wrong otherwise (every row whose message does not parse, a line each), NotFound if
  // there is no file. Open runs the cheaper quick_check and the identity check, and refuses a
  // file that fails them.
  static absl::StatusOr<std::string> CheckDatabase(const std::string& path);

  ExperimentStore(const ExperimentStore&) = delete;
  ExperimentStore& operator=(const ExperimentStore&) = delete;
  ~ExperimentStore();

  // Assigns the next id ("exp-000001", "exp-000002", ...; never reused, also across restarts),
  // sets it as experiment.id and first_event.experiment_id, and inserts both in one
  // transaction. Returns the id. first_event.seq must be positive (InvalidArgument otherwise).
  // `audit`, when given, is stored in the same transaction, with the new id as its
  // experiment_id: the submission and its audit entry are stored together or not at all.
  absl::StatusOr<std::string> Create(v1::Experiment experiment, v1::ExperimentEvent first_event,
                                     const v1::AuditEntry* audit = nullptr);
  // Create for several experiments in one transaction (one sync for a whole sweep): either
  // every one is created or none. Ids in the order given.
  absl::StatusOr<std::vector<std::string>> CreateMany(
      std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> experiments);

  // In one transaction: replaces the stored experiment with `experiment` (NotFound if its id
  // does not exist) and appends `event` unless event.seq <= 0. An event whose seq is already
  // stored for the experiment is refused with AlreadyExists, and nothing is written. An empty
  // event.experiment_id is taken to mean experiment.id; a different one is InvalidArgument.
  // `audit`, when given, is stored in the same transaction.
  absl::Status Update(const v1::Experiment& experiment, const v1::ExperimentEvent& event,
                      const v1::AuditEntry* audit = nullptr);

  // Update for several (experiment, event) pairs, all in one transaction: either every pair
  // is written or none is.
  absl::Status UpdateMany(
      const std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>>& updates);

  // NotFound (naming the id) if there is no such experiment; DataLoss naming it and what to
  // do if its stored row does not parse.
  absl::StatusOr<v1::Experiment> Get(const std::string& id);

  // The experiment's events with seq >= from_seq, in ascending seq order, as many as `limit`
  // allows (all by default). NotFound if the experiment does not exist.
  absl::StatusOr<std::vector<v1::ExperimentEvent>> Events(const std::string& id, int64_t from_seq,
                                                          store::EventPageLimit limit = {});

  // Experiments matching `filter`, newest (last submitted) first, `page_size` at a time.
  // page_size 0 means kDefaultPageSize, larger than kMaxPageSize means kMaxPageSize, and a
  // negative one is InvalidArgument. `page_token` is empty for the first page, else the
  // next_page_token of the previous page; a malformed one is InvalidArgument.
  absl::StatusOr<ExperimentPage> List(const ExperimentFilter& filter, int page_size,
                                      const std::string& page_token);

  // Every experiment in `state`, oldest (first submitted) first, with results: used at
  // start-up to re-queue QUEUED experiments and to find the ones that were RUNNING. Rows that
  // do not parse are left out (and kept in DamagedRowsMet), so one cannot stop the rest.
  absl::StatusOr<std::vector<v1::Experiment>> ListByState(v1::ExperimentState state);
  // When the first submitted experiment still QUEUED was created (Unix ns), or -1 when none
  // is: the metrics' queue age. One index lookup, on the read connection.
  absl::StatusOr<int64_t> OldestQueuedCreatedUnixNanos();

  // ---- Sweeps (a sweep's points are experiments whose sweep_id names it) ----
  // A sweep's row holds its request, state and counts; its points are rows of their own, so
  // that a point's change rewrites one point and a huge sweep is read a page at a time.

  // Assigns the next sweep id ("swp-000001", ...; never reused), sets it in the sweep and the
  // first event, and inserts both, and the sweep's points in their rows, in one transaction.
  // Returns the id.
  absl::StatusOr<std::string> CreateSweep(v1::Sweep sweep, v1::SweepEvent first_event);
  // In one transaction: replaces the stored sweep's row, writes `changed_points` (by index)
  // and any points embedded in `sweep` to their rows, and appends `event` unless
  // event.seq <= 0.
  absl::Status UpdateSweep(const v1::Sweep& sweep, const v1::SweepEvent& event,
                           absl::Span<const v1::SweepPoint> changed_points = {});
  // The sweep without its points; NotFound if there is none.
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& id);
  // The sweep with one page of its points, in index order, and next_points_page_token: page
  // size and token as GetSweepRequest's points_page_size and points_page_token.
  absl::StatusOr<v1::Sweep> GetSweepPage(const std::string& id, int points_page_size,
                                         const std::string& points_page_token);
  absl::StatusOr<std::vector<v1::SweepEvent>> SweepEvents(const std::string& id, int64_t from_seq,
                                                          store::EventPageLimit limit = {});
  // Newest first; points left out. Paging as for List.
  absl::StatusOr<SweepPage> ListSweeps(const std::string& user, int page_size,
                                       const std::string& page_token);
  // Every sweep in `state`, oldest first, with all its points: start-up resumes the running
  // ones. Rows that do not parse are left out and kept in DamagedRowsMet, as for ListByState.
  absl::StatusOr<std::vector<v1::Sweep>> ListSweepsByState(v1::SweepState state);
  // Point index -> the experiments created for it, oldest attempt first. Filled by Create, in
  // the same transaction as the experiment, so no point's experiment is ever lost.
  absl::StatusOr<std::map<int, std::vector<std::string>>> SweepPointExperiments(
      const std::string& sweep_id);

  // ---- Baselines ----

  using BaselineWrite = store::BaselineWrite;
  using BaselineDecision = store::BaselineDecision;
  // One change of the baseline `name`, decided and written in one transaction: `decide` sees
  // the baseline stored now and returns what to write, or an error, which is returned with
  // nothing written. No other write comes between what `decide` saw and what it wrote, so a
  // check it makes (ownership) cannot be raced. It runs under the store's write lock: it must
  // not call the store. A written baseline must keep the name.
  absl::Status ChangeBaseline(const std::string& name, const BaselineDecision& decide);
  // Every baseline, by name; only `name` when it is not empty. Baselines saved before owners
  // were recorded have an empty owner.
  absl::StatusOr<std::vector<v1::Baseline>> ListBaselines(const std::string& name);
  // `user`'s experiments created at or after the time, oldest first (GPU-hours over a day).
  absl::StatusOr<std::vector<v1::Experiment>> ListUserCreatedSince(const std::string& user,
                                                                   int64_t created_after_unix_ns);

  // The audit trail: who submitted, cancelled, preempted, was refused, changed the policy.
  absl::Status AppendAudit(const v1::AuditEntry& entry);
  // Newest first; `user` matches the actor or the user acted for; empty filters match all.
  // limit 0 means 100, at most 1000.
  absl::StatusOr<std::vector<v1::AuditEntry>> ListAudit(const std::string& user,
                                                        const std::string& experiment_id,
                                                        int limit);

  // ---- GPU health ----

  // GPUs drained by a hardware fault, by UUID (indices can change when GPUs are added), kept
  // until an admin clears them, across restarts.
  using DrainedGpu = store::DrainedGpu;
  // Inserts or replaces the GPU's record (durably, before it returns).
  absl::Status SaveDrainedGpu(const DrainedGpu& gpu);
  // NOT_FOUND when the GPU is not drained.
  absl::Status DeleteDrainedGpu(const std::string& uuid);
  absl::StatusOr<std::vector<DrainedGpu>> ListDrainedGpus();

  // Size of the database in bytes (page_count * page_size), for a metric. Excludes the WAL.
  absl::StatusOr<int64_t> SizeBytes();

  // ---- A full disk (daemon/store/store_space_monitor.h watches it) ----

  // Whether the last write was refused because the disk is full, until one commits: reads
  // are served, writes are refused with ResourceExhausted.
  bool disk_full() const { return database_->disk_full(); }
  // A small write (the schema version, rewritten as it is): whether the disk takes writes now.
  absl::Status ProbeWrite();
  // Copies the WAL into the database and empties it, giving its space back: when idle.
  absl::Status CheckpointWal();

  // Every row this store has found damaged since it was opened (by start-up's reads, listings
  // and gets), by table and id: for the log and a metric.
  std::vector<store::DamagedRow> DamagedRowsMet() ABSL_LOCKS_EXCLUDED(damaged_mutex_);

 private:
  explicit ExperimentStore(std::unique_ptr<store::GroupCommit> database);

  // Inserts one experiment (and its sweep link) inside the caller's transaction; sets the id.
  absl::StatusOr<std::string> CreateInTransaction(store::SqliteDatabase& database,
                                                  v1::Experiment& experiment,
                                                  v1::ExperimentEvent& first_event);

  // Keeps the rows for DamagedRowsMet.
  void NoteDamaged(const std::vector<store::DamagedRow>& rows) ABSL_LOCKS_EXCLUDED(damaged_mutex_);
  // A Get's DataLoss (the row does not parse) noted and restated with what to do.
  absl::Status ExplainDamaged(const absl::Status& read, const std::string& table,
                              const std::string& id);

  const std::unique_ptr<store::GroupCommit> database_;
  const store::EventLog<v1::Experiment, v1::ExperimentEvent> experiments_;
  const store::EventLog<v1::Sweep, v1::SweepEvent> sweeps_;
  absl::Mutex damaged_mutex_;
  // (table, id) -> the row.
  std::map<std::pair<std::string, std::string>, store::DamagedRow> damaged_
      ABSL_GUARDED_BY(damaged_mutex_);
};

}  // namespace gpuprof::daemon

#endif  // GPUPROF_DAEMON_STORE_EXPERIMENT_STORE_H_
