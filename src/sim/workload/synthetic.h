// A synthetic LLM-cluster workload: a stream of TraceJobs mixing pre-training gangs, fine-tunes,
// evaluations and debug jobs, for clusters no public trace describes (thousands of GPUs, gangs of
// 256-8,192). Generated lazily (constant memory) and deterministic for a seed.
//
// Calibration. The Acme summaries (../shared/data/traces/summaries/acme_cluster_summary.csv,
// rows Seren and Kalos: Hu et al., "Characterization of Large Language Model Development in the
// Datacenter", NSDI'24) give, for GPU jobs: median run time 122 s (Seren) / 124 s (Kalos), median
// GPUs 1 on both, mean run time 1,414 / 1,260 s, mean GPUs 5.7 / 26.8, max 1,024 GPUs, and final
// states of 50-54 % completed, 6-8 % cancelled, 40-43 % failed. The paper attributes most jobs to
// evaluation and debugging and most GPU time to pre-training. The defaults below are fitted to
// Kalos, the LLM pre-training cluster (the CSV is not read at run time; synthetic_test.cc checks
// the fit against it when ../shared is present):
//   - job mix by count: debug 40 %, evaluation 46.5 %, fine-tune 12 %, pre-training 1.5 %;
//   - GPUs: debug 1-8 (powers of two, 1 most often), evaluation 1 (75 %) or 8, fine-tune 8-64,
//     pre-training 256-8,192 in powers of two, fewer as they grow (the Acme maximum is 1,024;
//     larger gangs extrapolate to the clusters baton targets);
//   - run time: log-normal (sigma 1.2) with medians debug 90 s, evaluation 125 s, fine-tune
//     30 min; pre-training 6-16 h, uniform. Acme logs every submission of a pre-training run as
//     its own job, and runs are resubmitted after failures and for reconfiguration, so a
//     pre-training *job* here is one such attempt, not a whole run;
//   - arrivals Poisson with mean gap `mean_interarrival`;
//   - pre-training jobs carry a model name in `kind` ("pretrain/llama3-8b" ... "/llama3-405b",
//     larger models for larger gangs) so a driver can attach a plan; the others say "debug",
//     "eval", "finetune".
// With these, 400,000 jobs (seed 3) have mean GPUs 27.3, median 1, mean run time 1,232 s,
// median 136 s (Kalos: 26.8, 1, 1,260 s, 124 s), and pre-training takes 99 % of the GPU time.
// Failed/cancelled final states are not generated: in the simulator failures come from the
// node-failure model, and a run time is the work a job does.
#pragma once

#include <cstdint>
#include <memory>

#include "core/units.h"
#include "sim/workload/trace.h"

namespace baton::sim {

struct SyntheticParams {
  std::int64_t jobs = 1000;
  Seconds mean_interarrival = Seconds(60);
  double share_debug = 0.40;
  double share_eval = 0.465;
  double share_finetune = 0.12;  // pre-training takes the rest
  int max_pretrain_gpus = 8192;  // capped further to the cluster by the caller if needed
  int tenants = 8;               // "team0".."team7", uniform
};

// A TraceReader over generated jobs. Errors: none (stats().jobs counts them).
std::unique_ptr<TraceReader> MakeSyntheticTrace(SyntheticParams params, std::uint64_t seed);

}  // namespace baton::sim
