#include "server/store/postgres_job_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <iostream>
#include <memory>
#include <pqxx/pqxx>
#include <thread>

#include "server/store/job_store_contract_test.h"
#include "server/store/leader_lease.h"
#include "server/store/testing/postgres_server.h"

// libpqxx 6.4 leaks the libpq result of a statement that fails because the server dropped the
// connection (ReconnectsAfterTheServerDropsItsConnections does that on purpose). Only
// allocations made inside libpqxx are ignored: a connection the store forgot to free would still
// be reported, from the store's own frames.
// NOLINTNEXTLINE(bugprone-reserved-identifier): LeakSanitizer's hook, which must be spelled so.
extern "C" const char* __lsan_default_suppressions() { return "leak:libpqxx-6.4.so\n"; }

namespace baton::server {
namespace {

// One server per test process (initdb takes a second or two), started by the first test that
// needs it and stopped when the process exits; one fresh database per test.
struct SharedServer {
  Status status = Status::Ok();
  bool skip = false;
  std::unique_ptr<testing::PostgresServer> server;
};

SharedServer& Server() {
  static SharedServer* shared = [] {
    auto* s = new SharedServer;
    auto started = testing::PostgresServer::Start();
    if (started.ok()) {
      s->server = std::move(started).value();
    } else {
      s->status = started.status();
      s->skip = started.status().code() == StatusCode::kNotFound;
    }
    // Stopped at exit, pass or fail (and by the guardian if the process dies without exiting).
    std::atexit([] { Server().server.reset(); });
    return s;
  }();
  return *shared;
}

class PostgresBackend {
 public:
  using Store = PostgresJobStore;
  static constexpr int kSchemaVersion = PostgresJobStore::kSchemaVersion;

  std::string SetUp() {
    SharedServer& shared = Server();
    if (shared.skip) return "PostgreSQL is not available: " + shared.status.message();
    if (!shared.status.ok()) {
      ADD_FAILURE() << "cannot start PostgreSQL: " << shared.status.ToString();
      return "the PostgreSQL server did not start";
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(info->test_suite_name()) + "_" + info->name();
    for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? std::tolower(c) : '_';
    name = name.substr(0, 60);  // identifiers are at most 63 bytes
    auto url = shared.server->CreateDatabase(name);
    if (!url.ok()) {
      ADD_FAILURE() << url.status().ToString();
      return "no database";
    }
    url_ = *url;
    return "";
  }
  void TearDown() {
    if (::testing::Test::HasFailure() && Server().server != nullptr) {
      std::string log = Server().server->Log();
      std::cerr << "PostgreSQL server log (last 4000 bytes):\n"
                << log.substr(log.size() > 4000 ? log.size() - 4000 : 0) << "\n";
    }
  }

  Result<std::unique_ptr<PostgresJobStore>> Open(const Clock* clock, bool group_commit) {
    PostgresStoreOptions o;
    o.url = url_;
    o.clock = clock;
    o.group_commit = group_commit;
    o.lock_wait = Seconds(1);
    return PostgresJobStore::Open(o);
  }

  const std::string& url() const { return url_; }

 private:
  std::string url_;
};

INSTANTIATE_TYPED_TEST_SUITE_P(Postgres, JobStoreContractTest, PostgresBackend);

// What only the PostgreSQL store does: its schema version table, connection strings, losing and
// regaining its connection.
class PostgresJobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string skip = backend_.SetUp();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  void TearDown() override { backend_.TearDown(); }

  std::unique_ptr<PostgresJobStore> Open() {
    auto store = backend_.Open(&clock_, true);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  void Sql(const std::string& sql) {
    pqxx::connection c(backend_.url());
    pqxx::nontransaction q(c);
    q.exec(sql);
  }

  PostgresBackend backend_;
  ManualClock clock_{TimePoint{Seconds(1000)}};
};

TEST_F(PostgresJobStoreTest, RecordsItsSchemaVersion) {
  ASSERT_NE(Open(), nullptr);
  pqxx::connection c(backend_.url());
  pqxx::nontransaction q(c);
  EXPECT_EQ(q.exec1("SELECT MAX(version) FROM schema_version")[0].as<int>(),
            PostgresJobStore::kSchemaVersion);
}

// Issue 15: the schema that added the placement and bad-node columns, from a database the
// previous version (v1) wrote: its jobs keep everything and have no placement on record.
TEST_F(PostgresJobStoreTest, MigratesAVersion1Database) {
  // The v1 schema as released (frozen copy).
  Sql(R"sql(
    CREATE TABLE schema_version (version integer PRIMARY KEY, applied_us bigint NOT NULL);
    CREATE TABLE jobs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL,
      name text NOT NULL, spec text NOT NULL,
      state text NOT NULL CHECK (state IN ('queued', 'running', 'cancelling', 'succeeded',
                                            'failed', 'cancelled')),
      attempts integer NOT NULL DEFAULT 0, idempotency_key text,
      created_us bigint NOT NULL, updated_us bigint NOT NULL);
    CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant, idempotency_key)
      WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_state ON jobs (state, id);
    CREATE INDEX jobs_tenant_state ON jobs (tenant, state, id);
    CREATE TABLE job_events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      job_id bigint NOT NULL REFERENCES jobs (id), time_us bigint NOT NULL, kind text NOT NULL,
      message text NOT NULL);
    CREATE INDEX job_events_job ON job_events (job_id, id);
    CREATE TABLE node_admin (node text PRIMARY KEY, admin text NOT NULL, reason text NOT NULL,
      set_by text NOT NULL, updated_us bigint NOT NULL);
    CREATE TABLE daemon_session (id integer PRIMARY KEY CHECK (id = 1), open boolean NOT NULL,
      opened_us bigint NOT NULL);
    INSERT INTO daemon_session VALUES (1, false, 0);
    INSERT INTO schema_version VALUES (1, 5);
    INSERT INTO jobs (tenant, name, spec, state, attempts, idempotency_key, created_us,
      updated_us) VALUES ('old', 'legacy', '{}', 'running', 1, NULL, 5, 6);
    INSERT INTO job_events (job_id, time_us, kind, message)
      VALUES (1, 6, 'placed', 'placed on gpu001 [alloc gpu001:0xff]');
    )sql");
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->open_report().schema_version_found, 1);
  EXPECT_EQ(store->open_report().schema_version, PostgresJobStore::kSchemaVersion);
  const JobRecord job = store->Get(1).value();
  EXPECT_EQ(job.name, "legacy");
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_TRUE(job.placement.empty());
  EXPECT_TRUE(job.bad_nodes.empty());
  EXPECT_TRUE(store->ListNodeHealth().value().empty());
  StateChange bind{{JobState::kRunning}, JobState::kRunning, "placed", "moved"};
  bind.placement = std::vector<PlacedNode>{{"gpu003", 0xff}};
  ASSERT_TRUE(store->Transition(1, bind).ok());
  EXPECT_EQ(store->Get(1).value().placement[0].node, "gpu003");
  EXPECT_EQ(store->Get(1).value().attempts, 1);
}

// Issue 15 (replay): the schema that added the scheduler's history, from a database the previous
// version (v2) wrote: everything stays, and the history starts empty.
TEST_F(PostgresJobStoreTest, MigratesAVersion2Database) {
  // The v2 schema as released (frozen copy).
  Sql(R"sql(
    CREATE TABLE schema_version (version integer PRIMARY KEY, applied_us bigint NOT NULL);
    CREATE TABLE jobs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, tenant text NOT NULL,
      name text NOT NULL, spec text NOT NULL,
      state text NOT NULL CHECK (state IN ('queued', 'running', 'cancelling', 'succeeded',
                                            'failed', 'cancelled')),
      attempts integer NOT NULL DEFAULT 0, idempotency_key text,
      created_us bigint NOT NULL, updated_us bigint NOT NULL);
    CREATE UNIQUE INDEX jobs_idempotency ON jobs (tenant, idempotency_key)
      WHERE idempotency_key IS NOT NULL;
    CREATE INDEX jobs_state ON jobs (state, id);
    CREATE INDEX jobs_tenant_state ON jobs (tenant, state, id);
    CREATE TABLE job_events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      job_id bigint NOT NULL REFERENCES jobs (id), time_us bigint NOT NULL, kind text NOT NULL,
      message text NOT NULL);
    CREATE INDEX job_events_job ON job_events (job_id, id);
    CREATE TABLE node_admin (node text PRIMARY KEY, admin text NOT NULL, reason text NOT NULL,
      set_by text NOT NULL, updated_us bigint NOT NULL);
    CREATE TABLE daemon_session (id integer PRIMARY KEY CHECK (id = 1), open boolean NOT NULL,
      opened_us bigint NOT NULL);
    INSERT INTO daemon_session VALUES (1, false, 0);
    ALTER TABLE jobs ADD COLUMN placement jsonb NOT NULL DEFAULT '[]';
    ALTER TABLE jobs ADD COLUMN bad_nodes jsonb NOT NULL DEFAULT '[]';
    CREATE TABLE node_health (node text PRIMARY KEY, condition text NOT NULL,
      rules jsonb NOT NULL, updated_us bigint NOT NULL);
    INSERT INTO schema_version VALUES (1, 5), (2, 6);
    INSERT INTO jobs (tenant, name, spec, state, attempts, idempotency_key, created_us,
      updated_us, placement) VALUES ('old', 'legacy', '{}', 'running', 1, NULL, 5, 6,
      '[{"node":"gpu001","mask":255}]');
    INSERT INTO node_health VALUES ('gpu002', 'down', '["xid-79"]', 7);
    )sql");
  auto store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->open_report().schema_version_found, 2);
  EXPECT_EQ(store->open_report().schema_version, PostgresJobStore::kSchemaVersion);
  const JobRecord job = store->Get(1).value();
  EXPECT_EQ(job.name, "legacy");
  ASSERT_EQ(job.placement.size(), 1u);
  EXPECT_EQ(job.placement[0].node, "gpu001");
  EXPECT_EQ(store->ListNodeHealth().value().size(), 1u);
  EXPECT_TRUE(store->History(0, 10).value().empty());
  ASSERT_TRUE(store->AppendHistory(R"({"type":"cycle"})", 0).ok());
  EXPECT_EQ(store->History(0, 10).value().size(), 1u);
}

// `baton export` reads the history while a daemon holds the database's lock.
TEST_F(PostgresJobStoreTest, HistoryIsReadableWhileADaemonHoldsTheDatabase) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->AppendHistory("first", 0).ok());
  ASSERT_TRUE(store->AppendHistory("second", 0).ok());
  auto lines = PostgresJobStore::ReadHistory(backend_.url(), 0, 10);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1].text, "second");
  EXPECT_EQ(PostgresJobStore::ReadHistory(backend_.url(), (*lines)[0].seq, 10)->size(), 1u);
}

TEST_F(PostgresJobStoreTest, RefusesANewerSchema) {
  ASSERT_NE(Open(), nullptr);
  Sql("INSERT INTO schema_version VALUES (99, 0)");
  PostgresStoreOptions o;
  o.url = backend_.url();
  auto store = PostgresJobStore::Open(o);
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer"), std::string::npos);
}

TEST_F(PostgresJobStoreTest, UnreachableServerIsUnavailableAndThePasswordStaysSecret) {
  // Port 1 on loopback: nothing listens there.
  PostgresStoreOptions o;
  o.url = "postgresql://baton:s3cret@127.0.0.1:1/baton?connect_timeout=2";
  auto store = PostgresJobStore::Open(o);
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable) << store.status().ToString();
  EXPECT_EQ(store.status().message().find("s3cret"), std::string::npos) << store.status().message();
  EXPECT_NE(store.status().message().find("baton:***@127.0.0.1:1"), std::string::npos)
      << store.status().message();
}

TEST_F(PostgresJobStoreTest, ReconnectsAfterTheServerDropsItsConnections) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  JobId before = store->Submit(NewJob{"t", "train", "{}", "k"}).value().job.id;
  // What a server restart or an administrator does to every connection of the store.
  Sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
      "AND pid <> pg_backend_pid()");
  // The first write and read after the loss may fail (kUnavailable); the next ones reconnect.
  Result<SubmitResult> after = store->Submit(NewJob{"t", "train", "{}", "k2"});
  if (!after.ok()) {
    EXPECT_EQ(after.status().code(), StatusCode::kUnavailable) << after.status().ToString();
    after = store->Submit(NewJob{"t", "train", "{}", "k2"});
  }
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GT(after->job.id, before);
  for (int i = 0; i < 8; ++i) (void)store->Get(before);  // every reader meets the loss once
  EXPECT_TRUE(store->Get(before).ok());
  EXPECT_FALSE(store->Submit(NewJob{"t", "train", "{}", "k"}).value().created);
  // The reconnected writer holds the daemon lock again.
  PostgresStoreOptions o;
  o.url = backend_.url();
  o.lock_wait = Seconds(0);
  EXPECT_EQ(PostgresJobStore::Open(o).status().code(), StatusCode::kFailedPrecondition);
}

// Replicas (leader_lease.h): one holder at a time, a takeover only after expiry, a higher epoch
// at each takeover, and the deposed holder's renewals refused.
TEST_F(PostgresJobStoreTest, TheLeaderLeaseHasOneHolderAndEachTakeoverRaisesTheEpoch) {
  LeaderLeaseOptions a_options{backend_.url(), "a", "http://a:8080", Seconds(1)};
  LeaderLeaseOptions b_options{backend_.url(), "b", "http://b:8080", Seconds(1)};
  auto a = LeaderLease::Open(a_options);
  auto b = LeaderLease::Open(b_options);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << b.status().ToString();
  auto first = (*a)->TryAcquire();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status().ToString();
  EXPECT_EQ(**first, 1);
  auto refused = (*b)->TryAcquire();
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->has_value()) << "b took a live lease";
  auto seen = (*b)->Read();
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->url, "http://a:8080");
  EXPECT_TRUE(seen->live);
  EXPECT_TRUE(*(*a)->Renew(1));

  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // the server's clock: expiry
  auto second = (*b)->TryAcquire();
  ASSERT_TRUE(second.ok() && second->has_value());
  EXPECT_EQ(**second, 2);
  auto renewed = (*a)->Renew(1);
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed) << "the deposed holder renewed";
  // A clean stop hands over at once.
  ASSERT_TRUE((*b)->Release(2).ok());
  auto third = (*a)->TryAcquire();
  ASSERT_TRUE(third.ok() && third->has_value());
  EXPECT_EQ(**third, 3);
}

// The fence: a store opened at epoch 1 writes while epoch 1 holds the lease, and every write
// after a takeover (epoch 2) is refused by the server, changing nothing.
TEST_F(PostgresJobStoreTest, ADeposedLeadersWritesAreRefusedByTheServer) {
  auto lease = LeaderLease::Open({backend_.url(), "a", "http://a:8080", Seconds(1)});
  ASSERT_TRUE(lease.ok()) << lease.status().ToString();
  ASSERT_EQ(**(*lease)->TryAcquire(), 1);
  PostgresStoreOptions o;
  o.url = backend_.url();
  o.clock = &clock_;
  o.fencing_epoch = 1;
  auto store = PostgresJobStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  NewJob job{"team-a", "before", R"({"gpus": 1})", "k1"};
  ASSERT_TRUE((*store)->Submit(job).ok());

  // Another replica takes over (the lease expired under a paused leader).
  Sql("UPDATE baton_leader SET epoch = 2, holder = 'b'");
  job.idempotency_key = "k2";
  Result<SubmitResult> late = (*store)->Submit(job);
  EXPECT_EQ(late.status().code(), StatusCode::kUnavailable) << late.status().ToString();
  EXPECT_NE(late.status().message().find("superseded by epoch 2"), std::string::npos)
      << late.status().ToString();
  pqxx::connection c(backend_.url());
  pqxx::nontransaction q(c);
  EXPECT_EQ(q.exec1("SELECT COUNT(*) FROM jobs")[0].as<int>(), 1) << "a fenced write landed";
  // And from then on the store does not even send one.
  EXPECT_EQ((*store)->Submit(job).status().code(), StatusCode::kUnavailable);
}

TEST(PostgresUrlTest, RecognisesPostgresSchemes) {
  EXPECT_TRUE(IsPostgresUrl("postgresql://baton@db:5432/baton"));
  EXPECT_TRUE(IsPostgresUrl("postgres://db/baton"));
  EXPECT_FALSE(IsPostgresUrl("baton.db"));
  EXPECT_FALSE(IsPostgresUrl("/var/lib/baton/postgresql://x"));
}

}  // namespace
}  // namespace baton::server
