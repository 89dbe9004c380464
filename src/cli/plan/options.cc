// The steps every `baton plan` subcommand shares: model, training, system and plan from the
// flags.
#include "cli/plan/options.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"
#include "perf/stack.h"
#include "topology/builders/fabrics.h"
#include "topology/gpu.h"
#include "topology/io/cluster_file.h"

namespace baton::cli::plan {
namespace {

// "cp_attention" -> "--cp-attention".
std::string StackFlag(std::string_view setting) {
  std::string flag = "--" + std::string(setting);
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

Result<std::vector<int>> ParseIntList(const std::string& s, std::string_view field, int min,
                                      int max) {
  std::vector<int> out;
  for (std::string_view part : Split(s, ',')) {
    auto v = ParseInt64(part);
    if (!v || *v < min || *v > max) {
      return InvalidArgumentError(
          fmt::format("{}: '{}' is not in {}..{}", field, Printable(part), min, max));
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

Result<perf::SystemSpec> MakeSystemNoProfile(const PlanOptions& o, int gpus) {
  if (!o.preset.empty() || !o.topology.empty()) {
    ASSIGN_OR_RETURN(topo::Cluster cluster, LoadTopology(o));
    return perf::SystemFromCluster(cluster, gpus);
  }
  perf::ShortSystem s;
  s.gpu = o.gpu;
  s.gpus = gpus;
  s.gpus_per_node = o.gpus_per_node;
  s.nvlink_domain_gpus = o.nvlink_domain;
  s.nvlink_gbytes_per_s = o.nvlink_gbytes;
  s.nic_gbits_per_gpu = o.nic_gbits > 0 ? o.nic_gbits : perf::DefaultNicGbps(o.gpu);
  s.nodes_per_leaf = o.nodes_per_leaf;
  s.oversubscription = o.oversubscription;
  return perf::SystemFromShort(s);
}

}  // namespace

void PrintError(const Status& st) { fmt::print(stderr, "error: {}\n", st.ToString()); }

std::string DtypeAndStack(const perf::TrainingSpec& t) {
  std::string stack = perf::StackSummary(t);
  std::string dtype(topo::DtypeName(t.dtype));
  return stack.empty() ? dtype : fmt::format("{} ({})", dtype, stack);
}

Result<std::vector<int>> ParseGpuList(const std::string& s) {
  std::vector<int> out;
  if (Trim(s).empty()) return InvalidArgumentError("gpus: --gpus is required");
  for (std::string_view part : Split(s, ',')) {
    auto v = ParseInt64(part);
    if (!v || *v <= 0 || *v > (1 << 22)) {
      return InvalidArgumentError(
          fmt::format("gpus: '{}' is not a GPU count in 1..4194304", Printable(part)));
    }
    out.push_back(static_cast<int>(*v));
  }
  return out;
}

Status RestrictSpace(const PlanOptions& o, perf::SearchSpace& space) {
  struct Field {
    const std::string& text;
    std::vector<int>& values;
    const char* name;
    int min;
  };
  for (Field f :
       {Field{o.tp_list, space.tp, "search.tp", 1}, Field{o.pp_list, space.pp, "search.pp", 1},
        Field{o.cp_list, space.cp, "search.cp", 1}, Field{o.ep_list, space.ep, "search.ep", 1},
        Field{o.mbs_list, space.mbs, "search.mbs", 1}, Field{o.vp_list, space.vp, "search.vp", 1},
        Field{o.zero_list, space.zero, "search.zero", 0}}) {
    if (f.text.empty()) continue;
    ASSIGN_OR_RETURN(f.values, ParseIntList(f.text, f.name, f.min, 1 << 16));
  }
  if (!o.recompute_list.empty()) {
    space.recompute.clear();
    for (std::string_view part : Split(o.recompute_list, ',')) {
      ASSIGN_OR_RETURN(perf::Recompute r, perf::ParseRecompute(part));
      space.recompute.push_back(r);
    }
  }
  if (o.even_pp) space.allow_uneven_pp = false;
  return Status::Ok();
}

Result<perf::TrainingSpec> MakeTraining(const PlanOptions& o, const perf::ModelSpec& m) {
  perf::TrainingSpec t;
  if (o.global_batch_tokens != 0) {
    ASSIGN_OR_RETURN(t.global_batch, perf::GlobalBatchFromTokens(o.global_batch_tokens, m.seq,
                                                                 "training.global_batch_tokens"));
  } else {
    t.global_batch = o.global_batch;
  }
  if (t.global_batch == 0) {
    // Default: ~4M tokens, a common pre-training batch.
    t.global_batch = std::max(1, (4 << 20) / m.seq);
  }
  ASSIGN_OR_RETURN(t.dtype, topo::ParseDtype(o.dtype));
  t.tokens_to_train = o.tokens;
  t.dollars_per_gpu_hour = o.price;
  t.flash_attention = !o.no_flash;
  for (const auto& [name, word] : o.stack) {
    if (word.empty()) continue;
    RETURN_IF_ERROR(perf::ApplyStackSetting(name, word, StackFlag(name), &t));
  }
  if (!(o.checkpoint_gbps > 0)) {
    return InvalidArgumentError("training.checkpoint_gbps: must be > 0");
  }
  if (!(o.mtbf_hours > 0)) return InvalidArgumentError("training.mtbf_hours: must be > 0");
  t.checkpoint_bandwidth = GBps(o.checkpoint_gbps);
  t.mtbf = Hours(o.mtbf_hours);
  RETURN_IF_ERROR(perf::ValidateTraining(t));
  return t;
}

Result<topo::Cluster> LoadTopology(const PlanOptions& o) {
  if (!o.topology.empty()) return topo::LoadClusterFile(o.topology);
  return topo::BuildPreset(o.preset);
}

Result<perf::SystemProfile> ProfileFor(const PlanOptions& o) {
  if (o.profile.empty()) return perf::ActiveProfile();
  return perf::LoadProfile(o.profile);
}

Result<perf::SystemSpec> MakeSystem(const PlanOptions& o, int gpus) {
  ASSIGN_OR_RETURN(perf::SystemSpec s, MakeSystemNoProfile(o, gpus));
  if (!o.profile.empty()) {
    ASSIGN_OR_RETURN(perf::SystemProfile p, perf::LoadProfile(o.profile));
    perf::ApplyProfile(p, &s);
  }
  return s;
}

Result<perf::ModelSpec> MakeModel(const PlanOptions& o) {
  ASSIGN_OR_RETURN(perf::ModelSpec m, perf::ResolveModel(o.model));
  if (o.seq != 0) {
    if (o.seq < 0) return InvalidArgumentError(fmt::format("seq: {} must be > 0", o.seq));
    m.seq = o.seq;
    RETURN_IF_ERROR(perf::ValidateModel(m));
  }
  return m;
}

Result<ParallelPlan> MakePlan(const PlanOptions& o, const perf::ModelSpec& m, int gpus) {
  ParallelPlan p;
  p.tp = o.tp;
  p.pp = o.pp;
  p.cp = o.cp;
  p.ep = o.ep;
  p.mbs = o.mbs;
  p.vp = o.vp;
  p.zero = o.zero;
  p.fsdp_group = o.fsdp_group;
  p.sequence_parallel = o.sp;
  p.overlap_dp_comm = !o.no_overlap;
  p.uneven_pp = o.uneven_pp;
  ASSIGN_OR_RETURN(p.recompute, perf::ParseRecompute(o.recompute));
  ASSIGN_OR_RETURN(p.order, perf::ParseRankOrder(o.order));
  for (auto [name, v] : {std::pair{"tp", p.tp}, std::pair{"pp", p.pp}, std::pair{"cp", p.cp}}) {
    if (v <= 0) return InvalidArgumentError(fmt::format("plan.{}: {} must be > 0", name, v));
  }
  {
    // Name the model-shape conflicts before the GPU split they would also break.
    ParallelPlan shape = p;
    shape.dp = 1;
    shape.fsdp_group = 0;  // checked against the real dp below
    perf::TrainingSpec any;
    any.global_batch = 1 << 20;
    Status st = perf::ValidatePlan(m, shape, any, 0);
    if (!st.ok() && st.message().rfind("plan.mbs", 0) != 0 &&
        st.message().rfind("plan.vp", 0) != 0 && st.message().rfind("plan.ep", 0) != 0) {
      return st;
    }
  }
  if (o.dp > 0) {
    p.dp = o.dp;
  } else {
    long long mp = static_cast<long long>(p.tp) * p.pp * p.cp;
    if (gpus % mp != 0) {
      return InvalidArgumentError(fmt::format(
          "gpus: {} GPUs cannot be split into tp {} x pp {} x cp {} = {} model-parallel groups",
          gpus, p.tp, p.pp, p.cp, mp));
    }
    p.dp = static_cast<int>(gpus / mp);
  }
  return p;
}

void AddModelOptions(CLI::App* c, PlanOptions* o) {
  c->add_option("--model", o->model,
                "Catalogue name (gpt3-175b, llama3-405b, megatron-1t, mixtral-8x7b, ...) or a "
                ".yaml/.json file")
      ->capture_default_str();
  c->add_option("--seq", o->seq,
                "Sequence length in tokens (default: the model's; a catalogue model at another "
                "length)");
  c->add_option("--global-batch", o->global_batch,
                "Global batch in sequences (default ~4M tokens)");
  c->add_option("--global-batch-tokens", o->global_batch_tokens, "Global batch in tokens");
  c->add_option("--dtype", o->dtype, "bf16, fp16 or fp8")->capture_default_str();
  c->add_option("--tokens", o->tokens, "Tokens to train (for time, GPU-hours and cost)");
  c->add_option("--price", o->price, "$ per GPU-hour");
  c->add_flag("--no-flash-attention", o->no_flash, "Unfused attention (pre-2022 kernels)");
  for (const perf::StackSetting& s : perf::StackSettings()) {
    std::string& word = o->stack[std::string(s.name)];
    c->add_option(StackFlag(s.name), word, fmt::format("{}: {}", s.values, s.help));
  }
  c->add_option("--checkpoint-gbps", o->checkpoint_gbps, "Checkpoint write bandwidth, GB/s")
      ->capture_default_str();
  c->add_option("--mtbf-hours", o->mtbf_hours, "Mean time between job failures, hours")
      ->capture_default_str();
}

void AddSystemOptions(CLI::App* c, PlanOptions* o) {
  c->add_option("--gpus", o->gpus_arg, "GPU count (search: a comma list)")->required();
  c->add_option("--gpu", o->gpu, "GPU type (short description)")->capture_default_str();
  c->add_option("--gpus-per-node", o->gpus_per_node, "GPUs per node")->capture_default_str();
  c->add_option("--nvlink-domain", o->nvlink_domain,
                "GPUs per NVLink domain spanning several nodes (GB200 NVL72: --gpus-per-node 4 "
                "--nvlink-domain 72); 0 = each node its own");
  c->add_option("--nvlink-gbps", o->nvlink_gbytes, "NVLink GB/s per direction (0 = GPU's)");
  c->add_option("--nic-gbps", o->nic_gbits,
                "NIC Gb/s per GPU (default: the GPU's reference system, 200 for A100 (HDR), 400 "
                "otherwise (NDR))");
  c->add_option("--nodes-per-leaf", o->nodes_per_leaf, "Nodes under one leaf switch")
      ->capture_default_str();
  c->add_option("--oversubscription", o->oversubscription, "Above the leaf")->capture_default_str();
  c->add_option("--preset", o->preset, "Take the system from a topology preset");
  c->add_option("--topology", o->topology, "Take the system from a cluster file");
  c->add_option("--profile", o->profile,
                "System profile YAML from `baton plan calibrate` (default: the built-in one)");
}

void AddPlanOptions(CLI::App* c, PlanOptions* o) {
  c->add_option("--tp", o->tp, "Tensor parallel")->capture_default_str();
  c->add_option("--pp", o->pp, "Pipeline parallel")->capture_default_str();
  c->add_option("--dp", o->dp, "Data parallel (default: GPUs / (tp*pp*cp))");
  c->add_option("--cp", o->cp, "Context parallel")->capture_default_str();
  c->add_option("--ep", o->ep, "Expert parallel")->capture_default_str();
  c->add_option("--mbs", o->mbs, "Micro-batch size")->capture_default_str();
  c->add_option("--vp", o->vp, "Virtual pipeline stages")->capture_default_str();
  c->add_option("--recompute", o->recompute,
                "none, selective, full, ops (per-op checkpointing) or mlp (core attention and the "
                "MLP block)")
      ->capture_default_str();
  c->add_flag("--sp", o->sp, "Sequence parallelism");
  c->add_option("--zero", o->zero, "ZeRO stage 0..3")->capture_default_str();
  c->add_option("--fsdp-group", o->fsdp_group,
                "With --zero 3: HSDP, parameters sharded over groups of this many dp x cp ranks "
                "(a node's GPUs, say) and replicated across them; 0 = shard over all");
  c->add_flag("--no-overlap", o->no_overlap, "Do not overlap DP communication with backward");
  c->add_flag("--uneven-pp", o->uneven_pp, "Allow pp not dividing the layers");
  c->add_option("--rank-order", o->order, "tp-cp-ep-dp-pp or tp-cp-ep-pp-dp")
      ->capture_default_str();
}

}  // namespace baton::cli::plan
