#include "sim/report/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string_view>

#include "sim/report/chart.h"

namespace baton::sim {
namespace {

constexpr std::size_t kMaxPoints = 400;  // per plotted series

std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string CsvField(std::string_view s) {
  if (s.find_first_of(",\"\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

// Every k-th sample so that at most kMaxPoints remain (the last one always kept).
std::vector<const Sample*> Thin(const std::vector<Sample>& samples) {
  std::vector<const Sample*> out;
  if (samples.empty()) return out;
  const std::size_t stride = (samples.size() + kMaxPoints - 1) / kMaxPoints;
  for (std::size_t i = 0; i < samples.size(); i += stride) out.push_back(&samples[i]);
  if (out.back() != &samples.back()) out.push_back(&samples.back());
  return out;
}

using Series = ChartSeries;

// An empirical CDF of `values` as at most kMaxPoints (value, fraction) points.
std::vector<std::pair<double, double>> Cdf(std::vector<double> values) {
  std::vector<std::pair<double, double>> out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const std::size_t steps = std::min(n, kMaxPoints);
  for (std::size_t k = 1; k <= steps; ++k) {
    const std::size_t i = (k * n + steps - 1) / steps - 1;
    out.push_back({values[i], static_cast<double>(i + 1) / static_cast<double>(n)});
  }
  return out;
}

template <typename F>
std::vector<Series> TimeSeries(const std::vector<SimResult>& runs, F value) {
  std::vector<Series> out;
  for (const auto& r : runs) {
    Series s{r.summary.policy, {}};
    for (const Sample* x : Thin(r.samples)) s.points.push_back({x->t_s / 86400.0, value(*x, r)});
    out.push_back(std::move(s));
  }
  return out;
}

template <typename F>
std::vector<Series> CdfSeries(const std::vector<SimResult>& runs, F value) {
  std::vector<Series> out;
  for (const auto& r : runs) {
    std::vector<double> v;
    for (const auto& j : r.jobs) {
      if (j.outcome == JobOutcome::kCompleted) v.push_back(value(j));
    }
    out.push_back({r.summary.policy, Cdf(std::move(v))});
  }
  return out;
}

}  // namespace

std::optional<Verdict> ComputeVerdict(const std::vector<SimResult>& runs) {
  std::optional<std::size_t> best, second;
  auto better = [&](std::size_t a, std::size_t b) {
    return runs[a].summary.avg_jct_s < runs[b].summary.avg_jct_s;
  };
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].summary.completed == 0) continue;  // a mean JCT of nothing wins nothing
    if (!best || better(i, *best)) {
      second = best;
      best = i;
    } else if (!second || better(i, *second)) {
      second = i;
    }
  }
  if (!best) return std::nullopt;
  const SimSummary& w = runs[*best].summary;
  Verdict v;
  v.winner = *best;
  v.runner_up = second;
  v.mean_jct_s = w.avg_jct_s;
  v.preemptions = w.preemptions;
  v.lost_gpu_hours = w.lost_gpu_hours;
  if (second && runs[*second].summary.avg_jct_s > 0) {
    const double other = runs[*second].summary.avg_jct_s;
    v.below_runner_up_pct = 100 * (other - w.avg_jct_s) / other;
  }
  for (std::size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].summary.completed > w.completed &&
        (!v.completed_more ||
         runs[i].summary.completed > runs[*v.completed_more].summary.completed)) {
      v.completed_more = i;
    }
  }
  return v;
}

std::string VerdictLine(const Verdict& v, const std::vector<SimResult>& runs) {
  const SimSummary& w = runs.at(v.winner).summary;
  const std::string cost =
      fmt::format("{} preemptions and {:.1f} lost GPU-hours", v.preemptions, v.lost_gpu_hours);
  std::string out;
  if (runs.size() == 1) {
    out = fmt::format("Verdict: one policy run, {}: mean JCT {:.2f} h at {}", w.policy,
                      v.mean_jct_s / 3600, cost);
  } else if (!v.runner_up) {
    out = fmt::format(
        "Verdict: {} has the lowest mean JCT ({:.2f} h; no other policy completed a "
        "job) at {}",
        w.policy, v.mean_jct_s / 3600, cost);
  } else {
    const SimSummary& r = runs.at(*v.runner_up).summary;
    const std::string margin =
        r.avg_jct_s == w.avg_jct_s
            ? fmt::format("tied with {}", r.policy)
            : fmt::format("{:.{}f}% below {}, the next best", v.below_runner_up_pct,
                          v.below_runner_up_pct < 1 ? 2 : 1, r.policy);
    out = fmt::format(
        "Verdict: {} has the lowest mean JCT ({:.2f} h, {}) at {} ({}: {} and {:.1f})", w.policy,
        v.mean_jct_s / 3600, margin, cost, r.policy, r.preemptions, r.lost_gpu_hours);
  }
  if (v.completed_more) {
    const SimSummary& m = runs.at(*v.completed_more).summary;
    out +=
        fmt::format("; {} completed more jobs ({} against {})", m.policy, m.completed, w.completed);
  }
  return out;
}

std::string SummaryTable(const std::vector<SimResult>& runs) {
  // The policy column is as wide as the longest label ("backfill/rigid" with --elastic-variants).
  std::size_t width = 10;
  for (const auto& r : runs) width = std::max(width, r.summary.policy.size());
  std::string out = fmt::format(
      "{:<{}} {:>7} {:>7} {:>6} {:>12} {:>12} {:>12} {:>9} {:>7} {:>7} {:>7} {:>8} {:>8} "
      "{:>10}\n",
      "policy", width, "jobs", "done", "fail", "avg JCT h", "p50 JCT h", "avg wait h", "slowdown",
      "util", "eff", "goodpt", "preempt", "fail-rst", "lost GPUh");
  for (const auto& r : runs) {
    const SimSummary& s = r.summary;
    out += fmt::format(
        "{:<{}} {:>7} {:>7} {:>6} {:>12.3f} {:>12.3f} {:>12.3f} {:>9.2f} {:>7.3f} {:>7.3f} "
        "{:>7.3f} {:>8} {:>8} {:>10.1f}\n",
        s.policy, width, s.jobs, s.completed, s.failed + s.rejected + s.unfinished,
        s.avg_jct_s / 3600, s.median_jct_s / 3600, s.avg_wait_s / 3600, s.avg_slowdown,
        s.allocated_util, s.effective_util, s.goodput, s.preemptions, s.failure_restarts,
        s.lost_gpu_hours);
  }
  if (auto v = ComputeVerdict(runs)) out += VerdictLine(*v, runs) + "\n";
  return out;
}

std::string ElasticVariantsTable(const std::vector<SimResult>& runs) {
  std::string out = fmt::format(
      "elastic variants: {} elastic job(s) as the trace gives them vs rigid at their max_gpus\n"
      "{:<16} {:>12} {:>12} {:>12} {:>12} {:>7} {:>7} {:>8} {:>10}\n",
      runs.empty() ? 0 : runs[0].summary.elastic_jobs, "policy/variant", "avg JCT h", "p50 JCT h",
      "p95 JCT h", "avg wait h", "util", "eff", "resizes", "lost GPUh");
  for (std::size_t i = 0; i + 1 < runs.size(); i += 2) {
    const SimSummary& e = runs[i].summary;
    const SimSummary& r = runs[i + 1].summary;
    for (const SimSummary* s : {&e, &r}) {
      out += fmt::format(
          "{:<16} {:>12.3f} {:>12.3f} {:>12.3f} {:>12.3f} {:>7.3f} {:>7.3f} {:>8} {:>10.1f}\n",
          s->policy, s->avg_jct_s / 3600, s->median_jct_s / 3600, s->p95_jct_s / 3600,
          s->avg_wait_s / 3600, s->allocated_util, s->effective_util, s->resizes,
          s->lost_gpu_hours);
    }
    auto change = [](double now, double was) {
      return was > 0 ? fmt::format("{:+.1f}%", 100 * (now - was) / was) : std::string("-");
    };
    out += fmt::format("{:<16} avg JCT {} , p95 JCT {} , util {} (elastic against rigid)\n",
                       e.policy, change(e.avg_jct_s, r.avg_jct_s), change(e.p95_jct_s, r.p95_jct_s),
                       change(e.allocated_util, r.allocated_util));
  }
  return out;
}

std::string ReportJson(const ReportMeta& meta, const std::vector<SimResult>& runs) {
  std::string out = fmt::format(
      "{{\n  \"trace\": {},\n  \"cluster\": {},\n  \"seed\": {},\n  \"failures\": {},\n"
      "  \"runs\": [",
      JsonString(meta.trace), JsonString(meta.cluster), meta.seed, meta.failures);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const SimResult& r = runs[i];
    const SimSummary& s = r.summary;
    out += i ? ",\n" : "\n";
    out += fmt::format(
        "    {{\n      \"policy\": {},\n      \"summary\": {{\"cluster_gpus\": {}, \"jobs\": {}, "
        "\"completed\": {}, \"failed\": {}, \"rejected\": {}, \"unfinished\": {}, "
        "\"skipped\": {}, \"avg_jct_s\": {:.3f}, \"median_jct_s\": {:.3f}, \"p95_jct_s\": {:.3f}, "
        "\"avg_wait_s\": {:.3f}, \"avg_slowdown\": {:.4f}, \"makespan_s\": {:.3f}, "
        "\"allocated_util\": {:.4f}, \"effective_util\": {:.4f}, \"goodput\": {:.4f}, "
        "\"avg_queue\": {:.3f}, \"avg_fragmentation_gpus\": {:.3f}, \"preemptions\": {}, "
        "\"failure_restarts\": {}, "
        "\"node_failures\": {}, \"lost_gpu_hours\": {:.3f}, \"tenant_fairness\": {:.4f}, "
        "\"events\": {}, \"cycles\": {}}},\n",
        JsonString(s.policy), s.cluster_gpus, s.jobs, s.completed, s.failed, s.rejected,
        s.unfinished, s.skipped, s.avg_jct_s, s.median_jct_s, s.p95_jct_s, s.avg_wait_s,
        s.avg_slowdown, s.makespan_s, s.allocated_util, s.effective_util, s.goodput, s.avg_queue,
        s.avg_fragmentation, s.preemptions, s.failure_restarts, s.node_failures, s.lost_gpu_hours,
        s.tenant_fairness, s.events, s.cycles);
    out += fmt::format(
        "      \"trace\": {{\"lines\": {}, \"jobs\": {}, \"malformed\": {}, \"filtered\": {}}},\n"
        "      \"tenants\": [",
        r.trace.lines, r.trace.jobs, r.trace.malformed, r.trace.filtered);
    for (std::size_t k = 0; k < r.tenants.size(); ++k) {
      const TenantStats& t = r.tenants[k];
      out += fmt::format(
          "{}{{\"tenant\": {}, \"jobs\": {}, \"gpu_hours\": {:.3f}, \"avg_jct_s\": {:.3f}, "
          "\"avg_slowdown\": {:.4f}}}",
          k ? ", " : "", JsonString(t.tenant), t.jobs, t.gpu_hours, t.avg_jct_s, t.avg_slowdown);
    }
    out += "],\n      \"samples\": {\"t_s\": [";
    const auto thin = Thin(r.samples);
    auto list = [&](auto field) {
      std::string l;
      for (std::size_t k = 0; k < thin.size(); ++k) l += (k ? ", " : "") + field(*thin[k]);
      return l;
    };
    out += list([](const Sample& x) { return fmt::format("{:.0f}", x.t_s); });
    out += "],\n        \"allocated_gpus\": [";
    out += list([](const Sample& x) { return fmt::format("{}", x.allocated_gpus); });
    out += "],\n        \"effective_gpus\": [";
    out += list([](const Sample& x) { return fmt::format("{:.2f}", x.effective_gpus); });
    out += "],\n        \"down_gpus\": [";
    out += list([](const Sample& x) { return fmt::format("{}", x.down_gpus); });
    out += "],\n        \"queue\": [";
    out += list([](const Sample& x) { return fmt::format("{}", x.queue); });
    out += "],\n        \"fragmentation_gpus\": [";
    out += list([](const Sample& x) { return fmt::format("{}", x.fragmentation); });
    out += "]}\n    }";
  }
  return out + "\n  ]\n}\n";
}

std::string JobsCsv(const std::vector<SimResult>& runs) {
  std::string out =
      "policy,job,tenant,gpus,submit_s,start_s,end_s,work_s,wait_s,jct_s,slowdown,preemptions,"
      "failure_restarts,lost_gpu_s,held_gpu_s,outcome,reason\n";
  for (const auto& r : runs) {
    for (const auto& j : r.jobs) {
      out += fmt::format(
          "{},{},{},{},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.4f},{},{},{:.3f},"
          "{:.3f},{},{}\n",
          CsvField(r.summary.policy), CsvField(j.id), CsvField(j.tenant), j.gpus, j.submit_s,
          j.first_start_s, j.end_s, j.work_s, j.wait_s(), j.jct_s(), j.slowdown(), j.preemptions,
          j.failure_restarts, j.lost_gpu_s, j.held_gpu_s, JobOutcomeName(j.outcome),
          CsvField(j.reason));
    }
  }
  return out;
}

std::string ReportHtml(const ReportMeta& meta, const std::vector<SimResult>& runs) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>baton sim: {0}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em}}.wide{{overflow-x:auto}}"
      "table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:3px 8px;"
      "text-align:right}}th{{background:#eee}}td:first-child{{text-align:left}}"
      ".plots{{display:flex;flex-wrap:wrap;gap:1em}}</style></head><body>\n"
      "<h1>baton sim</h1>\n<p>Trace <code>{0}</code> on {1}; seed {2}; node failures {3}.</p>\n",
      HtmlEscape(meta.trace), HtmlEscape(meta.cluster), meta.seed, meta.failures ? "on" : "off");
  out +=
      "<div "
      "class=\"wide\"><table><tr><th>policy</th><th>jobs</th><th>completed</th><th>failed</"
      "th><th>rejected</th>"
      "<th>avg JCT (h)</th><th>median JCT (h)</th><th>p95 JCT (h)</th><th>avg wait (h)</th>"
      "<th>avg slowdown</th><th>allocated util</th><th>effective util</th><th>goodput</th>"
      "<th>avg queue</th><th>avg fragmentation (GPUs)</th><th>preemptions</th>"
      "<th>failure restarts</th>"
      "<th>node failures</th><th>lost GPU-h</th><th>tenant fairness</th></tr>\n";
  for (const auto& r : runs) {
    const SimSummary& s = r.summary;
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td>"
        "<td>{:.3f}</td><td>{:.3f}</td><td>{:.2f}</td><td>{:.3f}</td><td>{:.3f}</td>"
        "<td>{:.3f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1f}</"
        "td>"
        "<td>{:.3f}</td></tr>\n",
        HtmlEscape(s.policy), s.jobs, s.completed, s.failed, s.rejected, s.avg_jct_s / 3600,
        s.median_jct_s / 3600, s.p95_jct_s / 3600, s.avg_wait_s / 3600, s.avg_slowdown,
        s.allocated_util, s.effective_util, s.goodput, s.avg_queue, s.avg_fragmentation,
        s.preemptions, s.failure_restarts, s.node_failures, s.lost_gpu_hours, s.tenant_fairness);
  }
  out += "</table></div>\n";
  if (auto v = ComputeVerdict(runs)) {
    out += fmt::format("<p class=\"verdict\"><strong>{}</strong></p>\n",
                       HtmlEscape(VerdictLine(*v, runs)));
  }
  out +=
      "<p><small>JCT: job completion time, submit to end. Slowdown: JCT over the "
      "job's run time alone. Allocated util: GPU-time held by jobs over the GPU-time available. "
      "Effective util (eff): held GPU-time weighted by the speed each placement allows (a spread "
      "gang counts less than a compact one). Goodput (goodpt): GPU-time of the work of completed "
      "jobs over the GPU-time available, so what failures, restarts and preemptions lost is not "
      "in it. Fragmentation: free GPUs the smallest waiting gang cannot use. Preemptions (by the "
      "policy) and failure restarts (a node went down) are counted apart.</small></p>\n"
      "<div class=\"plots\">\n";
  out += LineChart("Allocated GPU utilisation", "days", "fraction of GPUs",
                   TimeSeries(runs,
                              [](const Sample& x, const SimResult& r) {
                                return r.summary.cluster_gpus
                                           ? static_cast<double>(x.allocated_gpus) /
                                                 r.summary.cluster_gpus
                                           : 0.0;
                              }),
                   false, 1.0);
  out += LineChart("JCT CDF", "job completion time (s, log)", "fraction of jobs",
                   CdfSeries(runs, [](const JobRecord& j) { return j.jct_s(); }), true, 1.0);
  out += LineChart("Queueing delay CDF", "wait (s, log)", "fraction of jobs",
                   CdfSeries(runs, [](const JobRecord& j) { return j.wait_s(); }), true, 1.0);
  out += LineChart("Queue length", "days", "waiting jobs",
                   TimeSeries(runs, [](const Sample& x,
                                       const SimResult&) { return static_cast<double>(x.queue); }),
                   false);
  out += LineChart(
      "Fragmentation", "days", "free GPUs unusable by the smallest waiting gang",
      TimeSeries(runs, [](const Sample& x,
                          const SimResult&) { return static_cast<double>(x.fragmentation); }),
      false);
  out += "</div>\n</body></html>\n";
  return out;
}

}  // namespace baton::sim
