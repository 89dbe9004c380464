// JobSpec: a job submission as the HTTP API accepts it (JSON, or YAML with the same fields),
// strictly validated: unknown fields, wrong types and out-of-range values are rejected with the
// offending field's name. The daemon stores the validated spec as canonical JSON (sorted keys,
// defaults filled in), so that equal requests compare equal as strings.
//
// Parsing is a pure function with no shared state: safe to call from any thread. It never
// throws; third-party parser exceptions are caught here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "perf/request.h"

namespace baton::server {

// A training plan: the job runs `request.model` with `request.plan` (or the planner's best plan
// for its GPUs), and the scheduler ranks its placements by the planner's predicted slowdown.
struct JobPlan {
  perf::JobPlanRequest request;
  std::string json;  // the validated object as CanonicalJson writes it (catalogue model name)
};

// One input to bring to the site before the job starts: a dataset or the job's last checkpoint,
// held at site `from` (a name of the federation's sites file). The federation broker fills the
// list from its routing plan; the local executor's stage command copies each item
// (executors/local_executor.h); other executors do not stage.
struct StageItem {
  std::string kind;  // "dataset" or "checkpoint"
  std::string name;  // [A-Za-z0-9][A-Za-z0-9._-]{0,127}
  std::string from;  // the site holding it, same charset, at most 64
  double size_gib = 0;
};

// What the federation broker (`baton federate`) routes a job by; a site stores it unread.
struct FederationFields {
  std::vector<std::string> datasets;  // names in the sites file
  std::string home_site;              // empty: none
  std::vector<std::string> require_regions;
  std::vector<std::string> exclude_regions;
  std::string deadline;                   // RFC 3339 UTC ("2026-12-01T18:00:00Z"); empty: none
  std::optional<double> deadline_unix_s;  // the same instant, parsed
  double checkpoint_gib = 0;              // the size of the job's checkpoint (staged on a move)
  // Set by a broker only (a site refuses it from anyone else): the site runs the job only while
  // the broker renews its lease (each GET of the job by the broker renews it for this long).
  // A lease that lapses stops the job there and holds it, until the broker renews it or cancels
  // it: an attempt the broker gave up on is fenced at its site (docs/federation.md). 0: none.
  std::int64_t lease_s = 0;
};

// An elastic job's GPU range: it starts at `gpus` (min_gpus when the spec leaves gpus out) and
// the scheduler grows it toward max_gpus into idle GPUs and shrinks it toward min_gpus instead of
// preempting it, in steps of step_gpus (the data-parallel unit). Every resize restarts the job
// from its checkpoint at the new size (docs/jobs.md).
struct ElasticRange {
  std::int64_t min_gpus = 0;  // >= 1, a multiple of step_gpus
  std::int64_t max_gpus = 0;  // >= min_gpus, a multiple of step_gpus
  std::int64_t step_gpus =
      0;  // 0: the daemon's default for its cluster (sched::DefaultElasticStep)
};

struct JobSpec {
  std::string name;                   // [A-Za-z0-9][A-Za-z0-9._-]{0,127}
  std::optional<std::string> tenant;  // only admins may name a tenant other than their own
  std::int64_t gpus = 0;              // 0 .. kMaxJobGpus; 0 only for a CPU-only job
  // A share of one GPU in thousandths, 1..1000 (1000: the whole GPU, stored as 0); 1..999 needs
  // gpus: 1. 0: whole GPUs.
  int gpu_milli = 0;
  // Host resources per task (per node the job's tasks land on, once per task): thousandths of a
  // core and MiB, 0 .. kMaxHostResource. A job with gpus: 0 must ask for one of them.
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  // Named extended resources per task (`extended: {rdma_nic: 1}`), sorted by name: at most
  // kMaxJobExtended names of [a-z][a-z0-9_./-]{0,62}, amounts 0 .. topo::kMaxExtendedAmount.
  // Whether the cluster has them is checked at admission (400 naming "extended.NAME").
  std::vector<std::pair<std::string, std::int64_t>> extended;
  int gpus_per_node = 0;  // 0: the scheduler decides; else 1..64 and divides gpus
  std::string gpu_type;   // catalogue name ("H100-SXM"); empty: any
  int priority = 0;       // -1000 .. 1000
  bool preemptible = true;
  double grace_period_s = 30;        // 0 .. 86,400
  double estimated_runtime_s = 0;    // 0 (unknown) .. one year
  std::vector<std::string> command;  // argv; may be empty (the executor supplies one)
  std::string topology_required;     // level name ("leaf", "spine", ...); empty: none
  std::string topology_preferred;
  // perf::ParseJobPlan's flat object; its GPUs (tp x pp x dp x cp) are `gpus`.
  std::optional<JobPlan> plan;
  std::vector<StageItem> stage;  // at most kMaxListItems
  std::optional<FederationFields> federation;
  std::optional<ElasticRange> elastic;  // whole GPUs only: not with gpu_milli, host resources or
                                        // gpus_per_node
};

inline constexpr std::size_t kMaxListItems = 64;

inline constexpr std::int64_t kMaxJobGpus = 1'000'000;
inline constexpr std::int64_t kMaxLeaseSeconds = 86'400;  // a federation lease: at most a day
inline constexpr std::int64_t kMaxHostResource = std::int64_t{1} << 40;
// The scheduler's bound on extended resources per task (sched::kMaxExtendedPerTask).
inline constexpr std::size_t kMaxJobExtended = 8;

enum class BodyFormat { kJson, kYaml };

// Maps a Content-Type header ("application/json; charset=utf-8", "application/yaml", ...) to a
// format; empty means JSON. kInvalidArgument for anything else.
Result<BodyFormat> BodyFormatFromContentType(std::string_view content_type);

// Parses and validates a request body. On error the Status is kInvalidArgument; its field() is
// the dotted path of the offending field ("gpus", "topology.required", "command[2]"), or "" when
// the body as a whole is malformed, and its message names the field and the reason.
Result<JobSpec> ParseJobSpec(std::string_view body, BodyFormat format);

// Canonical JSON of a validated spec: sorted keys, every field present. Round-trips through
// ParseJobSpec.
std::string CanonicalJson(const JobSpec& spec);

}  // namespace baton::server
