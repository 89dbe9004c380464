#include "perf/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace baton::perf {

RankCoords RankToCoords(const ParallelPlan& p, int rank) {
  RankCoords c;
  c.tp = rank % p.tp;
  rank /= p.tp;
  c.cp = rank % p.cp;
  rank /= p.cp;
  if (p.order == RankOrder::kTpCpEpDpPp) {
    c.dp = rank % p.dp;
    c.pp = rank / p.dp;
  } else {
    c.pp = rank % p.pp;
    c.dp = rank / p.pp;
  }
  return c;
}

int CoordsToRank(const ParallelPlan& p, const RankCoords& c) {
  if (p.order == RankOrder::kTpCpEpDpPp) {
    return c.tp + p.tp * (c.cp + p.cp * (c.dp + p.dp * c.pp));
  }
  return c.tp + p.tp * (c.cp + p.cp * (c.pp + p.pp * c.dp));
}

namespace {

// Tier index of the system whose level covers `level`.
int TierFor(const SystemSpec& system, topo::Level level) {
  for (int i = 0; i < system.tier_count; ++i) {
    if (system.tiers[i].level >= level) return i;
  }
  return system.tier_count - 1;
}

struct Span {
  topo::Level top = topo::Level::kGpu;
  int nodes = 1;
  int size = 1;
};

// Measures groups of one placement. Distinct nodes are counted with a per-node stamp (the group's
// serial number) instead of a set: the scheduler scores every candidate placement of a job with a
// plan through here, so a call must not allocate per group.
class GroupMeter {
 public:
  GroupMeter(const topo::Cluster& cluster, std::span<const topo::GpuRef> gpus)
      : cluster_(cluster), gpus_(gpus), stamp_(cluster.nodes().size(), 0) {}

  Span Measure(const std::vector<int>& ranks) {
    ++serial_;
    Span s;
    s.size = static_cast<int>(ranks.size());
    s.nodes = 0;
    const topo::GpuRef first = gpus_[ranks[0]];
    for (int r : ranks) {
      const topo::GpuRef g = gpus_[r];
      std::uint32_t& seen = stamp_[g.node.value()];
      if (seen != serial_) {
        seen = serial_;
        ++s.nodes;
      }
      topo::Level l = cluster_.Meet(first, g);
      if (l > s.top) s.top = l;
    }
    return s;
  }

 private:
  const topo::Cluster& cluster_;
  std::span<const topo::GpuRef> gpus_;
  std::vector<std::uint32_t> stamp_;  // by node: the serial of the last group that counted it
  std::uint32_t serial_ = 0;
};

}  // namespace

Result<GroupSpans> SpansForPlacement(const topo::Cluster& cluster,
                                     std::span<const topo::GpuRef> gpus, const ParallelPlan& plan,
                                     const SystemSpec& system) {
  const int world = plan.gpus();
  if (static_cast<int>(gpus.size()) != world) {
    return InvalidArgumentError(
        fmt::format("placement: {} GPUs given, the plan needs {}", gpus.size(), world));
  }
  // GPUs in use, one bit per GPU of each node (a node has at most 64).
  static_assert(topo::kMaxGpusPerNode <= 64);
  std::vector<std::uint64_t> used(cluster.nodes().size(), 0);
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const topo::GpuRef& g = gpus[i];
    if (!g.node.valid() || g.node.value() >= cluster.nodes().size() ||
        g.index >= cluster.node(g.node).gpus) {
      return InvalidArgumentError(
          fmt::format("placement: rank {} is on a GPU not in the cluster", i));
    }
    const std::uint64_t bit = std::uint64_t{1} << g.index;
    if ((used[g.node.value()] & bit) != 0) {
      return InvalidArgumentError(fmt::format("placement: rank {} reuses a GPU", i));
    }
    used[g.node.value()] |= bit;
  }
  // Members of every group, then the worst span per kind.
  GroupMeter meter(cluster, gpus);
  std::array<Span, kGroupCount> worst{};
  auto consider = [&](Group g, const std::vector<int>& ranks) {
    Span s = meter.Measure(ranks);
    Span& w = worst[static_cast<int>(g)];
    if (s.top > w.top || (s.top == w.top && s.nodes > w.nodes)) w = s;
    w.size = s.size;
  };
  std::vector<int> ranks;
  ranks.reserve(world);
  for (int base = 0; base < world; ++base) {
    RankCoords c = RankToCoords(plan, base);
    if (c.tp == 0) {  // TP group: the tp ranks with these cp, dp, pp
      ranks.clear();
      for (int t = 0; t < plan.tp; ++t) ranks.push_back(base + t);
      consider(Group::kTp, ranks);
    }
    if (c.cp == 0) {
      ranks.clear();
      for (int x = 0; x < plan.cp; ++x) {
        RankCoords m = c;
        m.cp = x;
        ranks.push_back(CoordsToRank(plan, m));
      }
      consider(Group::kCp, ranks);
    }
    if (c.cp == 0 && c.dp == 0) {  // gradient group: all cp x dp ranks
      ranks.clear();
      for (int y = 0; y < plan.dp; ++y) {
        for (int x = 0; x < plan.cp; ++x) {
          RankCoords m = c;
          m.cp = x;
          m.dp = y;
          ranks.push_back(CoordsToRank(plan, m));
        }
      }
      consider(Group::kDp, ranks);
      // Expert groups: consecutive blocks of ep in the flattened cp-dp index.
      if (plan.ep > 1) {
        for (std::size_t start = 0; start + plan.ep <= ranks.size(); start += plan.ep) {
          std::vector<int> block(ranks.begin() + start, ranks.begin() + start + plan.ep);
          consider(Group::kEp, block);
        }
      }
    }
    if (c.pp == 0) {
      ranks.clear();
      for (int x = 0; x < plan.pp; ++x) {
        RankCoords m = c;
        m.pp = x;
        ranks.push_back(CoordsToRank(plan, m));
      }
      consider(Group::kPp, ranks);
    }
  }
  GroupSpans spans;
  for (int g = 0; g < kGroupCount; ++g) {
    const Span& s = worst[g];
    GroupSpan& out = spans.groups[g];
    if (s.size <= 1) continue;
    int tier = TierFor(system, s.top);
    if (tier == 0 || s.nodes <= 1) {
      out.factor[0] = s.size;
    } else {
      out.factor[0] = double(s.size) / s.nodes;
      out.factor[tier] = s.nodes;
    }
  }
  return spans;
}

Result<StepEstimate> EstimateOnPlacement(const ModelSpec& model, const ParallelPlan& plan,
                                         const TrainingSpec& training, const SystemSpec& system,
                                         const topo::Cluster& cluster,
                                         std::span<const topo::GpuRef> gpus) {
  RETURN_IF_ERROR(ValidateModel(model));
  RETURN_IF_ERROR(ValidateTraining(training));
  RETURN_IF_ERROR(ValidatePlan(model, plan, training, static_cast<int>(gpus.size())));
  ASSIGN_OR_RETURN(GroupSpans spans, SpansForPlacement(cluster, gpus, plan, system));
  EvalContext ctx(model, training, system);
  StepEstimate e;
  Evaluate(ctx, plan, plan.gpus(), &spans, &e, /*time_if_oom=*/true);
  return e;
}

Result<double> PlacementSlowdown(const ModelSpec& model, const ParallelPlan& plan,
                                 const TrainingSpec& training, const SystemSpec& system,
                                 const topo::Cluster& cluster, std::span<const topo::GpuRef> gpus) {
  ASSIGN_OR_RETURN(StepEstimate placed,
                   EstimateOnPlacement(model, plan, training, system, cluster, gpus));
  EvalContext ctx(model, training, system);
  StepEstimate ideal;
  Evaluate(ctx, plan, plan.gpus(), nullptr, &ideal, /*time_if_oom=*/true);
  if (!(ideal.step.value() > 0)) return InternalError("placement: zero step time");
  return placed.step.value() / ideal.step.value();
}

Result<std::vector<topo::GpuRef>> CompactGpus(const topo::Cluster& cluster, int count,
                                              int node_stride) {
  if (count <= 0) return InvalidArgumentError(fmt::format("gpus: {} must be > 0", count));
  if (node_stride <= 0) {
    return InvalidArgumentError(fmt::format("node_stride: {} must be > 0", node_stride));
  }
  std::vector<topo::GpuRef> out;
  const auto nodes = cluster.nodes();
  for (std::size_t start = 0; start < static_cast<std::size_t>(node_stride); ++start) {
    for (std::size_t n = start; n < nodes.size(); n += node_stride) {
      for (int g = 0; g < nodes[n].gpus; ++g) {
        if (static_cast<int>(out.size()) == count) return out;
        out.push_back(topo::GpuRef{topo::NodeId(static_cast<std::uint32_t>(n)),
                                   static_cast<std::uint8_t>(g)});
      }
    }
  }
  if (static_cast<int>(out.size()) < count) {
    return InvalidArgumentError(
        fmt::format("gpus: {} asked, the cluster has {}", count, out.size()));
  }
  return out;
}

Result<LaunchSpec> MakeLaunchSpec(const ModelSpec& model, const ParallelPlan& plan,
                                  const TrainingSpec& training, const topo::Cluster& cluster,
                                  std::span<const topo::GpuRef> gpus, int master_port) {
  RETURN_IF_ERROR(ValidateModel(model));
  RETURN_IF_ERROR(ValidatePlan(model, plan, training, static_cast<int>(gpus.size())));
  if (master_port <= 0 || master_port > 65535) {
    return InvalidArgumentError(fmt::format("master_port: {} is not a port", master_port));
  }
  LaunchSpec spec;
  // Node order = first appearance; each node's ranks must be one contiguous block.
  std::vector<topo::NodeId> order;
  std::vector<int> first_rank;
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    topo::NodeId n = gpus[r].node;
    if (n.value() >= cluster.nodes().size()) {
      return InvalidArgumentError(fmt::format("placement: rank {} is not on a cluster node", r));
    }
    if (order.empty() || order.back() != n) {
      if (std::find(order.begin(), order.end(), n) != order.end()) {
        return InvalidArgumentError(fmt::format(
            "placement: rank {} returns to node {}; torchrun needs each node's ranks contiguous", r,
            cluster.node(n).name));
      }
      order.push_back(n);
      first_rank.push_back(static_cast<int>(r));
    }
  }
  const int nproc = static_cast<int>(gpus.size() / order.size());
  if (nproc * order.size() != gpus.size()) {
    return InvalidArgumentError("placement: nodes hold different numbers of ranks");
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (first_rank[i] != static_cast<int>(i) * nproc) {
      return InvalidArgumentError(
          fmt::format("placement: node {} holds a different number of ranks than the others",
                      cluster.node(order[i]).name));
    }
  }
  const std::string& master = cluster.node(order[0]).name;
  bool renumbered = false;
  for (std::size_t r = 0; r < gpus.size(); ++r) {
    int node_rank = static_cast<int>(r) / nproc;
    int local = static_cast<int>(r) % nproc;
    if (gpus[r].index != local) renumbered = true;
    spec.ranks.push_back(RankLocation{static_cast<int>(r), cluster.node(gpus[r].node).name,
                                      node_rank, local, gpus[r].index});
  }
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::string& host = cluster.node(order[i]).name;
    spec.hostfile += fmt::format("{} slots={}\n", host, nproc);
    std::string devices;
    if (renumbered) {
      devices = "CUDA_VISIBLE_DEVICES=";
      for (int l = 0; l < nproc; ++l) {
        devices += fmt::format("{}{}", l == 0 ? "" : ",", spec.ranks[i * nproc + l].gpu);
      }
      devices += " ";
    }
    spec.torchrun.push_back(
        fmt::format("{}torchrun --nnodes={} --node_rank={} --nproc_per_node={} --master_addr={} "
                    "--master_port={} pretrain_gpt.py",
                    devices, order.size(), i, nproc, master, master_port));
  }
  if (renumbered) {
    spec.cuda_visible_devices_note =
        "the granted GPUs are not 0..n-1 in rank order on every node: each torchrun line sets "
        "CUDA_VISIBLE_DEVICES so LOCAL_RANK k runs on the k-th granted GPU";
  }
  auto& f = spec.megatron_flags;
  f.push_back(fmt::format("--tensor-model-parallel-size {}", plan.tp));
  f.push_back(fmt::format("--pipeline-model-parallel-size {}", plan.pp));
  if (plan.cp > 1) f.push_back(fmt::format("--context-parallel-size {}", plan.cp));
  if (plan.ep > 1) f.push_back(fmt::format("--expert-model-parallel-size {}", plan.ep));
  int stage_layers = (model.layers + plan.pp - 1) / plan.pp;
  if (plan.vp > 1) {
    f.push_back(fmt::format("--num-layers-per-virtual-pipeline-stage {}", stage_layers / plan.vp));
  }
  if (plan.order == RankOrder::kTpCpEpPpDp) f.push_back("--use-tp-pp-dp-mapping");
  if (plan.uneven_pp) {
    int first = model.layers - stage_layers * (plan.pp - 1);
    f.push_back(fmt::format("--decoder-first-pipeline-num-layers {}", first));
  }
  f.push_back(fmt::format("--micro-batch-size {}", plan.mbs));
  f.push_back(fmt::format("--global-batch-size {}", training.global_batch));
  if (plan.sequence_parallel) f.push_back("--sequence-parallel");
  if (plan.recompute == Recompute::kFull) {
    f.push_back("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  } else if (plan.recompute == Recompute::kMlp) {
    f.push_back("--recompute-granularity selective --recompute-modules core_attn mlp");
  } else if (plan.recompute == Recompute::kSelective || plan.recompute == Recompute::kOps) {
    // Megatron has no per-op checkpointing (torchtitan's); its selective mode is the nearest.
    f.push_back("--recompute-granularity selective");
  }
  if (plan.zero == 1 || plan.zero == 2) f.push_back("--use-distributed-optimizer");
  if (plan.zero == 3) f.push_back("--use-torch-fsdp2");
  if (plan.overlap_dp_comm && plan.dp * plan.cp > 1) {
    f.push_back("--overlap-grad-reduce");
    if (plan.zero >= 1) f.push_back("--overlap-param-gather");
  }
  f.push_back(fmt::format("--num-layers {} --hidden-size {} --num-attention-heads {}", model.layers,
                          model.hidden, model.heads));
  if (model.kv_heads != model.heads) {
    f.push_back(fmt::format("--group-query-attention --num-query-groups {}", model.kv_heads));
  }
  f.push_back(fmt::format("--ffn-hidden-size {}", model.ffn));
  f.push_back(fmt::format("--seq-length {} --max-position-embeddings {}", model.seq, model.seq));
  if (model.ffn_kind == FfnKind::kSwiGlu) f.push_back("--swiglu");
  if (!model.tied_embeddings) f.push_back("--untie-embeddings-and-output-weights");
  if (!model.learned_positions) f.push_back("--position-embedding-type rope");
  if (model.is_moe()) {
    f.push_back(
        fmt::format("--num-experts {} --moe-router-topk {}", model.moe.experts, model.moe.top_k));
  }
  switch (training.dtype) {
    case topo::Dtype::kFp16:
      f.push_back("--fp16");
      break;
    case topo::Dtype::kFp8:
      f.push_back("--bf16 --fp8-format hybrid");
      break;
    default:
      f.push_back("--bf16");
      break;
  }
  return spec;
}

}  // namespace baton::perf
