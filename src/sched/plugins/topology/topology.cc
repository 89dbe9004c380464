#include "sched/plugins/topology/topology.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <numeric>
#include <set>

#include "sched/framework/registry.h"

namespace baton::sched {
namespace {

struct Take {
  topo::NodeId node;
  int tasks;
};

// One placement search for one job over one state.
class Search {
 public:
  Search(const PluginContext& ctx, const JobInfo& job, const NodeFilter& filter)
      : st_(ctx.state),
        c_(ctx.state.cluster()),
        job_(job),
        filter_(filter),
        g_(job.task_gpus),
        used_nodes_((c_.nodes().size() + 63) / 64, 0) {
    quantum_.fill(1);
    for (const auto& sg : job.spec.sub_groups) {
      if (sg.gpus <= g_) continue;
      const int k = sg.gpus / g_;
      for (int l = static_cast<int>(sg.level); l < topo::kLevelCount; ++l) {
        quantum_[l] = std::lcm(quantum_[l], k);
      }
    }
  }

  // Takes up to `want` tasks inside `s`; appends to takes_ and returns the count.
  int Descend(Subtree s, int want) {
    if (want <= 0) return 0;
    const int q = quantum_[static_cast<int>(st_.LevelOf(s))];
    if (s.kind == SubtreeKind::kNode) return TakeNode(topo::NodeId(s.index), want, q);
    // A scratch list per recursion depth (root, switch tiers, domain), kept across calls.
    CHECK_LT(depth_, room_.size());
    std::vector<std::pair<std::int64_t, Subtree>>& room = room_[depth_];
    st_.Children(s, &children_);
    room.clear();
    for (Subtree ch : children_) {
      std::int64_t r = st_.Slots(ch, g_);
      if (r > 0) room.push_back({r, ch});
    }
    // Most room first (fewest children spanned), ties by id; but a child that can take the whole
    // remainder goes first, the tightest such child (best fit).
    StableSortByRoom(&room);
    if (!room.empty() && room[0].first >= want) {
      std::size_t k = 0;
      while (k + 1 < room.size() && room[k + 1].first >= want) ++k;
      std::size_t j = k;
      while (j > 0 && room[j - 1].first == room[k].first) --j;
      std::rotate(room.begin(), room.begin() + static_cast<std::ptrdiff_t>(j),
                  room.begin() + static_cast<std::ptrdiff_t>(j) + 1);
    }
    const std::size_t mark = takes_.size();
    int taken = 0;
    ++depth_;
    for (const auto& [r, ch] : room) {
      if (taken >= want) break;
      taken += Descend(ch, want - taken);
    }
    --depth_;
    const int excess = taken % q;
    if (excess > 0) Trim(mark, excess);
    return taken - excess;
  }

  std::vector<Take>& takes() { return takes_; }
  void Reset() {
    for (const Take& t : takes_) SetUsed(t.node.value(), false);
    takes_.clear();
    used_domains_.clear();
  }

  Placement Build() const {
    Placement p;
    for (const Take& t : takes_) {
      const topo::Node& n = c_.node(t.node);
      std::uint64_t mask = 0;
      int need = t.tasks * g_;
      for (int i = 0; i < n.gpus && need > 0; ++i) {
        if (!((n.allocated_mask >> i) & 1)) {
          mask |= 1ULL << i;
          --need;
        }
      }
      p.nodes.push_back({t.node, mask});
    }
    p.span = SpanOf(c_, p.nodes);
    return p;
  }

  int TakeNode(topo::NodeId id, int want, int q) {
    if (Used(id.value())) return 0;
    int cap = st_.FreeGpus(id) / g_;
    if (job_.spec.spread || job_.spec.one_task_per_node) cap = std::min(cap, 1);
    cap = std::min(cap, want);
    cap -= cap % q;
    if (cap <= 0) return 0;
    std::uint32_t fd = 0;
    if (job_.spec.spread) {
      fd = c_.node(id).failure_domains[static_cast<int>(*job_.spec.spread)].value();
      if (used_domains_.contains(fd)) return 0;
    }
    if (!filter_.Fits(id)) return 0;
    if (job_.spec.spread) used_domains_.insert(fd);
    SetUsed(id.value(), true);
    takes_.push_back({id, cap});
    return cap;
  }

 private:
  // std::stable_sort by room, most first, without its temporary buffer for the short lists a
  // subtree's children make (the order is the same: a stable sort's result is unique).
  static void StableSortByRoom(std::vector<std::pair<std::int64_t, Subtree>>* room) {
    auto& r = *room;
    if (r.size() > 32) {
      std::stable_sort(r.begin(), r.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      return;
    }
    for (std::size_t i = 1; i < r.size(); ++i) {
      const auto x = r[i];
      std::size_t j = i;
      for (; j > 0 && r[j - 1].first < x.first; --j) r[j] = r[j - 1];
      r[j] = x;
    }
  }
  bool Used(std::uint32_t n) const { return (used_nodes_[n / 64] >> (n % 64)) & 1; }
  void SetUsed(std::uint32_t n, bool used) {
    const std::uint64_t bit = std::uint64_t{1} << (n % 64);
    used_nodes_[n / 64] = used ? used_nodes_[n / 64] | bit : used_nodes_[n / 64] & ~bit;
  }

  void Trim(std::size_t mark, int excess) {
    while (excess > 0 && takes_.size() > mark) {
      Take& t = takes_.back();
      const int cut = std::min(excess, t.tasks);
      t.tasks -= cut;
      excess -= cut;
      if (t.tasks == 0) {
        SetUsed(t.node.value(), false);
        if (job_.spec.spread) {
          used_domains_.erase(
              c_.node(t.node).failure_domains[static_cast<int>(*job_.spec.spread)].value());
        }
        takes_.pop_back();
      }
    }
  }

  const ClusterState& st_;
  const topo::Cluster& c_;
  const JobInfo& job_;
  const NodeFilter& filter_;
  const int g_;
  std::array<int, topo::kLevelCount> quantum_{};
  std::vector<Take> takes_;
  std::vector<std::uint64_t> used_nodes_;  // bit per node: one of takes_
  std::set<std::uint32_t> used_domains_;
  std::vector<Subtree> children_;  // scratch: used before recursing only
  std::array<std::vector<std::pair<std::int64_t, Subtree>>, topo::kMaxSwitchTiers + 2>
      room_;  // scratch per depth
  std::size_t depth_ = 0;
};

}  // namespace

PluginStatus TopologyPlugin::Propose(const PluginContext& ctx, const JobInfo& job,
                                     const NodeFilter& filter, int max_candidates,
                                     std::vector<Placement>* out) {
  const ClusterState& st = ctx.state;
  const topo::Cluster& c = st.cluster();
  const int g = job.task_gpus;
  const int tasks = job.spec.gpus / g;
  const topo::Level required = job.spec.topology.required.value_or(topo::Level::kCore);
  Search search(ctx, job, filter);

  // Without sub-groups or spread, Descend(s, n) takes min(n, the sum over the nodes of s that the
  // filter accepts of their free task slots) (one per node with one_task_per_node): it tries
  // every child until it has enough. So once a Descend has failed (nodes the counts include are
  // refused, e.g. by backfill's reservations), those sums, counted in one pass over the free
  // nodes, tell which other candidate subtrees would fail too, and they are skipped instead of
  // searched. The candidates searched, and so the placements, are the same.
  const bool additive = job.spec.sub_groups.empty() && !job.spec.spread;
  bool capacity_ready = false;
  std::vector<std::int64_t> switch_capacity;
  std::vector<std::int64_t> domain_capacity;
  std::int64_t root_capacity = 0;
  auto count_capacity = [&] {
    capacity_ready = true;
    switch_capacity.assign(c.switches().size(), 0);
    domain_capacity.assign(c.nvlink_domains().size(), 0);
    for (int f = g; f <= st.max_node_gpus(); ++f) {
      const std::int64_t cap = job.spec.one_task_per_node ? 1 : f / g;
      for (std::uint32_t n : st.NodesWithFree(f)) {
        const topo::NodeId id(n);
        if (!filter.Fits(id)) continue;
        const topo::Node& node = c.node(id);
        domain_capacity[node.nvlink_domain.value()] += cap;
        for (int t = 0; t < c.tier_count(); ++t) {
          if (node.ancestors[t].valid()) switch_capacity[node.ancestors[t].value()] += cap;
        }
        root_capacity += cap;
      }
    }
  };
  auto capacity_of = [&](Subtree s) {
    switch (s.kind) {
      case SubtreeKind::kSwitch:
        return switch_capacity[s.index];
      case SubtreeKind::kDomain:
        return domain_capacity[s.index];
      case SubtreeKind::kRoot:
        return root_capacity;
      case SubtreeKind::kNode:
        break;
    }
    return std::int64_t{tasks};  // not counted: search it
  };

  auto try_subtrees = [&](std::vector<std::pair<std::int64_t, Subtree>>& cands) {
    // Best fit: least room left over, then lowest id.
    std::sort(cands.begin(), cands.end());
    for (const auto& [room, s] : cands) {
      if (static_cast<int>(out->size()) >= max_candidates) break;
      if (capacity_ready && capacity_of(s) < tasks) continue;
      search.Reset();
      if (search.Descend(s, tasks) == tasks) {
        out->push_back(search.Build());
      } else if (additive && !capacity_ready) {
        count_capacity();
      }
    }
  };

  // Level 1: one node, best fit from the free-count buckets. At most one candidate per leaf
  // switch: in node order the candidates would often all sit in the first free leaf, and the
  // bin-packing score could not steer the job into a fuller leaf to keep whole leaves free.
  std::vector<std::uint32_t> leaves_seen;
  auto new_leaf = [&](std::uint32_t n) {
    const topo::SwitchId leaf = c.node(topo::NodeId(n)).ancestors[0];
    if (!leaf.valid()) return true;
    if (std::find(leaves_seen.begin(), leaves_seen.end(), leaf.value()) != leaves_seen.end()) {
      return false;
    }
    leaves_seen.push_back(leaf.value());
    return true;
  };
  if (job.spec.gpus <= st.max_node_gpus() && tasks == 1) {
    for (int f = job.spec.gpus; f <= st.max_node_gpus() && out->empty(); ++f) {
      leaves_seen.clear();
      for (std::uint32_t n : st.NodesWithFree(f)) {
        if (static_cast<int>(out->size()) >= max_candidates) break;
        search.Reset();
        if (search.TakeNode(topo::NodeId(n), 1, 1) == 1 && new_leaf(n)) {
          out->push_back(search.Build());
        }
      }
    }
    if (!out->empty()) return PluginStatus::Success();
  } else if (job.spec.gpus <= st.max_node_gpus() && !job.spec.spread) {
    for (int f = job.spec.gpus; f <= st.max_node_gpus() && out->empty(); ++f) {
      leaves_seen.clear();
      for (std::uint32_t n : st.NodesWithFree(f)) {
        if (static_cast<int>(out->size()) >= max_candidates) break;
        search.Reset();
        if (search.Descend({SubtreeKind::kNode, n}, tasks) == tasks && new_leaf(n)) {
          out->push_back(search.Build());
        }
      }
    }
    if (!out->empty()) return PluginStatus::Success();
  }
  // Level 2: one multi-node NVLink domain.
  if (st.has_multi_node_domains() && required >= topo::Level::kNvlinkDomain) {
    std::vector<std::pair<std::int64_t, Subtree>> cands;
    for (std::uint32_t d = 0; d < c.nvlink_domains().size(); ++d) {
      Subtree s{SubtreeKind::kDomain, d};
      const std::int64_t room = st.Slots(s, g);
      if (room >= tasks) cands.push_back({room - tasks, s});
    }
    try_subtrees(cands);
    if (!out->empty()) return PluginStatus::Success();
  }
  // Level 3..: one switch subtree per tier, then the whole cluster.
  for (int t = 0; t < c.tier_count(); ++t) {
    if (c.tier_level(t) > required) break;
    std::vector<std::pair<std::int64_t, Subtree>> cands;
    for (std::uint32_t sw : st.SwitchesOfTier(t)) {
      Subtree s{SubtreeKind::kSwitch, sw};
      const std::int64_t room = st.Slots(s, g);
      if (room >= tasks) cands.push_back({room - tasks, s});
    }
    try_subtrees(cands);
    if (!out->empty()) return PluginStatus::Success();
  }
  if (required >= topo::Level::kCore && st.Slots(Subtree{}, g) >= tasks) {
    std::vector<std::pair<std::int64_t, Subtree>> cands = {{0, Subtree{}}};
    try_subtrees(cands);
    if (!out->empty()) return PluginStatus::Success();
  }

  // Nothing fits now. Unresolvable when even an idle cluster has no subtree of the required
  // level with enough GPUs; otherwise waiting (or preemption) may help.
  std::int64_t largest = 0;
  if (required >= topo::Level::kCore) {
    largest = c.counts().total;
  } else if (required <= topo::Level::kNode) {
    largest = st.max_node_gpus();
  } else if (required == topo::Level::kNvlinkDomain) {
    for (const auto& d : c.nvlink_domains())
      largest = std::max<std::int64_t>(largest, d.counts.total);
  } else {
    for (int t = 0; t < c.tier_count(); ++t) {
      if (c.tier_level(t) > required) break;
      for (std::uint32_t sw : st.SwitchesOfTier(t)) {
        largest = std::max<std::int64_t>(largest, c.counts(topo::SwitchId(sw)).total);
      }
    }
    for (const auto& d : c.nvlink_domains())
      largest = std::max<std::int64_t>(largest, d.counts.total);
  }
  // At the core and above the candidate is the whole cluster, which is what a user is told (a
  // cluster without a core tier has no "core" to name).
  const bool whole = required >= topo::Level::kCore;
  if (largest < job.spec.gpus) {
    return PluginStatus::Unresolvable(
        whole ? fmt::format("the whole cluster has {} GPUs, fewer than {}", largest, job.spec.gpus)
              : fmt::format("no {} has {} GPUs (largest has {})", topo::LevelName(required),
                            job.spec.gpus, largest));
  }
  return PluginStatus::Unschedulable(
      whole ? fmt::format("fewer than {} GPUs free in the whole cluster in tasks of {}",
                          job.spec.gpus, g)
            : fmt::format("no {} has {} free GPUs in tasks of {}", topo::LevelName(required),
                          job.spec.gpus, g));
}

void RegisterTopologyPlugins(PluginRegistry& registry) {
  registry["topology"] = NoArgs<TopologyPlugin>();
}

}  // namespace baton::sched
