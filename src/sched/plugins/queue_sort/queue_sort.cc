#include "sched/plugins/queue_sort/queue_sort.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"
#include "sched/framework/registry.h"

namespace baton::sched {

bool FifoPlugin::Less(const PluginContext&, const JobInfo& a, const JobInfo& b) const {
  return a.spec.submit_time < b.spec.submit_time;
}

bool PriorityPlugin::Less(const PluginContext&, const JobInfo& a, const JobInfo& b) const {
  if (a.spec.priority != b.spec.priority) return a.spec.priority > b.spec.priority;
  return a.spec.submit_time < b.spec.submit_time;
}

bool ShortestFirstPlugin::Less(const PluginContext&, const JobInfo& a, const JobInfo& b) const {
  const double ea = a.spec.estimated_runtime.value();
  const double eb = b.spec.estimated_runtime.value();
  if ((ea > 0) != (eb > 0)) return ea > 0;
  return ea < eb;
}

Result<std::unique_ptr<Plugin>> LasPlugin::Create(const PluginArgs& args) {
  auto p = std::make_unique<LasPlugin>();
  for (const auto& [key, value] : args) {
    if (key.rfind("thresholds", 0) != 0) {
      return InvalidArgumentError(fmt::format("unknown argument '{}'", key));
    }
    auto v = ParseDouble(value);
    if (!v || !(*v > 0)) {
      return InvalidArgumentError(fmt::format("argument '{}': expected GPU-hours > 0", key));
    }
    p->thresholds_gpu_seconds_.push_back(*v * 3600.0);
  }
  if (p->thresholds_gpu_seconds_.empty()) p->thresholds_gpu_seconds_ = {3600.0, 36000.0, 360000.0};
  std::sort(p->thresholds_gpu_seconds_.begin(), p->thresholds_gpu_seconds_.end());
  return std::unique_ptr<Plugin>(std::move(p));
}

int LasPlugin::BandOf(double gpu_seconds) const {
  int band = 0;
  for (double t : thresholds_gpu_seconds_) band += gpu_seconds >= t ? 1 : 0;
  return band;
}

bool LasPlugin::Less(const PluginContext&, const JobInfo& a, const JobInfo& b) const {
  const int ba = Band(a);
  const int bb = Band(b);
  if (ba != bb) return ba < bb;
  return a.spec.submit_time < b.spec.submit_time;
}

Result<std::unique_ptr<Plugin>> DrfPlugin::Create(const PluginArgs& args) {
  auto p = std::make_unique<DrfPlugin>();
  for (const auto& [key, value] : args) {
    auto parts = Split(key, '.');
    if (parts.size() != 3 || parts[0] != "tenants" || parts[2] != "weight") {
      return InvalidArgumentError(fmt::format("unknown argument '{}'", key));
    }
    auto v = ParseDouble(value);
    if (!v || !(*v > 0)) {
      return InvalidArgumentError(fmt::format("argument '{}': expected a weight > 0", key));
    }
    p->weights_[std::string(parts[1])] = *v;
  }
  return std::unique_ptr<Plugin>(std::move(p));
}

void DrfPlugin::PrepareSort(const PluginContext& ctx) {
  share_.clear();
  const double total = std::max(1, ctx.state.cluster().counts().total);
  for (const auto& [id, job] : ctx.jobs) {
    if (job.phase == JobPhase::kRunning || job.phase == JobPhase::kTerminating) {
      share_[job.spec.tenant] += job.placement.gpus() / total;
    }
  }
  for (auto& [tenant, share] : share_) {
    auto it = weights_.find(tenant);
    share /= it == weights_.end() ? 1.0 : it->second;
  }
}

double DrfPlugin::Share(const std::string& tenant) const {
  auto it = share_.find(tenant);
  return it == share_.end() ? 0.0 : it->second;
}

bool DrfPlugin::Less(const PluginContext&, const JobInfo& a, const JobInfo& b) const {
  const double sa = Share(a.spec.tenant);
  const double sb = Share(b.spec.tenant);
  if (sa != sb) return sa < sb;
  if (a.spec.priority != b.spec.priority) return a.spec.priority > b.spec.priority;
  return a.spec.submit_time < b.spec.submit_time;
}

void RegisterQueueSortPlugins(PluginRegistry& registry) {
  registry["fifo"] = NoArgs<FifoPlugin>();
  registry["priority"] = NoArgs<PriorityPlugin>();
  registry["shortest-first"] = NoArgs<ShortestFirstPlugin>();
  registry["las"] = [](const PluginArgs& a, const PluginDeps&) { return LasPlugin::Create(a); };
  registry["drf"] = [](const PluginArgs& a, const PluginDeps&) { return DrfPlugin::Create(a); };
}

}  // namespace baton::sched
