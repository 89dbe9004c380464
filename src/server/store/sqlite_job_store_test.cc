#include "server/store/sqlite_job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "server/store/job_store_contract_test.h"

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
  EXPECT_EQ(store->open_report().schema_version, 2);
  EXPECT_EQ(store->open_report().jobs_by_state.at(JobState::kRunning), 1);
  EXPECT_EQ(store->Get(1).value().name, "legacy");
  EXPECT_TRUE(store->SetNodeAdmin({"n1", NodeAdmin::kCordoned, "", "", {}}).ok());
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
