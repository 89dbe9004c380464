#include "perf/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "perf/stack.h"

namespace baton::perf {

namespace {

struct Part {
  const char* name;
  const char* color;
  Seconds StepEstimate::*field;
};
constexpr std::array<Part, 10> kParts = {{
    {"compute", "#4e79a7", &StepEstimate::compute},
    {"recompute", "#a0cbe8", &StepEstimate::recompute},
    {"tp comm", "#f28e2b", &StepEstimate::tp_comm},
    {"cp comm", "#ffbe7d", &StepEstimate::cp_comm},
    {"ep comm", "#8cd17d", &StepEstimate::ep_comm},
    {"pp comm", "#b6992d", &StepEstimate::pp_comm},
    {"dp comm", "#e15759", &StepEstimate::dp_comm},
    {"bubble", "#bab0ac", &StepEstimate::bubble},
    {"optimizer", "#79706e", &StepEstimate::optimizer},
    {"launch", "#d37295", &StepEstimate::launch},
}};

struct MemPart {
  const char* name;
  const char* color;
  Bytes MemoryEstimate::*field;
};
constexpr std::array<MemPart, 5> kMemParts = {{
    {"weights", "#4e79a7", &MemoryEstimate::weights},
    {"gradients", "#f28e2b", &MemoryEstimate::gradients},
    {"optimizer", "#e15759", &MemoryEstimate::optimizer},
    {"activations", "#76b7b2", &MemoryEstimate::activations},
    {"buffers", "#bab0ac", &MemoryEstimate::buffers},
}};

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string LargestOverhead(const StepEstimate& e) {
  const Part* best = nullptr;
  for (const Part& p : kParts) {
    if (std::string_view(p.name) == "compute") continue;
    if (best == nullptr || e.*(p.field) > e.*(best->field)) best = &p;
  }
  if (best == nullptr || e.step.value() <= 0) return "";
  return fmt::format("{} {:.0f}%", best->name, 100 * (e.*(best->field)) / e.step);
}

}  // namespace

nlohmann::json PlanToJson(const ParallelPlan& p) {
  return {{"tp", p.tp},
          {"pp", p.pp},
          {"dp", p.dp},
          {"cp", p.cp},
          {"ep", p.ep},
          {"mbs", p.mbs},
          {"vp", p.vp},
          {"recompute", std::string(RecomputeName(p.recompute))},
          {"sequence_parallel", p.sequence_parallel},
          {"zero", p.zero},
          {"fsdp_group", p.fsdp_group},
          {"overlap_dp_comm", p.overlap_dp_comm},
          {"uneven_pp", p.uneven_pp},
          {"batched_pp_p2p", p.batched_pp_p2p},
          {"order", std::string(RankOrderName(p.order))},
          {"gpus", p.gpus()}};
}

nlohmann::json EstimateToJson(const StepEstimate& e) {
  nlohmann::json j;
  j["feasible"] = e.feasible();
  j["rejection"] = std::string(RejectionName(e.rejection));
  j["step_s"] = e.step.value();
  nlohmann::json b;
  for (const Part& p : kParts) b[p.name] = (e.*(p.field)).value();
  j["breakdown_s"] = b;
  j["micro_batches"] = e.micro_batches;
  j["tokens_per_second"] = e.tokens_per_second;
  j["mfu"] = e.mfu;
  j["mfu_causal"] = e.mfu_causal;
  j["hfu"] = e.hfu;
  nlohmann::json m;
  for (const MemPart& p : kMemParts) m[std::string(p.name) + "_gib"] = ToGiB(e.memory.*(p.field));
  m["total_gib"] = ToGiB(e.memory.total());
  m["capacity_gib"] = ToGiB(e.memory.capacity);
  m["usable_gib"] = ToGiB(e.memory.usable);
  j["memory"] = m;
  return j;
}

nlohmann::json BandToJson(const UncertaintyBand& b) {
  return {{"relative", b.relative}, {"extrapolated", b.extrapolated}, {"why", b.why}};
}

nlohmann::json EstimateBandJson(const UncertaintyBand& b, const StepEstimate& e) {
  nlohmann::json j = BandToJson(b);
  j["step_s"] = {e.step.value() / (1 + b.relative), e.step.value() * (1 + b.relative)};
  j["mfu"] = {e.mfu / (1 + b.relative), e.mfu * (1 + b.relative)};
  return j;
}

std::string FormatBand(const UncertaintyBand& b) {
  if (b.relative <= 0) return "";
  std::string s = fmt::format(
      "uncertainty   +-{:.0f}% (what held-out runs like this one missed by, cross-validated; "
      "docs/perf/planner.md)\n",
      100 * b.relative);
  if (b.extrapolated)
    s += fmt::format("EXTRAPOLATION: outside the validated envelope: {}\n", b.why);
  return s;
}

nlohmann::json SearchToJson(const SearchResult& r) {
  nlohmann::json j;
  j["space"] = r.space;
  j["feasible"] = r.feasible;
  nlohmann::json rej = nlohmann::json::object();
  for (int i = 1; i < kRejectionCount; ++i) {
    if (r.rejected[i] > 0)
      rej[std::string(RejectionName(static_cast<Rejection>(i)))] = r.rejected[i];
  }
  j["rejected"] = rej;
  j["band"] = BandToJson(r.band);
  j["mfu_reached"] = r.mfu_reached;
  j["top"] = nlohmann::json::array();
  for (const RankedPlan& p : r.top) {
    nlohmann::json e = EstimateToJson(p.estimate);
    double rel = r.band.relative;
    e["step_s_band"] = {p.estimate.step.value() / (1 + rel), p.estimate.step.value() * (1 + rel)};
    e["mfu_band"] = {p.estimate.mfu / (1 + rel), p.estimate.mfu * (1 + rel)};
    j["top"].push_back(
        {{"plan", PlanToJson(p.plan)}, {"estimate", e}, {"beyond_envelope", p.beyond_envelope}});
  }
  return j;
}

nlohmann::json StackJson(const TrainingSpec& training) {
  nlohmann::json j = nlohmann::json::object();
  for (const StackSetting& s : StackSettings()) {
    j[std::string(s.name)] = std::string(StackSettingValue(s.name, training));
  }
  return j;
}

nlohmann::json EstimateReportJson(const ModelSpec& model, const TrainingSpec& training,
                                  const SystemSpec& system, const ParallelPlan& plan,
                                  const StepEstimate& e) {
  TrainingTotals totals = ComputeTotals(model, training, e, plan.gpus());
  nlohmann::json j;
  j["model"] = model.name;
  j["system"] = system.name;
  j["global_batch"] = training.global_batch;
  j["stack"] = StackJson(training);
  j["plan"] = PlanToJson(plan);
  j["estimate"] = EstimateToJson(e);
  if (!e.feasible()) j["reason"] = ExplainRejection(EvalContext(model, training, system), plan, e);
  j["checkpoint"] = {{"size_gib", ToGiB(totals.checkpoint_size)},
                     {"write_s", totals.checkpoint_write.value()},
                     {"interval_s", totals.checkpoint_interval.value()}};
  if (training.tokens_to_train > 0 && e.feasible()) {
    j["train"] = {{"time_s", totals.time_to_train.value()},
                  {"gpu_hours", totals.gpu_hours},
                  {"cost_dollars", totals.cost_dollars}};
  }
  return j;
}

std::string FormatEstimate(const StepEstimate& e) {
  std::string out;
  // An infeasible plan has no step time, rate or MFU (they would print as 0): only its memory,
  // which says why it does not fit.
  if (e.feasible()) {
    out += fmt::format("step time     {}  ({} micro-batches)\n", FormatDuration(e.step),
                       e.micro_batches);
    for (const Part& p : kParts) {
      Seconds s = e.*(p.field);
      if (s.value() <= 0) continue;
      out += fmt::format("  {:<11} {:>10}  {:5.1f}%\n", p.name, FormatDuration(s),
                         e.step.value() > 0 ? 100 * s / e.step : 0.0);
    }
    out += fmt::format(
        "tokens/s      {:.4g}\nMFU           {:.1f}%  ({:.1f}% counting causal attention only, "
        "as Llama 3 reports it)\nHFU           {:.1f}%\n",
        e.tokens_per_second, 100 * e.mfu, 100 * e.mfu_causal, 100 * e.hfu);
  }
  out += "memory per GPU (first pipeline stage)\n";
  for (const MemPart& p : kMemParts) {
    out += fmt::format("  {:<11} {:8.2f} GiB\n", p.name, ToGiB(e.memory.*(p.field)));
  }
  out += fmt::format("  {:<11} {:8.2f} GiB of {:.1f} usable ({:.1f} HBM)\n", "total",
                     ToGiB(e.memory.total()), ToGiB(e.memory.usable), ToGiB(e.memory.capacity));
  return out;
}

std::string FormatSearchTable(const SearchResult& r) {
  std::string out;
  if (r.band.extrapolated) {
    out += fmt::format("EXTRAPOLATION: every plan below is outside the validated envelope ({})\n",
                       r.band.why);
  }
  if (r.band.relative > 0) {
    out +=
        fmt::format("uncertainty band: +-{:.0f}% on step time and MFU{}\n", 100 * r.band.relative,
                    r.band.extrapolated ? " (widened: extrapolation)" : "");
  }
  out += fmt::format("{:>3}  {:<66} {:>10} {:>10} {:>6} {:>7} {:>9}  {}\n", "#", "plan", "step",
                     "tokens/s", "MFU", "causal", "mem GiB", "largest overhead");
  int i = 0;
  bool any_beyond = false;
  for (const RankedPlan& p : r.top) {
    any_beyond = any_beyond || p.beyond_envelope;
    out += fmt::format("{:>3}  {:<66} {:>10} {:>10.4g} {:>5.1f}%{} {:>6.1f}% {:>9.1f}  {}\n", ++i,
                       PlanToString(p.plan), FormatDuration(p.estimate.step),
                       p.estimate.tokens_per_second, 100 * p.estimate.mfu,
                       p.beyond_envelope ? "!" : " ", 100 * p.estimate.mfu_causal,
                       ToGiB(p.estimate.memory.total()), LargestOverhead(p.estimate));
  }
  if (any_beyond) {
    out += fmt::format(
        "! EXTRAPOLATION: MFU above the {:.1f}% validated runs of a model this size reached on "
        "this GPU family\n",
        100 * r.mfu_reached);
  }
  return out;
}

std::string FormatRejections(const SearchResult& r) {
  std::string out = fmt::format("space {} plans = feasible {} + rejected {}\n", r.space, r.feasible,
                                r.rejected_total());
  for (int i = 1; i < kRejectionCount; ++i) {
    if (r.rejected[i] == 0) continue;
    out += fmt::format("  {:<18} {}\n", RejectionName(static_cast<Rejection>(i)), r.rejected[i]);
  }
  return out;
}

std::string SearchReportHtml(const std::string& title, const SearchResult& r) {
  const int bar_h = 22, chart_w = 520, gap = 8;
  const int n = static_cast<int>(r.top.size());
  // Room for the longest "N. plan" label: 12 px monospace is about 7.3 px a character.
  std::size_t longest = 0;
  for (int i = 0; i < n; ++i) {
    longest = std::max(longest, fmt::format("{}. {}", i + 1, PlanToString(r.top[i].plan)).size());
  }
  const int label_w = static_cast<int>(longest * 7.3) + 12;
  const int height = 40 + n * (bar_h + gap) + 30;
  double max_step = 0, max_mem = 0;
  for (const RankedPlan& p : r.top) {
    max_step = std::max(max_step, p.estimate.step.value());
    max_mem =
        std::max({max_mem, p.estimate.memory.total().value(), p.estimate.memory.usable.value()});
  }
  auto legend = [&](auto& parts) {
    std::string s = "<p class=legend>";
    for (const auto& p : parts) {
      s += fmt::format("<span><i style=\"background:{}\"></i>{}</span>", p.color, p.name);
    }
    return s + "</p>";
  };
  std::string time_svg =
      fmt::format("<svg width=\"{}\" height=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">",
                  label_w + chart_w + 220, height);
  std::string mem_svg = time_svg;
  for (int i = 0; i < n; ++i) {
    const RankedPlan& p = r.top[i];
    int y = 30 + i * (bar_h + gap);
    std::string label = fmt::format("<text x=\"0\" y=\"{}\" class=\"lbl\">{}. {}</text>", y + 15,
                                    i + 1, Escape(PlanToString(p.plan)));
    time_svg += label;
    mem_svg += label;
    double x = label_w;
    for (const Part& part : kParts) {
      double w = max_step > 0 ? chart_w * (p.estimate.*(part.field)).value() / max_step : 0;
      if (w <= 0) continue;
      time_svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: "
          "{}</title></rect>",
          x, y, w, bar_h, part.color, part.name, Escape(FormatDuration(p.estimate.*(part.field))));
      x += w;
    }
    time_svg += fmt::format(
        "<text x=\"{:.1f}\" y=\"{}\" class=\"val\">{} · MFU {:.1f}% ({:.1f}% causal)</text>", x + 6,
        y + 15, Escape(FormatDuration(p.estimate.step)), 100 * p.estimate.mfu,
        100 * p.estimate.mfu_causal);
    x = label_w;
    for (const MemPart& part : kMemParts) {
      double w = max_mem > 0 ? chart_w * (p.estimate.memory.*(part.field)).value() / max_mem : 0;
      if (w <= 0) continue;
      mem_svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"><title>{}: "
          "{:.2f} GiB</title></rect>",
          x, y, w, bar_h, part.color, part.name, ToGiB(p.estimate.memory.*(part.field)));
      x += w;
    }
    double cap =
        max_mem > 0 ? label_w + chart_w * p.estimate.memory.usable.value() / max_mem : label_w;
    mem_svg += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#000\" "
        "stroke-dasharray=\"3,2\"/><text x=\"{3:.1f}\" y=\"{4}\" class=\"val\">{5:.1f} / {6:.0f} "
        "GiB</text>",
        cap, y - 2, y + bar_h + 2, std::max(x, cap) + 6, y + 15, ToGiB(p.estimate.memory.total()),
        ToGiB(p.estimate.memory.usable));
  }
  time_svg += "</svg>";
  mem_svg += "</svg>";

  std::string rows;
  int i = 0;
  for (const RankedPlan& p : r.top) {
    rows += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.4g}</td><td>{:.1f}%{}</td><td>{:.1f}%</td>"
        "<td>{:.1f}%</td><td>{:.1f}</td></tr>",
        ++i, Escape(PlanToString(p.plan)), Escape(FormatDuration(p.estimate.step)),
        p.estimate.tokens_per_second, 100 * p.estimate.mfu, p.beyond_envelope ? " !" : "",
        100 * p.estimate.mfu_causal, 100 * p.estimate.hfu, ToGiB(p.estimate.memory.total()));
  }
  std::string band;
  if (r.band.relative > 0) {
    band = fmt::format(
        "<p class=band>Uncertainty band: &plusmn;{:.0f}% on step time and MFU (cross-validated "
        "error of the nearest validated runs).</p>",
        100 * r.band.relative);
  }
  if (r.band.extrapolated) {
    band +=
        fmt::format("<p class=band><b>Extrapolation:</b> outside the validated envelope: {}</p>",
                    Escape(r.band.why));
  }
  if (std::any_of(r.top.begin(), r.top.end(),
                  [](const RankedPlan& p) { return p.beyond_envelope; })) {
    band += fmt::format(
        "<p class=band><b>Extrapolation (!):</b> MFU above the {:.1f}% validated runs of a model "
        "this size reached on this GPU family.</p>",
        100 * r.mfu_reached);
  }
  std::string rejected;
  for (int k = 1; k < kRejectionCount; ++k) {
    if (r.rejected[k] == 0) continue;
    rejected +=
        fmt::format("<li>{}: {}</li>", RejectionName(static_cast<Rejection>(k)), r.rejected[k]);
  }
  return fmt::format(
      R"(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{0}</title>
<style>body{{font:14px sans-serif;margin:24px;color:#222}} table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}} td:nth-child(2){{text-align:left}}
.lbl{{font:12px monospace}} .val{{font:12px sans-serif}} .legend span{{margin-right:14px}}
.legend i{{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:middle}}</style>
</head><body>
<h1>{0}</h1>
<p>Search space {1} plans: {2} feasible, {3} rejected.</p><ul>{4}</ul>{10}
<h2>Step time breakdown</h2>{5}{6}
<h2>Memory per GPU (first pipeline stage; dashed line = usable HBM)</h2>{7}{8}
<h2>Top plans</h2>
<table><tr><th>#</th><th>plan</th><th>step</th><th>tokens/s</th><th>MFU</th><th>MFU, causal attention</th><th>HFU</th><th>GiB</th></tr>{9}</table>
</body></html>
)",
      Escape(title), r.space, r.feasible, r.rejected_total(), rejected, legend(kParts), time_svg,
      legend(kMemParts), mem_svg, rows, band);
}

}  // namespace baton::perf
