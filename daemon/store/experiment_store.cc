#include "daemon/store/experiment_store.h"

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "daemon/store/audit_log.h"
#include "daemon/store/baselines.h"
#include "daemon/store/database_checks.h"
#include "daemon/store/drained_gpus.h"
#include "daemon/store/event_log.h"
#include "daemon/store/group_commit.h"
#include "daemon/store/sqlite_database.h"
#include "daemon/store/sweep_point_table.h"
#include "google/protobuf/util/time_util.h"
#include "gpuprof/v1/experiment.pb.h"
#include "gpuprof/v1/sweep.pb.h"

namespace gpuprof::daemon {
namespace {

using store::Column;
using store::Condition;
using store::SqliteDatabase;
using store::SqliteStatement;
using store::SqliteTransaction;

constexpr char kSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS experiments (
  -- Submission order. AUTOINCREMENT: numbers, and so ids, are never reused.
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE NOT NULL,
  -- Copies of proto fields, kept in sync with it, for filtering.
  user TEXT NOT NULL,
  state INTEGER NOT NULL,
  workload INTEGER NOT NULL,
  created_unix_ns INTEGER NOT NULL,
  -- The gpuprof.v1.Experiment, serialized.
  proto BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS experiments_by_state ON experiments (state, seq);
CREATE INDEX IF NOT EXISTS experiments_by_user ON experiments (user, seq);
CREATE TABLE IF NOT EXISTS events (
  experiment_id TEXT NOT NULL REFERENCES experiments (id),
  seq INTEGER NOT NULL,
  -- The gpuprof.v1.ExperimentEvent, serialized.
  proto BLOB NOT NULL,
  PRIMARY KEY (experiment_id, seq)
) WITHOUT ROWID;
)sql";

// Added with sweeps: applied to every database at open (additive, idempotent). The baselines
// table came with them (daemon/store/baselines.cc).
constexpr char kSweepSchema[] = R"sql(
CREATE TABLE IF NOT EXISTS sweeps (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT UNIQUE NOT NULL,
  user TEXT NOT NULL,
  state INTEGER NOT NULL,
  created_unix_ns INTEGER NOT NULL,
  -- The gpuprof.v1.Sweep, serialized, without its points (sweep_point_protos has them; until
  -- schema version 2 they were embedded here).
  proto BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS sweeps_by_state ON sweeps (state, seq);
CREATE TABLE IF NOT EXISTS sweep_events (
  sweep_id TEXT NOT NULL REFERENCES sweeps (id),
  seq INTEGER NOT NULL,
  proto BLOB NOT NULL,
  PRIMARY KEY (sweep_id, seq)
) WITHOUT ROWID;
-- Which experiments run a sweep's points; written with the experiment, in its transaction.
CREATE TABLE IF NOT EXISTS sweep_points (
  sweep_id TEXT NOT NULL REFERENCES sweeps (id),
  point_index INTEGER NOT NULL,
  attempt INTEGER NOT NULL,
  experiment_id TEXT NOT NULL REFERENCES experiments (id),
  PRIMARY KEY (sweep_id, point_index, attempt)
) WITHOUT ROWID;
)sql";

// The WAL is checkpointed when it reaches this many pages (512 KiB at SQLite's 4 KiB pages;
// its default, 1000, lets the WAL take 4 MiB of a small volume before any is given back), and
// cut back to kWalKeptBytes once checkpointed.
constexpr int kWalAutocheckpointPages = 128;
constexpr int kWalKeptBytes = 512 * 1024;

int64_t UnixNanos(const google::protobuf::Timestamp& time) {
  return google::protobuf::util::TimeUtil::TimestampToNanoseconds(time);
}

}  // namespace

void SummarizeForListing(v1::Experiment& experiment) {
  experiment.mutable_result()->clear_provenance();
  // A custom kernel's source (up to 256 KiB) and SASS would make a page of 50 megabytes.
  if (experiment.request().has_custom_kernel()) {
    experiment.mutable_request()->mutable_custom_kernel()->clear_source();
  }
  experiment.mutable_result()->clear_sass();
}

namespace {

const store::EventLogKind<v1::Experiment, v1::ExperimentEvent> kExperimentLog = {
    .tables = {.noun = "experiment",
               .noun_with_article = "an experiment",
               .entity_table = "experiments",
               .event_table = "events",
               .owner_column = "experiment_id",
               .id_prefix = "exp-"},
    .columns =
        [](const v1::Experiment& experiment) {
          return std::vector<Column>{{"user", experiment.user()},
                                     {"state", int64_t{experiment.state()}},
                                     {"workload", int64_t{experiment.workload()}},
                                     {"created_unix_ns", UnixNanos(experiment.created())}};
        },
    .assign_id =
        [](const std::string& id, v1::Experiment& experiment, v1::ExperimentEvent& first) {
          experiment.set_id(id);
          first.set_experiment_id(id);
        },
    .owner = &v1::ExperimentEvent::experiment_id,
    .set_owner = [](v1::ExperimentEvent& event,
                    const std::string& id) { event.set_experiment_id(id); },
    .summarize = &SummarizeForListing,
};

const store::EventLogKind<v1::Sweep, v1::SweepEvent> kSweepLog = {
    .tables = {.noun = "sweep",
               .noun_with_article = "a sweep",
               .entity_table = "sweeps",
               .event_table = "sweep_events",
               .owner_column = "sweep_id",
               .id_prefix = "swp-"},
    .columns =
        [](const v1::Sweep& sweep) {
          return std::vector<Column>{{"user", sweep.user()},
                                     {"state", int64_t{sweep.state()}},
                                     {"created_unix_ns", UnixNanos(sweep.created())}};
        },
    .assign_id =
        [](const std::string& id, v1::Sweep& sweep, v1::SweepEvent& first) {
          sweep.set_id(id);
          first.set_sweep_id(id);
          if (first.has_created()) first.mutable_created()->set_id(id);
        },
    .owner = &v1::SweepEvent::sweep_id,
    .set_owner = [](v1::SweepEvent& event, const std::string& id) { event.set_sweep_id(id); },
    // A listing's sweeps without their points, nor custom kernels' sources (the base's, a
    // kernel axis's): GetSweep and each point's experiment keep them.
    .summarize =
        [](v1::Sweep& sweep) {
          sweep.clear_points();
          v1::SweepRequest& request = *sweep.mutable_request();
          if (request.base().has_custom_kernel()) {
            request.mutable_base()->mutable_custom_kernel()->clear_source();
          }
          for (v1::SweepAxis& axis : *request.mutable_axes()) {
            for (v1::CustomKernel& kernel : *axis.mutable_kernels()) kernel.clear_source();
          }
        },
};

// A table whose rows hold a serialized message, and how --check-db names a row of it.
struct MessageTable {
  const char* table;
  const char* noun;  // "experiment event"
  const char* key;   // SQL naming the row: "experiment_id || ' seq ' || seq"
  google::protobuf::Message* message;
};

// Counts the rows of the table and parses each one's proto: SQLite checks pages, not what is
// in the blobs. Every row that does not parse is added to `damaged`; the count includes them.
absl::StatusOr<int64_t> ParseEveryRow(SqliteDatabase& database, const MessageTable& table,
                                      std::vector<store::DamagedRow>& damaged) {
  ASSIGN_OR_RETURN(
      SqliteStatement select,
      database.Prepare(absl::StrCat("SELECT proto, ", table.key, " FROM ", table.table),
                       absl::StrCat("reading ", table.table)));
  int64_t count = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool has_row, select.Step());
    if (!has_row) return count;
    ++count;
    const std::string key = select.ColumnText(1);
    const absl::Status parsed =
        select.ColumnMessage(0, *table.message, absl::StrCat(table.noun, " ", key));
    if (absl::IsDataLoss(parsed)) {
      damaged.push_back({table.table, key, std::string(parsed.message())});
    } else {
      RETURN_IF_ERROR(parsed);
    }
  }
}

// --check-db's verdict on rows that do not parse: every one, a line each, and what to do.
absl::Status DamagedRowsError(const std::string& path,
                              const std::vector<store::DamagedRow>& damaged) {
  std::string message = absl::StrCat("database ", path, " has ", damaged.size(),
                                     " damaged row(s) whose stored message does not parse (its "
                                     "pages are intact; every other row parses):");
  for (const store::DamagedRow& row : damaged) {
    absl::StrAppend(&message, "\n  table ", row.table, ", ", row.id, ": ", row.error);
  }
  absl::StrAppend(&message,
                  "\ngpuprofd starts on it and leaves these rows out (listings name them). "
                  "To get them back, restore the database from a backup taken before the damage");
  return absl::DataLossError(message);
}

// A database that must be created or upgraded before anything can be served, on a full disk:
// what to do. Other errors unchanged.
absl::Status ExplainFullDiskAtCreation(const absl::Status& status, const std::string& path) {
  if (!absl::IsResourceExhausted(status)) return status;
  return absl::ResourceExhaustedError(absl::StrCat(
      status.message(), ". The disk holding ", path,
      " is full and the database must be created or upgraded before gpuprofd can serve it: "
      "free space there and start gpuprofd again"));
}

// Creates or upgrades the schema, in one transaction. `commit`: under the write lock, and
// committed; otherwise in a read transaction that is rolled back, to find out whether there is
// anything to change. Returns whether there was.
absl::StatusOr<bool> ApplySchema(SqliteDatabase& database, const std::string& path, bool commit) {
  std::optional<SqliteTransaction> transaction;
  if (commit) {
    absl::StatusOr<SqliteTransaction> begun = SqliteTransaction::Begin(database, "creating schema");
    if (!begun.ok()) return begun.status();
    transaction.emplace(*std::move(begun));
  } else {
    RETURN_IF_ERROR(database.Execute("BEGIN", "checking the schema"));
  }
  auto apply = [&]() -> absl::Status {
    // Checked again in the transaction: another process may have created or upgraded it.
    ASSIGN_OR_RETURN(int64_t version,
                     store::CheckSchemaVersion(database, path, ExperimentStore::kSchemaVersion));
    if (version < ExperimentStore::kSchemaVersion) {
      RETURN_IF_ERROR(database.Execute(kSchema, "creating schema"));
      RETURN_IF_ERROR(database.Execute(
          absl::StrCat("PRAGMA user_version = ", ExperimentStore::kSchemaVersion),
          "setting schema version"));
    }
    // Tables added after version 1, in the order they came: idempotent, at every open.
    RETURN_IF_ERROR(database.Execute(kSweepSchema, "creating the sweep tables"));
    RETURN_IF_ERROR(store::CreateSweepPointTable(database));
    // Once, with the version set above: a version-1 file's points move to their own rows.
    if (version < 2) RETURN_IF_ERROR(store::MoveEmbeddedSweepPoints(database).status());
    RETURN_IF_ERROR(store::CreateBaselinesTable(database));
    // Databases created before the id was introduced get it on their next start.
    ASSIGN_OR_RETURN(int64_t application_id,
                     database.QueryInt64("PRAGMA application_id", "reading application id"));
    if (application_id != store::kApplicationId) {
      RETURN_IF_ERROR(database.Execute(
          absl::StrCat("PRAGMA application_id = ", store::kApplicationId),
          "setting application id"));
    }
    RETURN_IF_ERROR(store::CreateAuditTable(database));
    RETURN_IF_ERROR(store::CreateDrainedGpusTable(database));
    return absl::OkStatus();
  };
  const absl::Status applied = apply();
  const bool changes = database.TransactionWrites();
  if (!commit) {
    if (database.InTransaction()) (void)database.Execute("ROLLBACK", "ending the schema check");
    RETURN_IF_ERROR(applied);
    return changes;
  }
  RETURN_IF_ERROR(applied);
  RETURN_IF_ERROR(transaction->Commit());
  return changes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExperimentStore>> ExperimentStore::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> database, SqliteDatabase::Open(path));
  // Refuse a newer schema, another application's file or a damaged one before changing
  // anything in it.
  RETURN_IF_ERROR(store::ExplainUnreadable(
      store::CheckSchemaVersion(*database, path, kSchemaVersion).status(), path));
  RETURN_IF_ERROR(store::ExplainUnreadable(store::CheckIdentity(*database, path), path));
  RETURN_IF_ERROR(
      store::ExplainUnreadable(store::CheckPages(*database, path, /*full=*/false), path));

  // The journal mode is stored in the file; it cannot change inside a transaction. Read
  // first: setting it writes, and a start on a full disk must write nothing it need not.
  ASSIGN_OR_RETURN(std::string journal_mode,
                   database->QueryText("PRAGMA journal_mode", "reading the journal mode"));
  if (journal_mode != "wal") {
    absl::StatusOr<std::string> enabled =
        database->QueryText("PRAGMA journal_mode = WAL", "enabling WAL");
    if (!enabled.ok()) return ExplainFullDiskAtCreation(enabled.status(), path);
    journal_mode = *enabled;
  }
  if (journal_mode != "wal") {
    return absl::FailedPreconditionError(
        absl::StrCat("database ", path, " cannot use write-ahead logging (journal mode is ",
                     journal_mode, "); put it on a local file system"));
  }
  // FULL syncs the WAL at every commit. NORMAL would survive a killed daemon too, but can lose
  // the last acknowledged commits on power loss. The WAL is checkpointed every
  // kWalAutocheckpointPages (SQLite's 1000 let it take 4 MiB of a small volume first) and cut
  // back to kWalKeptBytes after.
  RETURN_IF_ERROR(database->Execute(
      absl::StrCat("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; "
                   "PRAGMA wal_autocheckpoint = ",
                   kWalAutocheckpointPages, "; PRAGMA journal_size_limit = ", kWalKeptBytes, ";"),
      "configuring connection"));
  RETURN_IF_ERROR(database->KeepWalFilesOnClose());
  // The schema is applied in a read transaction first, and only if that would change
  // something, again under the write lock, committed: a start on a complete database writes
  // nothing, so a full disk does not stop it from serving what is stored.
  ASSIGN_OR_RETURN(bool schema_changes, ApplySchema(*database, path, /*commit=*/false));
  if (schema_changes) {
    RETURN_IF_ERROR(ExplainFullDiskAtCreation(
        ApplySchema(*database, path, /*commit=*/true).status(), path));
  }
  // Reads go through a second connection: in WAL mode they see the last commit without
  // waiting for the writer's transaction and fsync.
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> reader, SqliteDatabase::Open(path));
  RETURN_IF_ERROR(reader->Execute("PRAGMA query_only = ON", "configuring the read connection"));
  RETURN_IF_ERROR(reader->KeepWalFilesOnClose());
  return std::unique_ptr<ExperimentStore>(new ExperimentStore(
      std::make_unique<store::GroupCommit>(std::move(database), std::move(reader))));
}

absl::StatusOr<std::string> ExperimentStore::CheckDatabase(const std::string& path) {
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("database ", path, " does not exist"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<SqliteDatabase> database, SqliteDatabase::OpenReadOnly(path));
  std::vector<store::DamagedRow> damaged;
  auto check = [&]() -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(int64_t version, store::CheckSchemaVersion(*database, path, kSchemaVersion));
    RETURN_IF_ERROR(store::CheckIdentity(*database, path));
    RETURN_IF_ERROR(store::CheckPages(*database, path, /*full=*/true));
    if (version == 0) {
      return absl::StrCat("database ", path, " is intact and holds no experiments yet");
    }
    v1::Experiment experiment;
    v1::ExperimentEvent event;
    v1::Sweep sweep;
    v1::SweepEvent sweep_event;
    v1::Baseline baseline;
    v1::SweepPoint point;
    // The sweep tables are added at start-up to databases older than sweeps; one that has not
    // been opened by such a daemon yet has none, which is fine.
    const MessageTable tables[] = {
        {"experiments", "experiment", "id", &experiment},
        {"events", "experiment event", "experiment_id || ' seq ' || seq", &event},
        {"sweeps", "sweep", "id", &sweep},
        {"sweep_events", "sweep event", "sweep_id || ' seq ' || seq", &sweep_event},
        {"baselines", "baseline", "name", &baseline},
        {"sweep_point_protos", "sweep point", "sweep_id || ' point ' || point_index", &point}};
    std::map<std::string, int64_t> rows;
    for (const MessageTable& table : tables) {
      ASSIGN_OR_RETURN(bool present, store::HasTable(*database, table.table));
      if (!present) continue;
      ASSIGN_OR_RETURN(rows[table.table], ParseEveryRow(*database, table, damaged));
    }
    return absl::StrFormat(
        "database %s is intact: schema version %d, %d experiments, %d events, %d sweeps, %d "
        "sweep events, %d baselines, %d sweep points",
        path, version, rows["experiments"], rows["events"], rows["sweeps"], rows["sweep_events"],
        rows["baselines"], rows["sweep_point_protos"]);
  };
  absl::StatusOr<std::string> verdict = check();
  if (!verdict.ok()) return store::ExplainUnreadable(verdict.status(), path);
  if (!damaged.empty()) return DamagedRowsError(path, damaged);
  return verdict;
}

ExperimentStore::ExperimentStore(std::unique_ptr<store::GroupCommit> database)
    : database_(std::move(database)), experiments_(kExperimentLog), sweeps_(kSweepLog) {}

ExperimentStore::~ExperimentStore() = default;

absl::Status NotStoredError(const absl::Status& stored, absl::string_view what) {
  return absl::Status(
      stored.code(),
      absl::StrCat(what, ": ", stored.message(),
                   absl::IsResourceExhausted(stored)
                       ? ". The disk holding gpuprofd's database is full: free space there "
                         "and submit again (gpuprofd carries on by itself once it can write)"
                       : ""));
}

// ---- Experiments ----

absl::StatusOr<std::string> ExperimentStore::Create(v1::Experiment experiment,
                                                    v1::ExperimentEvent first_event,
                                                    const v1::AuditEntry* audit) {
  if (audit == nullptr) {
    std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> one;
    one.emplace_back(std::move(experiment), std::move(first_event));
    ASSIGN_OR_RETURN(std::vector<std::string> ids, CreateMany(std::move(one)));
    return ids.front();
  }
  RETURN_IF_ERROR(experiments_.CheckFirstEvent(first_event));
  // The audit entry shares the experiment's savepoint: one commit, and never one without the
  // other.
  std::string id;
  RETURN_IF_ERROR(
      database_->Commit("creating an experiment", [&](SqliteDatabase& database) -> absl::Status {
        ASSIGN_OR_RETURN(id, CreateInTransaction(database, experiment, first_event));
        v1::AuditEntry entry = *audit;
        entry.set_experiment_id(id);
        return store::InsertAudit(database, entry);
      }));
  return id;
}

absl::StatusOr<std::vector<std::string>> ExperimentStore::CreateMany(
    std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>> experiments) {
  for (const auto& [experiment, first_event] : experiments) {
    RETURN_IF_ERROR(experiments_.CheckFirstEvent(first_event));
  }
  // All of them in one savepoint of a group commit: stored together or not at all, and
  // acknowledged only once the transaction carrying them has committed.
  std::vector<std::string> ids;
  RETURN_IF_ERROR(database_->Commit(
      experiments.size() == 1 ? "creating an experiment"
                              : absl::StrCat("creating ", experiments.size(), " experiments"),
      [&](SqliteDatabase& database) -> absl::Status {
        ids.clear();
        for (auto& [experiment, first_event] : experiments) {
          ASSIGN_OR_RETURN(std::string id, CreateInTransaction(database, experiment, first_event));
          ids.push_back(std::move(id));
        }
        return absl::OkStatus();
      }));
  return ids;
}

absl::StatusOr<std::string> ExperimentStore::CreateInTransaction(SqliteDatabase& database,
                                                                 v1::Experiment& experiment,
                                                                 v1::ExperimentEvent& first_event) {
  ASSIGN_OR_RETURN(std::string id, experiments_.Create(database, experiment, first_event));
  if (experiment.sweep_id().empty()) return id;
  // The point's link, in the experiment's transaction: no point's experiment is ever lost.
  ASSIGN_OR_RETURN(
      SqliteStatement link,
      database.Prepare("INSERT INTO sweep_points (sweep_id, point_index, attempt, "
                       "experiment_id) VALUES (?1, ?2, (SELECT COUNT(*) + 1 FROM "
                       "sweep_points WHERE sweep_id = ?1 AND point_index = ?2), ?3)",
                       absl::StrCat("linking ", id, " to sweep ", experiment.sweep_id())));
  RETURN_IF_ERROR(link.BindText(1, experiment.sweep_id()));
  RETURN_IF_ERROR(link.BindInt64(2, experiment.sweep_point()));
  RETURN_IF_ERROR(link.BindText(3, id));
  RETURN_IF_ERROR(link.Run());
  return id;
}

absl::Status ExperimentStore::Update(const v1::Experiment& experiment,
                                     const v1::ExperimentEvent& event,
                                     const v1::AuditEntry* audit) {
  return database_->Commit(
      absl::StrCat("updating ", experiment.id()), [&](SqliteDatabase& database) -> absl::Status {
        RETURN_IF_ERROR(experiments_.Update(database, experiment, event));
        return audit == nullptr ? absl::OkStatus() : store::InsertAudit(database, *audit);
      });
}

absl::Status ExperimentStore::UpdateMany(
    const std::vector<std::pair<v1::Experiment, v1::ExperimentEvent>>& updates) {
  if (updates.empty()) return absl::OkStatus();
  return database_->Commit(absl::StrCat("updating ", updates.size(), " experiments"),
                           [&](SqliteDatabase& database) -> absl::Status {
                             for (const auto& [experiment, event] : updates) {
                               RETURN_IF_ERROR(experiments_.Update(database, experiment, event));
                             }
                             return absl::OkStatus();
                           });
}

absl::StatusOr<v1::Experiment> ExperimentStore::Get(const std::string& id) {
  absl::StatusOr<v1::Experiment> experiment = database_->OnReader(
      [&](SqliteDatabase& database) { return experiments_.Get(database, id); });
  if (!experiment.ok()) return ExplainDamaged(experiment.status(), "experiments", id);
  return experiment;
}

absl::StatusOr<std::vector<v1::ExperimentEvent>> ExperimentStore::Events(
    const std::string& id, int64_t from_seq, store::EventPageLimit limit) {
  return database_->OnReader([&](SqliteDatabase& database) {
    return experiments_.Events(database, id, from_seq, limit);
  });
}

absl::StatusOr<ExperimentPage> ExperimentStore::List(const ExperimentFilter& filter, int page_size,
                                                     const std::string& page_token) {
  std::vector<Condition> conditions;
  if (!filter.user.empty()) conditions.push_back({"user = ?", {filter.user}});
  if (!filter.states.empty()) {
    Condition states{"state IN (", {}};
    for (v1::ExperimentState state : filter.states) {
      absl::StrAppend(&states.sql, states.values.empty() ? "?" : ", ?");
      states.values.push_back(int64_t{state});
    }
    states.sql += ")";
    conditions.push_back(std::move(states));
  }
  if (filter.workload != v1::WORKLOAD_UNSPECIFIED) {
    conditions.push_back({"workload = ?", {int64_t{filter.workload}}});
  }
  ASSIGN_OR_RETURN(auto page, database_->OnReader([&](SqliteDatabase& database) {
    return experiments_.List(database, conditions, page_size, page_token);
  }));
  NoteDamaged(page.damaged);
  return ExperimentPage{std::move(page.entities), std::move(page.next_page_token),
                        std::move(page.damaged)};
}

absl::StatusOr<std::vector<v1::Experiment>> ExperimentStore::ListByState(
    v1::ExperimentState state) {
  ASSIGN_OR_RETURN(auto listed, database_->OnReader([&](SqliteDatabase& database) {
    return experiments_.ListAll(
        database, {{"state = ?", {int64_t{state}}}},
        absl::StrCat("listing experiments in state ", v1::ExperimentState_Name(state)));
  }));
  NoteDamaged(listed.damaged);
  return std::move(listed.entities);
}

absl::StatusOr<int64_t> ExperimentStore::OldestQueuedCreatedUnixNanos() {
  return database_->OnReader([&](SqliteDatabase& database) {
    return database.QueryInt64(
        absl::StrCat("SELECT coalesce((SELECT created_unix_ns FROM experiments WHERE state = ",
                     int64_t{v1::QUEUED}, " ORDER BY seq LIMIT 1), -1)"),
        "finding the oldest queued experiment");
  });
}

absl::StatusOr<std::vector<v1::Experiment>> ExperimentStore::ListUserCreatedSince(
    const std::string& user, int64_t created_after_unix_ns) {
  // On the write connection: a quota check must see every write acknowledged so far.
  // A damaged row counts for nothing: it cannot be read, and refusing every submission of
  // the user over it would be worse.
  ASSIGN_OR_RETURN(auto listed, database_->OnWriter([&](SqliteDatabase& database) {
    return experiments_.ListAll(
        database, {{"user = ?", {user}}, {"created_unix_ns >= ?", {created_after_unix_ns}}},
        absl::StrCat("listing recent experiments of ", user));
  }));
  NoteDamaged(listed.damaged);
  return std::move(listed.entities);
}

// ---- Sweeps ----

absl::StatusOr<std::string> ExperimentStore::CreateSweep(v1::Sweep sweep,
                                                         v1::SweepEvent first_event) {
  RETURN_IF_ERROR(sweeps_.CheckFirstEvent(first_event));
  google::protobuf::RepeatedPtrField<v1::SweepPoint> points;
  points.Swap(sweep.mutable_points());
  std::string id;
  RETURN_IF_ERROR(
      database_->Commit("creating a sweep", [&](SqliteDatabase& database) -> absl::Status {
        ASSIGN_OR_RETURN(id, sweeps_.Create(database, sweep, first_event));
        return store::WriteSweepPoints(database, id, points);
      }));
  return id;
}

absl::Status ExperimentStore::UpdateSweep(const v1::Sweep& sweep, const v1::SweepEvent& event,
                                          absl::Span<const v1::SweepPoint> changed_points) {
  // The row never holds points: a caller that passes them embedded has them written apart.
  v1::Sweep without_points;
  const v1::Sweep* row = &sweep;
  if (sweep.points_size() > 0) {
    without_points = sweep;
    without_points.clear_points();
    row = &without_points;
  }
  return database_->Commit(
      absl::StrCat("updating ", sweep.id()), [&](SqliteDatabase& database) -> absl::Status {
        RETURN_IF_ERROR(sweeps_.Update(database, *row, event));
        RETURN_IF_ERROR(store::WriteSweepPoints(database, sweep.id(), sweep.points()));
        return store::WriteSweepPoints(database, sweep.id(), changed_points);
      });
}

absl::StatusOr<v1::Sweep> ExperimentStore::GetSweep(const std::string& id) {
  absl::StatusOr<v1::Sweep> sweep =
      database_->OnReader([&](SqliteDatabase& database) { return sweeps_.Get(database, id); });
  if (!sweep.ok()) return ExplainDamaged(sweep.status(), "sweeps", id);
  return sweep;
}

absl::StatusOr<v1::Sweep> ExperimentStore::GetSweepPage(const std::string& id,
                                                        int points_page_size,
                                                        const std::string& points_page_token) {
  ASSIGN_OR_RETURN(v1::Sweep sweep, GetSweep(id));
  // A point changed since the sweep's row was read is read as it is now: every point's row
  // is whole on its own.
  ASSIGN_OR_RETURN(store::SweepPointPage page,
                   database_->OnReader([&](SqliteDatabase& database) {
                     return store::ReadSweepPointPage(database, id, points_page_size,
                                                      points_page_token);
                   }));
  for (v1::SweepPoint& point : page.points) *sweep.add_points() = std::move(point);
  sweep.set_next_points_page_token(std::move(page.next_page_token));
  return sweep;
}

absl::StatusOr<std::vector<v1::SweepEvent>> ExperimentStore::SweepEvents(
    const std::string& id, int64_t from_seq, store::EventPageLimit limit) {
  return database_->OnReader(
      [&](SqliteDatabase& database) { return sweeps_.Events(database, id, from_seq, limit); });
}

absl::StatusOr<SweepPage> ExperimentStore::ListSweeps(const std::string& user, int page_size,
                                                      const std::string& page_token) {
  std::vector<Condition> conditions;
  if (!user.empty()) conditions.push_back({"user = ?", {user}});
  ASSIGN_OR_RETURN(auto page, database_->OnReader([&](SqliteDatabase& database) {
    return sweeps_.List(database, conditions, page_size, page_token);
  }));
  NoteDamaged(page.damaged);
  return SweepPage{std::move(page.entities), std::move(page.next_page_token),
                   std::move(page.damaged)};
}

absl::StatusOr<std::vector<v1::Sweep>> ExperimentStore::ListSweepsByState(v1::SweepState state) {
  ASSIGN_OR_RETURN(auto listed, database_->OnReader([&](SqliteDatabase& database) {
    return sweeps_.ListAll(database, {{"state = ?", {int64_t{state}}}}, "listing sweeps by state");
  }));
  NoteDamaged(listed.damaged);
  for (v1::Sweep& sweep : listed.entities) {
    ASSIGN_OR_RETURN(std::vector<v1::SweepPoint> points,
                     database_->OnReader([&](SqliteDatabase& database) {
                       return store::ReadAllSweepPoints(database, sweep.id());
                     }));
    for (v1::SweepPoint& point : points) *sweep.add_points() = std::move(point);
  }
  return std::move(listed.entities);
}

absl::StatusOr<std::map<int, std::vector<std::string>>> ExperimentStore::SweepPointExperiments(
    const std::string& sweep_id) {
  return database_->OnReader(
      [&](SqliteDatabase& database) -> absl::StatusOr<std::map<int, std::vector<std::string>>> {
        ASSIGN_OR_RETURN(SqliteStatement select,
                         database.Prepare("SELECT point_index, experiment_id FROM sweep_points "
                                          "WHERE sweep_id = ?1 ORDER BY point_index, attempt",
                                          absl::StrCat("reading the points of ", sweep_id)));
        RETURN_IF_ERROR(select.BindText(1, sweep_id));
        std::map<int, std::vector<std::string>> experiments;
        while (true) {
          ASSIGN_OR_RETURN(bool has_row, select.Step());
          if (!has_row) return experiments;
          experiments[static_cast<int>(select.ColumnInt64(0))].push_back(select.ColumnText(1));
        }
      });
}

// ---- Baselines, audit, drained GPUs: each in its own file, through the group commit ----

absl::Status ExperimentStore::ChangeBaseline(const std::string& name,
                                             const BaselineDecision& decide) {
  return database_->Commit(absl::StrCat("changing baseline ", name), [&](SqliteDatabase& database) {
    return store::ChangeBaseline(database, name, decide);
  });
}

absl::StatusOr<std::vector<v1::Baseline>> ExperimentStore::ListBaselines(const std::string& name) {
  return database_->OnReader(
      [&](SqliteDatabase& database) { return store::ListBaselines(database, name); });
}

absl::Status ExperimentStore::AppendAudit(const v1::AuditEntry& entry) {
  // Through the group commit, like every other write: acknowledged once it is on disk.
  return database_->Commit("recording an audit entry", [&](SqliteDatabase& database) {
    return store::InsertAudit(database, entry);
  });
}

absl::StatusOr<std::vector<v1::AuditEntry>> ExperimentStore::ListAudit(
    const std::string& user, const std::string& experiment_id, int limit) {
  return database_->OnReader([&](SqliteDatabase& database) {
    return store::ListAudit(database, user, experiment_id, limit);
  });
}

absl::Status ExperimentStore::SaveDrainedGpu(const DrainedGpu& gpu) {
  return database_->Commit("recording a drained GPU", [&](SqliteDatabase& database) {
    return store::SaveDrainedGpu(database, gpu);
  });
}

absl::Status ExperimentStore::DeleteDrainedGpu(const std::string& uuid) {
  return database_->Commit("clearing a drained GPU", [&](SqliteDatabase& database) {
    return store::DeleteDrainedGpu(database, uuid);
  });
}

absl::StatusOr<std::vector<ExperimentStore::DrainedGpu>> ExperimentStore::ListDrainedGpus() {
  return database_->OnReader(
      [&](SqliteDatabase& database) { return store::ListDrainedGpus(database); });
}

absl::Status ExperimentStore::ProbeWrite() {
  return database_->Commit("checking that the database can be written",
                           [](SqliteDatabase& database) {
                             return database.Execute(
                                 absl::StrCat("PRAGMA user_version = ", kSchemaVersion),
                                 "rewriting the schema version");
                           });
}

absl::Status ExperimentStore::CheckpointWal() {
  return database_->OnWriter(
      [](SqliteDatabase& database) { return database.CheckpointWal(/*truncate=*/true); });
}

absl::StatusOr<int64_t> ExperimentStore::SizeBytes() {
  return database_->OnReader([&](SqliteDatabase& database) {
    return database.QueryInt64(
        "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()",
        "measuring the database");
  });
}

// ---- Damaged rows ----

std::vector<store::DamagedRow> ExperimentStore::DamagedRowsMet() {
  absl::MutexLock lock(&damaged_mutex_);
  std::vector<store::DamagedRow> rows;
  for (const auto& [key, row] : damaged_) rows.push_back(row);
  return rows;
}

void ExperimentStore::NoteDamaged(const std::vector<store::DamagedRow>& rows) {
  if (rows.empty()) return;
  absl::MutexLock lock(&damaged_mutex_);
  for (const store::DamagedRow& row : rows) damaged_.try_emplace({row.table, row.id}, row);
}

absl::Status ExperimentStore::ExplainDamaged(const absl::Status& read, const std::string& table,
                                             const std::string& id) {
  if (!absl::IsDataLoss(read)) return read;
  NoteDamaged({{table, id, std::string(read.message())}});
  return absl::DataLossError(absl::StrCat(id, " cannot be read: its row in table ", table,
                                          " is damaged (", read.message(), "); ",
                                          store::kDamagedRowAdvice));
}

}  // namespace gpuprof::daemon
