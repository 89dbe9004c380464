// PostgresJobStore: the JobStore on a PostgreSQL database (libpqxx), for a daemon whose state
// should live on a database server rather than in a local file. Same design as SqliteJobStore:
// one committer thread owns the write connection and group-commits whatever callers are waiting
// into one transaction (each write in its own savepoint), so N concurrent submitters wait for
// one WAL flush instead of N, and job ids become visible in the order they were assigned. Reads
// use a small pool of connections and never wait for the committer.
//
// Durability: the write connection runs with synchronous_commit=on, so an acknowledged write is
// flushed to the server's WAL (and, if the server is configured for it, to its synchronous
// standbys). Open logs a warning when the server runs with fsync=off. One exception to "an error
// changed nothing": if the connection breaks during COMMIT nobody knows whether it committed; the
// writes in that transaction return kUnavailable saying so, and retrying a Submit with the same
// idempotency key is safe. After a dropped connection the next write reconnects (and retakes the
// lock); a reader reconnects on its next use.
//
// One daemon per database at a time: the write connection holds a session-level advisory lock,
// which the server releases when that connection ends (kill -9 of the daemon included).
// libpqxx exceptions never leave this class; they become Status values naming what failed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/units.h"
#include "server/store/group_commit.h"
#include "server/store/job_store.h"

namespace baton::server {

struct PostgresStoreOptions {
  // A libpq connection string: "postgresql://user@host:port/db" or "host=... dbname=...". The
  // database must exist; the store creates and migrates its tables in it.
  std::string url;
  // Batch concurrent writes into one transaction. Off: one transaction per write.
  bool group_commit = true;
  int max_batch = 1024;  // writes per transaction at most
  int read_connections = 4;
  // How long Open waits for the daemon lock: after a kill -9 the server may take a moment to
  // notice that the old daemon's connection is gone.
  Seconds lock_wait{5};
  const Clock* clock = nullptr;  // not owned; must outlive the store. nullptr: the system clock
  // Replicas (leader_lease.h): the epoch of the leader lease this daemon holds. Above 0, Open
  // takes no daemon lock (the lease decides who writes), and every write transaction ends by
  // checking, in the same transaction, that the lease's epoch is still this one: writes of a
  // deposed leader are refused by the server (kUnavailable), however late they arrive. 0: one
  // daemon per database, held by the advisory lock.
  std::int64_t fencing_epoch = 0;
  // With a fencing epoch: the server ends a transaction of this daemon left idle this long (a
  // leader cut off mid-transaction must not hold row locks its successor waits for).
  Seconds idle_transaction_timeout{8};
};

// True for the connection strings that name a PostgreSQL store ("postgresql://", "postgres://").
bool IsPostgresUrl(std::string_view url);

class PostgresJobStore final : public JobStore {
 public:
  // The schema version this build writes (recorded in the schema_version table). Older schemas
  // are migrated on open; a newer one is refused (kFailedPrecondition) rather than misread.
  static constexpr int kSchemaVersion = 5;

  // Connects, takes the database's daemon lock, creates or migrates the schema and starts the
  // committer thread. Errors: kInvalidArgument (bad options), kUnavailable (cannot connect),
  // kFailedPrecondition (another daemon holds the database, or its schema is newer than this
  // build), kInternal (an unexpected server error). Messages never contain the password.
  static Result<std::unique_ptr<PostgresJobStore>> Open(const PostgresStoreOptions& options);

  // The history of the database at `url` (as History), read over a plain connection that takes
  // no lock: for `baton export` while a daemon holds the database.
  static Result<std::vector<HistoryLine>> ReadHistory(const std::string& url, std::int64_t after,
                                                      int limit);

  // Refuses every write from now on (kUnavailable) without sending it: this daemon lost the
  // leader lease. A transaction already sent still meets the server's fence. Thread-safe.
  void Fence();

  // Finishes every queued write, stops the committer, records a clean shutdown and closes the
  // connections. Callers must not be inside a method concurrently.
  ~PostgresJobStore() override;

  Result<SubmitResult> Submit(const NewJob& job) override;
  Result<JobRecord> Get(JobId id) override;
  Result<std::optional<JobRecord>> FindByIdempotencyKey(std::string_view tenant,
                                                        std::string_view key) override;
  Result<JobPage> List(const JobFilter& filter) override;
  Result<std::map<JobState, std::int64_t>> CountByState() override;
  Result<JobRecord> Transition(JobId id, const StateChange& change) override;
  Result<bool> RecordCheckpoint(JobId id, const CheckpointRecord& checkpoint) override;
  Status AppendEvent(JobId id, std::string_view kind, std::string_view message) override;
  Result<std::vector<JobEvent>> Events(JobId id, int limit) override;
  Status SetNodeAdmin(const NodeAdminState& state) override;
  Result<std::vector<NodeAdminState>> ListNodeAdmin() override;
  Status SetNodeHealth(const NodeHealthState& state) override;
  Result<std::vector<NodeHealthState>> ListNodeHealth() override;
  Status PutSiteAttempt(const SiteAttempt& attempt) override;
  Result<std::vector<SiteAttempt>> SiteAttempts(JobId job,
                                                std::optional<SiteAttemptState> state) override;
  Status AppendHistory(std::string_view text, std::int64_t keep) override;
  Result<std::vector<HistoryLine>> History(std::int64_t after, int limit) override;
  const OpenReport& open_report() const override { return report_; }

  // The connection string with any password replaced by "***", for logs.
  const std::string& display_url() const { return display_url_; }

  // Write transactions committed so far. Thread-safe; for tests and benchmarks.
  std::int64_t transactions_committed() const { return writes_.transactions_committed(); }

  // Implementation types, public only so that the .cc's helpers can name them.
  struct Connection;
  struct Writer;

 private:
  explicit PostgresJobStore(const PostgresStoreOptions& options);
  Status Init();
  // Runs a batch of writes in one transaction, each inside a savepoint: an error (returned or
  // thrown) rolls back only that write's changes. On the committer thread.
  Status CommitBatch(const std::vector<GroupCommitQueue<Writer>::Pending*>& batch);
  // Borrows a read connection (round-robin, one user at a time) for `fn`, reconnecting it first
  // if the server dropped it.
  template <typename Fn>
  auto WithReader(std::string_view what, Fn&& fn);

  PostgresStoreOptions options_;
  std::string display_url_;  // options_.url without its password, for messages
  const Clock* clock_;
  OpenReport report_;
  std::unique_ptr<Writer> writer_;
  std::vector<std::unique_ptr<Connection>> readers_;
  std::atomic<std::uint32_t> next_reader_{0};

  bool opened_ = false;              // Init succeeded
  std::atomic<bool> fenced_{false};  // Fence() was called, or the server's fence refused a write
  GroupCommitQueue<Writer> writes_;
};

}  // namespace baton::server
