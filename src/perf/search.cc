#include "perf/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace baton::perf {

std::uint64_t SearchSpace::size() const {
  std::uint64_t n = gpus.size();
  for (std::size_t s :
       {tp.size(), pp.size(), cp.size(), ep.size(), mbs.size(), vp.size(), recompute.size(),
        sequence_parallel.size(), zero.size(), overlap_dp_comm.size()}) {
    n *= s;
  }
  return n;
}

std::uint64_t SearchResult::rejected_total() const {
  std::uint64_t n = 0;
  for (std::uint64_t r : rejected) n += r;
  return n;
}

SearchSpace DefaultSearchSpace(const ModelSpec& model, std::vector<int> gpus) {
  SearchSpace s;
  s.gpus = std::move(gpus);
  for (int v = 1; v <= 64; v *= 2) s.tp.push_back(v);
  for (int v = 1; v <= std::min(model.layers, 128); ++v) s.pp.push_back(v);
  for (int v = 1; v <= 16; v *= 2) s.cp.push_back(v);
  if (model.is_moe()) {
    for (int v = 1; v <= model.moe.experts; ++v) {
      if (model.moe.experts % v == 0) s.ep.push_back(v);
    }
  } else {
    s.ep.push_back(1);
  }
  for (int v = 1; v <= 16; v *= 2) s.mbs.push_back(v);
  for (int v = 1; v <= 8; ++v) s.vp.push_back(v);
  return s;
}

namespace {

struct Candidate {
  double key;
  std::uint64_t order;
  RankedPlan ranked;
};

bool Better(const Candidate& a, const Candidate& b) {
  if (a.key != b.key) return a.key < b.key;
  return a.order < b.order;
}

// A fixed-capacity top-k list; Offer() never allocates after construction.
class TopK {
 public:
  explicit TopK(int k) : k_(std::max(1, k)) { items_.reserve(k_ + 1); }
  bool Wants(double key) const {
    return static_cast<int>(items_.size()) < k_ || key <= items_.back().key;
  }
  void Offer(const Candidate& c) {
    if (static_cast<int>(items_.size()) == k_) {
      if (!Better(c, items_.back())) return;
      items_.pop_back();
    }
    auto pos = std::upper_bound(items_.begin(), items_.end(), c, Better);
    items_.insert(pos, c);
  }
  const std::vector<Candidate>& items() const { return items_; }

 private:
  int k_;
  std::vector<Candidate> items_;
};

struct Worker {
  explicit Worker(int k) : top(k) {}
  TopK top;
  std::uint64_t feasible = 0;
  std::array<std::uint64_t, kRejectionCount> rejected{};
};

struct Item {
  int gpus;
  int tp;
  int pp;
};

Status CheckList(const std::vector<int>& v, const char* name, int max) {
  if (v.empty()) return InvalidArgumentError(fmt::format("search.{}: no candidates", name));
  for (int x : v) {
    if (x <= 0 || x > max) {
      return InvalidArgumentError(fmt::format("search.{}: {} is not in 1..{}", name, x, max));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<SearchResult> Search(const ModelSpec& model, const TrainingSpec& training,
                            const SystemSpec& system, const SearchSpace& space,
                            const SearchOptions& options) {
  RETURN_IF_ERROR(ValidateModel(model));
  RETURN_IF_ERROR(ValidateTraining(training));
  RETURN_IF_ERROR(CheckSystemRuns(training, system));
  RETURN_IF_ERROR(CheckList(space.gpus, "gpus", 1 << 22));
  RETURN_IF_ERROR(CheckList(space.tp, "tp", 1 << 16));
  RETURN_IF_ERROR(CheckList(space.pp, "pp", 1 << 16));
  RETURN_IF_ERROR(CheckList(space.cp, "cp", 1 << 16));
  RETURN_IF_ERROR(CheckList(space.ep, "ep", 1 << 16));
  RETURN_IF_ERROR(CheckList(space.mbs, "mbs", 1 << 16));
  RETURN_IF_ERROR(CheckList(space.vp, "vp", 1 << 16));
  if (space.zero.empty()) return InvalidArgumentError("search.zero: no candidates");
  for (int z : space.zero) {
    if (z < 0 || z > 3) return InvalidArgumentError(fmt::format("search.zero: {} is not 0..3", z));
  }
  if (space.recompute.empty() || space.sequence_parallel.empty() || space.overlap_dp_comm.empty()) {
    return InvalidArgumentError("search: recompute, sequence_parallel and overlap need a value");
  }
  if (options.top_k <= 0 || options.top_k > 10000) {
    return InvalidArgumentError(fmt::format("search.top_k: {} is not in 1..10000", options.top_k));
  }
  if (options.threads <= 0 || options.threads > 1024) {
    return InvalidArgumentError(
        fmt::format("search.threads: {} is not in 1..1024", options.threads));
  }

  const EvalContext ctx(model, training, system);
  // Sizes of the sub-spaces below each loop level, to count pruned plans in bulk.
  const std::uint64_t inner_last = space.recompute.size() * space.sequence_parallel.size() *
                                   space.zero.size() * space.overlap_dp_comm.size();
  const std::uint64_t inner_vp = inner_last / space.sequence_parallel.size();  // per sp value
  const std::uint64_t below_vp = space.sequence_parallel.size() * inner_vp;
  const std::uint64_t below_mbs = space.vp.size() * below_vp;
  const std::uint64_t below_ep = space.mbs.size() * below_mbs;
  const std::uint64_t below_cp = space.ep.size() * below_ep;
  const std::uint64_t below_pp = space.cp.size() * below_cp;
  const std::uint64_t per_item = below_pp;

  std::vector<Item> items;
  for (int n : space.gpus) {
    for (int tp : space.tp) {
      for (int pp : space.pp) items.push_back(Item{n, tp, pp});
    }
  }
  const std::uint64_t total = space.size();
  const bool mfu = options.objective == Objective::kMfu;

  auto run_item = [&](std::size_t index, Worker& w) {
    const Item& it = items[index];
    const int gbs = training.global_batch;
    std::uint64_t order = static_cast<std::uint64_t>(index) << 32;
    ParallelPlan plan;
    plan.tp = it.tp;
    plan.pp = it.pp;
    if (model.heads % it.tp != 0 || model.kv_heads % it.tp != 0 || model.ffn % it.tp != 0) {
      w.rejected[static_cast<int>(Rejection::kTensorParallel)] += per_item;
      return;
    }
    const int stage_layers = (model.layers + it.pp - 1) / it.pp;
    plan.uneven_pp = model.layers % it.pp != 0;
    if (it.pp > model.layers || (plan.uneven_pp && (!space.allow_uneven_pp ||
                                                    stage_layers * (it.pp - 1) >= model.layers))) {
      w.rejected[static_cast<int>(Rejection::kPipeline)] += per_item;
      return;
    }
    for (int cp : space.cp) {
      plan.cp = cp;
      long long model_parallel = static_cast<long long>(it.tp) * it.pp * cp;
      if (it.gpus % model_parallel != 0) {
        w.rejected[static_cast<int>(Rejection::kGpuCount)] += below_cp;
        continue;
      }
      if (cp > 1 && model.seq % (2 * cp) != 0) {
        w.rejected[static_cast<int>(Rejection::kContextParallel)] += below_cp;
        continue;
      }
      plan.dp = static_cast<int>(it.gpus / model_parallel);
      for (int ep : space.ep) {
        plan.ep = ep;
        if (ep > 1 &&
            (!model.is_moe() || model.moe.experts % ep != 0 || (plan.dp * cp) % ep != 0)) {
          w.rejected[static_cast<int>(Rejection::kExpertParallel)] += below_ep;
          continue;
        }
        for (int mbs : space.mbs) {
          plan.mbs = mbs;
          long long per_step = static_cast<long long>(plan.dp) * mbs;
          if (gbs % per_step != 0) {
            w.rejected[static_cast<int>(Rejection::kBatch)] += below_mbs;
            continue;
          }
          const int micro = static_cast<int>(gbs / per_step);
          for (int vp : space.vp) {
            plan.vp = vp;
            if (vp > 1 && (it.pp == 1 || stage_layers % vp != 0 || micro % it.pp != 0)) {
              w.rejected[static_cast<int>(Rejection::kVirtualStages)] += below_vp;
              continue;
            }
            for (bool sp : space.sequence_parallel) {
              plan.sequence_parallel = sp;
              if (sp && it.tp == 1) {
                w.rejected[static_cast<int>(Rejection::kSequenceParallel)] += inner_vp;
                continue;
              }
              for (Recompute rc : space.recompute) {
                plan.recompute = rc;
                for (int zero : space.zero) {
                  plan.zero = zero;
                  for (bool overlap : space.overlap_dp_comm) {
                    plan.overlap_dp_comm = overlap;
                    ++order;
                    StepEstimate e;
                    Evaluate(ctx, plan, it.gpus, nullptr, &e);
                    if (!e.feasible()) {
                      ++w.rejected[static_cast<int>(e.rejection)];
                      continue;
                    }
                    ++w.feasible;
                    double key = mfu ? -e.mfu : e.step.value();
                    if (w.top.Wants(key))
                      w.top.Offer(Candidate{key, order, RankedPlan{plan, e, false}});
                  }
                }
              }
            }
          }
        }
      }
    }
  };

  int threads = std::min<int>(options.threads, std::max<std::size_t>(1, items.size()));
  std::vector<Worker> workers;
  workers.reserve(threads);
  for (int i = 0; i < threads; ++i) workers.emplace_back(options.top_k);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};
  auto loop = [&](Worker& w, bool report) {
    for (;;) {
      std::size_t i = next.fetch_add(1);
      if (i >= items.size()) break;
      run_item(i, w);
      std::size_t d = done.fetch_add(1) + 1;
      if (report && options.progress) options.progress(d * per_item, total);
    }
  };
  {
    std::vector<std::jthread> pool;
    for (int i = 1; i < threads; ++i) pool.emplace_back([&, i] { loop(workers[i], false); });
    loop(workers[0], true);
  }
  if (options.progress) options.progress(total, total);

  SearchResult result;
  result.space = total;
  TopK merged(options.top_k);
  for (const Worker& w : workers) {
    result.feasible += w.feasible;
    for (int r = 0; r < kRejectionCount; ++r) result.rejected[r] += w.rejected[r];
    for (const Candidate& c : w.top.items()) merged.Offer(c);
  }
  for (const Candidate& c : merged.items()) result.top.push_back(c.ranked);
  return result;
}

void MarkBeyondEnvelope(const SystemProfile& p, const ModelSpec& m, const SystemSpec& s,
                        SearchResult* r) {
  const FamilyProfile* f = p.Find(topo::GpuFamilyName(s.gpu.family));
  r->mfu_reached = f == nullptr ? 0.0 : f->MfuReached(m.TotalParams() / 1e9);
  for (RankedPlan& plan : r->top) {
    plan.beyond_envelope = r->mfu_reached > 0 && plan.estimate.mfu > r->mfu_reached;
  }
}

void AttachTrust(const SystemProfile& p, const ModelSpec& m, const SystemSpec& s, int gpus,
                 SearchResult* r) {
  r->band = EstimateBand(p, m, s, gpus);
  MarkBeyondEnvelope(p, m, s, r);
}

}  // namespace baton::perf
