// Placement-aware estimates and the launch spec: maps ranks in the plan's Megatron order
// (tp-cp-ep-dp-pp by default; the first name varies fastest) onto the GPUs a job was granted, finds
// the tier each parallel group spans (Cluster::Meet) and estimates with those bandwidths; and
// writes what torchrun / Megatron-LM need to start the job on those GPUs.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "perf/estimator.h"
#include "topology/cluster.h"

namespace baton::perf {

// Rank r's coordinates in the plan's rank order: by default tp-cp-dp-pp
// (rank = tp + TP*(cp + CP*(dp + DP*pp))), or tp-cp-pp-dp.
struct RankCoords {
  int tp = 0, cp = 0, dp = 0, pp = 0;
};
RankCoords RankToCoords(const ParallelPlan& plan, int rank);
int CoordsToRank(const ParallelPlan& plan, const RankCoords& c);

// For each parallel group kind, the worst group's span over the system's tiers when rank i runs
// on gpus[i]. Errors: the GPU count differs from the plan's, a GPU is not in the cluster or is
// listed twice.
Result<GroupSpans> SpansForPlacement(const topo::Cluster& cluster,
                                     std::span<const topo::GpuRef> gpus, const ParallelPlan& plan,
                                     const SystemSpec& system);

// The estimate on a concrete placement.
Result<StepEstimate> EstimateOnPlacement(const ModelSpec& model, const ParallelPlan& plan,
                                         const TrainingSpec& training, const SystemSpec& system,
                                         const topo::Cluster& cluster,
                                         std::span<const topo::GpuRef> gpus);

// Step time on `gpus` divided by the step time on a compact placement (consecutive ranks on
// consecutive GPUs of consecutive nodes): 1.0 = no loss. For the scheduler's scoring.
Result<double> PlacementSlowdown(const ModelSpec& model, const ParallelPlan& plan,
                                 const TrainingSpec& training, const SystemSpec& system,
                                 const topo::Cluster& cluster, std::span<const topo::GpuRef> gpus);

struct RankLocation {
  int rank = 0;
  std::string node;
  int node_rank = 0;
  int local_rank = 0;
  int gpu = 0;  // CUDA index on the node
};

struct LaunchSpec {
  std::string hostfile;                     // "host slots=8" per line, node-rank order
  std::vector<std::string> torchrun;        // one command line per node
  std::vector<std::string> megatron_flags;  // Megatron-LM arguments for the plan
  std::vector<RankLocation> ranks;
  std::string cuda_visible_devices_note;  // set when a node's GPUs are not 0..n-1 in order
};

// The launch spec for running `plan` with rank i on gpus[i]. The ranks of one node must be
// contiguous and every node must hold the same number of them (torchrun's RANK =
// node_rank * nproc_per_node + local_rank); otherwise InvalidArgument says which rank breaks it.
Result<LaunchSpec> MakeLaunchSpec(const ModelSpec& model, const ParallelPlan& plan,
                                  const TrainingSpec& training, const topo::Cluster& cluster,
                                  std::span<const topo::GpuRef> gpus, int master_port = 29500);

// The first `count` GPUs of the cluster in node order (a compact placement), or the GPUs of
// every `stride`-th node (a scattered one) for comparisons and the CLI.
Result<std::vector<topo::GpuRef>> CompactGpus(const topo::Cluster& cluster, int count,
                                              int node_stride = 1);

}  // namespace baton::perf
