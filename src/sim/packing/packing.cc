#include "sim/packing/packing.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "core/strings.h"
#include "sched/framework/scheduler.h"
#include "sched/plugins/fragmentation/fragmentation.h"

namespace baton::sim {
namespace {

sched::GangJob JobOf(const OpenbPod& pod, std::uint64_t id) {
  sched::GangJob j;
  j.id = sched::JobId(id);
  j.name = pod.name;
  j.gpus = pod.num_gpu;
  j.gpu_milli = pod.num_gpu == 1 && pod.gpu_milli < 1000 ? pod.gpu_milli : 0;
  j.cpu_milli = pod.cpu_milli;
  j.memory_mib = pod.memory_mib;
  j.gpu_types = pod.gpu_spec;
  j.preemptible = false;
  return j;
}

double Interpolate(const std::vector<PackingPoint>& curve, double at, double PackingPoint::*field) {
  if (curve.empty()) return 0;
  for (std::size_t i = 0; i < curve.size(); ++i) {
    if (curve[i].arrived >= at) {
      if (i == 0) return curve[0].*field;
      const PackingPoint& a = curve[i - 1];
      const PackingPoint& b = curve[i];
      const double t = b.arrived > a.arrived ? (at - a.arrived) / (b.arrived - a.arrived) : 1;
      return a.*field + t * (b.*field - a.*field);
    }
  }
  return curve.back().*field;
}

}  // namespace

double PackingResult::AllocationAt(double at) const {
  return Interpolate(curve, at, &PackingPoint::allocated);
}
double PackingResult::FragmentationAt(double at) const {
  return Interpolate(curve, at, &PackingPoint::fragmentation);
}

std::vector<OpenbPod> TunedArrivals(std::span<const OpenbPod> pods, std::int64_t gpu_capacity_milli,
                                    double tune, std::uint64_t seed) {
  Rng rng(seed);
  const double target = tune * static_cast<double>(gpu_capacity_milli);
  std::vector<OpenbPod> out(pods.begin(), pods.end());
  double total = 0;
  for (const OpenbPod& p : out) total += static_cast<double>(p.TotalGpuMilli());
  bool any_gpu = false;
  for (const OpenbPod& p : pods) any_gpu |= p.TotalGpuMilli() > 0;
  while (total < target && any_gpu) {
    const OpenbPod& p = pods[static_cast<std::size_t>(
        rng.UniformInt(0, static_cast<std::int64_t>(pods.size()) - 1))];
    out.push_back(p);
    out.back().name += fmt::format("-tune{}", out.size());
    total += static_cast<double>(p.TotalGpuMilli());
  }
  // Fisher-Yates with the platform-independent Rng.
  for (std::size_t i = out.size(); i > 1; --i) {
    const auto j = static_cast<std::size_t>(rng.UniformInt(0, static_cast<std::int64_t>(i) - 1));
    std::swap(out[i - 1], out[j]);
  }
  if (total > target) {  // the list alone was above the target: cut where it is reached
    double sum = 0;
    std::size_t keep = 0;
    while (keep < out.size() && sum < target)
      sum += static_cast<double>(out[keep++].TotalGpuMilli());
    out.resize(keep);
  }
  return out;
}

std::vector<OpenbPod> ResampledPods(std::span<const OpenbPod> pods, bool (*heavy)(const OpenbPod&),
                                    double p, std::size_t count, std::uint64_t seed) {
  std::vector<const OpenbPod*> yes;
  std::vector<const OpenbPod*> no;
  for (const OpenbPod& pod : pods) (heavy(pod) ? yes : no).push_back(&pod);
  std::vector<OpenbPod> out;
  if (pods.empty()) return out;
  Rng rng(seed);
  out.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    const bool pick_yes = no.empty() || (!yes.empty() && rng.Uniform() < p);
    const auto& from = pick_yes ? yes : no;
    out.push_back(*from[static_cast<std::size_t>(
        rng.UniformInt(0, static_cast<std::int64_t>(from.size()) - 1))]);
    out.back().name += fmt::format("-v{}", i);
  }
  return out;
}

Result<std::vector<OpenbPod>> VariantPods(std::span<const OpenbPod> pods, std::string_view name) {
  // Seed 7: any fixed seed; the variants are lists, not experiments over seeds.
  constexpr std::uint64_t kSeed = 7;
  if (name == "multi-gpu") {
    return ResampledPods(
        pods, [](const OpenbPod& p) { return p.num_gpu >= 2; }, 0.1, pods.size(), kSeed);
  }
  if (name == "shared") {
    return ResampledPods(
        pods, [](const OpenbPod& p) { return p.num_gpu == 1 && p.gpu_milli < 1000; }, 0.7,
        pods.size(), kSeed);
  }
  return InvalidArgumentError(
      fmt::format("unknown variant '{}' (expected multi-gpu or shared)", Printable(name)));
}

Result<PackingResult> RunPacking(std::span<const OpenbNode> nodes, std::span<const OpenbPod> pods,
                                 const PackingOptions& options) {
  if (!(options.tune > 0) || options.tune > 100) {
    return InvalidArgumentError(
        fmt::format("field 'tune': {} is out of range (0..100]", options.tune));
  }
  if (!(options.step > 0) || options.step > 1) {
    return InvalidArgumentError(
        fmt::format("field 'step': {} is out of range (0..1]", options.step));
  }
  ASSIGN_OR_RETURN(topo::Cluster cluster, OpenbCluster(nodes));
  const std::int64_t capacity = std::int64_t{cluster.counts().total} * 1000;
  if (capacity == 0) return InvalidArgumentError("the node list has no GPU");
  std::vector<OpenbPod> arrivals = TunedArrivals(pods, capacity, options.tune, options.seed);

  sched::SchedulerConfig config;
  config.actions = {"admit", "allocate"};
  config.queue_sort = "fifo";
  // "name" or "name:key=value/key=value" (plugin arguments).
  sched::PluginConfig policy{options.policy, 1, {}};
  if (const auto colon = options.policy.find(':'); colon != std::string::npos) {
    policy.name = options.policy.substr(0, colon);
    for (std::string_view kv : Split(std::string_view(options.policy).substr(colon + 1), '/')) {
      const auto eq = kv.find('=');
      if (eq == std::string_view::npos) {
        return InvalidArgumentError(fmt::format("field 'policy': '{}' is not key=value", kv));
      }
      policy.args[std::string(kv.substr(0, eq))] = std::string(kv.substr(eq + 1));
    }
  }
  if (policy.name == "random-fit") policy.args["seed"] = std::to_string(options.seed);
  config.plugins = {{"health", 1, {}}, {"gpu-type", 1, {}}, {"resources", 1, {}}, policy};
  config.max_candidates = 1;
  sched::SchedulerOptions sopts;
  sopts.waiting_notes = false;
  ASSIGN_OR_RETURN(auto scheduler, sched::Scheduler::Create(std::move(cluster), config, sopts));

  // The request mix the fragmentation measure is taken against: every arrival.
  sched::FragmentationModel mix;
  {
    std::uint64_t id = 0;
    for (const OpenbPod& p : arrivals) {
      sched::JobInfo info;
      info.spec = JobOf(p, ++id);
      info.task_gpus = p.num_gpu;
      for (const auto& t : p.gpu_spec) {
        auto g = scheduler->state().cluster().FindGpuType(t);
        if (g.ok()) info.accepted_gpus.push_back(*g);
      }
      std::sort(info.accepted_gpus.begin(), info.accepted_gpus.end());
      mix.Observe(sched::KindOf(info));
    }
  }
  auto fragmentation = [&]() {
    const sched::ClusterState& st = scheduler->state();
    double sum = 0;
    for (std::uint32_t n = 0; n < st.cluster().nodes().size(); ++n) {
      sum += mix.Fragmentation(sched::FreeOf(st, topo::NodeId(n)));
    }
    return sum / std::max(1.0, mix.observed()) / static_cast<double>(capacity);
  };

  PackingResult r;
  r.gpu_capacity_milli = capacity;
  std::int64_t arrived = 0;
  std::int64_t allocated = 0;
  double next = options.step;
  std::vector<sched::Event> events;
  std::uint64_t id = 0;
  for (const OpenbPod& pod : arrivals) {
    const sched::JobId jid(++id);
    events.push_back(sched::Event::Submit(JobOf(pod, id)));
    sched::Decisions d = scheduler->RunCycle({TimePoint{}, events});
    events.clear();
    ++r.pods;
    arrived += pod.TotalGpuMilli();
    bool placed = false;
    for (const auto& b : d.binds) placed |= b.job == jid;
    if (placed) {
      ++r.placed;
      allocated += pod.TotalGpuMilli();
    } else {
      ++r.skipped;
      if (arrived <= capacity && pod.num_gpu > 0) {
        const int k = pod.gpu_milli < 1000 ? 0 : std::min(pod.num_gpu, 8);
        r.skipped_milli_by_gpus[static_cast<std::size_t>(k)] += pod.TotalGpuMilli();
      }
      // Skipped: an arrival that does not fit leaves (rejected ones are already gone).
      if (scheduler->job(jid) != nullptr) events.push_back(sched::Event::Cancel(jid));
    }
    const double a = static_cast<double>(arrived) / static_cast<double>(capacity);
    while (a + 1e-12 >= next && next <= options.tune + 1e-9) {
      r.curve.push_back({a, static_cast<double>(allocated) / static_cast<double>(capacity),
                         fragmentation(), r.pods, r.skipped});
      next += options.step;
    }
  }
  if (!events.empty()) scheduler->RunCycle({TimePoint{}, events});
  const double a = static_cast<double>(arrived) / static_cast<double>(capacity);
  if (r.curve.empty() || r.curve.back().arrived < a) {
    r.curve.push_back({a, static_cast<double>(allocated) / static_cast<double>(capacity),
                       fragmentation(), r.pods, r.skipped});
  }
  return r;
}

}  // namespace baton::sim
