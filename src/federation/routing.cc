#include "federation/routing.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace baton::federation {
namespace {

// The time to bring one input of `size`, held at `holders`, to site `to`: from the nearest.
Seconds Fetch(const Sites& sites, const std::vector<int>& holders, Bytes size, int to) {
  Seconds best(std::numeric_limits<double>::infinity());
  for (int h : holders) best = std::min(best, TransferTime(size, sites.Link(h, to)));
  return best;
}

std::string Signed(Seconds d) {
  double m = d.value() / 60;
  if (std::fabs(m) < 90) return fmt::format("{:+.0f} min", m);
  return fmt::format("{:+.2f} h", m / 60);
}

std::string Span(Seconds d) {
  double m = d.value() / 60;
  if (m < 90) return fmt::format("{:.0f} min", m);
  return fmt::format("{:.2f} h", m / 60);
}

int HomeSite(const JobNeeds& job, std::span<const SitePrediction> p, const Sites& sites) {
  int home = sites.Find(job.home_site);
  return home >= 0 && p[home].eligible ? home : -1;
}

// The eligible site with the largest share of free GPUs (ties: the first in the file).
int LeastLoaded(const JobNeeds&, std::span<const SitePrediction> p, const Sites&) {
  int best = -1;
  double best_share = -1;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (!p[i].eligible) continue;
    double share = p[i].total_gpus > 0 ? static_cast<double>(p[i].free_gpus) / p[i].total_gpus : 0;
    if (share > best_share) {
      best = static_cast<int>(i);
      best_share = share;
    }
  }
  return best;
}

int PredictedCompletion(const JobNeeds&, std::span<const SitePrediction> p, const Sites&) {
  int best = -1;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (!p[i].eligible) continue;
    if (best < 0 || p[i].completion < p[best].completion) best = static_cast<int>(i);
  }
  return best;
}

// The cheapest site that finishes by the deadline; without a deadline, or when none can, the
// earliest completion.
int CheapestByDeadline(const JobNeeds& job, std::span<const SitePrediction> p, const Sites& sites) {
  int best = -1;
  if (job.deadline) {
    for (std::size_t i = 0; i < p.size(); ++i) {
      if (!p[i].eligible || p[i].completion > *job.deadline) continue;
      if (best < 0 || p[i].cost < p[best].cost) best = static_cast<int>(i);
    }
  }
  return best >= 0 ? best : PredictedCompletion(job, p, sites);
}

}  // namespace

std::span<const RoutingPolicy> RoutingPolicies() {
  static constexpr std::array<RoutingPolicy, 4> kPolicies = {{
      {"home-site", "the job's home site only (no federation)", &HomeSite},
      {"least-loaded", "the eligible site with the largest share of free GPUs", &LeastLoaded},
      {"predicted-completion",
       "the earliest predicted completion: queue wait, data staging and the site's speed",
       &PredictedCompletion},
      {"cheapest-by-deadline",
       "the lowest cost that completes by the job's deadline (else the earliest completion)",
       &CheapestByDeadline},
  }};
  return kPolicies;
}

Result<const RoutingPolicy*> FindRoutingPolicy(std::string_view name) {
  std::string known;
  for (const RoutingPolicy& p : RoutingPolicies()) {
    if (p.name == name) return &p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  return InvalidArgumentError(fmt::format("unknown routing policy '{}' (known: {})", name, known));
}

Result<std::vector<SitePrediction>> Predict(const JobNeeds& job, const Sites& sites,
                                            std::span<const SiteAnswer> answers, TimePoint now) {
  const int n = static_cast<int>(sites.sites().size());
  if (static_cast<int>(answers.size()) != n) {
    return InvalidArgumentError(
        fmt::format("{} answers for {} sites", answers.size(), sites.sites().size()));
  }
  // Each input: its size and the sites holding it.
  struct Input {
    std::string what;
    Bytes size;
    std::vector<int> holders;
  };
  std::vector<Input> inputs;
  for (std::size_t d = 0; d < job.datasets.size(); ++d) {
    Input in{"dataset '" + job.datasets[d] + "'", Bytes(0), {}};
    for (int s = 0; s < n; ++s) {
      if (const Dataset* ds = sites.sites()[s].FindDataset(job.datasets[d])) {
        in.size = ds->size;
        in.holders.push_back(s);
      }
    }
    if (in.holders.empty()) {
      return InvalidArgumentError(
          fmt::format("field 'datasets[{}]': no site stores dataset '{}'", d, job.datasets[d]));
    }
    inputs.push_back(std::move(in));
  }
  if (!job.checkpoint_site.empty()) {
    int at = sites.Find(job.checkpoint_site);
    if (at < 0) {
      return InvalidArgumentError(
          fmt::format("field 'checkpoint_site': unknown site '{}'", job.checkpoint_site));
    }
    inputs.push_back({"its checkpoint", job.checkpoint_size, {at}});
  }
  if (!job.home_site.empty() && sites.Find(job.home_site) < 0) {
    return InvalidArgumentError(fmt::format("field 'home_site': unknown site '{}'", job.home_site));
  }

  std::vector<SitePrediction> out(n);
  for (int s = 0; s < n; ++s) {
    const Site& site = sites.sites()[s];
    const SiteAnswer& a = answers[s];
    SitePrediction& p = out[s];
    p.site = s;
    p.free_gpus = a.free_gpus;
    p.total_gpus = a.total_gpus;
    for (const std::string& r : job.require_regions) {
      if (!site.InRegion(r)) p.why_not = fmt::format("not in region '{}'", r);
    }
    for (const std::string& r : job.exclude_regions) {
      if (site.InRegion(r)) p.why_not = fmt::format("in excluded region '{}'", r);
    }
    if (p.why_not.empty() && !a.reachable) p.why_not = "unreachable";
    if (p.why_not.empty() && !a.refusal.empty()) p.why_not = "refuses: " + a.refusal;
    for (const Input& in : inputs) p.staging += Fetch(sites, in.holders, in.size, s);
    TimePoint staged = now + p.staging;
    TimePoint queued = a.estimated_start.value_or(now);
    p.start = std::max(staged, std::max(queued, now));
    p.run = job.steps > 0 && a.step_time.value() > 0 ? a.step_time * static_cast<double>(job.steps)
                                                     : job.estimated_runtime;
    p.completion = p.start + p.run;
    p.cost = job.gpus * p.run.value() / 3600 * site.price_per_gpu_hour;
    p.eligible = p.why_not.empty();
  }
  // Inputs no eligible site can receive before the deadline make the job impossible.
  if (job.deadline) {
    bool any = false, any_eligible = false;
    for (const SitePrediction& p : out) {
      any_eligible = any_eligible || p.eligible;
      any = any || (p.eligible && now + p.staging <= *job.deadline);
    }
    if (any_eligible && !any) {
      const Input* biggest = nullptr;
      for (const Input& in : inputs) {
        if (biggest == nullptr || in.size > biggest->size) biggest = &in;
      }
      return InvalidArgumentError(fmt::format(
          "field 'deadline': {} ({:.0f} GiB) cannot reach any eligible site before the deadline "
          "(in {}) over the WAN links of the sites file",
          biggest != nullptr ? biggest->what : std::string("its input"),
          biggest != nullptr ? biggest->size.value() / (1 << 30) : 0.0, Span(*job.deadline - now)));
    }
  }
  return out;
}

Result<RouteDecision> Route(const JobNeeds& job, const Sites& sites,
                            std::span<const SiteAnswer> answers, TimePoint now,
                            const RoutingPolicy& policy) {
  RouteDecision d;
  ASSIGN_OR_RETURN(d.predictions, Predict(job, sites, answers, now));
  d.site = policy.pick(job, d.predictions, sites);
  if (d.site < 0) {
    std::string why;
    for (const SitePrediction& p : d.predictions) {
      why += fmt::format(
          "{}{}: {}", why.empty() ? "" : "; ", sites.sites()[p.site].name,
          p.eligible ? "eligible but not chosen by " + std::string(policy.name) : p.why_not);
    }
    return UnavailableError(
        fmt::format("no site for job '{}' under {}: {}", job.name, policy.name, why));
  }
  const SitePrediction& c = d.predictions[d.site];
  // The runner-up: the eligible site with the earliest completion other than the chosen one.
  const SitePrediction* other = nullptr;
  for (const SitePrediction& p : d.predictions) {
    if (p.site == d.site || !p.eligible) continue;
    if (other == nullptr || p.completion < other->completion) other = &p;
  }
  d.explanation = fmt::format("{} by {}: start {}, staging {}", sites.sites()[c.site].name,
                              policy.name, Signed(c.start - now), Span(c.staging));
  if (other != nullptr) {
    if (other->run.value() > 0 && c.run.value() > 0 && other->run != c.run) {
      double speed = other->run / c.run;
      d.explanation += fmt::format(", {:.2f}x {}", speed >= 1 ? speed : 1 / speed,
                                   speed >= 1 ? "faster" : "slower");
    }
    Seconds gain = other->completion - c.completion;
    d.explanation +=
        fmt::format(" → done {} {} than {}", Span(Seconds(std::fabs(gain.value()))),
                    gain.value() >= 0 ? "earlier" : "later", sites.sites()[other->site].name);
  }
  return d;
}

}  // namespace baton::federation
