// GangJob: what a user asks the scheduler for — N GPUs as tasks of g GPUs per node, placed all at
// once, with topology, GPU type, priority, tenant, preemption, elastic and failure-handling
// parameters. ValidateJob checks a spec against a cluster and names the offending field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/ids.h"
#include "core/status.h"
#include "core/units.h"
#include "topology/cluster.h"

namespace baton::sched {

struct JobTag {};
using JobId = Id<JobTag, std::uint64_t>;

// Each consecutive slice of `gpus` ranks (a TP group, a PP stage, a DP replica) must sit inside
// one subtree of `level`.
struct SubGroupConstraint {
  int gpus = 0;
  topo::Level level = topo::Level::kNode;
};

// Where the whole gang may (required) and should (preferred) sit. nullopt: no limit.
struct TopologyConstraint {
  std::optional<topo::Level> required;
  std::optional<topo::Level> preferred;
};

// Elastic jobs run with any GPU count in [min_gpus, max_gpus] that is a multiple of step_gpus
// (the data-parallel unit). min_gpus == 0 means "not elastic".
struct ElasticSpec {
  int min_gpus = 0;
  int max_gpus = 0;
  int step_gpus = 0;
};

// A requirement on node attributes (node labels; numeric attributes are labels whose values are
// numbers, e.g. "nvme_iops" = "800000", "nic_gbps_per_gpu" = "400", "rdma_latency_us" = "2.1").
struct NodeRequirement {
  enum class Op : std::uint8_t { kIn, kNotIn, kExists, kGreaterEqual, kLessEqual };
  std::string key;
  Op op = Op::kIn;
  std::vector<std::string> values;  // kIn / kNotIn
  double bound = 0;                 // kGreaterEqual / kLessEqual
};

struct GangJob {
  JobId id;
  std::string name;
  std::string tenant = "default";
  int gpus = 0;
  // GPUs of one task, all on one node. 0: the whole gang on one node when it fits in a node
  // (gpus < the node size may share a node), otherwise tasks of a full node.
  int gpus_per_task = 0;
  // Acceptable GPU types (catalogue names or aliases); empty: any.
  std::vector<std::string> gpu_types;
  TopologyConstraint topology;
  std::vector<SubGroupConstraint> sub_groups;
  int priority = 0;
  bool preemptible = true;
  Seconds grace_period;
  ElasticSpec elastic;
  Seconds estimated_runtime;    // 0: unknown (backfill treats it as unbounded)
  Seconds checkpoint_interval;  // 0: never checkpoints
  Seconds restart_cost;
  int max_retries = 3;
  // Spread the gang's tasks over distinct failure domains of this kind (replicated services).
  std::optional<topo::FailureDomainKind> spread;
  // Every requirement must hold on every node of the placement.
  std::vector<NodeRequirement> node_requirements;
  // A model + plan is attached: the StepTimeEstimator can score placements of this job.
  bool has_plan = false;
  TimePoint submit_time;
};

// Returns InvalidArgument "job 'name': field 'gpus': ..." for a spec that can never run on
// `cluster`: 0 or negative GPUs, more GPUs than exist, a task size that does not divide the gang
// or exceeds every node, an unknown GPU type or one the cluster lacks, a level the cluster does
// not have, a sub-group size that does not divide the gang, negative times, a bad elastic range.
Status ValidateJob(const GangJob& job, const topo::Cluster& cluster);

// The task size ValidateJob accepted for `job` on `cluster` (resolves gpus_per_task == 0).
int EffectiveTaskGpus(const GangJob& job, const topo::Cluster& cluster);

}  // namespace baton::sched
