// resize: elastic jobs (ElasticSpec) change size in steps of elastic.step_gpus. When pending jobs
// cannot be placed, running elastic jobs of no higher priority shrink toward min_gpus, lowest
// priority first, one step at a time, until the first such job fits; it is then bound at once
// (its GPUs were freed by the shrink). When nothing is pending, elastic jobs grow toward
// max_gpus into idle GPUs, highest priority first: onto their own nodes first, then the nearest
// nodes, never outside the subtree of their required (and sub-group) level. A job is resizable
// when its step is a whole number of tasks, or when it is one task on one node (it then resizes
// on that node). Shrinks release the highest ranks. Each changed job appears once in
// Decisions::resizes with its final placement, already reflected in the state.
#include <algorithm>
#include <bit>
#include <map>
#include <tuple>

#include "sched/actions/internal.h"

namespace baton::sched::internal {
namespace {

class ResizeAction final : public Action {
 public:
  std::string_view Name() const override { return "resize"; }
  void Execute(Session& s) override {
    std::vector<JobInfo*> elastic;
    for (auto& [id, j] : s.jobs()) {
      if (j.phase == JobPhase::kRunning && j.spec.elastic.min_gpus > 0 && Unit(j) > 0) {
        elastic.push_back(&j);
      }
    }
    if (elastic.empty()) return;
    bool any_pending = false;
    for (JobId id : s.pending_at_start()) {
      auto it = s.jobs().find(id);
      any_pending |= it != s.jobs().end() && it->second.phase == JobPhase::kPending;
    }
    if (any_pending) {
      Shrink(s, elastic);
    } else {
      Grow(s, elastic);
    }
  }

 private:
  // GPUs added or removed per placement unit: a task, or for a one-task job a step on its node;
  // 0 when the job cannot be resized.
  static int Unit(const JobInfo& j) {
    const int step = j.spec.elastic.step_gpus;
    if (step % j.task_gpus == 0) return j.task_gpus;
    // One task (its initial gang fit one node) stays one task on its node at any size.
    if (j.placement.nodes.size() == 1 && j.spec.gpus == j.task_gpus) return step;
    return 0;
  }

  // `p` without its highest `gpus` ranks; the removed GPUs go to `released`.
  static Placement WithoutLast(Placement p, int gpus, std::vector<NodeAlloc>* released) {
    while (gpus > 0 && !p.nodes.empty()) {
      NodeAlloc& a = p.nodes.back();
      std::uint64_t cut = 0;
      while (gpus > 0 && a.mask != 0) {
        const std::uint64_t top = std::uint64_t{1} << (63 - std::countl_zero(a.mask));
        a.mask &= ~top;
        cut |= top;
        --gpus;
      }
      released->push_back({a.node, cut});
      if (a.mask == 0) p.nodes.pop_back();
    }
    return p;
  }

  static void Shrink(Session& s, std::vector<JobInfo*> elastic) {
    std::sort(elastic.begin(), elastic.end(),
              [&](const JobInfo* a, const JobInfo* b) { return LowestFirst{&s}(a, b); });
    int attempts = 0;
    for (JobId id : s.PendingQueue()) {
      JobInfo& job = s.jobs().at(id);
      if (job.nominated) continue;
      if (++attempts > s.config().max_preemptors_per_cycle) break;
      if (s.FitsNow(job)) continue;
      Statement shrink(&s.state());
      std::map<JobId, Placement> shrunk;
      bool fits = false;
      for (JobInfo* e : elastic) {
        if (e->phase != JobPhase::kRunning || e->spec.priority > job.spec.priority) continue;
        if (!s.config().tenancy.MayPreempt(job.spec.tenant, e->spec.tenant)) continue;
        Placement p = e->placement;
        while (!fits && p.gpus() - e->spec.elastic.step_gpus >= e->spec.elastic.min_gpus) {
          std::vector<NodeAlloc> released;
          p = WithoutLast(std::move(p), e->spec.elastic.step_gpus, &released);
          for (const auto& a : released) CHECK(shrink.Release(a.node, a.mask).ok());
          shrunk[e->spec.id] = p;
          fits = s.state().Free(Subtree{}) >= job.spec.gpus && s.FitsNow(job);
        }
        if (fits) break;
      }
      if (!fits) continue;  // `shrink` discards
      Statement place(&s.state());
      Placement p;
      PluginStatus st = s.TryPlace(job, &place, &p);
      CHECK(st.ok()) << "resize: the job fit a moment ago: " << st.ToString();
      s.Bind(job, std::move(p), &place);
      shrink.Commit();
      for (auto& [eid, ep] : shrunk) s.Resize(s.jobs().at(eid), std::move(ep));
    }
  }

  static void Grow(Session& s, std::vector<JobInfo*> elastic) {
    std::sort(elastic.begin(), elastic.end(), [](const JobInfo* a, const JobInfo* b) {
      if (a->spec.priority != b->spec.priority) return a->spec.priority > b->spec.priority;
      return a->spec.id < b->spec.id;
    });
    const topo::Cluster& c = s.state().cluster();
    for (JobInfo* e : elastic) {
      const int unit = Unit(*e);
      const int step = e->spec.elastic.step_gpus;
      if (e->placement.gpus() + step > e->spec.elastic.max_gpus) continue;
      const topo::NodeId home = e->placement.nodes.front().node;
      // Nodes other than its own stay inside the subtree of its first node at the required level
      // and at every multi-task sub-group level.
      topo::Level limit = e->spec.topology.required.value_or(topo::Level::kCore);
      for (const auto& sg : e->spec.sub_groups) {
        if (sg.gpus > e->task_gpus) limit = std::min(limit, sg.level);
      }
      // Candidate nodes: own nodes first (in rank order), then others by distance, then the
      // tightest fit, then id. A one-task job stays on its node.
      std::vector<topo::NodeId> nodes;
      for (const auto& a : e->placement.nodes) nodes.push_back(a.node);
      if (unit == e->task_gpus) {
        std::vector<std::tuple<topo::Level, int, std::uint32_t>> others;
        for (int f = unit; f <= s.state().max_node_gpus(); ++f) {
          for (std::uint32_t n : s.state().NodesWithFree(f)) {
            const topo::NodeId id(n);
            if (std::find(nodes.begin(), nodes.end(), id) != nodes.end()) continue;
            const topo::Level l = c.Meet(home, id);
            if (l <= limit) others.push_back({l, f, n});
          }
        }
        std::sort(others.begin(), others.end());
        for (const auto& [l, f, n] : others) nodes.push_back(topo::NodeId(n));
      }
      Statement grow(&s.state());
      Placement p = e->placement;
      bool grew = false;
      while (p.gpus() + step <= e->spec.elastic.max_gpus) {
        const std::size_t mark = grow.size();
        Placement next = p;
        int need = step;
        for (topo::NodeId id : nodes) {
          if (need == 0) break;
          int room = s.state().FreeGpus(id) / unit;
          if (room == 0 || !s.PassesFilters(*e, id)) continue;
          const std::uint64_t free_mask = ~c.node(id).allocated_mask;
          std::uint64_t mask = 0;
          for (int i = 0; i < c.node(id).gpus && room > 0 && need > 0; ++i) {
            if ((free_mask >> i) & 1) mask |= std::uint64_t{1} << i;
            if (std::popcount(mask) == unit) {
              CHECK(grow.Allocate(id, mask).ok());
              auto it = std::find_if(next.nodes.begin(), next.nodes.end(),
                                     [&](const NodeAlloc& a) { return a.node == id; });
              if (it != next.nodes.end()) {
                it->mask |= mask;
              } else {
                next.nodes.push_back({id, mask});
              }
              mask = 0;
              --room;
              need -= unit;
            }
          }
        }
        if (need > 0) {
          grow.RollbackTo(mark);
          break;
        }
        p = std::move(next);
        grew = true;
      }
      grow.Commit();
      if (grew) s.Resize(*e, std::move(p));
    }
  }
};

}  // namespace

std::unique_ptr<Action> MakeResizeAction() { return std::make_unique<ResizeAction>(); }

}  // namespace baton::sched::internal
