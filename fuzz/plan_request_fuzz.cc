// libFuzzer target for the planner's request parser (the body of POST /api/v1/plan/estimate and
// /plan/search). The first input byte picks the question; the rest is the body. Besides "no crash,
// no sanitizer report", it checks that an accepted estimate request's plan uses exactly the asked
// GPUs and that the estimator runs on it without failing its own validation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "perf/estimator.h"
#include "perf/request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace baton::perf;
  if (size == 0) return 0;
  PlanQuestion q = (data[0] & 1) != 0 ? PlanQuestion::kSearch : PlanQuestion::kEstimate;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string field;
  baton::Result<PlanRequest> r = ParsePlanRequest(body, q, &field);
  if (!r.ok()) return 0;
  if (r->gpus < 1 || r->training.global_batch < 1) __builtin_trap();
  if (q == PlanQuestion::kSearch) {
    if (r->space.size() > kMaxRequestSearchSpace || r->top_k < 1) __builtin_trap();
    return 0;
  }
  if (r->plan.gpus() != r->gpus) __builtin_trap();
  ShortSystem s;
  s.gpus = r->gpus;
  baton::Result<SystemSpec> system = SystemFromShort(s);
  if (!system.ok()) return 0;
  baton::Result<StepEstimate> e = Estimate(r->model, r->plan, r->training, *system);
  if (!e.ok()) __builtin_trap();
  return 0;
}
