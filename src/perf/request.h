// PlanRequest: a planning question as JSON — "how fast does this plan run?" (estimate) or "which
// plans are best?" (search) for a model on N GPUs of a given system. The daemon's
// /api/v1/plan/estimate and /plan/search take it; the system is the caller's (the daemon plans
// on its own cluster).
//
//   {"model": "llama3-70b" | {model fields, see ParseModel},
//    "gpus": 1024,
//    "training": {"global_batch": 512 | "global_batch_tokens": 4194304, "dtype": "bf16",
//                 "tokens": 1.5e13, "price_per_gpu_hour": 2.0, "flash_attention": true,
//                 "grads": "bf16", "fp8_recipe": "delayed", "compiled": true,
//                 "cp_attention": "ring", "async_tp": false, "tp_impl": "megatron"},
//                                                                  (the stack: perf/stack.h)
//    "plan": {"tp": 8, "pp": 4, "dp": 32, "cp": 1, "ep": 1, "mbs": 1, "vp": 1,
//             "recompute": "selective", "sequence_parallel": true, "zero": 1,
//             "overlap_dp_comm": true, "uneven_pp": false, "order": "tp-cp-ep-dp-pp"},
//    "search": {"tp": [1, 2, 4, 8], "pp": [...], "cp": [...], "ep": [...], "mbs": [...],
//               "vp": [...], "zero": [...], "recompute": ["none", "full"], "top": 10,
//               "objective": "time" | "mfu"}}
//
// Strict: unknown fields, wrong types and out-of-range values are errors naming the dotted field
// ("plan.tp", "search.pp[2]"). A model is a catalogue name or an inline object — never a path:
// the request comes from the network. Pure; never throws.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "perf/model.h"
#include "perf/plan.h"
#include "perf/search.h"
#include "perf/system.h"

namespace baton::perf {

enum class PlanQuestion { kEstimate, kSearch };

struct PlanRequest {
  ModelSpec model;
  TrainingSpec training;
  int gpus = 0;
  ParallelPlan plan;  // kEstimate: dp filled in from gpus when the request leaves it out
  SearchSpace space;  // kSearch: the default space with the request's restrictions
  int top_k = 10;     // kSearch: 1..100
  Objective objective = Objective::kStepTime;
};

// The largest space a search request may ask for (plans), so one request cannot hold a worker
// for minutes; the default space of the biggest catalogue model is well below it.
inline constexpr std::uint64_t kMaxRequestSearchSpace = 2'000'000'000;

// Parses and validates `body` (JSON). `question` decides which of "plan" / "search" is allowed.
// On error `*field` (when not null) names the offending field, "" when the body as a whole is
// malformed; the Status is kInvalidArgument and its message names the field too.
Result<PlanRequest> ParsePlanRequest(std::string_view body, PlanQuestion question,
                                     std::string* field);

// A training job's plan as a job spec carries it (the daemon's "plan" field): one flat object of
// "model" and any of the "plan" and "training" fields above, for a job of `gpus` GPUs:
//
//   {"model": "llama3-70b", "tp": 8, "pp": 4, "mbs": 1, "global_batch": 1024, "dtype": "bf16"}
//
// dp, when left out, is what the GPUs leave after tp x pp x cp. With no "plan" field at all it
// asks for the planner's best plan on `gpus` GPUs: then the model must be a catalogue name and no
// training field may be given (the best plan is searched with the default training: ~4M tokens
// per step, bf16). Strict as ParsePlanRequest; errors name the field with the "plan." prefix
// ("plan.model", "plan.tp", "plan.global_batch"; "plan.dp" when the GPUs do not add up).
struct JobPlanRequest {
  ModelSpec model;
  TrainingSpec training;
  std::optional<ParallelPlan> plan;  // nullopt: the planner's best plan for the job's GPUs
};
Result<JobPlanRequest> ParseJobPlan(std::string_view object, int gpus, std::string* field);

// The plan a job runs on `system` (system.gpus = the job's GPUs): its own when the planner finds
// it feasible there, else the planner's best (perf::Search over DefaultSearchSpace, by step
// time). kInvalidArgument naming the field in `*field` when there is none: "plan" with the
// reason ("out-of-memory: needs 93.1 GiB per GPU, has 80.0 ...", or no feasible plan at all).
// Pure; a best-plan search takes milliseconds for the catalogue's models.
Result<ParallelPlan> ResolveJobPlan(const JobPlanRequest& request, const SystemSpec& system,
                                    std::string* field);

}  // namespace baton::perf
