#include "perf/plan.h"

#include <fmt/format.h>

#include <cmath>

#include "core/strings.h"

namespace baton::perf {

std::string_view RecomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
    case Recompute::kOps:
      return "ops";
    case Recompute::kMlp:
      return "mlp";
  }
  return "?";
}

Result<Recompute> ParseRecompute(std::string_view name) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull, Recompute::kOps,
                      Recompute::kMlp}) {
    if (EqualsIgnoreCase(Trim(name), RecomputeName(r))) return r;
  }
  return InvalidArgumentError(fmt::format(
      "plan.recompute: '{}' is not none, selective, full, ops or mlp", Printable(name)));
}

std::string_view RankOrderName(RankOrder o) {
  return o == RankOrder::kTpCpEpPpDp ? "tp-cp-ep-pp-dp" : "tp-cp-ep-dp-pp";
}

Result<RankOrder> ParseRankOrder(std::string_view name) {
  for (RankOrder o : {RankOrder::kTpCpEpDpPp, RankOrder::kTpCpEpPpDp}) {
    if (EqualsIgnoreCase(Trim(name), RankOrderName(o))) return o;
  }
  return InvalidArgumentError(
      fmt::format("plan.order: '{}' is not tp-cp-ep-dp-pp or tp-cp-ep-pp-dp", Printable(name)));
}

std::string PlanToString(const ParallelPlan& p) {
  std::string s = fmt::format("tp{} pp{} dp{} cp{} ep{} mbs{} vp{} rc={}", p.tp, p.pp, p.dp, p.cp,
                              p.ep, p.mbs, p.vp, RecomputeName(p.recompute));
  if (p.sequence_parallel) s += " sp";
  s += fmt::format(" zero{}", p.zero);
  if (p.zero >= 3 && p.fsdp_group > 0) s += fmt::format(" hsdp{}", p.fsdp_group);
  if (!p.tp_comm_overlap && p.tp > 1) s += " no-tp-overlap";
  s += p.overlap_dp_comm ? " overlap" : " no-overlap";
  if (p.uneven_pp) s += " uneven-pp";
  if (!p.batched_pp_p2p) s += " serial-p2p";
  if (p.order != RankOrder::kTpCpEpDpPp) s += fmt::format(" order={}", RankOrderName(p.order));
  return s;
}

Result<int> GlobalBatchFromTokens(double tokens, int seq, std::string_view field) {
  if (!(tokens > 0) || seq <= 0) {
    return InvalidArgumentError(fmt::format("{}: {} must be > 0", field, tokens));
  }
  double seqs = tokens / seq;
  if (std::abs(seqs - std::round(seqs)) > 1e-9 || seqs > 1e9) {
    return InvalidArgumentError(fmt::format(
        "{}: {} tokens is not a whole number of {}-token sequences", field, tokens, seq));
  }
  return static_cast<int>(std::round(seqs));
}

Status ValidateTraining(const TrainingSpec& t) {
  if (t.global_batch <= 0) {
    return InvalidArgumentError(
        fmt::format("training.global_batch: {} must be > 0", t.global_batch));
  }
  if (t.tokens_to_train < 0) {
    return InvalidArgumentError(fmt::format("training.tokens: {} must be >= 0", t.tokens_to_train));
  }
  if (t.dollars_per_gpu_hour < 0) {
    return InvalidArgumentError(
        fmt::format("training.dollars_per_gpu_hour: {} must be >= 0", t.dollars_per_gpu_hour));
  }
  if (!(t.checkpoint_bandwidth.value() > 0)) {
    return InvalidArgumentError("training.checkpoint_bandwidth: must be > 0");
  }
  if (!(t.mtbf.value() > 0)) return InvalidArgumentError("training.mtbf: must be > 0");
  return Status::Ok();
}

namespace {
Status PlanError(std::string_view field, const std::string& why) {
  return InvalidArgumentError(fmt::format("plan.{}: {}", field, why));
}
}  // namespace

Status ValidatePlan(const ModelSpec& m, const ParallelPlan& p, const TrainingSpec& t, int gpus) {
  struct Named {
    const char* name;
    int value;
  };
  for (Named f : {Named{"tp", p.tp}, Named{"pp", p.pp}, Named{"dp", p.dp}, Named{"cp", p.cp},
                  Named{"ep", p.ep}, Named{"mbs", p.mbs}, Named{"vp", p.vp}}) {
    if (f.value <= 0) return PlanError(f.name, fmt::format("{} must be > 0", f.value));
    if (f.value > (1 << 20)) return PlanError(f.name, fmt::format("{} is too large", f.value));
  }
  if (p.zero < 0 || p.zero > 3) return PlanError("zero", fmt::format("{} is not 0..3", p.zero));
  if (p.fsdp_group < 0)
    return PlanError("fsdp_group", fmt::format("{} must be >= 0", p.fsdp_group));
  if (p.fsdp_group > 0 && p.zero != 3) {
    return PlanError("fsdp_group", fmt::format("{} needs zero 3, not {}", p.fsdp_group, p.zero));
  }
  if (p.fsdp_group > 0 && (static_cast<long long>(p.dp) * p.cp) % p.fsdp_group != 0) {
    return PlanError("fsdp_group", fmt::format("{} does not divide dp x cp = {}", p.fsdp_group,
                                               static_cast<long long>(p.dp) * p.cp));
  }
  if (static_cast<long long>(p.tp) * p.cp * p.pp * p.dp > (1 << 24)) {
    return PlanError("dp", "tp * cp * pp * dp is too large");
  }
  if (m.heads % p.tp != 0) {
    return PlanError("tp", fmt::format("{} does not divide heads {}", p.tp, m.heads));
  }
  if (m.kv_heads % p.tp != 0) {
    return PlanError("tp", fmt::format("{} does not divide kv_heads {}", p.tp, m.kv_heads));
  }
  if (m.ffn % p.tp != 0) {
    return PlanError("tp", fmt::format("{} does not divide ffn {}", p.tp, m.ffn));
  }
  if (p.pp > m.layers) {
    return PlanError("pp", fmt::format("{} is more than layers {}", p.pp, m.layers));
  }
  int stage_layers = (m.layers + p.pp - 1) / p.pp;
  if (!p.uneven_pp && m.layers % p.pp != 0) {
    return PlanError("pp", fmt::format("{} does not divide layers {}", p.pp, m.layers));
  }
  if (p.uneven_pp && stage_layers * (p.pp - 1) >= m.layers) {
    return PlanError("pp", fmt::format("{} stages of {} layers leave the last of {} layers empty",
                                       p.pp, stage_layers, m.layers));
  }
  if (p.vp > 1) {
    if (p.pp == 1) return PlanError("vp", "interleaving needs pp > 1");
    if (stage_layers % p.vp != 0) {
      return PlanError(
          "vp", fmt::format("{} does not divide the {} layers of a stage", p.vp, stage_layers));
    }
  }
  if (m.seq % (2 * p.cp) != 0 && p.cp > 1) {
    return PlanError("cp", fmt::format("seq {} is not divisible into 2 * {} chunks", m.seq, p.cp));
  }
  if (p.ep > 1) {
    if (!m.is_moe()) return PlanError("ep", "expert parallelism needs a MoE model");
    if (m.moe.experts % p.ep != 0) {
      return PlanError("ep", fmt::format("{} does not divide experts {}", p.ep, m.moe.experts));
    }
    if ((p.dp * p.cp) % p.ep != 0) {
      return PlanError("ep", fmt::format("{} does not divide dp * cp = {}", p.ep, p.dp * p.cp));
    }
  }
  if (p.sequence_parallel && p.tp == 1) {
    return PlanError("sequence_parallel", "needs tp > 1");
  }
  if (gpus > 0 && p.gpus() != gpus) {
    return PlanError("dp", fmt::format("tp {} * cp {} * pp {} * dp {} = {} GPUs, but {} are given",
                                       p.tp, p.cp, p.pp, p.dp, p.gpus(), gpus));
  }
  if (t.global_batch <= 0) {
    return InvalidArgumentError(
        fmt::format("training.global_batch: {} must be > 0", t.global_batch));
  }
  if (t.global_batch % (static_cast<long long>(p.dp) * p.mbs) != 0) {
    return PlanError("mbs", fmt::format("global batch {} is not divisible by dp {} * mbs {}",
                                        t.global_batch, p.dp, p.mbs));
  }
  int micro = t.global_batch / (p.dp * p.mbs);
  if (p.vp > 1 && micro % p.pp != 0) {
    return PlanError("vp", fmt::format("interleaving needs the {} micro-batches to be a multiple "
                                       "of pp {}",
                                       micro, p.pp));
  }
  return Status::Ok();
}

}  // namespace baton::perf
