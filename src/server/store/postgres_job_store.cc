#include "server/store/postgres_job_store.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <thread>
#include <utility>

#include "core/log.h"
#include "server/store/postgres_errors.h"

namespace baton::server {

bool IsPostgresUrl(std::string_view url) {
  return url.starts_with("postgresql://") || url.starts_with("postgres://");
}

namespace {

// The session-level advisory lock that makes one daemon the owner of a database ("baton" in
// ASCII). Advisory locks are per database, so several baton databases can share a server.
constexpr std::int64_t kDaemonLockKey = 0x626174'6f6e;

std::int64_t ToMicros(TimePoint t) {
  return static_cast<std::int64_t>(std::llround(t.since_epoch.value() * 1e6));
}
TimePoint FromMicros(std::int64_t us) { return TimePoint{Seconds(static_cast<double>(us) / 1e6)}; }

// Created before anything else; one row per applied migration.
constexpr const char* kSchemaVersionTable = R"sql(
  CREATE TABLE IF NOT EXISTS schema_version (
    version integer PRIMARY KEY,
    applied_us bigint NOT NULL
  ))sql";

// Schema migrations: kMigrations[i] takes a database from version i to i + 1, in one
// transaction (PostgreSQL DDL is transactional). Append only; never edit a released step.
constexpr const char* kMigrations[] = {
    // v0 → v1: jobs, their history, node administrative state, and whether a daemon has the
    // database open (to report an unclean shutdown).
    R"sql(
    CREATE TABLE jobs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- a sequence: ids are never reused
      tenant text NOT NULL,
      name text NOT NULL,
      spec text NOT NULL,
      state text NOT NULL CHECK (state IN ('queued', 'running', 'cancelling', 'succeeded',
                                            'failed', 'cancelled')),
      attempts integer NOT NULL DEFAULT 0,
      idempotency_key text,
      created_us bigint NOT NULL,
      updated_us bigint NOT NULL
    );
    CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant, idempotency_key)
      WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_state ON jobs (state, id);
    CREATE INDEX jobs_tenant_state ON jobs (tenant, state, id);
    CREATE TABLE job_events (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      job_id bigint NOT NULL REFERENCES jobs (id),
      time_us bigint NOT NULL,
      kind text NOT NULL,
      message text NOT NULL
    );
    CREATE INDEX job_events_job ON job_events (job_id, id);
    CREATE TABLE node_admin (
      node text PRIMARY KEY,
      admin text NOT NULL,
      reason text NOT NULL,
      set_by text NOT NULL,
      updated_us bigint NOT NULL
    );
    CREATE TABLE daemon_session (
      id integer PRIMARY KEY CHECK (id = 1),
      open boolean NOT NULL,
      opened_us bigint NOT NULL
    );
    INSERT INTO daemon_session VALUES (1, false, 0);
    )sql",
    // v1 → v2: a job's placement and bad nodes as columns of their own (restart recovery reads
    // them), and health verdicts that survive a restart.
    R"sql(
    ALTER TABLE jobs ADD COLUMN placement jsonb NOT NULL DEFAULT '[]';
    ALTER TABLE jobs ADD COLUMN bad_nodes jsonb NOT NULL DEFAULT '[]';
    CREATE TABLE node_health (
      node text PRIMARY KEY,
      condition text NOT NULL,
      rules jsonb NOT NULL,
      updated_us bigint NOT NULL
    );
    )sql",
    // v2 → v3: the scheduler's history (one line per scheduling cycle, sched/history), which
    // `baton serve export` writes out and `baton sim --replay-daemon` replays.
    R"sql(
    CREATE TABLE scheduler_history (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- never reused
      line text NOT NULL
    );
    )sql",
    // v3 → v4: the current attempt's rendezvous port, and the last checkpoint the job reported
    // (JSON, see CheckpointToJson; '' for none).
    R"sql(
    ALTER TABLE jobs ADD COLUMN master_port integer NOT NULL DEFAULT 0;
    ALTER TABLE jobs ADD COLUMN checkpoint text NOT NULL DEFAULT '';
    )sql",
    // v4 → v5: a federation broker's dispatches to sites, one row each (SiteAttempt).
    R"sql(
    CREATE TABLE site_attempts (
      job_id bigint NOT NULL REFERENCES jobs(id),
      number integer NOT NULL,
      site text NOT NULL,
      idempotency_key text NOT NULL,
      body text NOT NULL,
      site_job bigint NOT NULL,
      state text NOT NULL,
      site_refused boolean NOT NULL,
      updated_us bigint NOT NULL,
      PRIMARY KEY (job_id, number)
    );
    CREATE INDEX site_attempts_state ON site_attempts(state, job_id, number);
    )sql",
};
static_assert(std::size(kMigrations) == PostgresJobStore::kSchemaVersion);

#define BATON_JOB_COLUMNS                                                              \
  "id, tenant, name, spec, state, attempts, idempotency_key, created_us, updated_us, " \
  "placement::text, bad_nodes::text, master_port, checkpoint"

// Every connection prepares these (libpqxx re-prepares them if it ever reconnects).
constexpr std::pair<const char*, const char*> kReadStatements[] = {
    {"get_job", "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id = $1"},
    // The job and its first $2 events in one statement, so in one snapshot.
    {"events",
     "SELECT j.id, e.time_us, e.kind, e.message FROM jobs j LEFT JOIN LATERAL (SELECT id, "
     "time_us, kind, message FROM job_events WHERE job_id = j.id ORDER BY id LIMIT $2) e ON true "
     "WHERE j.id = $1 ORDER BY e.id"},
    {"list", "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id > $1 ORDER BY id LIMIT $2"},
    {"list_tenant",
     "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id > $1 AND tenant = $3 ORDER BY id LIMIT $2"},
    {"list_state",
     "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id > $1 AND state = $3 ORDER BY id LIMIT $2"},
    {"list_tenant_state",
     "SELECT " BATON_JOB_COLUMNS
     " FROM jobs WHERE id > $1 AND tenant = $3 AND state = $4 ORDER BY id LIMIT $2"},
    {"count_by_state", "SELECT state, COUNT(*) FROM jobs GROUP BY state"},
    {"find_key_read",
     "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE tenant = $1 AND idempotency_key = $2"},
    {"list_nodes", "SELECT node, admin, reason, set_by, updated_us FROM node_admin ORDER BY node"},
    {"list_attempts",
     "SELECT job_id, number, site, idempotency_key, body, site_job, state, site_refused, "
     "updated_us FROM site_attempts WHERE ($1 = 0 OR job_id = $1) AND ($2 = '' OR state = $2) "
     "ORDER BY job_id, number"},
    {"list_health",
     "SELECT node, condition, rules::text, updated_us FROM node_health ORDER BY node"},
    {"history", "SELECT seq, line FROM scheduler_history WHERE seq > $1 ORDER BY seq LIMIT $2"},
};

constexpr std::pair<const char*, const char*> kWriteStatements[] = {
    {"find_key",
     "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE tenant = $1 AND idempotency_key = $2"},
    {"lock_job", "SELECT " BATON_JOB_COLUMNS " FROM jobs WHERE id = $1 FOR UPDATE"},
    // The job and its "queued" event in one round trip.
    {"insert_job",
     "WITH job AS (INSERT INTO jobs (tenant, name, spec, state, attempts, idempotency_key, "
     "created_us, updated_us) VALUES ($1, $2, $3, 'queued', 0, NULLIF($4, ''), $5, $5) "
     "RETURNING id) INSERT INTO job_events (job_id, time_us, kind, message) "
     "SELECT id, $5, 'queued', $6 FROM job RETURNING job_id"},
    // Inserts nothing (0 rows affected) when the job does not exist.
    {"insert_event",
     "INSERT INTO job_events (job_id, time_us, kind, message) SELECT id, $2, $3, $4 FROM jobs "
     "WHERE id = $1"},
    {"update_state",
     "UPDATE jobs SET state = $2, attempts = attempts + $3, updated_us = $4 WHERE id = $1"},
    {"upsert_node",
     "INSERT INTO node_admin (node, admin, reason, set_by, updated_us) VALUES ($1, $2, $3, $4, "
     "$5) ON CONFLICT (node) DO UPDATE SET admin = EXCLUDED.admin, reason = EXCLUDED.reason, "
     "set_by = EXCLUDED.set_by, updated_us = EXCLUDED.updated_us"},
    {"delete_node", "DELETE FROM node_admin WHERE node = $1"},
    {"set_placement", "UPDATE jobs SET placement = $2::jsonb WHERE id = $1"},
    {"set_bad_nodes", "UPDATE jobs SET bad_nodes = $2::jsonb WHERE id = $1"},
    {"set_master_port", "UPDATE jobs SET master_port = $2 WHERE id = $1"},
    {"unschedulable",
     "SELECT node, admin FROM node_admin WHERE node = ANY(string_to_array($1, ',')) LIMIT 1"},
    {"set_checkpoint", "UPDATE jobs SET checkpoint = $2 WHERE id = $1"},
    {"upsert_health",
     "INSERT INTO node_health (node, condition, rules, updated_us) VALUES ($1, $2, $3::jsonb, $4) "
     "ON CONFLICT (node) DO UPDATE SET condition = EXCLUDED.condition, rules = EXCLUDED.rules, "
     "updated_us = EXCLUDED.updated_us"},
    {"delete_health", "DELETE FROM node_health WHERE node = $1"},
    {"insert_history", "INSERT INTO scheduler_history (line) VALUES ($1) RETURNING seq"},
    {"prune_history", "DELETE FROM scheduler_history WHERE seq <= $1"},
    // Inserts nothing (0 rows affected) when the job does not exist.
    {"upsert_attempt",
     "INSERT INTO site_attempts (job_id, number, site, idempotency_key, body, site_job, state, "
     "site_refused, updated_us) SELECT id, $2, $3, $4, $5, $6, $7, $8, $9 FROM jobs WHERE id = $1 "
     "ON CONFLICT (job_id, number) DO UPDATE SET site = EXCLUDED.site, idempotency_key = "
     "EXCLUDED.idempotency_key, body = EXCLUDED.body, site_job = EXCLUDED.site_job, state = "
     "EXCLUDED.state, site_refused = EXCLUDED.site_refused, updated_us = EXCLUDED.updated_us"},
};

#undef BATON_JOB_COLUMNS

Result<JobRecord> ReadJob(const pqxx::row& r) {
  JobRecord j;
  j.id = r[0].as<std::int64_t>();
  j.tenant = r[1].as<std::string>();
  j.name = r[2].as<std::string>();
  j.spec_json = r[3].as<std::string>();
  ASSIGN_OR_RETURN(j.state, ParseJobState(r[4].as<std::string>()));
  j.attempts = r[5].as<int>();
  j.idempotency_key = r[6].is_null() ? std::string() : r[6].as<std::string>();
  j.created_at = FromMicros(r[7].as<std::int64_t>());
  j.updated_at = FromMicros(r[8].as<std::int64_t>());
  ASSIGN_OR_RETURN(j.placement, PlacementFromJson(r[9].as<std::string>()));
  ASSIGN_OR_RETURN(j.bad_nodes, NamesFromJson(r[10].as<std::string>()));
  j.master_port = r[11].as<int>();
  ASSIGN_OR_RETURN(j.checkpoint, CheckpointFromJson(r[12].as<std::string>()));
  return j;
}

Status NotFound(JobId id) { return NotFoundError("job " + std::to_string(id) + " not found"); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Connections.

struct PostgresJobStore::Connection {
  std::unique_ptr<pqxx::connection> conn;
  std::mutex mu;  // readers: one user at a time

  bool connected() const { return conn != nullptr && conn->is_open(); }

  // (Re)connects; a reader also prepares the read statements. Throws.
  void Connect(const std::string& url, bool reader) {
    conn.reset();
    auto c = std::make_unique<pqxx::connection>(url);
    if (!reader) {
      conn = std::move(c);
      return;
    }
    // Prepared now rather than at first use, so that a statement the server rejects fails here
    // (at Open, or at a reconnect) instead of in the middle of a later call.
    for (const auto& [name, sql] : kReadStatements) {
      c->prepare(name, sql);
      c->prepare_now(name);
    }
    conn = std::move(c);
  }
};

// The committer thread's connection; `tx` is the savepoint the current write runs in.
struct PostgresJobStore::Writer {
  Connection conn;
  const Clock* clock = nullptr;
  std::int64_t fencing_epoch = 0;
  Seconds idle_transaction_timeout{8};
  pqxx::transaction_base* tx = nullptr;

  // Connects, asks for durable commits and takes the daemon lock, waiting up to `lock_wait` for
  // a previous owner's connection to go away. Statements are prepared separately
  // (PrepareWrites), once the schema exists. Throws on connection errors.
  Status Connect(const std::string& url, Seconds lock_wait) {
    conn.Connect(url, /*reader=*/false);
    bool locked = false;
    {
      pqxx::nontransaction session(*conn.conn);
      // The server default, but a cluster may have turned it off; acknowledged means flushed.
      session.exec0("SET synchronous_commit = on");
      if (fencing_epoch > 0) {
        // A replica: the leader lease decides who writes, and the fence checks every commit.
        session.exec0("SET idle_in_transaction_session_timeout = " +
                      std::to_string(std::max<std::int64_t>(
                          1000, std::llround(idle_transaction_timeout.value() * 1000))));
        return Status::Ok();
      }
      auto deadline = std::chrono::steady_clock::now() +
                      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                          std::chrono::duration<double>(lock_wait.value()));
      while (true) {
        locked =
            session.exec_params1("SELECT pg_try_advisory_lock($1)", kDaemonLockKey)[0].as<bool>();
        if (locked || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
    if (!locked) {
      conn.conn.reset();
      return FailedPreconditionError("database is in use by another baton daemon (advisory lock " +
                                     std::to_string(kDaemonLockKey) + " is held)");
    }
    return Status::Ok();
  }

  // With a fencing epoch, the last statement of every write transaction: throws (SQLSTATE
  // kFencedSqlState) when another replica has taken the lease since.
  void CheckFence(pqxx::transaction_base& t) {
    if (fencing_epoch > 0) t.exec_params("SELECT baton_fence($1)", fencing_epoch);
  }

  void PrepareWrites() {
    for (const auto& [name, sql] : kWriteStatements) {
      conn.conn->prepare(name, sql);
      conn.conn->prepare_now(name);
    }
  }

  Result<SubmitResult> Submit(const NewJob& job) {
    if (!job.idempotency_key.empty()) {
      pqxx::result r = tx->exec_prepared("find_key", job.tenant, job.idempotency_key);
      if (!r.empty()) {
        ASSIGN_OR_RETURN(JobRecord existing, ReadJob(r[0]));
        return SubmitResult{std::move(existing), false};
      }
    }
    std::int64_t now = ToMicros(clock->Now());
    pqxx::row row =
        tx->exec_prepared1("insert_job", job.tenant, job.name, job.spec_json, job.idempotency_key,
                           now, "submitted by tenant " + job.tenant);
    JobRecord r;
    r.id = row[0].as<std::int64_t>();
    r.tenant = job.tenant;
    r.name = job.name;
    r.spec_json = job.spec_json;
    r.idempotency_key = job.idempotency_key;
    r.state = JobState::kQueued;
    r.created_at = r.updated_at = FromMicros(now);
    return SubmitResult{std::move(r), true};
  }

  Status InsertEvent(JobId id, std::int64_t now_us, std::string_view kind,
                     std::string_view message) {
    pqxx::result r =
        tx->exec_prepared("insert_event", id, now_us, std::string(kind), std::string(message));
    return r.affected_rows() == 1 ? Status::Ok() : NotFound(id);
  }

  Result<JobRecord> Transition(JobId id, const StateChange& change) {
    pqxx::result current = tx->exec_prepared("lock_job", id);
    if (current.empty()) return NotFound(id);
    ASSIGN_OR_RETURN(JobRecord job, ReadJob(current[0]));
    RETURN_IF_ERROR(CheckTransition(id, job.state, change));
    if (!change.schedulable_nodes.empty()) {
      pqxx::result busy =
          tx->exec_prepared("unschedulable", JoinNodeNames(change.schedulable_nodes));
      if (!busy.empty()) {
        return UnschedulableNode(busy[0][0].as<std::string>(), busy[0][1].as<std::string>());
      }
    }
    std::int64_t now = ToMicros(clock->Now());
    int attempt = AttemptIncrement(job.state, change);
    tx->exec_prepared0("update_state", id, std::string(JobStateName(change.to)), attempt, now);
    if (change.placement) {
      tx->exec_prepared0("set_placement", id, PlacementToJson(*change.placement));
      job.placement = *change.placement;
    }
    if (change.bad_nodes) {
      tx->exec_prepared0("set_bad_nodes", id, NamesToJson(*change.bad_nodes));
      job.bad_nodes = *change.bad_nodes;
    }
    if (change.master_port) {
      tx->exec_prepared0("set_master_port", id, *change.master_port);
      job.master_port = *change.master_port;
    }
    RETURN_IF_ERROR(InsertEvent(id, now, TransitionEventKind(change), change.message));
    job.state = change.to;
    job.attempts += attempt;
    job.updated_at = FromMicros(now);
    return job;
  }

  Result<bool> RecordCheckpoint(JobId id, const CheckpointRecord& checkpoint) {
    pqxx::result current = tx->exec_prepared("lock_job", id);  // FOR UPDATE: fenced in this tx
    if (current.empty()) return NotFound(id);
    ASSIGN_OR_RETURN(JobRecord job, ReadJob(current[0]));
    if (!CheckpointApplies(job, checkpoint)) return false;
    tx->exec_prepared0("set_checkpoint", id, CheckpointToJson(checkpoint));
    RETURN_IF_ERROR(InsertEvent(id, ToMicros(clock->Now()), "checkpointed",
                                CheckpointEventMessage(checkpoint)));
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Open, migrate, close.

PostgresJobStore::PostgresJobStore(const PostgresStoreOptions& options)
    : options_(options),
      display_url_(WithoutPassword(options.url)),
      clock_(options.clock),
      writes_(display_url_, options.group_commit ? static_cast<std::size_t>(options.max_batch) : 1,
              [this](const auto& batch) { return CommitBatch(batch); }) {
  static const SystemClock kSystemClock;
  if (clock_ == nullptr) clock_ = &kSystemClock;
}

Result<std::unique_ptr<PostgresJobStore>> PostgresJobStore::Open(
    const PostgresStoreOptions& options) {
  if (options.url.empty()) return InvalidArgumentError("job store: empty PostgreSQL URL");
  if (options.max_batch < 1 || options.read_connections < 1) {
    return InvalidArgumentError("job store: max_batch and read_connections must be >= 1");
  }
  std::unique_ptr<PostgresJobStore> store(new PostgresJobStore(options));
  RETURN_IF_ERROR(store->Init().WithPrefix("job store " + store->display_url_));
  return store;
}

Status PostgresJobStore::Init() {
  writer_ = std::make_unique<Writer>();
  writer_->clock = clock_;
  writer_->fencing_epoch = options_.fencing_epoch;
  writer_->idle_transaction_timeout = options_.idle_transaction_timeout;
  try {
    RETURN_IF_ERROR(writer_->Connect(options_.url, options_.lock_wait));
    pqxx::connection& c = *writer_->conn.conn;
    {
      pqxx::nontransaction q(c);
      if (q.exec1("SELECT current_setting('fsync')")[0].as<std::string>() == "off") {
        LOG_WARN(
            "job store {}: the server runs with fsync=off; acknowledged jobs can be lost "
            "in a crash",
            display_url_);
      }
    }

    int version = 0;
    {
      pqxx::work tx(c);
      tx.exec0(kSchemaVersionTable);
      version = tx.exec1("SELECT COALESCE(MAX(version), 0) FROM schema_version")[0].as<int>();
      tx.commit();
    }
    report_.schema_version_found = version;
    if (version > kSchemaVersion) {
      return FailedPreconditionError("schema version " + std::to_string(version) +
                                     " is newer than this build's " +
                                     std::to_string(kSchemaVersion) + "; upgrade baton");
    }
    for (int v = version; v < kSchemaVersion; ++v) {
      try {
        pqxx::work tx(c);
        tx.exec0(kMigrations[v]);
        tx.exec_params0("INSERT INTO schema_version (version, applied_us) VALUES ($1, $2)", v + 1,
                        ToMicros(clock_->Now()));
        tx.commit();
      } catch (...) {
        return CurrentExceptionStatus("migration to schema v" + std::to_string(v + 1));
      }
      LOG_INFO("job store {}: migrated schema v{} -> v{}", display_url_, v, v + 1);
    }
    report_.schema_version = kSchemaVersion;

    {
      // The flag a clean close clears: finding it set means the last daemon died with the
      // database open. (PostgreSQL itself recovers its own crashes; nothing to replay here.)
      pqxx::work tx(c);
      report_.recovered_after_crash =
          tx.exec1("SELECT open FROM daemon_session WHERE id = 1 FOR UPDATE")[0].as<bool>();
      tx.exec_params0("UPDATE daemon_session SET open = true, opened_us = $1 WHERE id = 1",
                      ToMicros(clock_->Now()));
      writer_->CheckFence(tx);
      tx.commit();
    }
    writer_->PrepareWrites();

    for (int i = 0; i < options_.read_connections; ++i) {
      auto reader = std::make_unique<Connection>();
      reader->Connect(options_.url, /*reader=*/true);
      readers_.push_back(std::move(reader));
    }
    {
      pqxx::nontransaction q(c);
      report_.node_admin_entries = q.exec1("SELECT COUNT(*) FROM node_admin")[0].as<std::int64_t>();
    }
  } catch (...) {
    return CurrentExceptionStatus("open");
  }
  ASSIGN_OR_RETURN(report_.jobs_by_state, CountByState());
  writes_.Start();
  opened_ = true;
  return Status::Ok();
}

PostgresJobStore::~PostgresJobStore() {
  writes_.Stop();
  // Only a store that opened fully marks the database closed cleanly.
  if (opened_ && !fenced_ && writer_->conn.connected()) {
    try {
      pqxx::work tx(*writer_->conn.conn);
      tx.exec0("UPDATE daemon_session SET open = false WHERE id = 1");
      writer_->CheckFence(tx);
      tx.commit();
    } catch (...) {
      LOG_WARN("job store {}: {}", display_url_,
               CurrentExceptionStatus("recording a clean shutdown").ToString());
    }
  }
  readers_.clear();
  writer_.reset();  // closing the write connection releases the daemon lock
}

// ---------------------------------------------------------------------------------------------
// The committer.

void PostgresJobStore::Fence() { fenced_ = true; }

Status PostgresJobStore::CommitBatch(const std::vector<GroupCommitQueue<Writer>::Pending*>& batch) {
  Writer& w = *writer_;
  if (fenced_) {
    return UnavailableError("this replica no longer holds the leader lease (epoch " +
                            std::to_string(options_.fencing_epoch) + "); ask the leader");
  }
  try {
    if (!w.conn.connected()) {
      // The server dropped the connection (restart, failover, network): reconnect, which
      // retakes the daemon lock (refused if another daemon took the database meanwhile).
      RETURN_IF_ERROR(w.Connect(options_.url, options_.lock_wait));
      w.PrepareWrites();
      LOG_INFO("job store {}: reconnected", display_url_);
    }
    pqxx::work tx(*w.conn.conn);
    for (auto* p : batch) {
      try {
        pqxx::subtransaction savepoint(tx);
        w.tx = &savepoint;
        Status s = p->op(w);
        w.tx = nullptr;
        if (s.ok()) {
          savepoint.commit();
        } else {
          savepoint.abort();
        }
        p->result = s;
      } catch (const pqxx::broken_connection&) {
        throw;  // the whole transaction is lost
      } catch (const pqxx::in_doubt_error&) {
        throw;
      } catch (...) {
        w.tx = nullptr;
        p->result = CurrentExceptionStatus("write");
      }
    }
    w.CheckFence(tx);
    tx.commit();
    return Status::Ok();
  } catch (...) {
    w.tx = nullptr;
    Status s = CurrentExceptionStatus("commit");
    try {
      throw;
    } catch (const pqxx::sql_error& e) {
      if (e.sqlstate() == kFencedSqlState) {
        fenced_ = true;  // for good: a deposed leader's store writes nothing more
        LOG_ERROR("job store {}: {}", display_url_, s.ToString());
      }
    } catch (...) {
    }
    // Start the next batch on a fresh connection (retaking the lock) rather than trust this one.
    if (s.code() == StatusCode::kUnavailable || !w.conn.connected()) w.conn.conn.reset();
    return s;
  }
}

template <typename Fn>
auto PostgresJobStore::WithReader(std::string_view what, Fn&& fn) {
  using R = decltype(fn(std::declval<pqxx::connection&>()));
  Connection& c = *readers_[next_reader_.fetch_add(1) % readers_.size()];
  std::lock_guard lock(c.mu);
  try {
    if (!c.connected()) c.Connect(options_.url, /*reader=*/true);
    return fn(*c.conn);
  } catch (...) {
    Status s = CurrentExceptionStatus(what);
    if (s.code() == StatusCode::kUnavailable || !c.connected()) c.conn.reset();
    return R(std::move(s));
  }
}

// ---------------------------------------------------------------------------------------------
// JobStore.

Result<SubmitResult> PostgresJobStore::Submit(const NewJob& job) {
  std::optional<SubmitResult> out;
  RETURN_IF_ERROR(writes_.Write([&](Writer& w) -> Status {
    ASSIGN_OR_RETURN(SubmitResult r, w.Submit(job));
    out = std::move(r);
    return Status::Ok();
  }));
  return std::move(*out);
}

Result<JobRecord> PostgresJobStore::Get(JobId id) {
  return WithReader("get job", [&](pqxx::connection& c) -> Result<JobRecord> {
    pqxx::nontransaction q(c);
    pqxx::result r = q.exec_prepared("get_job", id);
    if (r.empty()) return NotFound(id);
    return ReadJob(r[0]);
  });
}

Result<std::optional<JobRecord>> PostgresJobStore::FindByIdempotencyKey(std::string_view tenant,
                                                                        std::string_view key) {
  return WithReader(
      "find idempotency key", [&](pqxx::connection& c) -> Result<std::optional<JobRecord>> {
        pqxx::nontransaction q(c);
        pqxx::result r = q.exec_prepared("find_key_read", std::string(tenant), std::string(key));
        if (r.empty()) return std::optional<JobRecord>();
        ASSIGN_OR_RETURN(JobRecord j, ReadJob(r[0]));
        return std::optional<JobRecord>(std::move(j));
      });
}

Result<JobPage> PostgresJobStore::List(const JobFilter& filter) {
  if (filter.limit < 1 || filter.limit > 1000) {
    return InvalidArgumentError("limit must be in 1..1000");
  }
  return WithReader("list jobs", [&](pqxx::connection& c) -> Result<JobPage> {
    pqxx::nontransaction q(c);
    int fetch = filter.limit + 1;
    pqxx::result r;
    if (filter.tenant && filter.state) {
      r = q.exec_prepared("list_tenant_state", filter.after, fetch, *filter.tenant,
                          std::string(JobStateName(*filter.state)));
    } else if (filter.tenant) {
      r = q.exec_prepared("list_tenant", filter.after, fetch, *filter.tenant);
    } else if (filter.state) {
      r = q.exec_prepared("list_state", filter.after, fetch,
                          std::string(JobStateName(*filter.state)));
    } else {
      r = q.exec_prepared("list", filter.after, fetch);
    }
    JobPage page;
    for (const pqxx::row& row : r) {
      if (static_cast<int>(page.jobs.size()) == filter.limit) {
        page.next_after = page.jobs.back().id;
        break;
      }
      ASSIGN_OR_RETURN(JobRecord j, ReadJob(row));
      page.jobs.push_back(std::move(j));
    }
    return page;
  });
}

Result<std::map<JobState, std::int64_t>> PostgresJobStore::CountByState() {
  return WithReader("count jobs",
                    [&](pqxx::connection& c) -> Result<std::map<JobState, std::int64_t>> {
                      pqxx::nontransaction q(c);
                      std::map<JobState, std::int64_t> out;
                      for (JobState st : kAllJobStates) out[st] = 0;
                      for (const pqxx::row& row : q.exec_prepared("count_by_state")) {
                        ASSIGN_OR_RETURN(JobState st, ParseJobState(row[0].as<std::string>()));
                        out[st] = row[1].as<std::int64_t>();
                      }
                      return out;
                    });
}

Result<JobRecord> PostgresJobStore::Transition(JobId id, const StateChange& change) {
  std::optional<JobRecord> out;
  RETURN_IF_ERROR(writes_.Write([&](Writer& w) -> Status {
    ASSIGN_OR_RETURN(JobRecord r, w.Transition(id, change));
    out = std::move(r);
    return Status::Ok();
  }));
  return std::move(*out);
}

Result<bool> PostgresJobStore::RecordCheckpoint(JobId id, const CheckpointRecord& checkpoint) {
  bool recorded = false;
  RETURN_IF_ERROR(writes_.Write([&](Writer& w) -> Status {
    ASSIGN_OR_RETURN(recorded, w.RecordCheckpoint(id, checkpoint));
    return Status::Ok();
  }));
  return recorded;
}

Status PostgresJobStore::AppendEvent(JobId id, std::string_view kind, std::string_view message) {
  return writes_.Write([&](Writer& w) -> Status {
    return w.InsertEvent(id, ToMicros(clock_->Now()), kind, message);
  });
}

Result<std::vector<JobEvent>> PostgresJobStore::Events(JobId id, int limit) {
  if (limit < 1) return InvalidArgumentError("limit must be >= 1");
  return WithReader("read events", [&](pqxx::connection& c) -> Result<std::vector<JobEvent>> {
    pqxx::nontransaction q(c);
    pqxx::result r = q.exec_prepared("events", id, limit);
    if (r.empty()) return NotFound(id);
    std::vector<JobEvent> out;
    for (const pqxx::row& row : r) {
      if (row[2].is_null()) continue;  // the job has no events (the LEFT JOIN's empty side)
      out.push_back(JobEvent{row[0].as<std::int64_t>(), FromMicros(row[1].as<std::int64_t>()),
                             row[2].as<std::string>(), row[3].as<std::string>()});
    }
    return out;
  });
}

Status PostgresJobStore::SetNodeAdmin(const NodeAdminState& state) {
  if (state.node.empty()) return InvalidArgumentError("node name is empty");
  return writes_.Write([&](Writer& w) -> Status {
    if (state.admin == NodeAdmin::kActive) {
      w.tx->exec_prepared0("delete_node", state.node);
    } else {
      w.tx->exec_prepared0("upsert_node", state.node, std::string(NodeAdminName(state.admin)),
                           state.reason, state.by, ToMicros(clock_->Now()));
    }
    return Status::Ok();
  });
}

Result<std::vector<NodeAdminState>> PostgresJobStore::ListNodeAdmin() {
  return WithReader("list node admin",
                    [&](pqxx::connection& c) -> Result<std::vector<NodeAdminState>> {
                      pqxx::nontransaction q(c);
                      std::vector<NodeAdminState> out;
                      for (const pqxx::row& row : q.exec_prepared("list_nodes")) {
                        NodeAdminState n;
                        n.node = row[0].as<std::string>();
                        ASSIGN_OR_RETURN(n.admin, ParseNodeAdmin(row[1].as<std::string>()));
                        n.reason = row[2].as<std::string>();
                        n.by = row[3].as<std::string>();
                        n.updated_at = FromMicros(row[4].as<std::int64_t>());
                        out.push_back(std::move(n));
                      }
                      return out;
                    });
}

Status PostgresJobStore::SetNodeHealth(const NodeHealthState& state) {
  if (state.node.empty()) return InvalidArgumentError("node name is empty");
  return writes_.Write([&](Writer& w) -> Status {
    if (state.condition == "healthy") {
      w.tx->exec_prepared0("delete_health", state.node);
    } else {
      w.tx->exec_prepared0("upsert_health", state.node, state.condition, NamesToJson(state.rules),
                           ToMicros(clock_->Now()));
    }
    return Status::Ok();
  });
}

Result<std::vector<NodeHealthState>> PostgresJobStore::ListNodeHealth() {
  return WithReader("list node health",
                    [&](pqxx::connection& c) -> Result<std::vector<NodeHealthState>> {
                      pqxx::nontransaction q(c);
                      std::vector<NodeHealthState> out;
                      for (const pqxx::row& row : q.exec_prepared("list_health")) {
                        NodeHealthState n;
                        n.node = row[0].as<std::string>();
                        n.condition = row[1].as<std::string>();
                        ASSIGN_OR_RETURN(n.rules, NamesFromJson(row[2].as<std::string>()));
                        n.updated_at = FromMicros(row[3].as<std::int64_t>());
                        out.push_back(std::move(n));
                      }
                      return out;
                    });
}

Status PostgresJobStore::PutSiteAttempt(const SiteAttempt& a) {
  if (a.number < 1) return InvalidArgumentError("site attempt: number must be >= 1");
  return writes_.Write([&](Writer& w) -> Status {
    pqxx::result r = w.tx->exec_prepared(
        "upsert_attempt", a.job, a.number, a.site, a.idempotency_key, a.body, a.site_job,
        std::string(SiteAttemptStateName(a.state)), a.site_refused, ToMicros(clock_->Now()));
    return r.affected_rows() == 1 ? Status::Ok() : NotFound(a.job);
  });
}

Result<std::vector<SiteAttempt>> PostgresJobStore::SiteAttempts(
    JobId job, std::optional<SiteAttemptState> state) {
  return WithReader(
      "list site attempts", [&](pqxx::connection& c) -> Result<std::vector<SiteAttempt>> {
        pqxx::nontransaction q(c);
        std::vector<SiteAttempt> out;
        const std::string wanted = state ? std::string(SiteAttemptStateName(*state)) : "";
        for (const pqxx::row& row : q.exec_prepared("list_attempts", job, wanted)) {
          SiteAttempt a;
          a.job = row[0].as<std::int64_t>();
          a.number = row[1].as<int>();
          a.site = row[2].as<std::string>();
          a.idempotency_key = row[3].as<std::string>();
          a.body = row[4].as<std::string>();
          a.site_job = row[5].as<std::int64_t>();
          ASSIGN_OR_RETURN(a.state, ParseSiteAttemptState(row[6].as<std::string>()));
          a.site_refused = row[7].as<bool>();
          a.updated_at = FromMicros(row[8].as<std::int64_t>());
          out.push_back(std::move(a));
        }
        return out;
      });
}

Status PostgresJobStore::AppendHistory(std::string_view text, std::int64_t keep) {
  if (keep < 0) return InvalidArgumentError("history: keep must be >= 0");
  return writes_.Write([&](Writer& w) -> Status {
    const std::int64_t seq =
        w.tx->exec_prepared1("insert_history", std::string(text))[0].as<std::int64_t>();
    if (keep > 0 && seq > keep) w.tx->exec_prepared0("prune_history", seq - keep);
    return Status::Ok();
  });
}

Result<std::vector<HistoryLine>> PostgresJobStore::History(std::int64_t after, int limit) {
  if (limit < 1 || limit > 10000) return InvalidArgumentError("limit must be in 1..10000");
  return WithReader("read the scheduler history",
                    [&](pqxx::connection& c) -> Result<std::vector<HistoryLine>> {
                      pqxx::nontransaction q(c);
                      std::vector<HistoryLine> out;
                      for (const pqxx::row& row : q.exec_prepared("history", after, limit)) {
                        out.push_back({row[0].as<std::int64_t>(), row[1].as<std::string>()});
                      }
                      return out;
                    });
}

Result<std::vector<HistoryLine>> PostgresJobStore::ReadHistory(const std::string& url,
                                                               std::int64_t after, int limit) {
  if (limit < 1 || limit > 10000) return InvalidArgumentError("limit must be in 1..10000");
  try {
    pqxx::connection c(url);
    pqxx::nontransaction q(c);
    std::vector<HistoryLine> out;
    for (const pqxx::row& row : q.exec_params(
             "SELECT seq, line FROM scheduler_history WHERE seq > $1 ORDER BY seq LIMIT $2", after,
             limit)) {
      out.push_back({row[0].as<std::int64_t>(), row[1].as<std::string>()});
    }
    return out;
  } catch (...) {
    return CurrentExceptionStatus("read the scheduler history from " + WithoutPassword(url));
  }
}

}  // namespace baton::server
