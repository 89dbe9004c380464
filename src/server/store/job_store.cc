#include "server/store/job_store.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
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
  if (!not_clean.empty()) {
    out += ", NOT CLEAN: the previous process did not close the database and " + not_clean;
  } else {
    out += recovered_after_crash ? ", recovered after an unclean shutdown" : ", clean";
  }
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

std::string PlacementToJson(const std::vector<PlacedNode>& placement) {
  nlohmann::json j = nlohmann::json::array();
  for (const PlacedNode& n : placement) j.push_back({{"node", n.node}, {"mask", n.mask}});
  return j.dump();
}

Result<std::vector<PlacedNode>> PlacementFromJson(std::string_view json) {
  if (json.empty()) return std::vector<PlacedNode>{};
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return InternalError("placement column: not a JSON array");
  std::vector<PlacedNode> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("node") || !e["node"].is_string() || !e.contains("mask") ||
        !e["mask"].is_number_unsigned()) {
      return InternalError("placement column: expected {\"node\": NAME, \"mask\": N}");
    }
    out.push_back({e["node"].get<std::string>(), e["mask"].get<std::uint64_t>()});
  }
  return out;
}

std::string CheckpointToJson(const std::optional<CheckpointRecord>& c) {
  if (!c) return "";
  return nlohmann::json{{"attempt", c->attempt},
                        {"step", c->step},
                        {"time", c->time.since_epoch.value()},
                        {"bytes", c->bytes.value()}}
      .dump();
}

Result<std::optional<CheckpointRecord>> CheckpointFromJson(std::string_view json) {
  if (json.empty()) return std::optional<CheckpointRecord>();
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  auto number = [&](const char* key) { return j.contains(key) && j[key].is_number(); };
  if (!j.is_object() || !number("attempt") || !number("step") || !number("time") ||
      !number("bytes")) {
    return InternalError("checkpoint column: expected {attempt, step, time, bytes}");
  }
  CheckpointRecord c;
  c.attempt = j["attempt"].get<int>();
  c.step = j["step"].get<std::int64_t>();
  c.time = TimePoint{Seconds(j["time"].get<double>())};
  c.bytes = Bytes(j["bytes"].get<double>());
  return std::optional<CheckpointRecord>(c);
}

int AttemptIncrement(JobState current, const StateChange& change) {
  if (change.to != JobState::kRunning) return 0;
  return current != JobState::kRunning || change.new_attempt ? 1 : 0;
}

std::string_view SiteAttemptStateName(SiteAttemptState s) {
  switch (s) {
    case SiteAttemptState::kDispatching:
      return "dispatching";
    case SiteAttemptState::kDispatched:
      return "dispatched";
    case SiteAttemptState::kOrphaned:
      return "orphaned";
    case SiteAttemptState::kCancelled:
      return "cancelled";
    case SiteAttemptState::kEnded:
      return "ended";
    case SiteAttemptState::kRefused:
      return "refused";
  }
  return "?";
}

Result<SiteAttemptState> ParseSiteAttemptState(std::string_view name) {
  for (SiteAttemptState s :
       {SiteAttemptState::kDispatching, SiteAttemptState::kDispatched, SiteAttemptState::kOrphaned,
        SiteAttemptState::kCancelled, SiteAttemptState::kEnded, SiteAttemptState::kRefused}) {
    if (SiteAttemptStateName(s) == name) return s;
  }
  return InternalError(fmt::format("site attempt: unknown state '{}'", name));
}

bool CheckpointApplies(const JobRecord& job, const CheckpointRecord& c) {
  if (job.state != JobState::kRunning && job.state != JobState::kCancelling) return false;
  if (c.attempt != job.attempts) return false;
  if (!job.checkpoint) return true;
  return c.attempt > job.checkpoint->attempt ||
         (c.attempt == job.checkpoint->attempt && c.step > job.checkpoint->step);
}

std::string JoinNodeNames(const std::vector<std::string>& nodes) {
  return fmt::format("{}", fmt::join(nodes, ","));
}

Status UnschedulableNode(std::string_view node, std::string_view admin) {
  return FailedPreconditionError(
      fmt::format("node {} is {}: nothing new is placed on it", node, admin));
}

std::string CheckpointEventMessage(const CheckpointRecord& c) {
  double mib = c.bytes.value() / (1024.0 * 1024.0);
  return mib >= 1024
             ? fmt::format("step {} by attempt {} ({:.1f} GiB)", c.step, c.attempt, mib / 1024)
             : fmt::format("step {} by attempt {} ({:.1f} MiB)", c.step, c.attempt, mib);
}

std::string NamesToJson(const std::vector<std::string>& names) {
  return nlohmann::json(names).dump();
}

Result<std::vector<std::string>> NamesFromJson(std::string_view json) {
  if (json.empty()) return std::vector<std::string>{};
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_array()) return InternalError("bad-node column: not a JSON array");
  std::vector<std::string> out;
  for (const auto& e : j) {
    if (!e.is_string()) return InternalError("bad-node column: expected node names");
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace baton::server
