#include "server/http/tenant_history.h"

#include <algorithm>
#include <functional>
#include <set>
#include <vector>

#include "core/log.h"

namespace baton::server {

using nlohmann::json;

std::map<std::string, double> FairShares(double total,
                                         const std::map<std::string, TenantDemand>& demand) {
  std::map<std::string, double> share;
  std::map<std::string, double> limit;  // of the tenants still wanting more
  for (const auto& [tenant, d] : demand) {
    share[tenant] = 0;
    double l = std::max(0.0, d.cap ? std::min(d.wants, *d.cap) : d.wants);
    if (l > 0 && d.weight > 0) limit[tenant] = l;
  }
  double left = std::max(0.0, total);
  // Each round either satisfies at least one tenant (and removes it) or hands out the rest: at
  // most one round per tenant.
  while (!limit.empty() && left > 1e-9) {
    double weights = 0;
    for (const auto& [tenant, l] : limit) weights += demand.at(tenant).weight;
    bool satisfied = false;
    for (auto it = limit.begin(); it != limit.end();) {
      const double offer = left * demand.at(it->first).weight / weights;
      if (it->second - share[it->first] <= offer) {
        left -= it->second - share[it->first];
        share[it->first] = it->second;
        it = limit.erase(it);
        satisfied = true;
      } else {
        ++it;
      }
    }
    if (satisfied) continue;  // the others' offers grow: offer again
    for (const auto& [tenant, l] : limit)
      share[tenant] += left * demand.at(tenant).weight / weights;
    left = 0;
  }
  return share;
}

TenantHistory::TenantHistory(JobStore& store, const Controller& controller,
                             std::chrono::milliseconds interval, std::size_t capacity)
    : store_(store),
      controller_(controller),
      interval_(interval),
      capacity_(std::max<std::size_t>(1, capacity)) {}

TenantHistory::~TenantHistory() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TenantHistory::Start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
}

void TenantHistory::Run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    Record(Measure());
    lock.lock();
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
  }
}

TenantHistory::Sample TenantHistory::Measure() const {
  Sample s;
  s.time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::map<std::string, Point> points;
  const ClusterView view = controller_.Cluster();
  for (const ClusterView::Node& n : view.nodes) {
    for (JobId id : n.gpu_jobs) {
      ++s.cluster_gpus;
      if (id == 0) continue;
      auto t = view.job_tenants.find(id);
      if (t != view.job_tenants.end()) ++points[t->second].used;
    }
  }
  // Pending demand: the GPUs of the queued jobs, read in pages (bounded per sample).
  JobFilter filter;
  filter.state = JobState::kQueued;
  filter.limit = 1000;
  int read = 0;
  for (;;) {
    Result<JobPage> page = store_.List(filter);
    if (!page.ok()) {
      LOG_WARN("tenants view: cannot list queued jobs: {}", page.status().ToString());
      s.pending_truncated = true;
      break;
    }
    for (const JobRecord& j : page->jobs) {
      json spec = json::parse(j.spec_json, nullptr, /*allow_exceptions=*/false);
      std::int64_t gpus = 0;
      if (spec.is_object() && spec.contains("gpus") && spec["gpus"].is_number_integer()) {
        gpus = spec["gpus"].get<std::int64_t>();
      }
      points[j.tenant].pending += gpus;
    }
    read += static_cast<int>(page->jobs.size());
    if (!page->next_after) break;
    if (read >= kMaxQueuedJobsPerSample) {
      s.pending_truncated = true;
      break;
    }
    filter.after = *page->next_after;
  }
  // The largest tenants by demand, when there are more than a sample keeps.
  if (points.size() > kMaxTenantsPerSample) {
    std::vector<std::pair<std::int64_t, std::string>> by_demand;
    by_demand.reserve(points.size());
    for (const auto& [t, p] : points) by_demand.emplace_back(p.used + p.pending, t);
    std::nth_element(by_demand.begin(), by_demand.begin() + kMaxTenantsPerSample, by_demand.end(),
                     std::greater<>());
    for (std::size_t i = kMaxTenantsPerSample; i < by_demand.size(); ++i) {
      points.erase(by_demand[i].second);
    }
  }
  const std::map<std::string, TenantLimits> limits = controller_.TenantLimitsByName();
  auto limits_of = [&](const std::string& tenant) -> TenantLimits {
    if (auto it = limits.find(tenant); it != limits.end()) return it->second;
    if (auto it = limits.find("*"); it != limits.end()) return it->second;
    return {};
  };
  std::map<std::string, TenantDemand> demand;
  for (const auto& [t, p] : points) {
    TenantLimits l = limits_of(t);
    TenantDemand& d = demand[t];
    d.wants = static_cast<double>(p.used + p.pending);
    if (l.quota_gpus) d.cap = static_cast<double>(*l.quota_gpus);
    d.weight = l.weight;
  }
  for (const auto& [t, share] : FairShares(static_cast<double>(s.cluster_gpus), demand)) {
    points[t].fair_share = share;
  }
  s.tenants = std::move(points);
  return s;
}

void TenantHistory::Record(Sample sample) {
  std::lock_guard lock(mu_);
  ring_.push_back(std::move(sample));
  while (ring_.size() > capacity_) ring_.pop_front();
}

json TenantHistory::Json(const Sample& now, const Principal& who) const {
  const bool admin = who.role == Role::kAdmin;
  auto visible = [&](const std::string& tenant) { return admin || tenant == who.tenant; };
  std::vector<const Sample*> samples;
  std::lock_guard lock(mu_);
  for (const Sample& s : ring_) samples.push_back(&s);
  samples.push_back(&now);
  // Every tenant seen in the window, in name order; a principal's own tenant always.
  std::set<std::string> names;
  for (const Sample* s : samples) {
    for (const auto& [t, p] : s->tenants) {
      if (visible(t)) names.insert(t);
    }
  }
  if (!admin) names.insert(who.tenant);
  const std::map<std::string, TenantLimits> limits = controller_.TenantLimitsByName();
  json time = json::array();
  for (const Sample* s : samples) time.push_back(s->time);
  json series = json::object();
  json current = json::array();
  for (const std::string& t : names) {
    json used = json::array(), pending = json::array(), fair = json::array();
    for (const Sample* s : samples) {
      auto it = s->tenants.find(t);
      const Point p = it == s->tenants.end() ? Point{} : it->second;
      used.push_back(p.used);
      pending.push_back(p.pending);
      fair.push_back(p.fair_share);
    }
    series[t] = {{"used", std::move(used)},
                 {"pending", std::move(pending)},
                 {"fair_share", std::move(fair)}};
    auto it = now.tenants.find(t);
    const Point p = it == now.tenants.end() ? Point{} : it->second;
    TenantLimits l;
    if (auto li = limits.find(t); li != limits.end()) {
      l = li->second;
    } else if (auto star = limits.find("*"); star != limits.end()) {
      l = star->second;
    }
    json row = {{"tenant", t},
                {"used", p.used},
                {"pending", p.pending},
                {"fair_share", p.fair_share},
                {"weight", l.weight},
                {"quota_gpus", nullptr},
                {"guaranteed_gpus", nullptr},
                {"borrowable_gpus", nullptr}};
    if (l.quota_gpus) row["quota_gpus"] = *l.quota_gpus;
    if (l.guaranteed_gpus) row["guaranteed_gpus"] = *l.guaranteed_gpus;
    if (l.borrowable_gpus) row["borrowable_gpus"] = *l.borrowable_gpus;
    current.push_back(std::move(row));
  }
  return {{"interval_s", std::chrono::duration<double>(interval_).count()},
          {"capacity", capacity_},
          {"cluster_gpus", now.cluster_gpus},
          {"pending_truncated", now.pending_truncated},
          {"tenants", std::move(current)},
          {"history", {{"time", std::move(time)}, {"tenants", std::move(series)}}}};
}

}  // namespace baton::server
