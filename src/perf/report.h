// Rendering of estimates and search results: text tables, JSON, and a self-contained HTML page
// (inline SVG, no scripts or network) with the top plans' step-time breakdowns and memory.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "perf/estimator.h"
#include "perf/search.h"

namespace baton::perf {

nlohmann::json PlanToJson(const ParallelPlan& plan);
nlohmann::json EstimateToJson(const StepEstimate& e);
nlohmann::json SearchToJson(const SearchResult& r);  // with "band" and per-plan bands
nlohmann::json BandToJson(const UncertaintyBand& b);
// "uncertainty   +-7% (...)" and, outside the envelope, an EXTRAPOLATION line; empty when the
// band is not known.
std::string FormatBand(const UncertaintyBand& b);
// BandToJson plus the step time and MFU ranges the band puts around estimate `e` ("step_s" and
// "mfu": [low, high]), as `plan estimate --json` and /api/v1/plan/estimate answer it.
nlohmann::json EstimateBandJson(const UncertaintyBand& b, const StepEstimate& e);
// Every stack setting (perf/stack.h) by name with its word: {"grads": "fp32", ...}.
nlohmann::json StackJson(const TrainingSpec& training);
// The whole answer to "estimate this plan": model, system, batch, stack, plan, estimate, why it
// does not fit (when it does not), checkpoint size and interval, and the time / GPU-hours / cost to
// train when the training spec asks for tokens. `baton plan estimate --json` and the daemon's
// /api/v1/plan/estimate print it.
nlohmann::json EstimateReportJson(const ModelSpec& model, const TrainingSpec& training,
                                  const SystemSpec& system, const ParallelPlan& plan,
                                  const StepEstimate& e);

// A multi-line breakdown: step, each part with its share, rates and memory.
std::string FormatEstimate(const StepEstimate& e);
// One line per plan: rank, plan, step, tokens/s, MFU, memory, the largest overhead.
std::string FormatSearchTable(const SearchResult& r);
// Rejected plans by reason, "space N = feasible F + rejected R".
std::string FormatRejections(const SearchResult& r);

std::string SearchReportHtml(const std::string& title, const SearchResult& r);

}  // namespace baton::perf
