// The packing protocol (FGD, "Beware of Fragmentation", USENIX ATC'23) as a mode of the
// simulator: pods are sampled from a pod list until their GPU request reaches `tune` x the
// cluster's GPU capacity, shuffled with a seed, and arrive one by one; each is placed at once or
// skipped, and none leaves. The measure is GPU allocation (allocated GPU thousandths over the
// cluster's) against arrived GPU demand (as a share of capacity).
//
// Every decision is the scheduler's: each arrival is a Submit event to sched::Scheduler::RunCycle
// with the configured placement plugin (the same plugins the daemon runs), a pod left pending is
// cancelled (skipped). The driver only samples, feeds and measures.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sim/workload/openb.h"

namespace baton::sim {

struct PackingOptions {
  // The placement plugin: fragmentation, best-fit, random-fit (or topology), optionally with
  // arguments: "fragmentation:weigh=gpus/best_fit_milli=20".
  std::string policy = "fragmentation";
  std::uint64_t seed = 42;  // sampling and shuffle (and random-fit's own draws)
  double tune = 1.3;        // arrived GPU demand at the end, as a multiple of capacity
  double step = 0.05;       // curve resolution: a point each `step` of capacity arrived
};

struct PackingPoint {
  double arrived = 0;        // arrived GPU demand / GPU capacity
  double allocated = 0;      // allocated GPU thousandths / capacity
  double fragmentation = 0;  // expected fragmented GPU thousandths / capacity (see below)
  std::int64_t pods = 0;     // arrived so far
  std::int64_t skipped = 0;  // of which not placed
};

struct PackingResult {
  std::vector<PackingPoint> curve;  // one point per `step`, the last at `tune`
  std::int64_t pods = 0;
  std::int64_t placed = 0;
  std::int64_t skipped = 0;
  std::int64_t gpu_capacity_milli = 0;
  double seconds_in_scheduler = 0;  // not measured here: filled by benchmarks
  // GPU thousandths skipped while arrived demand was at most the capacity, by request: [0] GPU
  // shares, [k] pods of k whole GPUs (k <= 8; more counts in [8]).
  std::array<std::int64_t, 9> skipped_milli_by_gpus{};
  // Allocation when arrived demand first reaches `at` x capacity (linear between points).
  double AllocationAt(double at) const;
  double FragmentationAt(double at) const;
};

// The pods that arrive, in order: `pods` sampled (with replacement, after the whole list once)
// until their GPU thousandths reach tune x `gpu_capacity_milli`, then shuffled; both draws from
// `seed`. A list already above the target is shuffled and cut where it reaches it.
std::vector<OpenbPod> TunedArrivals(std::span<const OpenbPod> pods, std::int64_t gpu_capacity_milli,
                                    double tune, std::uint64_t seed);

// A variant pod list drawn from `pods`, for checks beyond the published lists: `count` pods, each
// drawn uniformly with replacement from those `heavy` selects with probability `p`, else from the
// others (from all pods when one side is empty); names get a "-vN" suffix. Deterministic in
// `seed`. Built-in variants (VariantPods): "multi-gpu" (p 0.1 of pods with 2+ GPUs; they are 1.1 %
// of the default list's pods) and "shared" (p 0.7 of GPU shares; 38 % in the default list).
std::vector<OpenbPod> ResampledPods(std::span<const OpenbPod> pods, bool (*heavy)(const OpenbPod&),
                                    double p, std::size_t count, std::uint64_t seed);
// The named variant of `pods` ("multi-gpu" or "shared"), as many pods as `pods`, seed 7.
Result<std::vector<OpenbPod>> VariantPods(std::span<const OpenbPod> pods, std::string_view name);

// Replays the protocol. Fragmentation at each point is the expected fragmentation of the cluster
// measured against the request mix of all the arrivals (sched::FragmentationModel), over the
// cluster's GPU capacity.
Result<PackingResult> RunPacking(std::span<const OpenbNode> nodes, std::span<const OpenbPod> pods,
                                 const PackingOptions& options);

}  // namespace baton::sim
