// Exhaustive plan search: enumerates every combination of the search space for a model on N GPUs
// (or several N), prunes invalid sub-spaces as early as possible (counting every skipped plan by
// the reason), estimates the rest and keeps the top-k. The hot loop neither allocates nor throws.
//
// Thread safety: Search() is re-entrant; with options.threads > 1 it runs worker threads of its
// own and calls `progress` only from the calling thread.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "perf/estimator.h"
#include "perf/profile.h"

namespace baton::perf {

// The candidate values of each plan field; the space is their Cartesian product (per N).
struct SearchSpace {
  std::vector<int> gpus;  // world sizes N to try
  std::vector<int> tp, pp, cp, ep, mbs, vp;
  std::vector<Recompute> recompute{Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  std::vector<bool> sequence_parallel{false, true};
  std::vector<int> zero{0, 1, 2, 3};
  std::vector<bool> overlap_dp_comm{false, true};
  bool allow_uneven_pp = true;  // pp need not divide the layers (slowest stage gets the ceiling)

  std::uint64_t size() const;  // number of plans in the space
};

// The default space: tp powers of two up to 64, pp 1..min(layers, 128), cp powers of two up to
// 16, ep the divisors of the expert count (1 for dense models), mbs 1..16 (powers of two), vp
// 1..8, every recompute / sp / ZeRO / overlap choice.
SearchSpace DefaultSearchSpace(const ModelSpec& model, std::vector<int> gpus);

enum class Objective { kStepTime, kMfu };

struct SearchOptions {
  int top_k = 10;
  int threads = 1;
  Objective objective = Objective::kStepTime;
  // Called now and then from the calling thread with plans done and total.
  std::function<void(std::uint64_t done, std::uint64_t total)> progress;
};

struct RankedPlan {
  ParallelPlan plan;
  StepEstimate estimate;
  // Its MFU is above what validated runs of a model of this size reached on the GPU family
  // (FamilyProfile::MfuReached): an extrapolation. Set by MarkBeyondEnvelope, not by Search.
  bool beyond_envelope = false;
};

struct SearchResult {
  std::vector<RankedPlan> top;                            // best first
  std::uint64_t space = 0;                                // plans in the space
  std::uint64_t feasible = 0;                             // plans estimated and fitting in memory
  std::array<std::uint64_t, kRejectionCount> rejected{};  // by reason (index = Rejection)
  // How far to trust the estimates (profile.h; filled by the caller with EstimateBand, since it
  // depends on the profile, not on the search). relative 0 = not known.
  UncertaintyBand band;
  // The MFU validated runs of the model's size reached on the family (0 = not known); plans
  // above it carry beyond_envelope. Filled by MarkBeyondEnvelope.
  double mfu_reached = 0;
  std::uint64_t rejected_total() const;
};

// Flags the top plans whose MFU is above what validated runs of the model's size reached on the
// system's GPU family in profile `p` (sets mfu_reached and each plan's beyond_envelope).
void MarkBeyondEnvelope(const SystemProfile& p, const ModelSpec& m, const SystemSpec& s,
                        SearchResult* r);
// Everything a search answer says about trust, as `baton plan search` and the daemon's
// /api/v1/plan/search report it: the job's band on `gpus` GPUs (EstimateBand) and the marks of
// MarkBeyondEnvelope.
void AttachTrust(const SystemProfile& p, const ModelSpec& m, const SystemSpec& s, int gpus,
                 SearchResult* r);

// Errors name the bad input (model, training, an empty or non-positive candidate list).
Result<SearchResult> Search(const ModelSpec& model, const TrainingSpec& training,
                            const SystemSpec& system, const SearchSpace& space,
                            const SearchOptions& options);

}  // namespace baton::perf
