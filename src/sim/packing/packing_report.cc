#include "sim/packing/packing_report.h"

#include <fmt/format.h>

#include <cmath>

#include "sim/report/chart.h"

namespace baton::sim {
namespace {

// The point of `c` at arrived demand `at` (the nearest step), or nullptr.
const PackingPoint* PointAt(const PackingCurve& c, double at) {
  for (const PackingPoint& p : c.points) {
    if (std::abs(p.arrived - at) < 1e-6) return &p;
  }
  return nullptr;
}

}  // namespace

PackingCurve MeanCurve(std::string policy, std::span<const PackingResult> runs, double step,
                       double tune) {
  PackingCurve c;
  c.policy = std::move(policy);
  c.seeds = static_cast<int>(runs.size());
  if (runs.empty() || !(step > 0)) return c;
  const int steps = static_cast<int>(std::floor(tune / step + 1e-9));
  for (int i = 1; i <= steps; ++i) {
    PackingPoint p;
    p.arrived = step * i;
    for (const PackingResult& r : runs) {
      p.allocated += r.AllocationAt(p.arrived);
      p.fragmentation += r.FragmentationAt(p.arrived);
    }
    p.allocated /= static_cast<double>(runs.size());
    p.fragmentation /= static_cast<double>(runs.size());
    c.points.push_back(p);
  }
  return c;
}

std::string PackingCsv(std::span<const PackingCurve> curves) {
  std::string out = "policy,seeds,arrived_pct,allocated_pct,fragmentation_pct\n";
  for (const PackingCurve& c : curves) {
    for (const PackingPoint& p : c.points) {
      out += fmt::format("{},{},{:.1f},{:.3f},{:.3f}\n", c.policy, c.seeds, p.arrived * 100,
                         p.allocated * 100, p.fragmentation * 100);
    }
  }
  return out;
}

std::string PackingHtml(const PackingReportMeta& meta, std::span<const PackingCurve> curves) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>baton packing: {0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}"
      "td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}"
      "td:first-child{{text-align:left}}</style></head><body>\n"
      "<h1>Packing: allocation against arrived demand</h1>\n"
      "<p>Node list <code>{1}</code>, pod list <code>{0}</code>, seeds {2}. Pods are sampled to "
      "1.3&times; the GPU capacity, shuffled, and arrive one by one; a pod that does not fit is "
      "skipped and none leaves (FGD's protocol, USENIX ATC'23). Each line is the mean over the "
      "seeds.</p>\n<table><tr><th>policy</th><th>allocation at 100 % arrived</th>"
      "<th>fragmentation at 100 %</th><th>replay (s, median)</th></tr>\n",
      HtmlEscape(meta.pods), HtmlEscape(meta.nodes), HtmlEscape(meta.seeds));
  std::vector<ChartSeries> allocation;
  std::vector<ChartSeries> fragmentation;
  for (const PackingCurve& c : curves) {
    const PackingPoint* p = PointAt(c, 1.0);
    out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.2f}</td></tr>\n",
                       HtmlEscape(c.policy), p ? fmt::format("{:.2f} %", p->allocated * 100) : "-",
                       p ? fmt::format("{:.2f} %", p->fragmentation * 100) : "-", c.replay_seconds);
    ChartSeries a{c.policy, {}};
    ChartSeries f{c.policy, {}};
    for (const PackingPoint& q : c.points) {
      a.points.push_back({q.arrived * 100, q.allocated * 100});
      f.points.push_back({q.arrived * 100, q.fragmentation * 100});
    }
    allocation.push_back(std::move(a));
    fragmentation.push_back(std::move(f));
  }
  out += "</table>\n";
  out += LineChart("GPU allocation", "arrived GPU demand (% of capacity)",
                   "allocated GPU (% of capacity)", allocation, false, 100);
  out += LineChart("Expected GPU fragmentation", "arrived GPU demand (% of capacity)",
                   "fragmented GPU (% of capacity)", fragmentation, false);
  out += "</body></html>\n";
  return out;
}

}  // namespace baton::sim
