// JobStore: the daemon's durable state — jobs (spec, state, attempts, idempotency key), each
// job's event history, and the administrative state of nodes (cordoned / draining). The daemon
// acknowledges nothing to a client before the store has made it durable. SqliteJobStore
// (sqlite_job_store.h) is the embedded default; PostgresJobStore (postgres_job_store.h) keeps the
// same state in a PostgreSQL database.
//
// Contract shared by every implementation:
//  * Durability: when a mutating call (Submit, Transition, AppendEvent, SetNodeAdmin) returns OK,
//    its effect is committed and synced to stable storage; it survives kill -9 of the process and
//    (with the default options) power loss. A call that returns an error changed nothing.
//  * Atomicity: each mutating call is all-or-nothing (a job and its "queued" event are written
//    together; a transition and its event are written together).
//  * Thread safety: every method may be called concurrently from any thread. Reads observe every
//    write whose call has returned (read-your-writes across threads).
//  * Errors: kNotFound for an unknown job id; kFailedPrecondition for a transition that does not
//    apply to the job's current state; kUnavailable / kInternal for storage failures (the caller
//    may retry a Submit with the same idempotency key without risk of duplicates).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/units.h"

namespace baton::server {

// Job ids are assigned by the store, increase monotonically, and are never reused.
using JobId = std::int64_t;

// queued → running → succeeded | failed; queued → cancelled; running → cancelling → cancelled;
// running → queued (preempted or restarted). The store only checks the `from` states a caller
// names in a Transition; the lifecycle policy lives in the controller.
enum class JobState : std::uint8_t {
  kQueued,
  kRunning,
  kCancelling,  // cancel requested while running; the controller stops it, then marks cancelled
  kSucceeded,
  kFailed,
  kCancelled,
};
inline constexpr JobState kAllJobStates[] = {JobState::kQueued,     JobState::kRunning,
                                             JobState::kCancelling, JobState::kSucceeded,
                                             JobState::kFailed,     JobState::kCancelled};
std::string_view JobStateName(JobState s);  // "queued", "running", ...
Result<JobState> ParseJobState(std::string_view name);
bool IsTerminal(JobState s);

// The last checkpoint a job reported (the checkpoint contract, docs/jobs.md): which attempt wrote
// it, the training step it holds, when baton saw it, and its size.
struct CheckpointRecord {
  int attempt = 0;
  std::int64_t step = 0;
  TimePoint time;
  Bytes bytes;
  bool operator==(const CheckpointRecord&) const = default;
};

// One node of a job's placement: the node's name (as in the cluster description) and its GPUs
// (bit i = local GPU i), in rank order.
struct PlacedNode {
  std::string node;
  std::uint64_t mask = 0;
  bool operator==(const PlacedNode&) const = default;
};

struct JobRecord {
  JobId id = 0;
  std::string tenant;
  std::string name;
  std::string spec_json;        // the validated spec, canonical JSON (see http/job_spec.h)
  std::string idempotency_key;  // empty: none was given
  JobState state = JobState::kQueued;
  // Times the job was launched: entering kRunning, and each relaunch in place (a StateChange with
  // `new_attempt`: node replacement, resize). The current attempt's number, BATON_ATTEMPT.
  int attempts = 0;
  TimePoint created_at;
  TimePoint updated_at;
  // Where it was last placed (a column of its own, schema v3; restart recovery reads it). Empty:
  // never placed, or stored by an older version.
  std::vector<PlacedNode> placement;
  // Nodes that went down under it, where the scheduler does not place it again (node names).
  std::vector<std::string> bad_nodes;
  // The current attempt's rendezvous port on its rank-0 node (0: none recorded; schema v5).
  int master_port = 0;
  // The newest checkpoint the job reported, by any attempt (schema v5).
  std::optional<CheckpointRecord> checkpoint;
};

// One line of a job's history: "queued", "placed" (where and why), "preempted" (by whom),
// "failed", "restarted", "cancel_requested", "cancelled", ...
struct JobEvent {
  JobId job = 0;
  TimePoint time;
  std::string kind;
  std::string message;
};

struct NewJob {
  std::string tenant;
  std::string name;
  std::string spec_json;
  std::string idempotency_key;  // unique per tenant when not empty
};

struct SubmitResult {
  JobRecord job;
  // False when (tenant, idempotency_key) already named a job: `job` is that original job and
  // nothing was written.
  bool created = false;
};

// A conditional state change: applies only if the job is in one of `from` (empty: any state).
struct StateChange {
  std::vector<JobState> from;
  JobState to = JobState::kQueued;
  std::string event_kind;  // recorded with the change; empty: the new state's name
  std::string message;
  // Set: stored with the change (a bind, a node replacement: kRunning -> kRunning).
  std::optional<std::vector<PlacedNode>> placement;
  std::optional<std::vector<std::string>> bad_nodes;
  std::optional<int> master_port;
  // A relaunch that stays kRunning (node replacement, resize) is a new attempt too.
  bool new_attempt = false;
  // Set (a bind): the change applies only if none of these nodes is cordoned or draining, checked
  // in the same transaction as the change, so that nothing is placed on a node whose drain was
  // acknowledged first; otherwise kFailedPrecondition naming the node, and nothing is written.
  std::vector<std::string> schedulable_nodes;
};

// The JSON the stores keep in their placement and bad-node columns, and its inverse (kInternal
// for text no build wrote: the column is the store's own).
std::string PlacementToJson(const std::vector<PlacedNode>& placement);
Result<std::vector<PlacedNode>> PlacementFromJson(std::string_view json);
std::string NamesToJson(const std::vector<std::string>& names);
std::string CheckpointToJson(const std::optional<CheckpointRecord>& checkpoint);  // "" for none
Result<std::optional<CheckpointRecord>> CheckpointFromJson(std::string_view json);
// 1 when `change` starts a new attempt of a job now in `current`, else 0.
int AttemptIncrement(JobState current, const StateChange& change);
// Whether `checkpoint` is news for `job`: the job runs (or is being cancelled), the checkpoint
// comes from its current attempt, and it is newer than the one recorded (a later attempt, or a
// later step of the same one). A superseded attempt's report is never news.
bool CheckpointApplies(const JobRecord& job, const CheckpointRecord& checkpoint);
// For the stores' check of StateChange::schedulable_nodes: the names joined by commas (node names
// hold none), and the refusal for a node whose administrative state is `admin`.
std::string JoinNodeNames(const std::vector<std::string>& nodes);
Status UnschedulableNode(std::string_view node, std::string_view admin);
// The "checkpointed" event's text: "step 350 by attempt 2 (1.2 GiB)".
std::string CheckpointEventMessage(const CheckpointRecord& checkpoint);
Result<std::vector<std::string>> NamesFromJson(std::string_view json);

// What every store does with a StateChange, so that they agree: CheckTransition is OK when
// `change` applies to a job now in `current`, else kFailedPrecondition naming that state;
// TransitionEventKind is the kind of the event recorded with it.
Status CheckTransition(JobId id, JobState current, const StateChange& change);
std::string_view TransitionEventKind(const StateChange& change);

struct JobFilter {
  std::optional<std::string> tenant;
  std::optional<JobState> state;
  JobId after = 0;  // cursor: only jobs with id > after, in increasing id order
  int limit = 100;  // 1..1000
};

struct JobPage {
  std::vector<JobRecord> jobs;
  std::optional<JobId> next_after;  // set when more jobs may follow
};

enum class NodeAdmin : std::uint8_t { kActive, kCordoned, kDraining };
std::string_view NodeAdminName(NodeAdmin a);  // "active", "cordoned", "draining"
// The inverse, for reading a stored name back: kInternal for a name no build wrote.
Result<NodeAdmin> ParseNodeAdmin(std::string_view name);

// A verdict of the health rules on a node (telemetry), kept so that it survives a restart.
struct NodeHealthState {
  std::string node;
  std::string condition;           // "suspect", "draining", "down" (topo::NodeHealthName)
  std::vector<std::string> rules;  // the active rules, by name
  TimePoint updated_at;
};

struct NodeAdminState {
  std::string node;  // node name as in the cluster description
  NodeAdmin admin = NodeAdmin::kActive;
  std::string reason;
  std::string by;  // who set it
  TimePoint updated_at;
};

// One dispatch of a federation broker's job to a site (`baton federate`, server/broker): a row of
// its own, so that a restarted broker rebuilds what runs where from columns, not from messages.
enum class SiteAttemptState {
  kDispatching,  // the intent is durable; the site has not confirmed it (resent with the same key)
  kDispatched,   // the site confirmed it: site_job is its id there
  kOrphaned,     // abandoned by the broker: its copy (if the site made one) is to be cancelled
  kCancelled,    // its copy was cancelled at the site (or the site never made one)
  kEnded,        // it ran to its end there (the job's outcome)
  kRefused,      // the site refused the dispatch; nothing was made there
};
std::string_view SiteAttemptStateName(SiteAttemptState s);  // "dispatching", ...
Result<SiteAttemptState> ParseSiteAttemptState(std::string_view name);

struct SiteAttempt {
  JobId job = 0;
  int number = 0;  // 1, 2, ... per job
  std::string site;
  std::string idempotency_key;  // PREFIX-INSTANCE-JOB-ATTEMPT (server/broker)
  std::string body;             // the spec sent, canonical JSON (resent as it was)
  std::int64_t site_job = 0;    // the site's id for it; 0: not confirmed
  SiteAttemptState state = SiteAttemptState::kDispatching;
  // The site refused or lost the job: the broker does not send it there again.
  bool site_refused = false;
  TimePoint updated_at;  // set by the store
  bool operator==(const SiteAttempt&) const = default;
};

// One line of the scheduler's history (the controller's record of a scheduling cycle, in the
// format of sched/history/history.h; text the store keeps and returns as it was given).
struct HistoryLine {
  std::int64_t seq = 0;  // increases with every append, never reused
  std::string text;
};

// What the store found when it opened its database; logged by the daemon at start-up.
struct OpenReport {
  int schema_version_found = 0;  // 0: a new, empty database
  int schema_version = 0;        // after migrations
  // True when the previous process did not close the database cleanly (it was killed or the
  // machine crashed) and recovery replayed or discarded its write-ahead log.
  bool recovered_after_crash = false;
  // True when the previous process did not close the database cleanly and its write-ahead log
  // is gone (deleted by hand, lost with a disk): writes it acknowledged after its last
  // checkpoint are lost. SQLite only.
  bool wal_missing_after_crash = false;
  // Empty unless the previous process did not close the database cleanly and recovery cannot
  // bring back all it wrote: what is lost, as a phrase after "the previous process did not close
  // the database and" (its write-ahead log is missing, ends short, fails its checksums). The
  // report then says NOT CLEAN and the daemon logs it as an error. SQLite only.
  std::string not_clean;
  // Write-ahead log frames recovery dropped with the damage not_clean names; -1: all of them, or
  // unknown (a missing log).
  std::int64_t wal_frames_dropped = 0;
  std::map<JobState, std::int64_t> jobs_by_state;
  std::int64_t node_admin_entries = 0;
  std::string ToString() const;
};

class JobStore {
 public:
  virtual ~JobStore() = default;

  // Creates a queued job and its "queued" event, or returns the existing job for a repeated
  // (tenant, idempotency_key). Durable when it returns OK.
  virtual Result<SubmitResult> Submit(const NewJob& job) = 0;

  virtual Result<JobRecord> Get(JobId id) = 0;
  // The job that (tenant, key) named, or nullopt: what a Submit with that key would return
  // without writing, for a caller that must answer a retry before re-checking its request.
  virtual Result<std::optional<JobRecord>> FindByIdempotencyKey(std::string_view tenant,
                                                                std::string_view key) = 0;
  virtual Result<JobPage> List(const JobFilter& filter) = 0;
  virtual Result<std::map<JobState, std::int64_t>> CountByState() = 0;

  // Applies `change` atomically with its event (and its placement or bad nodes when set);
  // entering kRunning from another state counts an attempt.
  // kFailedPrecondition (naming the current state) when the job is not in `change.from`.
  virtual Result<JobRecord> Transition(JobId id, const StateChange& change) = 0;

  // Records `checkpoint` as the job's last one, with a "checkpointed" event, atomically, when
  // CheckpointApplies says it is news (the check runs in the same transaction as the write, so a
  // superseded attempt is fenced); returns false and writes nothing otherwise. kNotFound for an
  // unknown job.
  virtual Result<bool> RecordCheckpoint(JobId id, const CheckpointRecord& checkpoint) = 0;

  // Adds a history line without changing the state (e.g. "placed on n[01-04]: best leaf fit").
  virtual Status AppendEvent(JobId id, std::string_view kind, std::string_view message) = 0;
  // Oldest first; at most `limit` events.
  virtual Result<std::vector<JobEvent>> Events(JobId id, int limit = 1000) = 0;

  // Sets (or, with kActive, clears) a node's administrative state.
  virtual Status SetNodeAdmin(const NodeAdminState& state) = 0;
  virtual Result<std::vector<NodeAdminState>> ListNodeAdmin() = 0;

  // Sets a node's health verdict; condition "healthy" clears it.
  virtual Status SetNodeHealth(const NodeHealthState& state) = 0;
  virtual Result<std::vector<NodeHealthState>> ListNodeHealth() = 0;

  // Appends a line to the scheduling history and, in the same transaction, deletes the oldest
  // lines beyond the newest `keep` (0: keeps every line), so the history stays bounded. Durable
  // when it returns OK.
  virtual Status AppendHistory(std::string_view text, std::int64_t keep) = 0;
  // History lines with seq > after, oldest first, at most `limit` (1..10000).
  virtual Result<std::vector<HistoryLine>> History(std::int64_t after, int limit) = 0;

  // Records `attempt` (job, number) as it now stands, replacing an earlier record of it.
  // kNotFound for an unknown job; kInvalidArgument for a number below 1.
  virtual Status PutSiteAttempt(const SiteAttempt& attempt) = 0;
  // The attempts of `job`, by number; or, with job 0, every job's attempts in `state`, by job and
  // number (a restarted broker's copies left to cancel).
  virtual Result<std::vector<SiteAttempt>> SiteAttempts(JobId job,
                                                        std::optional<SiteAttemptState> state) = 0;

  virtual const OpenReport& open_report() const = 0;
};

}  // namespace baton::server
