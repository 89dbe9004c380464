// Queue-order plugins. The framework breaks remaining ties by submit time, then job id.
//   fifo            submit time
//   priority        priority (higher first), then submit time ("priority + age")
//   shortest-first  estimated runtime (unknown last)
//   las             Tiresias-style 2D least-attained-service: jobs fall into bands by attained
//                   GPU-hours (args thresholds[i], default 1, 10, 100 as in Tiresias'
//                   discretised 2D-LAS), lower band first. With preempt_by: las-band the preempt
//                   action also uses these bands: a waiting job evicts running jobs (whole gangs,
//                   gracefully) in strictly worse bands, counting their current run's service
//   drf             fair share across tenants: lowest (allocated GPUs / weight, as of each sort:
//                   an action's placements count for the next action's queue) first, then
//                   priority (args tenants.<t>.weight, default 1)
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sched/framework/config.h"
#include "sched/framework/plugin.h"

namespace baton::sched {

class FifoPlugin final : public Plugin, public QueueSortPlugin {
 public:
  std::string_view Name() const override { return "fifo"; }
  bool Stateless() const override { return true; }
  bool Less(const PluginContext& ctx, const JobInfo& a, const JobInfo& b) const override;
  bool OrderFixedWithinCycle() const override { return true; }
};

class PriorityPlugin final : public Plugin, public QueueSortPlugin {
 public:
  std::string_view Name() const override { return "priority"; }
  bool Stateless() const override { return true; }
  bool Less(const PluginContext& ctx, const JobInfo& a, const JobInfo& b) const override;
  bool OrderFixedWithinCycle() const override { return true; }
};

class ShortestFirstPlugin final : public Plugin, public QueueSortPlugin {
 public:
  std::string_view Name() const override { return "shortest-first"; }
  bool Stateless() const override { return true; }
  bool Less(const PluginContext& ctx, const JobInfo& a, const JobInfo& b) const override;
  bool OrderFixedWithinCycle() const override { return true; }
};

class LasPlugin final : public Plugin, public QueueSortPlugin, public ServiceBandPlugin {
 public:
  static Result<std::unique_ptr<Plugin>> Create(const PluginArgs& args);
  std::string_view Name() const override { return "las"; }
  bool Less(const PluginContext& ctx, const JobInfo& a, const JobInfo& b) const override;
  // Service from earlier runs changes only when a run ends, between cycles.
  bool OrderFixedWithinCycle() const override { return true; }
  // The band of `gpu_seconds` of attained service: the number of thresholds it reaches.
  int BandOf(double gpu_seconds) const override;

 private:
  std::vector<double> thresholds_gpu_seconds_;
};

class DrfPlugin final : public Plugin, public QueueSortPlugin {
 public:
  static Result<std::unique_ptr<Plugin>> Create(const PluginArgs& args);
  std::string_view Name() const override { return "drf"; }
  void PrepareSort(const PluginContext& ctx) override;
  bool Less(const PluginContext& ctx, const JobInfo& a, const JobInfo& b) const override;
  double Share(const std::string& tenant) const;

 private:
  std::map<std::string, double> weights_;
  std::map<std::string, double> share_;  // as of the last PrepareSort
};

}  // namespace baton::sched
