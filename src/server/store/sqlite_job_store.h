// SqliteJobStore: the embedded JobStore on one SQLite file (WAL mode, synchronous=FULL). All
// writes go through one committer thread that batches whatever callers are waiting into a single
// transaction (group commit): each caller still returns only after the transaction holding its
// write has been fsync'd, but N concurrent submitters pay for one fsync instead of N. Reads use
// a small pool of read connections and never wait for the committer (WAL readers do not block
// the writer, nor it them).
//
// One process at a time: Open takes an exclusive flock on the database file itself (released by
// the kernel when the process dies, so kill -9 does not leave a stale lock). An empty (0-byte)
// database file is refused, not taken for a new database; a crash whose write-ahead log was then
// deleted, cut short or damaged (it fails SQLite's frame checksums) is reported as NOT CLEAN with
// the frames recovery dropped (OpenReport::not_clean, sqlite_wal.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "server/store/group_commit.h"
#include "server/store/job_store.h"

namespace baton::server {

struct SqliteStoreOptions {
  std::string path;  // the database file; created (with its schema) when missing
  // Batch concurrent writes into one transaction. Off: one transaction (one fsync) per write,
  // the baseline the group-commit benchmark compares against.
  bool group_commit = true;
  int max_batch = 1024;  // writes per transaction at most
  int read_connections = 4;
  const Clock* clock = nullptr;  // not owned; must outlive the store. nullptr: the system clock
};

class SqliteJobStore final : public JobStore {
 public:
  // The schema version this build writes. Older databases are migrated on open; a newer one is
  // refused (kFailedPrecondition) rather than misread.
  static constexpr int kSchemaVersion = 6;

  // Opens (creating or migrating) the database and starts the committer thread. Errors:
  // kFailedPrecondition (another process holds the database, or the schema is newer than this
  // build), kUnavailable / kInternal (I/O or a corrupt file).
  static Result<std::unique_ptr<SqliteJobStore>> Open(const SqliteStoreOptions& options);

  // Finishes every queued write, stops the committer, closes the connections (checkpointing
  // the WAL) and releases the lock. Callers must not be inside a method concurrently.
  ~SqliteJobStore() override;

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

  // The history of the database at `path` (as History), read through a read-only connection
  // that takes no lock: for `baton export` while a daemon holds the database. Errors:
  // kNotFound (no such file), kFailedPrecondition (a schema without the history, v3 or older).
  static Result<std::vector<HistoryLine>> ReadHistory(const std::string& path, std::int64_t after,
                                                      int limit);

  // Write transactions committed so far (each one fsync). Thread-safe; for tests and benchmarks.
  std::int64_t transactions_committed() const { return writes_.transactions_committed(); }

  // Implementation types, public only so that the .cc's helpers can name them.
  struct Connection;
  struct Writer;

 private:
  explicit SqliteJobStore(const SqliteStoreOptions& options);
  Status Init();
  // Runs a batch of writes in one transaction, each inside a savepoint: an error return rolls
  // back only that write's changes. On the committer thread.
  Status CommitBatch(const std::vector<GroupCommitQueue<Writer>::Pending*>& batch);
  // Borrows a read connection (round-robin, one user at a time) for `fn`.
  template <typename Fn>
  auto WithReader(Fn&& fn);

  SqliteStoreOptions options_;
  const Clock* clock_;
  int lock_fd_ = -1;  // the database file, flock'ed while the store is open
  bool writes_started_ = false;
  OpenReport report_;
  std::unique_ptr<Writer> writer_;
  std::vector<std::unique_ptr<Connection>> readers_;
  std::atomic<std::uint32_t> next_reader_{0};

  GroupCommitQueue<Writer> writes_;
};

}  // namespace baton::server
