#include "sched/plugins/fragmentation/fragmentation.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/strings.h"
#include "sched/framework/registry.h"

namespace baton::sched {
namespace {

bool AcceptsGpu(const std::vector<const topo::GpuSpec*>& accepted, const topo::GpuSpec* gpu) {
  return accepted.empty() || std::find(accepted.begin(), accepted.end(), gpu) != accepted.end();
}

// The free GPU thousandths of `n` sorted descending: identical nodes give identical lists.
std::array<std::int16_t, topo::kMaxGpusPerNode> SortedMilli(const NodeFree& n) {
  std::array<std::int16_t, topo::kMaxGpusPerNode> m = n.milli;
  std::sort(m.begin(), m.begin() + n.gpus, std::greater<>());
  return m;
}

bool SameState(const NodeFree& a, const NodeFree& b) {
  if (a.gpu != b.gpu || a.cpu != b.cpu || a.memory != b.memory || a.gpus != b.gpus ||
      a.cpu_capacity != b.cpu_capacity || a.memory_capacity != b.memory_capacity) {
    return false;
  }
  const auto x = SortedMilli(a);
  const auto y = SortedMilli(b);
  return std::equal(x.begin(), x.begin() + a.gpus, y.begin());
}

std::uint64_t Mix(std::uint64_t h, std::uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

std::uint64_t StateHash(const NodeFree& n) {
  std::uint64_t h = reinterpret_cast<std::uintptr_t>(n.gpu);
  h = Mix(h, static_cast<std::uint64_t>(n.cpu));
  h = Mix(h, static_cast<std::uint64_t>(n.memory));
  h = Mix(h, static_cast<std::uint64_t>(n.cpu_capacity));
  h = Mix(h, static_cast<std::uint64_t>(n.gpus));
  const auto m = SortedMilli(n);
  for (int i = 0; i < n.gpus; ++i) h = Mix(h, static_cast<std::uint64_t>(m[i]));
  return h;
}

// Capacity left on a node, as shares of its GPUs and of its CPU (best fit: less is tighter).
double Left(const NodeFree& n) {
  double gpu = 0;
  for (int i = 0; i < n.gpus; ++i) gpu += n.milli[i];
  double left = n.gpus > 0 ? gpu / (kMilliPerGpu * n.gpus) : 0;
  if (n.cpu_capacity > 0) {
    left += static_cast<double>(n.cpu) / static_cast<double>(n.cpu_capacity);
  }
  return left;
}

}  // namespace

RequestKind KindOf(const JobInfo& job) {
  RequestKind k;
  k.cpu_milli = job.spec.cpu_milli;
  k.memory_mib = job.spec.memory_mib;
  if (CpuOnly(job.spec)) {
    k.gpus = 0;
    k.milli = 0;
  } else if (job.spec.gpu_milli > 0) {
    k.gpus = 1;
    k.milli = job.spec.gpu_milli;
  } else {
    k.gpus = job.task_gpus;
    k.milli = kMilliPerGpu;
  }
  k.accepted = job.accepted_gpus;
  return k;
}

NodeFree FreeOf(const ClusterState& state, topo::NodeId node) {
  const topo::Cluster& c = state.cluster();
  const topo::Node& n = c.node(node);
  const ClusterState::HostUsage& h = state.Host(node);
  NodeFree f;
  f.gpu = c.shape_of(node).gpu;
  f.cpu = h.cpu_free();
  f.memory = h.memory_free();
  f.cpu_capacity = h.cpu_capacity;
  f.memory_capacity = h.memory_capacity;
  f.gpus = n.gpus;
  const bool healthy = n.health == topo::NodeHealth::kHealthy;
  for (int i = 0; i < n.gpus; ++i) {
    f.milli[i] = static_cast<std::int16_t>(healthy ? kMilliPerGpu - state.UsedMilli(node, i) : 0);
  }
  return f;
}

void FragmentationModel::Observe(const RequestKind& kind, double weight) {
  if (kind.gpus > 0) {
    req_cpu_ += static_cast<double>(kind.cpu_milli);
    req_mem_ += static_cast<double>(kind.memory_mib);
    req_milli_ += static_cast<double>(kind.gpus) * kind.milli;
    if (req_milli_ > kDecayAt) req_cpu_ *= 0.5, req_mem_ *= 0.5, req_milli_ *= 0.5;
  }
  if (!(weight > 0) || !std::isfinite(weight)) return;
  total_ += weight;
  if (total_ > kDecayAt) {
    total_ = 0;
    for (double& c : counts_) total_ += (c *= 0.5);
  }
  for (std::size_t i = 0; i < kinds_.size(); ++i) {
    if (kinds_[i] == kind) {
      counts_[i] += weight;
      return;
    }
  }
  if (kinds_.size() >= max_kinds_) {  // replace the kind of least weight
    const auto least = static_cast<std::size_t>(std::min_element(counts_.begin(), counts_.end()) -
                                                counts_.begin());
    total_ -= counts_[least];
    kinds_.erase(kinds_.begin() + static_cast<std::ptrdiff_t>(least));
    counts_.erase(counts_.begin() + static_cast<std::ptrdiff_t>(least));
    class_of_.erase(class_of_.begin() + static_cast<std::ptrdiff_t>(least));
    // Classes stay: at most one per (gpus, milli) pair a kind ever had, 8 x 1000 at most.
  }
  int cls = -1;
  for (std::size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].gpus == kind.gpus && classes_[i].milli == kind.milli) {
      cls = static_cast<int>(i);
    }
  }
  if (cls < 0) {
    classes_.push_back({kind.gpus, kind.milli});
    cls = static_cast<int>(classes_.size()) - 1;
  }
  kinds_.push_back(kind);
  counts_.push_back(weight);
  class_of_.push_back(cls);
}

double FragmentationModel::Fragmentation(const NodeFree& n) const {
  int total = 0;
  int full = 0;
  int largest = 0;
  for (int i = 0; i < n.gpus; ++i) {
    total += n.milli[i];
    full += n.milli[i] == kMilliPerGpu;
    largest = std::max<int>(largest, n.milli[i]);
  }
  if (total == 0) return 0;
  // Per GPU class: whether it fits the node's GPUs, and the free thousandths it cannot use
  // (-1: does not fit). Classes beyond the table are computed per kind.
  auto class_part = [&](const Class& cl) -> int {
    if (cl.milli == 0) return 0;
    if (cl.milli < kMilliPerGpu) {
      if (largest < cl.milli) return -1;
      int p = 0;
      for (int i = 0; i < n.gpus; ++i) p += n.milli[i] < cl.milli ? n.milli[i] : 0;
      return p;
    }
    return full >= cl.gpus ? total - full * kMilliPerGpu : -1;
  };
  constexpr std::size_t kTable = 64;
  std::array<int, kTable> part{};
  const std::size_t table = std::min(classes_.size(), kTable);
  for (std::size_t c = 0; c < table; ++c) part[c] = class_part(classes_[c]);
  double sum = 0;
  for (std::size_t k = 0; k < kinds_.size(); ++k) {
    const RequestKind& kind = kinds_[k];
    const auto c = static_cast<std::size_t>(class_of_[k]);
    const int p = c < table ? part[c] : class_part(classes_[c]);
    const bool ok = p >= 0 && n.cpu >= kind.cpu_milli && n.memory >= kind.memory_mib &&
                    AcceptsGpu(kind.accepted, n.gpu);
    if (!ok) {
      sum += counts_[k] * total;
      continue;
    }
    sum += counts_[k] * p;
  }
  return sum;
}

double FragmentationModel::HostStranded(const NodeFree& n) const {
  if (req_milli_ <= 0) return 0;
  double free = 0;
  for (int i = 0; i < n.gpus; ++i) free += n.milli[i];
  double usable = free;
  if (n.cpu_capacity > 0 && req_cpu_ > 0) {
    usable = std::min(
        usable, static_cast<double>(std::max<std::int64_t>(0, n.cpu)) * req_milli_ / req_cpu_);
  }
  if (n.memory_capacity > 0 && req_mem_ > 0) {
    usable = std::min(
        usable, static_cast<double>(std::max<std::int64_t>(0, n.memory)) * req_milli_ / req_mem_);
  }
  return free - usable;
}

PluginStatus PackingPlacement::Propose(const PluginContext& ctx, const JobInfo& job,
                                       const NodeFilter& filter, int max_candidates,
                                       std::vector<Placement>* out) {
  const ClusterState& st = ctx.state;
  const topo::Cluster& c = st.cluster();
  const bool share = SharesGpu(job.spec);
  const bool cpu_only = CpuOnly(job.spec);
  const bool one_node = share || cpu_only ||
                        (job.task_gpus == job.spec.gpus && job.spec.gpus <= st.max_node_gpus() &&
                         job.spec.sub_groups.empty() && !job.spec.spread);
  if (!one_node) return gangs_.Propose(ctx, job, filter, max_candidates, out);
  Begin(ctx, job);
  const HostResources need = TaskHost(job);
  const int want_gpus = cpu_only ? 0 : (share ? 1 : job.spec.gpus);

  // Equal costs break on the capacity left (best fit), then on the node id.
  struct Cand {
    double cost;
    double left;
    std::uint32_t node;
    std::uint64_t mask;
  };
  std::vector<Cand> cands;
  // Distinct node states scored so far: hash -> index into `reps`.
  std::unordered_multimap<std::uint64_t, std::size_t> states;
  std::vector<NodeFree> reps;
  const bool dedupe = StateDeterministic();
  int share_amount = 0;  // thousandths this job takes of its GPU
  for (std::uint32_t id = 0; id < c.nodes().size(); ++id) {
    const topo::NodeId node(id);
    const topo::Node& n = c.node(node);
    if (n.health != topo::NodeHealth::kHealthy) continue;
    if (n.gpus < want_gpus || st.FreeGpus(node) < (share ? 0 : want_gpus)) continue;
    const topo::GpuSpec* gpu = c.shape_of(node).gpu;
    if (!AcceptsGpu(job.accepted_gpus, gpu)) continue;
    if (!st.HostFits(node, need)) continue;
    if (share) {
      auto amount = gpu ? ShareOn(job.spec, *gpu) : std::nullopt;
      if (!amount || amount->mig()) continue;  // MIG shares: the framework's slices, not milli
      share_amount = amount->milli;
    }
    NodeFree before = FreeOf(st, node);
    std::uint64_t hash = 0;
    if (dedupe) {
      hash = StateHash(before);
      bool seen = false;
      for (auto [it, end] = states.equal_range(hash); it != end && !seen; ++it) {
        seen = SameState(reps[it->second], before);
      }
      if (seen) continue;  // an identical node with a lower id already stands for this one
    }
    // The ways to place the job here.
    Choice best_choice;
    double best = 0;
    double best_left = 0;
    bool any = false;
    auto consider = [&](Choice& ch) {
      ch.after.cpu -= need.cpu_milli;
      ch.after.memory -= need.memory_mib;
      const double cost = Cost(before, ch);
      const double left = Left(ch.after);
      if (!any || cost < best || (cost == best && left < best_left)) {
        best = cost;
        best_left = left;
        best_choice = ch;
        any = true;
      }
    };
    if (cpu_only) {
      Choice ch{0, before};
      consider(ch);
    } else if (share) {
      std::uint64_t tried = 0;  // GPUs whose free amount another GPU already stood for
      for (int i = 0; i < before.gpus; ++i) {
        if (before.milli[i] < share_amount || ((tried >> i) & 1)) continue;
        // A time-shared GPU takes only time-sharing jobs; an idle one takes either.
        const auto* sh = st.Share({node, static_cast<std::uint8_t>(i)});
        if (sh != nullptr && sh->used.mig()) continue;
        for (int j = i; j < before.gpus; ++j) {
          if (before.milli[j] == before.milli[i]) tried |= std::uint64_t{1} << j;
        }
        Choice ch{std::uint64_t{1} << i, before};
        ch.after.milli[i] = static_cast<std::int16_t>(ch.after.milli[i] - share_amount);
        consider(ch);
      }
    } else {
      Choice ch{0, before};
      int taken = 0;
      for (int i = 0; i < before.gpus && taken < want_gpus; ++i) {
        if (((n.allocated_mask >> i) & 1) == 0) {
          ch.mask |= std::uint64_t{1} << i;
          ch.after.milli[i] = 0;
          ++taken;
        }
      }
      if (taken == want_gpus) consider(ch);
    }
    if (!any) continue;
    if (!filter.Fits(node)) continue;
    if (dedupe) {
      states.emplace(hash, reps.size());
      reps.push_back(before);
    }
    cands.push_back({best, best_left, id, best_choice.mask});
  }
  if (cands.empty()) {
    std::string what = cpu_only
                           ? fmt::format("{} milli-CPU and {} MiB", need.cpu_milli, need.memory_mib)
                       : share ? fmt::format("a GPU with {} milli free", job.spec.gpu_milli)
                               : fmt::format("{} free GPUs", want_gpus);
    return PluginStatus::Unschedulable(fmt::format("no node has {} for the job", what));
  }
  const std::size_t k =
      std::min<std::size_t>(cands.size(), static_cast<std::size_t>(std::max(1, max_candidates)));
  auto better = [](const Cand& a, const Cand& b) {
    if (a.cost != b.cost) return a.cost < b.cost;
    if (a.left != b.left) return a.left < b.left;
    return a.node < b.node;
  };
  std::partial_sort(cands.begin(), cands.begin() + static_cast<std::ptrdiff_t>(k), cands.end(),
                    better);
  for (std::size_t i = 0; i < k; ++i) {
    Placement p;
    p.nodes = {{topo::NodeId(cands[i].node), cands[i].mask}};
    p.span = topo::Level::kNode;
    out->push_back(std::move(p));
  }
  return PluginStatus::Success();
}

Result<std::unique_ptr<Plugin>> FragmentationPlugin::Create(const PluginArgs& args) {
  auto p = std::make_unique<FragmentationPlugin>();
  auto number = [](std::string_view key, const std::string& value, double hi) -> Result<double> {
    auto v = ParseDouble(value);
    if (!v || !(*v >= 0) || *v > hi) {
      return InvalidArgumentError(fmt::format("argument '{}': expected a number in 0..{}, got '{}'",
                                              key, hi, Printable(value)));
    }
    return *v;
  };
  for (const auto& [key, value] : args) {
    if (key == "weigh") {
      if (value != "requests" && value != "gpus") {
        return InvalidArgumentError(
            fmt::format("argument 'weigh': expected requests or gpus, got '{}'", Printable(value)));
      }
      p->exponent_ = value == "gpus" ? 1.0 : 0.0;
    } else if (key == "exponent") {
      ASSIGN_OR_RETURN(p->exponent_, number(key, value, 4));
    } else if (key == "fit") {
      ASSIGN_OR_RETURN(p->fit_, number(key, value, 100));
    } else if (key == "host") {
      ASSIGN_OR_RETURN(p->host_, number(key, value, 100));
    } else {
      return InvalidArgumentError(fmt::format("unknown argument '{}'", Printable(key)));
    }
  }
  return std::unique_ptr<Plugin>(std::move(p));
}

void FragmentationPlugin::Begin(const PluginContext&, const JobInfo& job) {
  if (!seen_.insert(job.admission).second) return;
  if (seen_ring_.size() < kSeenCapacity) {
    seen_ring_.push_back(job.admission);
  } else {
    seen_.erase(seen_ring_[seen_next_]);
    seen_ring_[seen_next_] = job.admission;
    seen_next_ = (seen_next_ + 1) % kSeenCapacity;
  }
  const RequestKind kind = KindOf(job);
  const double gpus = static_cast<double>(kind.gpus) * kind.milli / kMilliPerGpu;
  model_.Observe(kind, exponent_ == 0 ? 1.0 : std::pow(gpus, exponent_));
}

double FragmentationPlugin::Cost(const NodeFree& before, const Choice& c) {
  // Fragmentation growth per unit of observed weight (GPU thousandths), plus the best-fit term:
  // the node's capacity left (shares of its GPUs and CPU, 0..2) in GPU thousandths.
  const double growth = (model_.Fragmentation(c.after) - model_.Fragmentation(before)) /
                        std::max(1e-9, model_.observed());
  double cost = growth + fit_ * Left(c.after) * kMilliPerGpu;
  if (host_ > 0) cost += host_ * (model_.HostStranded(c.after) - model_.HostStranded(before));
  return cost;
}

double BestFitPlugin::Cost(const NodeFree&, const Choice& c) { return Left(c.after); }

Result<std::unique_ptr<Plugin>> RandomFitPlugin::Create(const PluginArgs& args) {
  std::uint64_t seed = 42;
  for (const auto& [key, value] : args) {
    if (key != "seed") return InvalidArgumentError(fmt::format("unknown argument '{}'", key));
    auto v = ParseInt64(value);
    if (!v || *v < 0) {
      return InvalidArgumentError(
          fmt::format("argument 'seed': expected a non-negative integer, got '{}'", value));
    }
    seed = static_cast<std::uint64_t>(*v);
  }
  return std::unique_ptr<Plugin>(std::make_unique<RandomFitPlugin>(seed));
}

double RandomFitPlugin::Cost(const NodeFree&, const Choice&) { return rng_.Uniform(); }

void RegisterPackingPlugins(PluginRegistry& registry) {
  registry["fragmentation"] = [](const PluginArgs& a, const PluginDeps&) {
    return FragmentationPlugin::Create(a);
  };
  registry["best-fit"] = NoArgs<BestFitPlugin>();
  registry["random-fit"] = [](const PluginArgs& a, const PluginDeps&) {
    return RandomFitPlugin::Create(a);
  };
}

}  // namespace baton::sched
