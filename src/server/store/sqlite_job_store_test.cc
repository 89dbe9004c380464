#include "server/store/sqlite_job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "server/store/job_store_contract_test.h"
#include "server/store/sqlite_wal.h"

namespace baton::server {
namespace {

namespace fs = std::filesystem;

// A fresh file in a directory of its own per test.
class SqliteBackend {
 public:
  using Store = SqliteJobStore;
  static constexpr int kSchemaVersion = SqliteJobStore::kSchemaVersion;

  std::string SetUp() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Typed suites are named "Sqlite/JobStoreContractTest/0": no slashes in a file name.
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ =
        fs::temp_directory_path() / ("baton_store_test_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "baton.db").string();
    return "";
  }
  void TearDown() { fs::remove_all(dir_); }

  Result<std::unique_ptr<SqliteJobStore>> Open(const Clock* clock, bool group_commit) {
    SqliteStoreOptions o;
    o.path = path_;
    o.clock = clock;
    o.group_commit = group_commit;
    return SqliteJobStore::Open(o);
  }

  const std::string& path() const { return path_; }

 private:
  fs::path dir_;
  std::string path_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Sqlite, JobStoreContractTest, SqliteBackend);

// What only the SQLite store does: its write-ahead log file, its migrations.
class SqliteJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(backend_.SetUp(), ""); }
  void TearDown() override { backend_.TearDown(); }

  std::unique_ptr<SqliteJobStore> Open() {
    auto store = backend_.Open(&clock_, true);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  SqliteBackend backend_;
  const std::string& path_ = backend_.path();
  ManualClock clock_{TimePoint{Seconds(1000)}};
};

TEST_F(SqliteJobStoreTest, CleanCloseRemovesTheWal) {
  {
    auto store = Open();
    ASSERT_TRUE(store->Submit(NewJob{"t", "train", "{}", ""}).ok());
    EXPECT_TRUE(fs::exists(path_ + "-wal"));
  }
  EXPECT_FALSE(fs::exists(path_ + "-wal"));
  EXPECT_FALSE(Open()->open_report().recovered_after_crash);
}

TEST_F(SqliteJobStoreTest, MigratesAVersion1Database) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    // The v1 schema as released (frozen copy).
    const char* v1 = R"sql(
      CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL,
        name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, idempotency_key TEXT,
        created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL);
      CREATE UNIQUE INDEX jobs_idempotency ON jobs(tenant, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
      CREATE TABLE job_events (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id),
        time_us INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL);
      CREATE INDEX job_events_job ON job_events(job_id, id);
      INSERT INTO jobs VALUES (1, 'old', 'legacy', '{}', 'running', 1, 'k', 5, 6);
      PRAGMA user_version=1;)sql";
    ASSERT_EQ(sqlite3_exec(db, v1, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->open_report().schema_version_found, 1);
  EXPECT_EQ(store->open_report().schema_version, SqliteJobStore::kSchemaVersion);
  EXPECT_EQ(store->open_report().jobs_by_state.at(JobState::kRunning), 1);
  EXPECT_EQ(store->Get(1).value().name, "legacy");
  EXPECT_TRUE(store->SetNodeAdmin({"n1", NodeAdmin::kCordoned, "", "", {}}).ok());
}

// Issue 15: the schema that added the placement and bad-node columns, from a database the
// previous version (v2) wrote: its jobs keep everything and have no placement on record.
TEST_F(SqliteJobStoreTest, MigratesAVersion2Database) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    // The v2 schema as released (frozen copy).
    const char* v2 = R"sql(
      CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL,
        name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, idempotency_key TEXT,
        created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL);
      CREATE UNIQUE INDEX jobs_idempotency ON jobs(tenant, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
      CREATE TABLE job_events (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id),
        time_us INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL);
      CREATE INDEX job_events_job ON job_events(job_id, id);
      CREATE TABLE node_admin (node TEXT PRIMARY KEY, admin TEXT NOT NULL, reason TEXT NOT NULL,
        set_by TEXT NOT NULL, updated_us INTEGER NOT NULL);
      CREATE INDEX jobs_state ON jobs(state, id);
      CREATE INDEX jobs_tenant_state ON jobs(tenant, state, id);
      INSERT INTO jobs VALUES (1, 'old', 'legacy', '{}', 'running', 1, NULL, 5, 6);
      INSERT INTO job_events VALUES (1, 1, 6, 'placed', 'placed on gpu001 [alloc gpu001:0xff]');
      INSERT INTO node_admin VALUES ('gpu002', 'draining', 'bad fan', 'ops', 7);
      PRAGMA user_version=2;)sql";
    ASSERT_EQ(sqlite3_exec(db, v2, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->open_report().schema_version_found, 2);
  EXPECT_EQ(store->open_report().schema_version, SqliteJobStore::kSchemaVersion);
  const JobRecord job = store->Get(1).value();
  EXPECT_EQ(job.name, "legacy");
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_TRUE(job.placement.empty());
  EXPECT_TRUE(job.bad_nodes.empty());
  EXPECT_EQ(store->ListNodeAdmin().value().size(), 1u);
  EXPECT_TRUE(store->ListNodeHealth().value().empty());
  StateChange bind{{JobState::kRunning}, JobState::kRunning, "placed", "moved"};
  bind.placement = std::vector<PlacedNode>{{"gpu003", 0xff}};
  ASSERT_TRUE(store->Transition(1, bind).ok());
  EXPECT_EQ(store->Get(1).value().placement[0].node, "gpu003");
}

// Issue 15 (replay): the schema that added the scheduler's history, from a database the previous
// version (v3) wrote: everything stays, and the history starts empty.
TEST_F(SqliteJobStoreTest, MigratesAVersion3Database) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    // The v3 schema as released (frozen copy).
    const char* v3 = R"sql(
      CREATE TABLE jobs (id INTEGER PRIMARY KEY AUTOINCREMENT, tenant TEXT NOT NULL,
        name TEXT NOT NULL, spec TEXT NOT NULL, state TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, idempotency_key TEXT,
        created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,
        placement TEXT NOT NULL DEFAULT '', bad_nodes TEXT NOT NULL DEFAULT '');
      CREATE UNIQUE INDEX jobs_idempotency ON jobs(tenant, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
      CREATE TABLE job_events (id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL REFERENCES jobs(id),
        time_us INTEGER NOT NULL, kind TEXT NOT NULL, message TEXT NOT NULL);
      CREATE INDEX job_events_job ON job_events(job_id, id);
      CREATE TABLE node_admin (node TEXT PRIMARY KEY, admin TEXT NOT NULL, reason TEXT NOT NULL,
        set_by TEXT NOT NULL, updated_us INTEGER NOT NULL);
      CREATE INDEX jobs_state ON jobs(state, id);
      CREATE INDEX jobs_tenant_state ON jobs(tenant, state, id);
      CREATE TABLE node_health (node TEXT PRIMARY KEY, condition TEXT NOT NULL,
        rules TEXT NOT NULL, updated_us INTEGER NOT NULL);
      CREATE TABLE store_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      INSERT INTO jobs VALUES (1, 'old', 'legacy', '{}', 'running', 1, NULL, 5, 6,
        '[{"node":"gpu001","mask":255}]', '');
      INSERT INTO node_health VALUES ('gpu002', 'down', '["xid-79"]', 7);
      INSERT INTO store_state VALUES ('open', '0');
      PRAGMA user_version=3;)sql";
    ASSERT_EQ(sqlite3_exec(db, v3, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->open_report().schema_version_found, 3);
  EXPECT_EQ(store->open_report().schema_version, SqliteJobStore::kSchemaVersion);
  const JobRecord job = store->Get(1).value();
  EXPECT_EQ(job.name, "legacy");
  ASSERT_EQ(job.placement.size(), 1u);
  EXPECT_EQ(job.placement[0].node, "gpu001");
  EXPECT_EQ(store->ListNodeHealth().value().size(), 1u);
  EXPECT_TRUE(store->History(0, 10).value().empty());
  ASSERT_TRUE(store->AppendHistory(R"({"type":"cycle"})", 0).ok());
  EXPECT_EQ(store->History(0, 10).value().size(), 1u);
}

// `baton export` reads the history of a database a daemon holds (locked), without the lock.
TEST_F(SqliteJobStoreTest, HistoryIsReadableWhileTheDatabaseIsLocked) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendHistory("first", 0).ok());
  ASSERT_TRUE(store->AppendHistory("second", 0).ok());
  auto lines = SqliteJobStore::ReadHistory(path_, 0, 10);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1].text, "second");
  EXPECT_EQ(SqliteJobStore::ReadHistory(path_ + "-none", 0, 10).status().code(),
            StatusCode::kNotFound);
}

// Issue 15: the lock was on a side file "<path>.lock", so a second daemon reaching the same
// database by another name (a symlink) opened it too.
TEST_F(SqliteJobStoreTest, SecondOpenThroughAnotherNameIsRefused) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const std::string link = path_ + "-link";
  fs::create_symlink(path_, link);
  SqliteStoreOptions o;
  o.path = link;
  auto second = SqliteJobStore::Open(o);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition) << second.status().ToString();
  EXPECT_TRUE(store->Submit(NewJob{"t", "train", "{}", ""}).ok());
}

// Issue 15: a 0-byte database file was taken for a new database.
TEST_F(SqliteJobStoreTest, EmptyDatabaseFileIsRefused) {
  { std::ofstream touch(path_); }
  ASSERT_EQ(fs::file_size(path_), 0u);
  SqliteStoreOptions o;
  o.path = path_;
  auto store = SqliteJobStore::Open(o);
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition) << store.status().ToString();
  EXPECT_NE(store.status().message().find("0 bytes"), std::string::npos);
  EXPECT_EQ(fs::file_size(path_), 0u) << "changed nothing";
}

// Writes `jobs` acknowledged submissions from a child process that then dies without closing
// the database (as kill -9 leaves it): the write-ahead log holds every one of them.
void CrashAfterSubmitting(const std::string& path, int jobs) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    SqliteStoreOptions o;
    o.path = path;
    auto store = SqliteJobStore::Open(o);
    if (!store.ok()) ::_exit(2);
    for (int i = 0; i < jobs; ++i) {
      if (!(*store)->Submit(NewJob{"t", "train", "{}", ""}).ok()) ::_exit(3);
    }
    ::_exit(0);  // no destructor: as kill -9 leaves it
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// Issue 15: after a crash, deleting the -wal lost the jobs it held while the log said "clean".
TEST_F(SqliteJobStoreTest, AWriteAheadLogDeletedAfterACrashIsReported) {
  ASSERT_NO_FATAL_FAILURE(CrashAfterSubmitting(path_, 5));
  ASSERT_TRUE(fs::exists(path_ + "-wal"));
  fs::remove(path_ + "-wal");
  fs::remove(path_ + "-shm");
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->open_report().wal_missing_after_crash);
  EXPECT_NE(store->open_report().ToString().find("NOT CLEAN"), std::string::npos)
      << store->open_report().ToString();
  EXPECT_EQ(store->open_report().ToString().find(", clean"), std::string::npos);
  // A crash that kept its log is a plain recovery; a clean close is clean.
  store.reset();
  EXPECT_FALSE(Open()->open_report().recovered_after_crash);
}

// Found by the crash test under load: a daemon killed before its first write after open left an
// empty (checkpointed) -wal, and the next open reported the log as deleted ("writes acknowledged
// after its last checkpoint are lost") although nothing was lost.
TEST_F(SqliteJobStoreTest, ACrashBeforeAnyWriteIsAPlainRecovery) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    SqliteStoreOptions o;
    o.path = path_;
    auto store = SqliteJobStore::Open(o);
    ::_exit(store.ok() ? 0 : 2);  // no destructor, no write: as kill -9 right after start
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->open_report().recovered_after_crash);
  EXPECT_FALSE(store->open_report().wal_missing_after_crash) << store->open_report().ToString();
}

std::int64_t JobCount(SqliteJobStore& store) {
  Result<std::map<JobState, std::int64_t>> counts = store.CountByState();
  EXPECT_TRUE(counts.ok()) << counts.status().ToString();
  std::int64_t n = 0;
  if (counts.ok()) {
    for (const auto& [state, count] : *counts) n += count;
  }
  return n;
}

// Issue 30: a -wal truncated or bit-flipped after a crash lost acknowledged jobs while the report
// said only "recovered after an unclean shutdown". Each damage is NOT CLEAN, with the frames
// recovery dropped.
TEST_F(SqliteJobStoreTest, AWriteAheadLogCutMidFrameIsReportedNotClean) {
  constexpr int kJobs = 20;
  ASSERT_NO_FATAL_FAILURE(CrashAfterSubmitting(path_, kJobs));
  const std::string wal = path_ + "-wal";
  Result<WalScan> intact = ScanWriteAheadLog(wal);
  ASSERT_TRUE(intact.ok()) << intact.status().ToString();
  ASSERT_TRUE(intact->damage.empty()) << intact->damage;
  ASSERT_GT(intact->frames, 4);
  const std::uintmax_t frame_bytes = 24 + static_cast<std::uintmax_t>(intact->page_size);
  // Half of the last frame's page is gone.
  fs::resize_file(wal, fs::file_size(wal) - frame_bytes / 2);

  auto store = Open();
  ASSERT_NE(store, nullptr);
  const OpenReport& report = store->open_report();
  EXPECT_FALSE(report.wal_missing_after_crash);
  EXPECT_GE(report.wal_frames_dropped, 1);
  EXPECT_NE(report.ToString().find("NOT CLEAN"), std::string::npos) << report.ToString();
  EXPECT_NE(report.ToString().find(std::to_string(report.wal_frames_dropped) + " frames dropped"),
            std::string::npos)
      << report.ToString();
  EXPECT_NE(report.ToString().find("ends "), std::string::npos) << report.ToString();
  EXPECT_LT(JobCount(*store), kJobs) << "the last submission went with its frames";
}

TEST_F(SqliteJobStoreTest, AWriteAheadLogFailingItsChecksumIsReportedNotClean) {
  constexpr int kJobs = 20;
  ASSERT_NO_FATAL_FAILURE(CrashAfterSubmitting(path_, kJobs));
  const std::string wal = path_ + "-wal";
  Result<WalScan> intact = ScanWriteAheadLog(wal);
  ASSERT_TRUE(intact.ok()) << intact.status().ToString();
  ASSERT_GT(intact->frames, 4);
  {
    // One bit of frame 2's page: SQLite drops frame 2 and everything after it.
    std::fstream f(wal, std::ios::in | std::ios::out | std::ios::binary);
    const std::streamoff at = 32 + (24 + intact->page_size) + 24 + 100;
    f.seekg(at);
    char byte = 0;
    f.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    f.seekp(at);
    f.write(&byte, 1);
  }
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const OpenReport& report = store->open_report();
  EXPECT_GE(report.wal_frames_dropped, intact->frames - 1) << report.ToString();
  EXPECT_NE(report.ToString().find("NOT CLEAN"), std::string::npos) << report.ToString();
  EXPECT_NE(report.ToString().find("fails its checksum at frame 2 of"), std::string::npos)
      << report.ToString();
  EXPECT_NE(report.ToString().find(std::to_string(report.wal_frames_dropped) + " frames dropped"),
            std::string::npos)
      << report.ToString();
  EXPECT_LT(JobCount(*store), kJobs - 5);
}

// What a kill -9 alone leaves is not damage: a whole log, or one that ends with a frame header
// whose page was not written yet (SQLite writes them with two writes).
TEST_F(SqliteJobStoreTest, AnIntactOrTornAppendLogIsAPlainRecovery) {
  ASSERT_NO_FATAL_FAILURE(CrashAfterSubmitting(path_, 5));
  {
    auto store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_TRUE(store->open_report().recovered_after_crash);
    EXPECT_TRUE(store->open_report().not_clean.empty()) << store->open_report().ToString();
    EXPECT_EQ(JobCount(*store), 5);
  }
  ASSERT_NO_FATAL_FAILURE(CrashAfterSubmitting(path_, 5));
  const std::string wal = path_ + "-wal";
  Result<WalScan> intact = ScanWriteAheadLog(wal);
  ASSERT_TRUE(intact.ok() && intact->frames > 1);
  // The last frame's header stays, its page is gone.
  fs::resize_file(wal, fs::file_size(wal) - static_cast<std::uintmax_t>(intact->page_size));
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->open_report().recovered_after_crash);
  EXPECT_TRUE(store->open_report().not_clean.empty()) << store->open_report().ToString();
}

TEST(ScanWriteAheadLogTest, MissingEmptyAndInvalidHeaders) {
  const fs::path dir =
      fs::temp_directory_path() / ("baton_wal_scan_test_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string wal = (dir / "x.db-wal").string();
  Result<WalScan> missing = ScanWriteAheadLog(wal);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->exists);
  std::ofstream(wal).close();
  EXPECT_TRUE(ScanWriteAheadLog(wal)->exists);
  EXPECT_TRUE(ScanWriteAheadLog(wal)->damage.empty());
  std::ofstream(wal) << "short";
  EXPECT_NE(ScanWriteAheadLog(wal)->damage.find("shorter than its 32-byte header"),
            std::string::npos);
  std::ofstream(wal) << std::string(4096, 'x');
  EXPECT_NE(ScanWriteAheadLog(wal)->damage.find("invalid header (bad magic number)"),
            std::string::npos);
  EXPECT_EQ(ScanWriteAheadLog(wal)->frames_dropped, -1);
  fs::remove_all(dir);
}

TEST_F(SqliteJobStoreTest, RefusesANewerSchema) {
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  SqliteStoreOptions o;
  o.path = path_;
  auto store = SqliteJobStore::Open(o);
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);
}

}  // namespace
}  // namespace baton::server
