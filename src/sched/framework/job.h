// GangJob: what a user asks the scheduler for — N GPUs as tasks of g GPUs per node, placed all at
// once, with topology, GPU type, priority, tenant, preemption, elastic and failure-handling
// parameters. ValidateJob checks a spec against a cluster and names the offending field.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/ids.h"
#include "core/status.h"
#include "core/units.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

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
  // At most one task per node, so every node of the placement holds exactly gpus_per_task GPUs
  // (the API's gpus_per_node). Requires gpus_per_task > 0; not with elastic.
  bool one_task_per_node = false;
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
  // A share of one GPU instead of whole GPUs (then gpus must be 1, and the job is neither elastic
  // nor spread): gpu_milli thousandths of a GPU, 1..999, time-shared with other such jobs (as in
  // Alibaba's openb traces), or one MIG instance by profile name ("1g.10gb", "2g.20gb",
  // "3g.40gb", "4g.40gb", "7g.80gb" on A100-80GB / H100-SXM; "1g.5gb" ... "7g.40gb" on
  // A100-40GB). 0 / empty: whole GPUs. At most one of the two.
  int gpu_milli = 0;
  std::string mig_profile;
  // Host resources per task (each node a task lands on is charged once per task): CPU in
  // thousandths of a core and memory in MiB, as Kubernetes requests them. 0: none. A job with
  // gpus == 0 and some CPU or memory is a CPU-only job: one task on one node, no GPU.
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  // Named extended resources per task ({"rdma_nic", 1}), charged like CPU and memory: a node
  // holds them only if its shape declares them (topo::NodeShape::extended). At most
  // kMaxExtendedPerTask names, each once, each one some node shape of the cluster declares;
  // amounts >= 0 (0 asks for nothing). A job with gpus == 0 and some of them is CPU-only.
  std::vector<topo::ExtendedResource> extended;
  // A model + plan is attached: the StepTimeEstimator can score placements of this job.
  bool has_plan = false;
  // Which model + plan, when has_plan: a key the driver got from the StepTimeEstimator it gave
  // the scheduler. Opaque to the scheduler, which only hands it back to that estimator.
  std::uint32_t plan_key = 0;
  TimePoint submit_time;
};

// True when the job asks for a share of one GPU (gpu_milli or mig_profile).
inline bool SharesGpu(const GangJob& job) { return job.gpu_milli > 0 || !job.mig_profile.empty(); }
// True when the job asks for no GPU at all, only CPU, memory and/or extended resources (one task
// on one node).
inline bool CpuOnly(const GangJob& job) { return job.gpus == 0; }
// Whether the job asks for any CPU, memory or extended resource per task.
bool AsksHostResources(const GangJob& job);

inline constexpr int kMaxExtendedPerTask = 8;  // extended resource names one job may request
// A task's extended resources by the cluster's interned ids (topo::Cluster::FindExtendedResource):
// the first `count` entries of id / amount, amounts > 0. A fixed array, so that charging and
// checking a placement never allocates.
struct ExtendedRequest {
  std::uint8_t count = 0;
  std::array<std::uint8_t, kMaxExtendedPerTask> id{};
  std::array<std::int64_t, kMaxExtendedPerTask> amount{};
  bool operator==(const ExtendedRequest&) const = default;
};
// `job.extended` resolved on `cluster`; names the cluster does not declare and zero amounts are
// left out (ValidateJob refuses the former), as are entries past kMaxExtendedPerTask.
ExtendedRequest CompileExtended(const GangJob& job, const topo::Cluster& cluster);

// What one task (or, HostOn, the tasks on one node) of a job takes from its node besides GPUs.
struct HostResources {
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  ExtendedRequest extended;
  bool empty() const { return cpu_milli == 0 && memory_mib == 0 && extended.count == 0; }
  // `tasks` tasks' worth.
  HostResources Times(std::int64_t tasks) const;
  bool operator==(const HostResources&) const = default;
};

// What a GPU-sharing job takes of its GPU: thousandths (time-sharing), or a MIG instance's
// compute slices (of 7) and memory slices (of 8). A GPU is shared one way or the other.
struct GpuShareAmount {
  int milli = 0;
  int compute_slices = 0;
  int memory_slices = 0;
  bool mig() const { return compute_slices > 0; }
  bool operator==(const GpuShareAmount&) const = default;
};
inline constexpr int kMilliPerGpu = 1000;
inline constexpr int kMigComputeSlices = 7;
inline constexpr int kMigMemorySlices = 8;

// The share `job` takes on a GPU of type `gpu`; nullopt when that type cannot host it (no such
// MIG profile) or the job takes whole GPUs.
std::optional<GpuShareAmount> ShareOn(const GangJob& job, const topo::GpuSpec& gpu);

// Returns InvalidArgument "job 'name': field 'gpus': ..." for a spec that can never run on
// `cluster`: 0 or negative GPUs, more GPUs than exist, a task size that does not divide the gang
// or exceeds every node, an unknown GPU type or one the cluster lacks, a level the cluster does
// not have, a sub-group size that does not divide the gang, negative times, a bad elastic range
// (or a multi-task elastic job whose step is not a whole number of its tasks, which could never
// resize),
// a gpu_milli outside 0..999 or a MIG profile no GPU of the cluster (of the accepted types) has,
// negative CPU or memory, a CPU-only job (gpus 0) without CPU, memory or extended resources or
// with GPU fields, an extended resource (field "extended.NAME") no node shape declares, with a
// negative amount, given twice or past kMaxExtendedPerTask, or a task whose GPUs, CPU, memory and
// extended resources together exceed every node (of the accepted types). A node shape with 0 CPUs
// or 0 memory does not declare that resource and does not limit it. A refusal's field() names
// the GangJob field ("gpus_per_task", "gpu_types[0]", "extended.NAME", ...) and its reason() says
// why; its message is "job 'NAME': field 'FIELD': REASON".
Status ValidateJob(const GangJob& job, const topo::Cluster& cluster);

// The task size ValidateJob accepted for `job` on `cluster` (resolves gpus_per_task == 0).
int EffectiveTaskGpus(const GangJob& job, const topo::Cluster& cluster);

// The step an elastic job resizes by when its submitter left ElasticSpec::step_gpus out (drivers
// fill it in before they submit): 1 GPU when its whole range fits on one node (one task that
// resizes on its node), else its task size at its initial `gpus` (a resize adds or removes whole
// tasks: one node's GPUs for a gang larger than a node). resize can move only whole tasks, so a
// multi-node job with any other step would never change size.
int DefaultElasticStep(const GangJob& job, const topo::Cluster& cluster);

}  // namespace baton::sched
