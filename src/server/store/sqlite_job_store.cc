#include "server/store/sqlite_job_store.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <mutex>
#include <system_error>
#include <utility>

#include "core/log.h"
#include "server/store/sqlite_wal.h"

namespace baton::server {

// ---------------------------------------------------------------------------------------------
// Thin RAII over the sqlite3 C API.

namespace {

Status SqliteError(sqlite3* db, int rc, std::string_view what) {
  std::string message = std::string(what) + ": " + sqlite3_errstr(rc);
  if (db != nullptr && sqlite3_errmsg(db) != nullptr) {
    message += " (";
    message += sqlite3_errmsg(db);
    message += ")";
  }
  int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_IOERR ||
      primary == SQLITE_FULL) {
    return UnavailableError(std::move(message));
  }
  return InternalError(std::move(message));
}

class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt(Stmt&& o) noexcept : db_(o.db_), stmt_(std::exchange(o.stmt_, nullptr)) {}
  Stmt& operator=(Stmt&& o) noexcept {
    std::swap(db_, o.db_);
    std::swap(stmt_, o.stmt_);
    return *this;
  }
  ~Stmt() { sqlite3_finalize(stmt_); }

  static Result<Stmt> Prepare(sqlite3* db, std::string_view sql) {
    Stmt s;
    s.db_ = db;
    int rc = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &s.stmt_, nullptr);
    if (rc != SQLITE_OK) return SqliteError(db, rc, "prepare '" + std::string(sql) + "'");
    return s;
  }

  // Resets and clears bindings so that the statement can be reused.
  Stmt& Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return *this;
  }
  Stmt& Bind(int i, std::int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& BindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // SQLITE_ROW → true, SQLITE_DONE → false, anything else → error.
  Result<bool> Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqliteError(db_, rc, "step");
  }
  Status Run() {
    Result<bool> r = Step();
    if (!r.ok()) return r.status();
    return Status::Ok();
  }
  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    int n = sqlite3_column_bytes(stmt_, col);
    return p == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(p), n);
  }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string message = std::string("exec '") + sql + "': " + (err ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    int primary = rc & 0xff;
    if (primary == SQLITE_BUSY || primary == SQLITE_IOERR || primary == SQLITE_FULL) {
      return UnavailableError(std::move(message));
    }
    return InternalError(std::move(message));
  }
  return Status::Ok();
}

Result<std::int64_t> QueryInt(sqlite3* db, const char* sql) {
  ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db, sql));
  ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return InternalError(std::string("no row from '") + sql + "'");
  return s.Int(0);
}

std::int64_t ToMicros(TimePoint t) {
  return static_cast<std::int64_t>(std::llround(t.since_epoch.value() * 1e6));
}
TimePoint FromMicros(std::int64_t us) { return TimePoint{Seconds(static_cast<double>(us) / 1e6)}; }

// Schema migrations: kMigrations[i] takes a database from version i to i + 1. Append only;
// never edit a released step.
constexpr const char* kMigrations[] = {
    // v0 → v1: jobs and their history.
    R"sql(
    CREATE TABLE jobs (
      id INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids are never reused
      tenant TEXT NOT NULL,
      name TEXT NOT NULL,
      spec TEXT NOT NULL,
      state TEXT NOT NULL,
      attempts INTEGER NOT NULL DEFAULT 0,
      idempotency_key TEXT,
      created_us INTEGER NOT NULL,
      updated_us INTEGER NOT NULL
    );
    CREATE UNIQUE INDEX jobs_idempotency ON jobs(tenant, idempotency_key)
      WHERE idempotency_key IS NOT NULL;
    CREATE TABLE job_events (
      id INTEGER PRIMARY KEY,
      job_id INTEGER NOT NULL REFERENCES jobs(id),
      time_us INTEGER NOT NULL,
      kind TEXT NOT NULL,
      message TEXT NOT NULL
    );
    CREATE INDEX job_events_job ON job_events(job_id, id);
    )sql",
    // v1 → v2: node administrative state; indexes for the list filters.
    R"sql(
    CREATE TABLE node_admin (
      node TEXT PRIMARY KEY,
      admin TEXT NOT NULL,
      reason TEXT NOT NULL,
      set_by TEXT NOT NULL,
      updated_us INTEGER NOT NULL
    );
    CREATE INDEX jobs_state ON jobs(state, id);
    CREATE INDEX jobs_tenant_state ON jobs(tenant, state, id);
    )sql",
    // v2 → v3: a job's placement and bad nodes as columns of their own (JSON, see
    // PlacementToJson), health verdicts that survive a restart, and the open/closed marker that
    // tells a lost write-ahead log from a clean close.
    R"sql(
    ALTER TABLE jobs ADD COLUMN placement TEXT NOT NULL DEFAULT '';
    ALTER TABLE jobs ADD COLUMN bad_nodes TEXT NOT NULL DEFAULT '';
    CREATE TABLE node_health (
      node TEXT PRIMARY KEY,
      condition TEXT NOT NULL,
      rules TEXT NOT NULL,
      updated_us INTEGER NOT NULL
    );
    CREATE TABLE store_state (
      key TEXT PRIMARY KEY,
      value TEXT NOT NULL
    );
    )sql",
    // v3 → v4: the scheduler's history (one line per scheduling cycle, sched/history), which
    // `baton serve export` writes out and `baton sim --replay-daemon` replays.
    R"sql(
    CREATE TABLE scheduler_history (
      seq INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: an export cursor stays valid
      line TEXT NOT NULL
    );
    )sql",
    // v4 → v5: the current attempt's rendezvous port, and the last checkpoint the job reported
    // (JSON, see CheckpointToJson; '' for none).
    R"sql(
    ALTER TABLE jobs ADD COLUMN master_port INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN checkpoint TEXT NOT NULL DEFAULT '';
    )sql",
    // v5 → v6: a federation broker's dispatches to sites, one row each (SiteAttempt).
    R"sql(
    CREATE TABLE site_attempts (
      job_id INTEGER NOT NULL REFERENCES jobs(id),
      number INTEGER NOT NULL,
      site TEXT NOT NULL,
      idempotency_key TEXT NOT NULL,
      body TEXT NOT NULL,
      site_job INTEGER NOT NULL,
      state TEXT NOT NULL,
      site_refused INTEGER NOT NULL,
      updated_us INTEGER NOT NULL,
      PRIMARY KEY (job_id, number)
    );
    CREATE INDEX site_attempts_state ON site_attempts(state, job_id, number);
    )sql",
};
static_assert(std::size(kMigrations) == SqliteJobStore::kSchemaVersion);

constexpr const char* kJobColumns =
    "id, tenant, name, spec, state, attempts, idempotency_key, created_us, updated_us, placement, "
    "bad_nodes, master_port, checkpoint";

Result<JobRecord> ReadJob(const Stmt& s) {
  JobRecord j;
  j.id = s.Int(0);
  j.tenant = s.Text(1);
  j.name = s.Text(2);
  j.spec_json = s.Text(3);
  ASSIGN_OR_RETURN(j.state, ParseJobState(s.Text(4)));
  j.attempts = static_cast<int>(s.Int(5));
  j.idempotency_key = s.IsNull(6) ? std::string() : s.Text(6);
  j.created_at = FromMicros(s.Int(7));
  j.updated_at = FromMicros(s.Int(8));
  ASSIGN_OR_RETURN(j.placement, PlacementFromJson(s.Text(9)));
  ASSIGN_OR_RETURN(j.bad_nodes, NamesFromJson(s.Text(10)));
  j.master_port = static_cast<int>(s.Int(11));
  ASSIGN_OR_RETURN(j.checkpoint, CheckpointFromJson(s.Text(12)));
  return j;
}

Status NotFound(JobId id) { return NotFoundError("job " + std::to_string(id) + " not found"); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Connections.

struct SqliteJobStore::Connection {
  sqlite3* db = nullptr;
  std::mutex mu;  // readers: one user at a time
  Stmt get_job;
  Stmt events;
  Stmt find_key;  // a job by (tenant, idempotency key)
  ~Connection() {
    // Statements must be finalized before the connection closes.
    get_job = Stmt();
    events = Stmt();
    find_key = Stmt();
    if (db != nullptr) sqlite3_close(db);
  }

  static Result<std::unique_ptr<Connection>> Open(const std::string& path, bool writer) {
    auto c = std::make_unique<Connection>();
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (writer ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path.c_str(), &c->db, flags, nullptr);
    if (rc != SQLITE_OK) {
      return SqliteError(c->db, rc, "open " + path).WithPrefix("job store");
    }
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, 5000);
    return c;
  }

  Status PrepareCommon() {
    ASSIGN_OR_RETURN(get_job, Stmt::Prepare(db, std::string("SELECT ") + kJobColumns +
                                                    " FROM jobs WHERE id = ?1"));
    ASSIGN_OR_RETURN(events, Stmt::Prepare(db,
                                           "SELECT job_id, time_us, kind, message FROM "
                                           "job_events WHERE job_id = ?1 ORDER BY id LIMIT ?2"));
    ASSIGN_OR_RETURN(find_key, Stmt::Prepare(db, std::string("SELECT ") + kJobColumns +
                                                     " FROM jobs WHERE tenant = ?1 AND "
                                                     "idempotency_key = ?2"));
    return Status::Ok();
  }

  Result<JobRecord> GetJob(JobId id) {
    get_job.Reset().Bind(1, id);
    Result<bool> row = get_job.Step();
    Result<JobRecord> job = !row.ok() ? Result<JobRecord>(row.status())
                            : *row    ? ReadJob(get_job)
                                      : Result<JobRecord>(NotFound(id));
    get_job.Reset();  // never leave a read snapshot open: it would pin the WAL
    return job;
  }
};

// The committer thread's connection and statements.
struct SqliteJobStore::Writer {
  std::unique_ptr<Connection> conn;
  const Clock* clock = nullptr;
  Stmt begin, commit, rollback, savepoint, release, rollback_to;
  Stmt insert_job, insert_event, update_state, upsert_node, delete_node;
  Stmt set_placement, set_bad_nodes, set_master_port, set_checkpoint, upsert_health, delete_health;
  Stmt unschedulable;
  Stmt insert_history, prune_history, upsert_attempt;

  Status Prepare() {
    sqlite3* db = conn->db;
    RETURN_IF_ERROR(conn->PrepareCommon());
    ASSIGN_OR_RETURN(begin, Stmt::Prepare(db, "BEGIN IMMEDIATE"));
    ASSIGN_OR_RETURN(commit, Stmt::Prepare(db, "COMMIT"));
    ASSIGN_OR_RETURN(rollback, Stmt::Prepare(db, "ROLLBACK"));
    ASSIGN_OR_RETURN(savepoint, Stmt::Prepare(db, "SAVEPOINT op"));
    ASSIGN_OR_RETURN(release, Stmt::Prepare(db, "RELEASE op"));
    ASSIGN_OR_RETURN(rollback_to, Stmt::Prepare(db, "ROLLBACK TO op"));
    ASSIGN_OR_RETURN(insert_job,
                     Stmt::Prepare(db,
                                   "INSERT INTO jobs (tenant, name, spec, state, attempts, "
                                   "idempotency_key, created_us, updated_us) VALUES "
                                   "(?1, ?2, ?3, 'queued', 0, ?4, ?5, ?5)"));
    ASSIGN_OR_RETURN(insert_event, Stmt::Prepare(db,
                                                 "INSERT INTO job_events (job_id, time_us, "
                                                 "kind, message) VALUES (?1, ?2, ?3, ?4)"));
    ASSIGN_OR_RETURN(update_state,
                     Stmt::Prepare(db,
                                   "UPDATE jobs SET state = ?2, attempts = attempts + ?3, "
                                   "updated_us = ?4 WHERE id = ?1"));
    ASSIGN_OR_RETURN(upsert_node,
                     Stmt::Prepare(db,
                                   "INSERT INTO node_admin (node, admin, reason, set_by, "
                                   "updated_us) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(node) "
                                   "DO UPDATE SET admin = ?2, reason = ?3, set_by = ?4, "
                                   "updated_us = ?5"));
    ASSIGN_OR_RETURN(delete_node, Stmt::Prepare(db, "DELETE FROM node_admin WHERE node = ?1"));
    ASSIGN_OR_RETURN(set_placement,
                     Stmt::Prepare(db, "UPDATE jobs SET placement = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(set_bad_nodes,
                     Stmt::Prepare(db, "UPDATE jobs SET bad_nodes = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(unschedulable,
                     Stmt::Prepare(db,
                                   "SELECT node, admin FROM node_admin WHERE instr(',' || ?1 || "
                                   "',', ',' || node || ',') > 0 LIMIT 1"));
    ASSIGN_OR_RETURN(set_master_port,
                     Stmt::Prepare(db, "UPDATE jobs SET master_port = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(set_checkpoint,
                     Stmt::Prepare(db, "UPDATE jobs SET checkpoint = ?2 WHERE id = ?1"));
    ASSIGN_OR_RETURN(upsert_health,
                     Stmt::Prepare(db,
                                   "INSERT INTO node_health (node, condition, rules, updated_us) "
                                   "VALUES (?1, ?2, ?3, ?4) ON CONFLICT(node) DO UPDATE SET "
                                   "condition = ?2, rules = ?3, updated_us = ?4"));
    ASSIGN_OR_RETURN(delete_health, Stmt::Prepare(db, "DELETE FROM node_health WHERE node = ?1"));
    ASSIGN_OR_RETURN(insert_history,
                     Stmt::Prepare(db, "INSERT INTO scheduler_history (line) VALUES (?1)"));
    ASSIGN_OR_RETURN(prune_history,
                     Stmt::Prepare(db, "DELETE FROM scheduler_history WHERE seq <= ?1"));
    ASSIGN_OR_RETURN(upsert_attempt,
                     Stmt::Prepare(db,
                                   "INSERT INTO site_attempts (job_id, number, site, "
                                   "idempotency_key, body, site_job, state, site_refused, "
                                   "updated_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
                                   "ON CONFLICT(job_id, number) DO UPDATE SET site = ?3, "
                                   "idempotency_key = ?4, body = ?5, site_job = ?6, state = ?7, "
                                   "site_refused = ?8, updated_us = ?9"));
    return Status::Ok();
  }

  Status InsertEvent(JobId id, std::int64_t now_us, std::string_view kind,
                     std::string_view message) {
    insert_event.Reset().Bind(1, id).Bind(2, now_us).Bind(3, kind).Bind(4, message);
    return insert_event.Run();
  }

  Result<SubmitResult> Submit(const NewJob& job) {
    if (!job.idempotency_key.empty()) {
      Stmt& find_key = conn->find_key;  // prepared with the readers' statements
      find_key.Reset().Bind(1, job.tenant).Bind(2, job.idempotency_key);
      ASSIGN_OR_RETURN(bool row, find_key.Step());
      if (row) {
        ASSIGN_OR_RETURN(JobRecord existing, ReadJob(find_key));
        find_key.Reset();
        return SubmitResult{std::move(existing), false};
      }
      find_key.Reset();
    }
    std::int64_t now = ToMicros(clock->Now());
    insert_job.Reset().Bind(1, job.tenant).Bind(2, job.name).Bind(3, job.spec_json).Bind(5, now);
    if (job.idempotency_key.empty()) {
      insert_job.BindNull(4);
    } else {
      insert_job.Bind(4, job.idempotency_key);
    }
    RETURN_IF_ERROR(insert_job.Run());
    JobId id = sqlite3_last_insert_rowid(conn->db);
    RETURN_IF_ERROR(InsertEvent(id, now, "queued", "submitted by tenant " + job.tenant));
    JobRecord r;
    r.id = id;
    r.tenant = job.tenant;
    r.name = job.name;
    r.spec_json = job.spec_json;
    r.idempotency_key = job.idempotency_key;
    r.state = JobState::kQueued;
    r.created_at = r.updated_at = FromMicros(now);
    return SubmitResult{std::move(r), true};
  }

  Result<JobRecord> Transition(JobId id, const StateChange& change) {
    ASSIGN_OR_RETURN(JobRecord job, conn->GetJob(id));
    RETURN_IF_ERROR(CheckTransition(id, job.state, change));
    if (!change.schedulable_nodes.empty()) {
      unschedulable.Reset().Bind(1, JoinNodeNames(change.schedulable_nodes));
      ASSIGN_OR_RETURN(bool row, unschedulable.Step());
      if (row) {
        Status refused = UnschedulableNode(unschedulable.Text(0), unschedulable.Text(1));
        unschedulable.Reset();
        return refused;
      }
      unschedulable.Reset();
    }
    std::int64_t now = ToMicros(clock->Now());
    int attempt = AttemptIncrement(job.state, change);
    update_state.Reset().Bind(1, id).Bind(2, JobStateName(change.to)).Bind(3, attempt).Bind(4, now);
    RETURN_IF_ERROR(update_state.Run());
    if (change.placement) {
      RETURN_IF_ERROR(
          set_placement.Reset().Bind(1, id).Bind(2, PlacementToJson(*change.placement)).Run());
      job.placement = *change.placement;
    }
    if (change.bad_nodes) {
      RETURN_IF_ERROR(
          set_bad_nodes.Reset().Bind(1, id).Bind(2, NamesToJson(*change.bad_nodes)).Run());
      job.bad_nodes = *change.bad_nodes;
    }
    if (change.master_port) {
      RETURN_IF_ERROR(set_master_port.Reset().Bind(1, id).Bind(2, *change.master_port).Run());
      job.master_port = *change.master_port;
    }
    RETURN_IF_ERROR(InsertEvent(id, now, TransitionEventKind(change), change.message));
    job.state = change.to;
    job.attempts += attempt;
    job.updated_at = FromMicros(now);
    return job;
  }

  Result<bool> RecordCheckpoint(JobId id, const CheckpointRecord& checkpoint) {
    ASSIGN_OR_RETURN(JobRecord job, conn->GetJob(id));
    if (!CheckpointApplies(job, checkpoint)) return false;
    RETURN_IF_ERROR(set_checkpoint.Reset().Bind(1, id).Bind(2, CheckpointToJson(checkpoint)).Run());
    RETURN_IF_ERROR(InsertEvent(id, ToMicros(clock->Now()), "checkpointed",
                                CheckpointEventMessage(checkpoint)));
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Open, migrate, close.

SqliteJobStore::SqliteJobStore(const SqliteStoreOptions& options)
    : options_(options),
      clock_(options.clock),
      writes_(options.path, options.group_commit ? static_cast<std::size_t>(options.max_batch) : 1,
              [this](const auto& batch) { return CommitBatch(batch); }) {
  static const SystemClock kSystemClock;
  if (clock_ == nullptr) clock_ = &kSystemClock;
}

Result<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(const SqliteStoreOptions& options) {
  if (options.path.empty()) return InvalidArgumentError("job store: empty database path");
  if (options.max_batch < 1 || options.read_connections < 1) {
    return InvalidArgumentError("job store: max_batch and read_connections must be >= 1");
  }
  if (sqlite3_threadsafe() == 0) {
    return FailedPreconditionError("job store: SQLite was built without thread support");
  }
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(options));
  RETURN_IF_ERROR(store->Init().WithPrefix("job store " + options.path));
  return store;
}

Status SqliteJobStore::Init() {
  const std::string& path = options_.path;
  // A database file that exists but is empty is not a new database: SQLite would take it for
  // one and start over, silently, where the operator's jobs used to be (a truncated copy, a
  // failed restore). Only a missing file is new.
  std::error_code ec;
  const bool existed = std::filesystem::exists(path, ec);
  if (existed && std::filesystem::is_regular_file(path, ec) &&
      std::filesystem::file_size(path, ec) == 0 && !ec) {
    return FailedPreconditionError(
        "the database file is empty (0 bytes); it is not a baton database. Remove it to start "
        "with a new one, or restore the real file");
  }

  // A clean close checkpoints and deletes the write-ahead log; finding a non-empty one means the
  // last process died with the database open. SQLite replays its committed transactions (and
  // drops an uncommitted tail) when the first connection reads it.
  // Open checkpoints with TRUNCATE, so a process killed before its first later write leaves an
  // empty log: that is a crash, not a lost log. A lost log is one that is not there at all.
  // SQLite also drops, silently, every frame after one that fails its checksum and a frame cut
  // short: the log is read here first, as SQLite's recovery will read it, to say so.
  ASSIGN_OR_RETURN(const WalScan wal, ScanWriteAheadLog(path + "-wal"));
  report_.recovered_after_crash = wal.bytes > 0;

  writer_ = std::make_unique<Writer>();
  writer_->clock = clock_;
  ASSIGN_OR_RETURN(writer_->conn, Connection::Open(path, /*writer=*/true));
  sqlite3* db = writer_->conn->db;
  // One daemon per database: an exclusive flock on the database file itself (not on a side file,
  // which a second daemon reaching the same file by another name, a symlink or a hard link, or
  // after the side file was deleted, would not see). flock and SQLite's own fcntl locks are
  // independent on Linux. The kernel drops it when the process dies, so kill -9 leaves no stale
  // lock. Taken before anything is written.
  lock_fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (lock_fd_ < 0) return UnavailableError("cannot open " + path + " to lock it");
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return FailedPreconditionError("database is in use by another process (" + path + ")");
  }
  // WAL: readers and the writer proceed concurrently, and a commit is one sequential append.
  RETURN_IF_ERROR(Exec(db, "PRAGMA journal_mode=WAL"));
  // FULL (not NORMAL): in WAL mode NORMAL syncs only at checkpoints, so a power cut could lose
  // transactions that were already acknowledged. FULL fsyncs the WAL at every commit; group
  // commit amortises that fsync over every submission in the batch.
  RETURN_IF_ERROR(Exec(db, "PRAGMA synchronous=FULL"));
  RETURN_IF_ERROR(Exec(db, "PRAGMA foreign_keys=ON"));

  ASSIGN_OR_RETURN(std::int64_t version, QueryInt(db, "PRAGMA user_version"));
  report_.schema_version_found = static_cast<int>(version);
  if (version > kSchemaVersion) {
    return FailedPreconditionError("schema version " + std::to_string(version) +
                                   " is newer than this build's " + std::to_string(kSchemaVersion) +
                                   "; upgrade baton");
  }
  if (version > 0) {
    ASSIGN_OR_RETURN(Stmt check, Stmt::Prepare(db, "PRAGMA quick_check"));
    ASSIGN_OR_RETURN(bool row, check.Step());
    if (!row || check.Text(0) != "ok") {
      return InternalError("integrity check failed: " + (row ? check.Text(0) : std::string()));
    }
  }
  for (auto v = version; v < kSchemaVersion; ++v) {
    RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
    Status s = Exec(db, kMigrations[v]);
    if (s.ok()) {
      std::string set_version = "PRAGMA user_version=" + std::to_string(v + 1);
      s = Exec(db, set_version.c_str());
    }
    if (s.ok()) s = Exec(db, "COMMIT");
    if (!s.ok()) {
      (void)Exec(db, "ROLLBACK");
      return s.WithPrefix("migration to schema v" + std::to_string(v + 1));
    }
    LOG_INFO("job store {}: migrated schema v{} -> v{}", options_.path, v, v + 1);
  }
  report_.schema_version = kSchemaVersion;
  // The marker is '1' from open to clean close. Found at '1' with no write-ahead log: the last
  // process died and its log, which held every write since its last checkpoint, is gone. It is
  // checkpointed into the database file at once, so that deleting the log cannot hide it too.
  ASSIGN_OR_RETURN(std::int64_t was_open,
                   QueryInt(db,
                            "SELECT COUNT(*) FROM store_state WHERE key = 'open' AND "
                            "value = '1'"));
  if (was_open > 0) {
    report_.recovered_after_crash = true;
    report_.wal_missing_after_crash = !wal.exists;
    if (!wal.exists) {
      report_.not_clean =
          "its write-ahead log (-wal) is missing; writes acknowledged after its last checkpoint "
          "are lost";
      report_.wal_frames_dropped = -1;
    } else if (!wal.damage.empty()) {
      report_.not_clean =
          "its write-ahead log (-wal) " + wal.damage + ": " +
          (wal.frames_dropped < 0 ? std::string("every frame")
                                  : std::to_string(wal.frames_dropped) + " frames") +
          " dropped; writes acknowledged in them are lost";
      report_.wal_frames_dropped = wal.frames_dropped;
    }
  }
  RETURN_IF_ERROR(Exec(db,
                       "INSERT INTO store_state (key, value) VALUES ('open', '1') "
                       "ON CONFLICT(key) DO UPDATE SET value = '1'"));
  RETURN_IF_ERROR(Exec(db, "PRAGMA wal_checkpoint(TRUNCATE)"));
  RETURN_IF_ERROR(writer_->Prepare());

  for (int i = 0; i < options_.read_connections; ++i) {
    ASSIGN_OR_RETURN(auto reader, Connection::Open(path, /*writer=*/false));
    RETURN_IF_ERROR(reader->PrepareCommon());
    readers_.push_back(std::move(reader));
  }

  ASSIGN_OR_RETURN(report_.jobs_by_state, CountByState());
  ASSIGN_OR_RETURN(report_.node_admin_entries, QueryInt(db, "SELECT COUNT(*) FROM node_admin"));
  writes_.Start();
  writes_started_ = true;
  return Status::Ok();
}

SqliteJobStore::~SqliteJobStore() {
  writes_.Stop();
  readers_.clear();
  if (writer_ != nullptr && writer_->conn != nullptr && writes_started_) {
    Writer& w = *writer_;
    if (Status s = Exec(w.conn->db, "UPDATE store_state SET value = '0' WHERE key = 'open'");
        !s.ok()) {
      LOG_WARN("job store {}: cannot mark the clean close: {}", options_.path, s.ToString());
    }
  }
  writer_.reset();  // the last connection to close checkpoints and removes the WAL
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

// ---------------------------------------------------------------------------------------------
// The committer.

Status SqliteJobStore::CommitBatch(const std::vector<GroupCommitQueue<Writer>::Pending*>& batch) {
  Writer& w = *writer_;
  Status txn = w.begin.Reset().Run();
  if (txn.ok()) {
    for (auto* p : batch) {
      Status s = w.savepoint.Reset().Run();
      if (s.ok()) s = p->op(w);
      if (s.ok()) {
        s = w.release.Reset().Run();
      } else {
        (void)w.rollback_to.Reset().Run();
        (void)w.release.Reset().Run();
      }
      p->result = s;
    }
    txn = w.commit.Reset().Run();
    if (!txn.ok()) (void)w.rollback.Reset().Run();
  }
  w.begin.Reset();
  w.commit.Reset();
  w.rollback.Reset();
  return txn;
}

template <typename Fn>
auto SqliteJobStore::WithReader(Fn&& fn) {
  Connection& c = *readers_[next_reader_.fetch_add(1) % readers_.size()];
  std::lock_guard lock(c.mu);
  return fn(c);
}

// ---------------------------------------------------------------------------------------------
// JobStore.

Result<SubmitResult> SqliteJobStore::Submit(const NewJob& job) {
  std::optional<SubmitResult> out;
  RETURN_IF_ERROR(writes_.Write([&](Writer& w) -> Status {
    ASSIGN_OR_RETURN(SubmitResult r, w.Submit(job));
    out = std::move(r);
    return Status::Ok();
  }));
  return std::move(*out);
}

Result<JobRecord> SqliteJobStore::Get(JobId id) {
  return WithReader([&](Connection& c) { return c.GetJob(id); });
}

Result<std::optional<JobRecord>> SqliteJobStore::FindByIdempotencyKey(std::string_view tenant,
                                                                      std::string_view key) {
  return WithReader([&](Connection& c) -> Result<std::optional<JobRecord>> {
    Stmt& s = c.find_key;
    s.Reset().Bind(1, tenant).Bind(2, key);
    auto read = [&]() -> Result<std::optional<JobRecord>> {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) return std::optional<JobRecord>();
      ASSIGN_OR_RETURN(JobRecord j, ReadJob(s));
      return std::optional<JobRecord>(std::move(j));
    };
    Result<std::optional<JobRecord>> out = read();
    s.Reset();  // never leave a read snapshot open: it would pin the WAL
    return out;
  });
}

Result<JobPage> SqliteJobStore::List(const JobFilter& filter) {
  if (filter.limit < 1 || filter.limit > 1000) {
    return InvalidArgumentError("limit must be in 1..1000");
  }
  std::string sql = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id > ?1";
  if (filter.tenant) sql += " AND tenant = ?2";
  if (filter.state) sql += " AND state = ?3";
  sql += " ORDER BY id LIMIT ?4";
  return WithReader([&](Connection& c) -> Result<JobPage> {
    ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(c.db, sql));
    s.Bind(1, filter.after).Bind(4, filter.limit + 1);
    if (filter.tenant) s.Bind(2, *filter.tenant);
    if (filter.state) s.Bind(3, JobStateName(*filter.state));
    JobPage page;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      if (static_cast<int>(page.jobs.size()) == filter.limit) {
        page.next_after = page.jobs.back().id;
        break;
      }
      ASSIGN_OR_RETURN(JobRecord j, ReadJob(s));
      page.jobs.push_back(std::move(j));
    }
    return page;
  });
}

Result<std::map<JobState, std::int64_t>> SqliteJobStore::CountByState() {
  auto count = [](Connection& c) -> Result<std::map<JobState, std::int64_t>> {
    ASSIGN_OR_RETURN(Stmt s,
                     Stmt::Prepare(c.db, "SELECT state, COUNT(*) FROM jobs GROUP BY state"));
    std::map<JobState, std::int64_t> out;
    for (JobState st : kAllJobStates) out[st] = 0;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      ASSIGN_OR_RETURN(JobState st, ParseJobState(s.Text(0)));
      out[st] = s.Int(1);
    }
    return out;
  };
  if (readers_.empty()) return count(*writer_->conn);  // during Init, before readers exist
  return WithReader(count);
}

Result<JobRecord> SqliteJobStore::Transition(JobId id, const StateChange& change) {
  std::optional<JobRecord> out;
  RETURN_IF_ERROR(writes_.Write([&](Writer& w) -> Status {
    ASSIGN_OR_RETURN(JobRecord r, w.Transition(id, change));
    out = std::move(r);
    return Status::Ok();
  }));
  return std::move(*out);
}

Result<bool> SqliteJobStore::RecordCheckpoint(JobId id, const CheckpointRecord& checkpoint) {
  bool recorded = false;
  RETURN_IF_ERROR(writes_.Write([&](Writer& w) -> Status {
    ASSIGN_OR_RETURN(recorded, w.RecordCheckpoint(id, checkpoint));
    return Status::Ok();
  }));
  return recorded;
}

Status SqliteJobStore::AppendEvent(JobId id, std::string_view kind, std::string_view message) {
  return writes_.Write([&](Writer& w) -> Status {
    ASSIGN_OR_RETURN(JobRecord job, w.conn->GetJob(id));
    return w.InsertEvent(job.id, ToMicros(clock_->Now()), kind, message);
  });
}

Result<std::vector<JobEvent>> SqliteJobStore::Events(JobId id, int limit) {
  if (limit < 1) return InvalidArgumentError("limit must be >= 1");
  return WithReader([&](Connection& c) -> Result<std::vector<JobEvent>> {
    // Read the job and its events in one snapshot.
    RETURN_IF_ERROR(Exec(c.db, "BEGIN"));
    auto read = [&]() -> Result<std::vector<JobEvent>> {
      RETURN_IF_ERROR(c.GetJob(id).status());
      c.events.Reset().Bind(1, id).Bind(2, limit);
      std::vector<JobEvent> out;
      while (true) {
        ASSIGN_OR_RETURN(bool row, c.events.Step());
        if (!row) break;
        out.push_back(JobEvent{c.events.Int(0), FromMicros(c.events.Int(1)), c.events.Text(2),
                               c.events.Text(3)});
      }
      c.events.Reset();
      return out;
    };
    Result<std::vector<JobEvent>> r = read();
    c.events.Reset();
    (void)Exec(c.db, "COMMIT");
    return r;
  });
}

Status SqliteJobStore::SetNodeAdmin(const NodeAdminState& state) {
  if (state.node.empty()) return InvalidArgumentError("node name is empty");
  return writes_.Write([&](Writer& w) -> Status {
    if (state.admin == NodeAdmin::kActive) {
      return w.delete_node.Reset().Bind(1, state.node).Run();
    }
    return w.upsert_node.Reset()
        .Bind(1, state.node)
        .Bind(2, NodeAdminName(state.admin))
        .Bind(3, state.reason)
        .Bind(4, state.by)
        .Bind(5, ToMicros(clock_->Now()))
        .Run();
  });
}

Result<std::vector<NodeAdminState>> SqliteJobStore::ListNodeAdmin() {
  return WithReader([&](Connection& c) -> Result<std::vector<NodeAdminState>> {
    ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(c.db,
                                           "SELECT node, admin, reason, set_by, updated_us "
                                           "FROM node_admin ORDER BY node"));
    std::vector<NodeAdminState> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      NodeAdminState n;
      n.node = s.Text(0);
      ASSIGN_OR_RETURN(n.admin, ParseNodeAdmin(s.Text(1)));
      n.reason = s.Text(2);
      n.by = s.Text(3);
      n.updated_at = FromMicros(s.Int(4));
      out.push_back(std::move(n));
    }
    return out;
  });
}

Status SqliteJobStore::SetNodeHealth(const NodeHealthState& state) {
  if (state.node.empty()) return InvalidArgumentError("node name is empty");
  return writes_.Write([&](Writer& w) -> Status {
    if (state.condition == "healthy") return w.delete_health.Reset().Bind(1, state.node).Run();
    return w.upsert_health.Reset()
        .Bind(1, state.node)
        .Bind(2, state.condition)
        .Bind(3, NamesToJson(state.rules))
        .Bind(4, ToMicros(clock_->Now()))
        .Run();
  });
}

Result<std::vector<NodeHealthState>> SqliteJobStore::ListNodeHealth() {
  return WithReader([&](Connection& c) -> Result<std::vector<NodeHealthState>> {
    ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(c.db,
                                           "SELECT node, condition, rules, updated_us "
                                           "FROM node_health ORDER BY node"));
    std::vector<NodeHealthState> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      NodeHealthState n;
      n.node = s.Text(0);
      n.condition = s.Text(1);
      ASSIGN_OR_RETURN(n.rules, NamesFromJson(s.Text(2)));
      n.updated_at = FromMicros(s.Int(3));
      out.push_back(std::move(n));
    }
    return out;
  });
}

Status SqliteJobStore::PutSiteAttempt(const SiteAttempt& a) {
  if (a.number < 1) return InvalidArgumentError("site attempt: number must be >= 1");
  return writes_.Write([&](Writer& w) -> Status {
    RETURN_IF_ERROR(w.conn->GetJob(a.job).status());  // kNotFound for an unknown job
    return w.upsert_attempt.Reset()
        .Bind(1, a.job)
        .Bind(2, static_cast<std::int64_t>(a.number))
        .Bind(3, a.site)
        .Bind(4, a.idempotency_key)
        .Bind(5, a.body)
        .Bind(6, a.site_job)
        .Bind(7, SiteAttemptStateName(a.state))
        .Bind(8, static_cast<std::int64_t>(a.site_refused ? 1 : 0))
        .Bind(9, ToMicros(clock_->Now()))
        .Run();
  });
}

Result<std::vector<SiteAttempt>> SqliteJobStore::SiteAttempts(
    JobId job, std::optional<SiteAttemptState> state) {
  return WithReader([&](Connection& c) -> Result<std::vector<SiteAttempt>> {
    ASSIGN_OR_RETURN(Stmt s,
                     Stmt::Prepare(c.db,
                                   "SELECT job_id, number, site, idempotency_key, body, site_job, "
                                   "state, site_refused, updated_us FROM site_attempts WHERE "
                                   "(?1 = 0 OR job_id = ?1) AND (?2 = '' OR state = ?2) "
                                   "ORDER BY job_id, number"));
    s.Bind(1, job).Bind(2, state ? SiteAttemptStateName(*state) : std::string_view(""));
    std::vector<SiteAttempt> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      SiteAttempt a;
      a.job = s.Int(0);
      a.number = static_cast<int>(s.Int(1));
      a.site = s.Text(2);
      a.idempotency_key = s.Text(3);
      a.body = s.Text(4);
      a.site_job = s.Int(5);
      ASSIGN_OR_RETURN(a.state, ParseSiteAttemptState(s.Text(6)));
      a.site_refused = s.Int(7) != 0;
      a.updated_at = FromMicros(s.Int(8));
      out.push_back(std::move(a));
    }
    return out;
  });
}

Status SqliteJobStore::AppendHistory(std::string_view text, std::int64_t keep) {
  if (keep < 0) return InvalidArgumentError("history: keep must be >= 0");
  return writes_.Write([&](Writer& w) -> Status {
    RETURN_IF_ERROR(w.insert_history.Reset().Bind(1, text).Run());
    const std::int64_t seq = sqlite3_last_insert_rowid(w.conn->db);
    // With the primary key this deletes at most the few lines that fell out of the window.
    if (keep > 0 && seq > keep) RETURN_IF_ERROR(w.prune_history.Reset().Bind(1, seq - keep).Run());
    return Status::Ok();
  });
}

Result<std::vector<HistoryLine>> SqliteJobStore::History(std::int64_t after, int limit) {
  if (limit < 1 || limit > 10000) return InvalidArgumentError("limit must be in 1..10000");
  return WithReader([&](Connection& c) -> Result<std::vector<HistoryLine>> {
    ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(c.db,
                                           "SELECT seq, line FROM scheduler_history WHERE seq > "
                                           "?1 ORDER BY seq LIMIT ?2"));
    s.Bind(1, after).Bind(2, limit);
    std::vector<HistoryLine> out;
    while (true) {
      ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      out.push_back({s.Int(0), s.Text(1)});
    }
    return out;
  });
}

Result<std::vector<HistoryLine>> SqliteJobStore::ReadHistory(const std::string& path,
                                                             std::int64_t after, int limit) {
  if (limit < 1 || limit > 10000) return InvalidArgumentError("limit must be in 1..10000");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return NotFoundError(path + ": no such database");
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> owned(db, sqlite3_close);
  if (rc != SQLITE_OK) return SqliteError(db, rc, "open " + path);
  sqlite3_busy_timeout(db, 5000);
  ASSIGN_OR_RETURN(std::int64_t version, QueryInt(db, "PRAGMA user_version"));
  if (version < 4) {
    return FailedPreconditionError(
        fmt::format("{}: schema v{} has no scheduling history (v4 and later do)", path, version));
  }
  ASSIGN_OR_RETURN(Stmt s, Stmt::Prepare(db,
                                         "SELECT seq, line FROM scheduler_history WHERE seq > ?1 "
                                         "ORDER BY seq LIMIT ?2"));
  s.Bind(1, after).Bind(2, limit);
  std::vector<HistoryLine> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    out.push_back({s.Int(0), s.Text(1)});
  }
  return out;
}

}  // namespace baton::server
