#include "server/store/job_store.h"

#include <string>

namespace baton::server {

std::string_view JobStateName(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kCancelling:
      return "cancelling";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

Result<JobState> ParseJobState(std::string_view name) {
  for (JobState s : kAllJobStates) {
    if (JobStateName(s) == name) return s;
  }
  return InvalidArgumentError("unknown job state '" + std::string(name) +
                              "' (expected queued, running, cancelling, succeeded, failed or "
                              "cancelled)");
}

Status CheckTransition(JobId id, JobState current, const StateChange& change) {
  bool allowed = change.from.empty();
  for (JobState s : change.from) allowed = allowed || s == current;
  if (allowed) return Status::Ok();
  return FailedPreconditionError("job " + std::to_string(id) + " is " +
                                 std::string(JobStateName(current)) + ", cannot become " +
                                 std::string(JobStateName(change.to)));
}

std::string_view TransitionEventKind(const StateChange& change) {
  return change.event_kind.empty() ? JobStateName(change.to) : std::string_view(change.event_kind);
}

bool IsTerminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

std::string_view NodeAdminName(NodeAdmin a) {
  switch (a) {
    case NodeAdmin::kActive:
      return "active";
    case NodeAdmin::kCordoned:
      return "cordoned";
    case NodeAdmin::kDraining:
      return "draining";
  }
  return "unknown";
}

Result<NodeAdmin> ParseNodeAdmin(std::string_view name) {
  for (NodeAdmin a : {NodeAdmin::kActive, NodeAdmin::kCordoned, NodeAdmin::kDraining}) {
    if (NodeAdminName(a) == name) return a;
  }
  return InternalError("unknown node admin state '" + std::string(name) + "' in the database");
}

std::string OpenReport::ToString() const {
  std::string out = "schema v" + std::to_string(schema_version);
  if (schema_version_found == 0) {
    out += " (new database)";
  } else if (schema_version_found != schema_version) {
    out += " (migrated from v" + std::to_string(schema_version_found) + ")";
  }
  out += recovered_after_crash ? ", recovered after an unclean shutdown" : ", clean";
  out += ", jobs:";
  std::int64_t total = 0;
  for (const auto& [state, count] : jobs_by_state) {
    if (count == 0) continue;
    out += ' ';
    out += JobStateName(state);
    out += '=';
    out += std::to_string(count);
    total += count;
  }
  if (total == 0) out += " none";
  out += ", node admin entries: " + std::to_string(node_admin_entries);
  return out;
}

}  // namespace baton::server
