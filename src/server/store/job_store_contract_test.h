// The JobStore contract (job_store.h) as a typed test suite that every implementation's test
// instantiates with a Backend:
//
//   struct Backend {
//     using Store = ...;                       // the JobStore implementation
//     static constexpr int kSchemaVersion;     // Store::kSchemaVersion
//     std::string SetUp();                     // a fresh, empty database; non-empty: skip reason
//     void TearDown();
//     Result<std::unique_ptr<Store>> Open(const Clock* clock, bool group_commit);
//   };
//
// Store must also offer transactions_committed() (write transactions so far).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "server/store/job_store.h"

namespace baton::server {

template <typename Backend>
class JobStoreContractTest : public ::testing::Test {
 protected:
  using Store = typename Backend::Store;

  void SetUp() override {
    std::string skip = backend_.SetUp();
    if (!skip.empty()) GTEST_SKIP() << skip;
  }
  void TearDown() override { backend_.TearDown(); }

  std::unique_ptr<Store> Open(bool group_commit = true) {
    auto store = backend_.Open(&clock_, group_commit);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  static NewJob Job(std::string tenant, std::string key = "") {
    return NewJob{std::move(tenant), "train", R"({"gpus":8})", std::move(key)};
  }

  Backend backend_;
  ManualClock clock_{TimePoint{Seconds(1000)}};
};

TYPED_TEST_SUITE_P(JobStoreContractTest);

TYPED_TEST_P(JobStoreContractTest, NewDatabaseReportsFreshSchema) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  const OpenReport& r = store->open_report();
  EXPECT_EQ(r.schema_version_found, 0);
  EXPECT_EQ(r.schema_version, TypeParam::kSchemaVersion);
  EXPECT_FALSE(r.recovered_after_crash);
  EXPECT_EQ(r.jobs_by_state.at(JobState::kQueued), 0);
}

TYPED_TEST_P(JobStoreContractTest, SubmitGetAndEvents) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  auto r = store->Submit(this->Job("team-a"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->created);
  EXPECT_GT(r->job.id, 0);
  EXPECT_EQ(r->job.state, JobState::kQueued);
  EXPECT_EQ(r->job.created_at.since_epoch.value(), 1000);

  auto got = store->Get(r->job.id);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->tenant, "team-a");
  EXPECT_EQ(got->spec_json, R"({"gpus":8})");
  EXPECT_TRUE(got->idempotency_key.empty());
  EXPECT_EQ(got->created_at.since_epoch.value(), 1000);

  auto events = store->Events(r->job.id, 100);
  ASSERT_TRUE(events.ok()) << events.status().ToString();
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "queued");
  EXPECT_EQ((*events)[0].job, r->job.id);

  EXPECT_EQ(store->Get(12345).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Events(12345, 10).status().code(), StatusCode::kNotFound);
}

TYPED_TEST_P(JobStoreContractTest, IdempotencyKeyIsPerTenant) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  auto a = store->Submit(this->Job("team-a", "k1"));
  auto again = store->Submit(this->Job("team-a", "k1"));
  auto b = store->Submit(this->Job("team-b", "k1"));
  ASSERT_TRUE(a.ok() && again.ok() && b.ok());
  EXPECT_TRUE(a->created);
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, a->job.id);
  EXPECT_EQ(again->job.idempotency_key, "k1");
  EXPECT_TRUE(b->created);
  EXPECT_NE(b->job.id, a->job.id);
  auto counts = store->CountByState();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->at(JobState::kQueued), 2);
  EXPECT_EQ(store->Events(a->job.id, 100).value().size(), 1u) << "a repeat writes no event";
  auto found = store->FindByIdempotencyKey("team-a", "k1");
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->id, a->job.id);
  EXPECT_EQ((*found)->spec_json, a->job.spec_json);
  auto missing = store->FindByIdempotencyKey("team-c", "k1");
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TYPED_TEST_P(JobStoreContractTest, TransitionsAreConditionalAndRecorded) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  JobId id = store->Submit(this->Job("t")).value().job.id;
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
  EXPECT_EQ(store->Transition(999, {{}, JobState::kFailed, "", ""}).status().code(),
            StatusCode::kNotFound);

  auto job = store->Get(id).value();
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempts, 2);
  auto events = store->Events(id, 100).value();
  std::vector<std::string> kinds;
  for (const auto& e : events) kinds.push_back(e.kind);
  EXPECT_EQ(kinds,
            (std::vector<std::string>{"queued", "placed", "preempted", "restarted", "note"}));
  EXPECT_EQ(events[1].message, "on n[01-04]: best leaf fit");
  EXPECT_EQ(store->Events(id, 2).value().size(), 2u);
}

TYPED_TEST_P(JobStoreContractTest, ListFiltersAndPages) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 7; ++i) ASSERT_TRUE(store->Submit(this->Job(i % 2 ? "odd" : "even")).ok());
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
  by_state.tenant = "odd";
  EXPECT_EQ(store->List(by_state).value().jobs.size(), 0u);
  EXPECT_EQ(store->List(JobFilter{}).value().jobs.size(), 7u);
  by_state.limit = 0;
  EXPECT_EQ(store->List(by_state).status().code(), StatusCode::kInvalidArgument);
}

TYPED_TEST_P(JobStoreContractTest, NodeAdminStateRoundTrips) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SetNodeAdmin({"n01", NodeAdmin::kCordoned, "bad PSU", "admin", {}}).ok());
  ASSERT_TRUE(store->SetNodeAdmin({"n02", NodeAdmin::kDraining, "XID 79", "health", {}}).ok());
  ASSERT_TRUE(store->SetNodeAdmin({"n01", NodeAdmin::kDraining, "bad PSU", "admin", {}}).ok());
  auto nodes = store->ListNodeAdmin().value();
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[0].node, "n01");
  EXPECT_EQ(nodes[0].admin, NodeAdmin::kDraining);
  EXPECT_EQ(nodes[1].reason, "XID 79");
  EXPECT_EQ(nodes[1].by, "health");
  ASSERT_TRUE(store->SetNodeAdmin({"n01", NodeAdmin::kActive, "", "admin", {}}).ok());
  EXPECT_EQ(store->ListNodeAdmin().value().size(), 1u);
  EXPECT_EQ(store->SetNodeAdmin({"", NodeAdmin::kCordoned, "", "", {}}).code(),
            StatusCode::kInvalidArgument);
}

TYPED_TEST_P(JobStoreContractTest, ReopenReloadsEverything) {
  JobId keyed, moved;
  {
    auto store = this->Open();
    ASSERT_NE(store, nullptr);
    keyed = store->Submit(this->Job("t", "key")).value().job.id;
    moved = store->Submit(this->Job("u")).value().job.id;
    ASSERT_TRUE(store->Transition(moved, {{}, JobState::kRunning, "placed", "on n01"}).ok());
    ASSERT_TRUE(store->AppendEvent(moved, "note", "step 100").ok());
    ASSERT_TRUE(store->SetNodeAdmin({"n09", NodeAdmin::kCordoned, "r", "a", {}}).ok());
  }
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  const OpenReport& report = store->open_report();
  EXPECT_EQ(report.schema_version_found, TypeParam::kSchemaVersion);
  EXPECT_FALSE(report.recovered_after_crash);
  EXPECT_EQ(report.jobs_by_state.at(JobState::kQueued), 1);
  EXPECT_EQ(report.jobs_by_state.at(JobState::kRunning), 1);
  EXPECT_EQ(report.node_admin_entries, 1);

  auto job = store->Get(moved).value();
  EXPECT_EQ(job.tenant, "u");
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempts, 1);
  auto events = store->Events(moved, 100).value();
  std::vector<std::string> kinds;
  for (const auto& e : events) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"queued", "placed", "note"}));
  auto nodes = store->ListNodeAdmin().value();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].node, "n09");
  EXPECT_EQ(nodes[0].admin, NodeAdmin::kCordoned);

  auto again = store->Submit(this->Job("t", "key")).value();
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.job.id, keyed);
  // Ids are never reused, even after a restart.
  EXPECT_GT(store->Submit(this->Job("t")).value().job.id, moved);
}

TYPED_TEST_P(JobStoreContractTest, SecondOpenOfTheSameDatabaseIsRefused) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  auto second = this->backend_.Open(nullptr, true);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition) << second.status().ToString();
  // The first store is unaffected.
  EXPECT_TRUE(store->Submit(this->Job("t")).ok());
}

TYPED_TEST_P(JobStoreContractTest, KilledWriterIsRecoveredWithEveryAcknowledgedJob) {
  // The child submits jobs, reports each acknowledged one through a pipe, and dies without
  // closing the store (as kill -9 would leave it).
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    auto store = this->backend_.Open(nullptr, true);
    if (!store.ok()) ::_exit(2);
    for (int i = 0; i < 50; ++i) {
      auto r = (*store)->Submit(this->Job("t", std::to_string(i)));
      if (!r.ok()) ::_exit(3);
      JobId id = r->job.id;
      if (::write(fds[1], &id, sizeof id) != sizeof id) ::_exit(4);
    }
    ::_exit(0);  // no destructor: nothing is closed cleanly
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

  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->open_report().recovered_after_crash);
  EXPECT_EQ(store->open_report().jobs_by_state.at(JobState::kQueued), 50);
  for (JobId a : acked) EXPECT_TRUE(store->Get(a).ok()) << a;
}

TYPED_TEST_P(JobStoreContractTest, ConcurrentSubmittersShareTransactions) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 16, kPerThread = 40;
  std::vector<std::thread> threads;
  std::vector<std::vector<JobId>> ids(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        // Every key is submitted twice; the second must return the first's job.
        std::string key = std::to_string(t) + "-" + std::to_string(i);
        auto a = store->Submit(this->Job("t", key));
        auto b = store->Submit(this->Job("t", key));
        ASSERT_TRUE(a.ok() && b.ok());
        ASSERT_EQ(a->job.id, b->job.id);
        ASSERT_FALSE(b->created);
        ids[t].push_back(a->job.id);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<JobId> unique;
  for (const auto& v : ids) unique.insert(v.begin(), v.end());
  EXPECT_EQ(unique.size(), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(store->CountByState().value().at(JobState::kQueued), kThreads * kPerThread);
  for (JobId id : unique) ASSERT_TRUE(store->Get(id).ok()) << id;
  // 1,280 writes; with batching far fewer transactions (the exact number depends on timing).
  EXPECT_LT(store->transactions_committed(), 2 * kThreads * kPerThread);
}

TYPED_TEST_P(JobStoreContractTest, ConcurrentRepeatsOfOneKeyMakeOneJob) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<JobId> ids(kThreads);
  std::vector<int> created(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto r = store->Submit(this->Job("t", "the-one"));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ids[t] = r->job.id;
      created[t] = r->created ? 1 : 0;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<JobId>(ids.begin(), ids.end()).size(), 1u);
  int total_created = 0;
  for (int c : created) total_created += c;
  EXPECT_EQ(total_created, 1);
  EXPECT_EQ(store->CountByState().value().at(JobState::kQueued), 1);
}

TYPED_TEST_P(JobStoreContractTest, WithoutGroupCommitEachWriteIsItsOwnTransaction) {
  auto store = this->Open(/*group_commit=*/false);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->Submit(this->Job("t")).ok());
  EXPECT_EQ(store->transactions_committed(), 5);
}

// The placement and bad nodes are columns of their own, stored with the transition that sets
// them; restart recovery reads them instead of parsing an event message.
TYPED_TEST_P(JobStoreContractTest, PlacementAndBadNodesAreStoredWithTheirTransition) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  const JobId id = store->Submit(this->Job("t")).value().job.id;
  EXPECT_TRUE(store->Get(id).value().placement.empty());
  const std::vector<PlacedNode> placed = {{"gpu001", 0xff}, {"gpu002", 0x0f}};
  StateChange bind{{JobState::kQueued}, JobState::kRunning, "placed", "placed on gpu[001-002]"};
  bind.placement = placed;
  auto r = store->Transition(id, bind);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->placement, placed);
  EXPECT_EQ(store->Get(id).value().placement, placed);
  EXPECT_EQ(store->Get(id).value().attempts, 1);
  // A node replacement: running -> running with the new placement is not a new attempt.
  StateChange swap{{JobState::kRunning}, JobState::kRunning, "placed", "gpu002 replaced"};
  swap.placement = std::vector<PlacedNode>{{"gpu001", 0xff}, {"gpu003", 0x0f}};
  ASSERT_TRUE(store->Transition(id, swap).ok());
  EXPECT_EQ(store->Get(id).value().attempts, 1);
  EXPECT_EQ(store->Get(id).value().placement[1].node, "gpu003");
  StateChange requeue{{JobState::kRunning}, JobState::kQueued, "requeued", "gpu003 is down"};
  requeue.bad_nodes = std::vector<std::string>{"gpu003"};
  ASSERT_TRUE(store->Transition(id, requeue).ok());
  store.reset();
  store = this->Open();
  ASSERT_NE(store, nullptr);
  const JobRecord back = store->Get(id).value();
  EXPECT_EQ(back.bad_nodes, std::vector<std::string>{"gpu003"});
  EXPECT_EQ(back.placement.size(), 2u);  // the last placement stays on record
}

// A relaunch in place is a new attempt when the caller says so; the rendezvous port is stored with
// the transition; a checkpoint is recorded only from the current attempt and only when newer, in
// the same transaction as the check (a superseded attempt is fenced by the store itself).
TYPED_TEST_P(JobStoreContractTest, CheckpointsAreFencedByAttempt) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  const JobId id = store->Submit(this->Job("t")).value().job.id;
  const CheckpointRecord first{1, 10, TimePoint{Seconds(1000)}, Bytes(4096)};
  EXPECT_FALSE(store->RecordCheckpoint(id, first).value()) << "a queued job has no attempt";
  StateChange bind{{JobState::kQueued}, JobState::kRunning, "placed", "placed"};
  bind.master_port = 29501;
  ASSERT_TRUE(store->Transition(id, bind).ok());
  EXPECT_EQ(store->Get(id).value().master_port, 29501);
  EXPECT_TRUE(store->RecordCheckpoint(id, first).value());
  EXPECT_FALSE(store->RecordCheckpoint(id, first).value()) << "not newer";
  EXPECT_FALSE(store->RecordCheckpoint(id, {1, 5, {}, Bytes(1)}).value()) << "older step";

  StateChange swap{{JobState::kRunning}, JobState::kRunning, "placed", "node replaced"};
  swap.new_attempt = true;
  swap.master_port = 29502;
  auto r = store->Transition(id, swap);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->attempts, 2);
  EXPECT_EQ(r->master_port, 29502);
  // Attempt 1 goes on writing after it was superseded: fenced, whatever its step.
  EXPECT_FALSE(store->RecordCheckpoint(id, {1, 20, {}, Bytes(1)}).value());
  EXPECT_TRUE(store->RecordCheckpoint(id, {2, 15, TimePoint{Seconds(1010)}, Bytes(8192)}).value());
  EXPECT_FALSE(store->RecordCheckpoint(id + 1000, first).ok()) << "unknown job";

  store.reset();
  store = this->Open();
  ASSERT_NE(store, nullptr);
  const JobRecord back = store->Get(id).value();
  ASSERT_TRUE(back.checkpoint.has_value());
  EXPECT_EQ(*back.checkpoint, (CheckpointRecord{2, 15, TimePoint{Seconds(1010)}, Bytes(8192)}));
  EXPECT_EQ(back.attempts, 2);
  int checkpointed = 0;
  const std::vector<JobEvent> events = store->Events(id, 100).value();
  for (const JobEvent& e : events) checkpointed += e.kind == "checkpointed";
  EXPECT_EQ(checkpointed, 2);
  ASSERT_TRUE(store->Transition(id, {{JobState::kRunning}, JobState::kSucceeded, "", "done"}).ok());
  EXPECT_FALSE(store->RecordCheckpoint(id, {2, 30, {}, Bytes(1)}).value()) << "finished";
}

// A bind names its nodes: it is refused, changing nothing, when one of them is cordoned or
// draining, so a drain acknowledged before the bind is never raced by it.
TYPED_TEST_P(JobStoreContractTest, BindIsRefusedOnADrainingNode) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  const JobId id = store->Submit(this->Job("t")).value().job.id;
  ASSERT_TRUE(store->SetNodeAdmin({"gpu002", NodeAdmin::kDraining, "xid 79", "ops", {}}).ok());
  ASSERT_TRUE(store->SetNodeAdmin({"gpu012", NodeAdmin::kCordoned, "", "ops", {}}).ok());
  StateChange bind{{JobState::kQueued}, JobState::kRunning, "placed", "placed"};
  bind.schedulable_nodes = {"gpu001", "gpu002"};
  auto refused = store->Transition(id, bind);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("gpu002 is draining"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(store->Get(id).value().state, JobState::kQueued);
  EXPECT_EQ(store->Get(id).value().attempts, 0);
  bind.schedulable_nodes = {"gpu01"};  // a prefix of a cordoned name is another node
  ASSERT_TRUE(store->Transition(id, bind).ok());
  EXPECT_EQ(store->Get(id).value().state, JobState::kRunning);
}

TYPED_TEST_P(JobStoreContractTest, NodeHealthVerdictsRoundTripAndClear) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->SetNodeHealth({"gpu007", "down", {"xid-79"}, {}}).ok());
  ASSERT_TRUE(store->SetNodeHealth({"gpu008", "draining", {"ecc-dbe", "ib-port-down"}, {}}).ok());
  ASSERT_TRUE(store->SetNodeHealth({"gpu007", "suspect", {"temperature"}, {}}).ok());
  store.reset();
  store = this->Open();
  ASSERT_NE(store, nullptr);
  auto list = store->ListNodeHealth().value();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].node, "gpu007");
  EXPECT_EQ(list[0].condition, "suspect");
  EXPECT_EQ(list[1].rules, (std::vector<std::string>{"ecc-dbe", "ib-port-down"}));
  EXPECT_EQ(list[1].updated_at.since_epoch.value(), 1000);
  ASSERT_TRUE(store->SetNodeHealth({"gpu007", "healthy", {}, {}}).ok());
  EXPECT_EQ(store->ListNodeHealth().value().size(), 1u);
  EXPECT_FALSE(store->SetNodeHealth({"", "down", {}, {}}).ok());
}

// The scheduling history keeps lines in order, bounded to the newest `keep`, across a reopen.
TYPED_TEST_P(JobStoreContractTest, HistoryIsOrderedBoundedAndDurable) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  EXPECT_TRUE(store->History(0, 10).value().empty());
  for (int i = 1; i <= 5; ++i) {
    ASSERT_TRUE(store->AppendHistory("line " + std::to_string(i), 0).ok());
  }
  ASSERT_TRUE(store->AppendHistory("line 6", 3).ok());  // keeps lines 4..6
  store.reset();
  store = this->Open();
  ASSERT_NE(store, nullptr);
  auto lines = store->History(0, 100).value();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].text, "line 4");
  EXPECT_EQ(lines[2].text, "line 6");
  EXPECT_LT(lines[0].seq, lines[1].seq);
  auto rest = store->History(lines[0].seq, 1).value();  // a cursor, one page of one
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].text, "line 5");
  EXPECT_FALSE(store->History(0, 0).ok());
  EXPECT_FALSE(store->AppendHistory("x", -1).ok());
}

// A broker's dispatches are rows: replaced by (job, number), listed per job or per state, kept
// across a reopen; an unknown job is refused.
TYPED_TEST_P(JobStoreContractTest, SiteAttemptsRoundTripAndReplace) {
  auto store = this->Open();
  ASSERT_NE(store, nullptr);
  JobId a = store->Submit({"t", "a", "{}", ""}).value().job.id;
  JobId b = store->Submit({"t", "b", "{}", ""}).value().job.id;
  SiteAttempt first{a,
                    1,
                    "hefei",
                    "baton-fed-00000000000000aa-1-1",
                    R"({"gpus":8})",
                    0,
                    SiteAttemptState::kDispatching,
                    false,
                    {}};
  ASSERT_TRUE(store->PutSiteAttempt(first).ok());
  first.site_job = 17;
  first.state = SiteAttemptState::kOrphaned;
  first.site_refused = true;
  ASSERT_TRUE(store->PutSiteAttempt(first).ok());  // replaces
  SiteAttempt second{
      a,     2, "wuhan", "baton-fed-00000000000000aa-1-2", "{}", 3, SiteAttemptState::kDispatched,
      false, {}};
  ASSERT_TRUE(store->PutSiteAttempt(second).ok());
  ASSERT_TRUE(
      store->PutSiteAttempt({b, 1, "hefei", "k", "{}", 4, SiteAttemptState::kOrphaned, false, {}})
          .ok());
  EXPECT_EQ(store->PutSiteAttempt({999, 1, "x", "k", "{}", 0, {}, false, {}}).code(),
            StatusCode::kNotFound);
  EXPECT_FALSE(store->PutSiteAttempt({a, 0, "x", "k", "{}", 0, {}, false, {}}).ok());
  store.reset();
  store = this->Open();
  ASSERT_NE(store, nullptr);
  std::vector<SiteAttempt> of_a = store->SiteAttempts(a, std::nullopt).value();
  ASSERT_EQ(of_a.size(), 2u);
  first.updated_at = of_a[0].updated_at;
  EXPECT_EQ(of_a[0], first);
  EXPECT_EQ(of_a[1].site, "wuhan");
  EXPECT_EQ(of_a[1].state, SiteAttemptState::kDispatched);
  std::vector<SiteAttempt> orphans = store->SiteAttempts(0, SiteAttemptState::kOrphaned).value();
  ASSERT_EQ(orphans.size(), 2u);
  EXPECT_EQ(orphans[0].job, a);
  EXPECT_EQ(orphans[1].job, b);
  EXPECT_TRUE(store->SiteAttempts(b, SiteAttemptState::kDispatched).value().empty());
}

REGISTER_TYPED_TEST_SUITE_P(
    JobStoreContractTest, HistoryIsOrderedBoundedAndDurable, NewDatabaseReportsFreshSchema,
    SiteAttemptsRoundTripAndReplace, SubmitGetAndEvents,
    PlacementAndBadNodesAreStoredWithTheirTransition, CheckpointsAreFencedByAttempt,
    BindIsRefusedOnADrainingNode, NodeHealthVerdictsRoundTripAndClear, IdempotencyKeyIsPerTenant,
    TransitionsAreConditionalAndRecorded, ListFiltersAndPages, NodeAdminStateRoundTrips,
    ReopenReloadsEverything, SecondOpenOfTheSameDatabaseIsRefused,
    KilledWriterIsRecoveredWithEveryAcknowledgedJob, ConcurrentSubmittersShareTransactions,
    ConcurrentRepeatsOfOneKeyMakeOneJob, WithoutGroupCommitEachWriteIsItsOwnTransaction);

}  // namespace baton::server
