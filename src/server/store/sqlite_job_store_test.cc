#include "server/store/sqlite_job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <thread>
#include <vector>

namespace baton::server {
namespace {

namespace fs = std::filesystem;

class SqliteJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("baton_store_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "baton.db").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<SqliteJobStore> Open(bool group_commit = true) {
    SqliteStoreOptions o;
    o.path = path_;
    o.clock = &clock_;
    o.group_commit = group_commit;
    auto store = SqliteJobStore::Open(o);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  static NewJob Job(std::string tenant, std::string key = "") {
    return NewJob{std::move(tenant), "train", R"({"gpus":8})", std::move(key)};
  }

  fs::path dir_;
  std::string path_;
  ManualClock clock_{TimePoint{Seconds(1000)}};
};

TEST_F(SqliteJobStoreTest, NewDatabaseReportsFreshSchema) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  const OpenReport& r = store->open_report();
  EXPECT_EQ(r.schema_version_found, 0);
  EXPECT_EQ(r.schema_version, SqliteJobStore::kSchemaVersion);
  EXPECT_FALSE(r.recovered_after_crash);
  EXPECT_EQ(r.jobs_by_state.at(JobState::kQueued), 0);
}

TEST_F(SqliteJobStoreTest, SubmitGetAndEvents) {
  auto store = Open();
  auto r = store->Submit(Job("team-a"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_GT(r->job.id, 0);
  EXPECT_EQ(r->job.state, JobState::kQueued);
  EXPECT_EQ(r->job.created_at.since_epoch.value(), 1000);

  auto got = store->Get(r->job.id);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tenant, "team-a");
  EXPECT_EQ(got->spec_json, R"({"gpus":8})");
  EXPECT_TRUE(got->idempotency_key.empty());

  auto events = store->Events(r->job.id, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "queued");

  EXPECT_EQ(store->Get(12345).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Events(12345, 10).status().code(), StatusCode::kNotFound);
}

TEST_F(SqliteJobStoreTest, IdempotencyKeyIsPerTenant) {
  auto store = Open();
  auto a = store->Submit(Job("team-a", "k1"));
  auto again = store->Submit(Job("team-a", "k1"));
  auto b = store->Submit(Job("team-b", "k1"));
  ASSERT_TRUE(a.ok() && again.ok() && b.ok());
  EXPECT_TRUE(a->created);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, a->job.id);
  EXPECT_TRUE(b->created);
  EXPECT_NE(b->job.id, a->job.id);
  auto counts = store->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->at(JobState::kQueued), 2);
}

TEST_F(SqliteJobStoreTest, TransitionsAreConditionalAndRecorded) {
  auto store = Open();
  JobId id = store->Submit(Job("t")).value().job.id;
  auto running = store->Transition(
      id, {{JobState::kQueued}, JobState::kRunning, "placed", "on n[01-04]: best leaf fit"});
  ASSERT_TRUE(running.ok()) << running.status().ToString();
  EXPECT_EQ(running->attempts, 1);
  auto bad = store->Transition(id, {{JobState::kQueued}, JobState::kCancelled, "", ""});
  EXPECT_EQ(bad.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(bad.status().message().find("running"), std::string::npos);
  ASSERT_TRUE(
      store
          ->Transition(
              id, {{JobState::kRunning}, JobState::kQueued, "preempted", "by job 7 (priority 10)"})
          .ok());
  ASSERT_TRUE(
      store->Transition(id, {{JobState::kQueued}, JobState::kRunning, "restarted", ""}).ok());
  ASSERT_TRUE(store->AppendEvent(id, "note", "checkpoint at step 100").ok());
  EXPECT_EQ(store->AppendEvent(999, "note", "x").code(), StatusCode::kNotFound);

  auto job = store->Get(id).value();
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempts, 2);
  auto events = store->Events(id, 100).value();
  std::vector<std::string> kinds;
  for (const auto& e : events) kinds.push_back(e.kind);
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"queued", "placed", "preempted", "restarted", "note"}));
  EXPECT_EQ(events[1].message, "on n[01-04]: best leaf fit");
}

TEST_F(SqliteJobStoreTest, ListFiltersAndPages) {
  auto store = Open();
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(store->Submit(Job(i % 2 ? "odd" : "even")).ok());
  JobFilter f;
  f.tenant = "even";
  f.limit = 3;
  auto p1 = store->List(f).value();
  ASSERT_EQ(p1.jobs.size(), 3u);
  ASSERT_TRUE(p1.next_after.has_value());
  f.after = *p1.next_after;
  auto p2 = store->List(f).value();
  ASSERT_EQ(p2.jobs.size(), 1u);
  EXPECT_FALSE(p2.next_after.has_value());
  EXPECT_GT(p2.jobs[0].id, p1.jobs[2].id);

  ASSERT_TRUE(store->Transition(p2.jobs[0].id, {{}, JobState::kCancelled, "", ""}).ok());
  JobFilter by_state;
  by_state.state = JobState::kCancelled;
  EXPECT_EQ(store->List(by_state).value().jobs.size(), 1u);
  by_state.limit = 0;
  EXPECT_EQ(store->List(by_state).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(SqliteJobStoreTest, NodeAdminStateRoundTrips) {
  auto store = Open();
  ASSERT_TRUE(store->SetNodeAdmin({"n01", NodeAdmin::kCordoned, "bad PSU", "admin", {}}).ok());
  ASSERT_TRUE(store->SetNodeAdmin({"n02", NodeAdmin::kDraining, "XID 79", "health", {}}).ok());
  ASSERT_TRUE(store->SetNodeAdmin({"n01", NodeAdmin::kDraining, "bad PSU", "admin", {}}).ok());
  auto nodes = store->ListNodeAdmin().value();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].node, "n01");
  EXPECT_EQ(nodes[0].admin, NodeAdmin::kDraining);
  EXPECT_EQ(nodes[1].reason, "XID 79");
  ASSERT_TRUE(store->SetNodeAdmin({"n01", NodeAdmin::kActive, "", "admin", {}}).ok());
  EXPECT_EQ(store->ListNodeAdmin().value().size(), 1u);
}

TEST_F(SqliteJobStoreTest, StateSurvivesReopen) {
  JobId id;
  {
    auto store = Open();
    id = store->Submit(Job("t", "key")).value().job.id;
    ASSERT_TRUE(store->SetNodeAdmin({"n09", NodeAdmin::kCordoned, "r", "a", {}}).ok());
  }
  EXPECT_FALSE(fs::exists(path_ + "-wal")) << "a clean close removes the WAL";
  auto store = Open();
  EXPECT_FALSE(store->open_report().recovered_after_crash);
  EXPECT_EQ(store->open_report().jobs_by_state.at(JobState::kQueued), 1);
  EXPECT_EQ(store->open_report().node_admin_entries, 1);
  auto again = store->Submit(Job("t", "key")).value();
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.job.id, id);
  // Ids are never reused, even after the highest one is gone from view.
  EXPECT_GT(store->Submit(Job("t")).value().job.id, id);
}

TEST_F(SqliteJobStoreTest, SecondOpenOfTheSameFileIsRefused) {
  auto store = Open();
  SqliteStoreOptions o;
  o.path = path_;
  auto second = SqliteJobStore::Open(o);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(SqliteJobStoreTest, KilledWriterIsRecoveredWithEveryAcknowledgedJob) {
  // The child submits jobs, reports each acknowledged one through a pipe, and dies without
  // closing the store (as kill -9 would leave it).
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    SqliteStoreOptions o;
    o.path = path_;
    auto store = SqliteJobStore::Open(o);
    if (!store.ok()) ::_exit(2);
    for (int i = 0; i < 50; ++i) {
      auto r = (*store)->Submit(Job("t", std::to_string(i)));
      if (!r.ok()) ::_exit(3);
      JobId id = r->job.id;
      if (::write(fds[1], &id, sizeof id) != sizeof id) ::_exit(4);
    }
    ::_exit(0);  // no destructor: the WAL stays behind
  }
  ::close(fds[1]);
  std::vector<JobId> acked;
  JobId id;
  while (::read(fds[0], &id, sizeof id) == sizeof id) acked.push_back(id);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ASSERT_EQ(acked.size(), 50u);
  EXPECT_TRUE(fs::exists(path_ + "-wal"));

  auto store = Open();
  EXPECT_TRUE(store->open_report().recovered_after_crash);
  EXPECT_EQ(store->open_report().jobs_by_state.at(JobState::kQueued), 50);
  for (JobId a : acked) EXPECT_TRUE(store->Get(a).ok()) << a;
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

TEST_F(SqliteJobStoreTest, ConcurrentSubmittersShareTransactions) {
  auto store = Open();
  constexpr int kThreads = 16, kPerThread = 40;
  std::vector<std::thread> threads;
  std::vector<std::vector<JobId>> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Every key is submitted twice; the second must return the first's job.
        std::string key = std::to_string(t) + "-" + std::to_string(i);
        auto a = store->Submit(Job("t", key));
        auto b = store->Submit(Job("t", key));
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(a->job.id, b->job.id);
        ids[t].push_back(a->job.id);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<JobId> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(store->CountByState().value().at(JobState::kQueued), kThreads * kPerThread);
  // 1,280 writes; with batching far fewer transactions (the exact number depends on timing).
  EXPECT_LT(store->transactions_committed(), 2 * kThreads * kPerThread);
}

TEST_F(SqliteJobStoreTest, WithoutGroupCommitEachWriteIsItsOwnTransaction) {
  auto store = Open(/*group_commit=*/false);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->Submit(Job("t")).ok());
  EXPECT_EQ(store->transactions_committed(), 5);
}

}  // namespace
}  // namespace baton::server
