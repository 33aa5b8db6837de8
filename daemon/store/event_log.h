// One pattern for an entity whose history is an ordered event stream (an experiment, a
// sweep): a row per entity with its proto and the columns lists filter on, a row per event
// keyed (entity id, seq), ids that are never reused, newest-first pages and replay from a seq.
// The typed EventLog<Entity, Event> is what the store uses; EventLogTable does the SQL.
#ifndef GPUPROF_DAEMON_STORE_EVENT_LOG_H_
#define GPUPROF_DAEMON_STORE_EVENT_LOG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "daemon/store/sqlite_database.h"

namespace gpuprof::daemon::store {

// Where one kind of entity and its events are stored.
struct EventLogTables {
  const char* noun;               // "experiment", in messages
  const char* noun_with_article;  // "an experiment"
  const char* entity_table;       // "experiments"
  const char* event_table;        // "events"
  const char* owner_column;       // the event table's entity id column: "experiment_id"
  const char* id_prefix;          // "exp-": ids are the prefix and six or more digits
};

// A column copied out of the entity's proto for filtering: written with the proto.
struct Column {
  const char* name;
  std::variant<int64_t, std::string> value;
};

// How much one read of an event history may return: a watcher pages through a long history
// instead of holding all of it. At least one event is returned whatever its size.
struct EventPageLimit {
  int64_t max_events = -1;  // -1: no limit
  int64_t max_bytes = -1;   // of the stored protos; -1: no limit
};

// A filter of List: `sql` names columns and has one `?` per value.
struct Condition {
  std::string sql;
  std::vector<std::variant<int64_t, std::string>> values;
};

// A stored entity whose proto does not parse. Listings and start-up skip it and report it, so
// that one damaged row does not hide the rest.
struct DamagedRow {
  std::string table;  // "experiments"
  std::string id;     // "exp-000003"
  std::string error;  // "stored experiment exp-000003 does not parse"
};

// What to do about a damaged row; ends the messages that report one.
inline constexpr char kDamagedRowAdvice[] =
    "restore gpuprofd's database from a backup; `gpuprofd --check-db` lists every damaged row";

// The SQL of an event log, on serialized protos. Writes run inside the caller's transaction;
// every method takes the connection to use.
class EventLogTable {
 public:
  using Row = absl::FunctionRef<absl::Status(int64_t seq, const SqliteStatement& row)>;
  static constexpr int kDefaultPageSize = 50;
  static constexpr int kMaxPageSize = 1000;

  explicit EventLogTable(EventLogTables tables) : tables_(tables) {}

  const EventLogTables& tables() const { return tables_; }

  // The number the next entity gets, AUTOINCREMENT's own rule (one past the largest ever used,
  // as sqlite_sequence remembers it), computed up front because the id is derived from it.
  absl::StatusOr<int64_t> NextNumber(SqliteDatabase& database) const;
  std::string IdOf(int64_t number) const;

  absl::Status InsertEntity(SqliteDatabase& database, int64_t number, const std::string& id,
                            const std::vector<Column>& columns, absl::string_view proto) const;
  // NotFound when no entity has the id.
  absl::Status UpdateEntity(SqliteDatabase& database, const std::string& id,
                            const std::vector<Column>& columns, absl::string_view proto) const;
  // AlreadyExists, naming the entity and seq, when the entity has an event with this seq.
  absl::Status InsertEvent(SqliteDatabase& database, const std::string& id, int64_t seq,
                           absl::string_view proto) const;

  // Calls `row` with the entity's row (proto in column 0); NotFound when there is none.
  absl::Status ReadEntity(SqliteDatabase& database, const std::string& id, Row row) const;
  // The entity's events with seq >= from_seq, in seq order (proto in column 1), as many as
  // `limit` allows. NotFound if the entity does not exist.
  absl::Status ReadEvents(SqliteDatabase& database, const std::string& id, int64_t from_seq,
                          EventPageLimit limit, Row row) const;
  // Entities matching every condition, newest first (proto in column 1, id in 2), one page:
  // page_size 0 means kDefaultPageSize, larger than kMaxPageSize means kMaxPageSize, negative is
  // InvalidArgument; `page_token` is empty or a previous page's next_page_token (a malformed
  // one is InvalidArgument). Returns the next page's token, empty on the last page.
  absl::StatusOr<std::string> ReadPage(SqliteDatabase& database,
                                       const std::vector<Condition>& conditions, int page_size,
                                       const std::string& page_token, Row row) const;
  // Entities matching every condition, oldest first (proto in column 1, id in 2).
  absl::Status ReadAll(SqliteDatabase& database, const std::vector<Condition>& conditions,
                       absl::string_view operation, Row row) const;

 private:
  EventLogTables tables_;
};

// How an entity and its events fill the tables.
template <typename Entity, typename Event>
struct EventLogKind {
  EventLogTables tables;
  // The filter columns of the entity row.
  std::vector<Column> (*columns)(const Entity& entity);
  // Sets a new id in the entity and its first event.
  void (*assign_id)(const std::string& id, Entity& entity, Event& first_event);
  // The event's entity id, and setting it.
  const std::string& (Event::*owner)() const;
  void (*set_owner)(Event& event, const std::string& id);
  // What a listed page keeps of an entity (summaries leave the bulk out).
  void (*summarize)(Entity& entity);
};

template <typename Entity, typename Event>
class EventLog {
 public:
  struct Page {
    std::vector<Entity> entities;
    std::string next_page_token;
    // Rows of the page whose proto does not parse, left out of `entities`.
    std::vector<DamagedRow> damaged;
  };
  struct Listed {
    std::vector<Entity> entities;
    std::vector<DamagedRow> damaged;
  };

  explicit EventLog(EventLogKind<Entity, Event> kind) : kind_(kind), table_(kind.tables) {}

  const EventLogTable& table() const { return table_; }

  // InvalidArgument unless the first event's seq is positive; called before anything is
  // written.
  absl::Status CheckFirstEvent(const Event& first_event) const {
    if (first_event.seq() > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("creating ", kind_.tables.noun_with_article,
                                                   ": the first event needs a positive seq, not ",
                                                   first_event.seq()));
  }

  // Inside a transaction: assigns the next id (set in both), inserts the entity and its first
  // event. Returns the id.
  absl::StatusOr<std::string> Create(SqliteDatabase& database, Entity& entity,
                                     Event& first_event) const {
    ASSIGN_OR_RETURN(int64_t number, table_.NextNumber(database));
    std::string id = table_.IdOf(number);
    kind_.assign_id(id, entity, first_event);
    RETURN_IF_ERROR(table_.InsertEntity(database, number, id, kind_.columns(entity),
                                        entity.SerializeAsString()));
    RETURN_IF_ERROR(
        table_.InsertEvent(database, id, first_event.seq(), first_event.SerializeAsString()));
    return id;
  }

  // Inside a transaction: replaces the entity (NotFound if its id does not exist) and appends
  // `event` unless event.seq <= 0. An event naming another entity is InvalidArgument; one
  // naming none is stored with the entity's id.
  absl::Status Update(SqliteDatabase& database, const Entity& entity, const Event& event) const {
    const std::string& id = entity.id();
    const std::string& owner = (event.*kind_.owner)();
    if (id.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("updating ", kind_.tables.noun_with_article, " without an id"));
    }
    if (!owner.empty() && owner != id) {
      return absl::InvalidArgumentError(absl::StrCat("updating ", kind_.tables.noun, " ", id,
                                                     " with an event of ", kind_.tables.noun, " ",
                                                     owner));
    }
    RETURN_IF_ERROR(
        table_.UpdateEntity(database, id, kind_.columns(entity), entity.SerializeAsString()));
    if (event.seq() <= 0) return absl::OkStatus();
    if (!owner.empty()) {
      return table_.InsertEvent(database, id, event.seq(), event.SerializeAsString());
    }
    Event with_owner = event;
    kind_.set_owner(with_owner, id);
    return table_.InsertEvent(database, id, event.seq(), with_owner.SerializeAsString());
  }

  absl::StatusOr<Entity> Get(SqliteDatabase& database, const std::string& id) const {
    Entity entity;
    RETURN_IF_ERROR(table_.ReadEntity(database, id, [&](int64_t, const SqliteStatement& row) {
      return row.ColumnMessage(0, entity, absl::StrCat(kind_.tables.noun, " ", id));
    }));
    return entity;
  }

  absl::StatusOr<std::vector<Event>> Events(SqliteDatabase& database, const std::string& id,
                                            int64_t from_seq, EventPageLimit limit = {}) const {
    std::vector<Event> events;
    RETURN_IF_ERROR(table_.ReadEvents(
        database, id, from_seq, limit, [&](int64_t seq, const SqliteStatement& row) {
          return row.ColumnMessage(1, events.emplace_back(),
                                   absl::StrCat("event ", seq, " of ", id));
        }));
    return events;
  }

  absl::StatusOr<Page> List(SqliteDatabase& database, const std::vector<Condition>& conditions,
                            int page_size, const std::string& page_token) const {
    Page page;
    ASSIGN_OR_RETURN(page.next_page_token,
                     table_.ReadPage(database, conditions, page_size, page_token,
                                     [&](int64_t, const SqliteStatement& row) {
                                       return ParseListed(row, /*summarize=*/true, page.entities,
                                                          page.damaged);
                                     }));
    return page;
  }

  // Oldest first, whole; rows that do not parse are in `damaged`, not `entities`.
  absl::StatusOr<Listed> ListAll(SqliteDatabase& database,
                                 const std::vector<Condition>& conditions,
                                 absl::string_view operation) const {
    Listed listed;
    RETURN_IF_ERROR(table_.ReadAll(
        database, conditions, operation, [&](int64_t, const SqliteStatement& row) {
          return ParseListed(row, /*summarize=*/false, listed.entities, listed.damaged);
        }));
    return listed;
  }

 private:
  // A row that does not parse is set aside as damaged; the read goes on with the next one.
  absl::Status ParseListed(const SqliteStatement& row, bool summarize,
                           std::vector<Entity>& entities, std::vector<DamagedRow>& damaged) const {
    const std::string id = row.ColumnText(2);
    Entity entity;
    const absl::Status parsed =
        row.ColumnMessage(1, entity, absl::StrCat(kind_.tables.noun, " ", id));
    if (absl::IsDataLoss(parsed)) {
      damaged.push_back({kind_.tables.entity_table, id, std::string(parsed.message())});
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(parsed);
    if (summarize) kind_.summarize(entity);
    entities.push_back(std::move(entity));
    return absl::OkStatus();
  }

  EventLogKind<Entity, Event> kind_;
  EventLogTable table_;
};

}  // namespace gpuprof::daemon::store

#endif  // GPUPROF_DAEMON_STORE_EVENT_LOG_H_
