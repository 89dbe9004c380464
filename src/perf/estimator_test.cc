#include "perf/estimator.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "perf/report.h"
#include "topology/builders/fabrics.h"

namespace baton::perf {
namespace {

ModelSpec Model(const char* name) {
  auto m = FindModel(name);
  CHECK(m.ok()) << m.status().ToString();
  return *m;
}

SystemSpec A100s(int gpus) {
  ShortSystem s;
  s.gpu = "A100-80GB";
  s.gpus = gpus;
  s.nic_gbits_per_gpu = 200;
  auto sys = SystemFromShort(s);
  CHECK(sys.ok());
  return *sys;
}

TrainingSpec Training(int gbs, topo::Dtype dtype = topo::Dtype::kFp16) {
  TrainingSpec t;
  t.global_batch = gbs;
  t.dtype = dtype;
  t.flash_attention = false;
  return t;
}

// A post-2022 run: bf16 with fused (flash) attention.
TrainingSpec FlashTraining(int gbs) {
  TrainingSpec t = Training(gbs, topo::Dtype::kBf16);
  t.flash_attention = true;
  return t;
}

// `t` trained in fp8 with `recipe`.
TrainingSpec Fp8(TrainingSpec t, Fp8Recipe recipe) {
  t.dtype = topo::Dtype::kFp8;
  t.fp8_recipe = recipe;
  return t;
}

SystemSpec H100s(int gpus, double nic_gbits_per_gpu = 400) {
  ShortSystem s;
  s.gpu = "H100-SXM";
  s.gpus = gpus;
  s.nic_gbits_per_gpu = nic_gbits_per_gpu;
  auto sys = SystemFromShort(s);
  CHECK(sys.ok());
  return *sys;
}

StepEstimate EstimateOf(const ModelSpec& m, const ParallelPlan& p, const TrainingSpec& t,
                        const SystemSpec& s) {
  EvalContext ctx(m, t, s);
  StepEstimate e;
  Evaluate(ctx, p, p.gpus(), nullptr, &e, /*time_if_oom=*/true);
  return e;
}

TEST(EstimatorTest, FlopsMatchMegatronClosedForm) {
  for (const char* name : {"gpt3-175b", "megatron-1t", "gpt-1.7b", "mt-nlg-530b"}) {
    ModelSpec m = Model(name);
    double ours = 3 * 64 * ForwardFlopsPerSequence(m).value();
    double megatron = MegatronModelFlops(m, 64).value();
    EXPECT_NEAR(ours / megatron, 1.0, 1e-12) << name;

    ParallelPlan p{.tp = 8, .pp = 1, .dp = 8, .mbs = 1, .recompute = Recompute::kFull};
    StepEstimate e = EstimateOf(m, p, Training(64), A100s(64));
    EXPECT_NEAR(e.model_flops_per_step.value() / megatron, 1.0, 1e-12) << name;
    EXPECT_NEAR(
        e.hardware_flops_per_step.value() / MegatronHardwareFlopsFullRecompute(m, 64).value(), 1.0,
        1e-12)
        << name;
  }
}

TEST(EstimatorTest, GqaAndSwigluFlops) {
  ModelSpec m = Model("llama3-70b");
  double s = m.seq, h = m.hidden, kvd = 8.0 * 128, f = m.ffn;
  double per_layer = 2 * s * (h * h + 2 * h * kvd + h * h + 3 * h * f) + 4 * s * s * h;
  double expected = m.layers * per_layer + 2 * s * h * m.vocab;
  EXPECT_NEAR(ForwardFlopsPerSequence(m).value() / expected, 1.0, 1e-12);
  // ~6 N per token plus attention.
  double six_n = 6 * m.TotalParams() * s;
  EXPECT_GT(3 * expected, six_n);
  EXPECT_LT(3 * expected, 1.3 * six_n);
}

// Korthikanti et al. (MLSys'23) Table 2: activations per layer = s b h (10 + 24/t + 5 a s/(h t))
// with tensor parallelism, 34 s b h / t with sequence parallelism + selective recompute, 2 s b h
// with full recompute; the first stage holds L layers' worth (times 1 + (p-1)/(p v) interleaved).
TEST(EstimatorTest, ActivationsMatchKorthikanti) {
  ModelSpec m = Model("gpt3-175b");
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8, p = 8, L = 96;
  SystemSpec sys = A100s(64);
  struct Case {
    Recompute rc;
    bool sp;
    int vp;
    double per_layer;
  };
  for (Case c : {Case{Recompute::kNone, false, 1, s * b * h * (10 + 24 / t + 5 * a * s / (h * t))},
                 Case{Recompute::kNone, false, 3, s * b * h * (10 + 24 / t + 5 * a * s / (h * t))},
                 Case{Recompute::kSelective, true, 1, 34 * s * b * h / t},
                 Case{Recompute::kNone, true, 1, s * b * h * (34 + 5 * a * s / h) / t},
                 Case{Recompute::kFull, false, 1, 2 * s * b * h},
                 Case{Recompute::kFull, true, 1, 2 * s * b * h / t}}) {
    ParallelPlan plan{.tp = 8,
                      .pp = 8,
                      .dp = 1,
                      .mbs = 1,
                      .vp = c.vp,
                      .recompute = c.rc,
                      .sequence_parallel = c.sp};
    StepEstimate e = EstimateOf(m, plan, Training(64), sys);
    double interleave = c.vp > 1 ? 1 + (p - 1) / (p * c.vp) : 1.0;
    EXPECT_NEAR(e.memory.activations.value() / (c.per_layer * L * interleave), 1.0, 1e-9)
        << RecomputeName(c.rc) << " sp=" << c.sp << " vp=" << c.vp;
  }
}

// An infeasible plan prints no step time, rate or MFU (they are not 0, they do not exist): only
// the memory that says why it does not fit.
TEST(EstimatorTest, AnInfeasiblePlanIsPrintedWithoutASpeed) {
  ModelSpec m = Model("megatron-22b");
  StepEstimate e =
      EstimateOf(m, ParallelPlan{.tp = 1, .pp = 1, .dp = 8, .mbs = 4}, Training(4), A100s(8));
  ASSERT_FALSE(e.feasible());
  std::string text = FormatEstimate(e);
  EXPECT_EQ(text.find("step time"), std::string::npos) << text;
  EXPECT_EQ(text.find("MFU"), std::string::npos) << text;
  EXPECT_NE(text.find("memory per GPU"), std::string::npos) << text;
  StepEstimate fits = EstimateOf(
      Model("gpt-7.5b"), ParallelPlan{.tp = 8, .pp = 1, .dp = 1, .mbs = 1}, Training(4), A100s(8));
  ASSERT_TRUE(fits.feasible());
  EXPECT_NE(FormatEstimate(fits).find("step time"), std::string::npos);
}

TEST(EstimatorTest, StateMemoryIs18BytesPerParameterWithoutZero) {
  ModelSpec m = Model("megatron-22b");
  ParallelPlan plan{.tp = 8, .pp = 1, .dp = 1, .mbs = 4};
  StepEstimate e = EstimateOf(m, plan, Training(4), A100s(8));
  double params = m.TotalParams() / 8;
  EXPECT_NEAR(e.memory.weights_grads_optimizer().value() / (18 * params), 1.0, 1e-3);
  // ZeRO stages shard optimizer, then gradients, then weights over dp.
  SystemSpec sys = A100s(64);
  double prev = 1e30;
  for (int zero = 0; zero <= 3; ++zero) {
    ParallelPlan z{.tp = 8, .pp = 1, .dp = 8, .mbs = 1, .zero = zero};
    StepEstimate ez = EstimateOf(m, z, Training(64), sys);
    EXPECT_LT(ez.memory.weights_grads_optimizer().value(), prev) << zero;
    prev = ez.memory.weights_grads_optimizer().value();
  }
}

TEST(EstimatorTest, BubbleIsPMinusOneOverVM) {
  ModelSpec m = Model("gpt3-175b");
  SystemSpec sys = A100s(512);
  for (int vp : {1, 2, 3}) {
    for (int gbs : {64, 256}) {
      ParallelPlan plan{.tp = 8,
                        .pp = 8,
                        .dp = 8,
                        .mbs = 1,
                        .vp = vp,
                        .recompute = Recompute::kSelective,
                        .sequence_parallel = true};
      StepEstimate e = EstimateOf(m, plan, Training(gbs), sys);
      ASSERT_TRUE(e.feasible()) << RejectionName(e.rejection);
      double m_count = gbs / 8.0;
      double busy =
          (e.compute + e.recompute + e.tp_comm + e.cp_comm + e.ep_comm + e.launch).value();
      // Fill and drain run at the pace of the stages without the output layer (below): a few
      // percent under the last stage's t_mb.
      const double ratio = e.bubble.value() / busy / (7.0 / (vp * m_count));
      EXPECT_LT(ratio, 1.0) << vp << " " << gbs;
      EXPECT_GT(ratio, 0.95) << vp << " " << gbs;
    }
  }
}

// The logits GEMM and the loss run on the last stage only (Megatron-LM and DeepSpeed split the
// layers evenly and put the output layer on top of the last stage's share): the steady state
// pays them every micro-batch, fill and drain, which pass through the other p - 1 stages, do
// not. A larger vocabulary lengthens every micro-batch and leaves the bubble as it was.
TEST(EstimatorTest, OutputLayerStaysOutOfTheBubble) {
  ModelSpec m = Model("gpt3-175b");
  ModelSpec wide = m;
  wide.vocab = 4 * m.vocab;
  SystemSpec sys = A100s(64);
  for (int vp : {1, 3}) {
    ParallelPlan plan{.tp = 8, .pp = 8, .dp = 1, .mbs = 1, .vp = vp};
    plan.recompute = Recompute::kFull;
    const StepEstimate a = EstimateOf(m, plan, Training(64), sys);
    const StepEstimate b = EstimateOf(wide, plan, Training(64), sys);
    ASSERT_TRUE(a.feasible() && b.feasible()) << vp;
    EXPECT_GT(b.compute.value(), a.compute.value() * 1.05) << vp;
    EXPECT_NEAR(b.bubble.value(), a.bubble.value(), 1e-9 * a.bubble.value()) << vp;
  }
}

// Context parallelism splits the sequence, not the work: the same GPUs spend more time per
// token as cp grows (smaller GEMMs, one attention kernel per ring step on half-size blocks,
// partial-output merges), even where the KV ring hides completely (GQA on NVLink).
TEST(EstimatorTest, ContextParallelIsNotFree) {
  ModelSpec m = Model("llama3-70b");
  TrainingSpec t = FlashTraining(64);
  SystemSpec sys = H100s(256);
  double prev = 0;
  for (int cp : {1, 2, 4, 8}) {
    ParallelPlan plan{
        .tp = 8, .pp = 4, .dp = 8 / cp, .cp = cp, .mbs = 1, .sequence_parallel = true};
    plan.recompute = Recompute::kSelective;
    plan.zero = 1;
    StepEstimate e = EstimateOf(m, plan, t, sys);
    ASSERT_TRUE(e.rejection == Rejection::kNone || e.rejection == Rejection::kOutOfMemory)
        << RejectionName(e.rejection);
    // Same GPUs, same tokens: compute per step would be flat if cp were free.
    EXPECT_GT(e.compute.value(), prev) << "cp" << cp;
    prev = e.compute.value();
  }
}

// The KV ring hides only behind the attention step that runs beside it. Full multi-head K and
// V of short chunks over a slow network cannot hide, and the exposed part grows with the ring.
TEST(EstimatorTest, ContextParallelRingHidesOnlyBehindAttention) {
  ModelSpec m = Model("gpt3-175b");
  TrainingSpec t = FlashTraining(64);
  SystemSpec slow = H100s(512, 50);
  double prev = 0;
  for (int cp : {2, 4, 8}) {
    ParallelPlan plan{
        .tp = 8, .pp = 8, .dp = 8 / cp, .cp = cp, .mbs = 1, .sequence_parallel = true};
    plan.recompute = Recompute::kSelective;
    StepEstimate e = EstimateOf(m, plan, t, slow);
    EXPECT_GT(e.cp_comm.value(), prev) << "cp" << cp;
    prev = e.cp_comm.value();
  }
  ParallelPlan plan{.tp = 8, .pp = 8, .dp = 2, .cp = 4, .mbs = 1, .sequence_parallel = true};
  EXPECT_LT(EstimateOf(m, plan, t, H100s(512, 3200)).cp_comm.value(),
            EstimateOf(m, plan, t, slow).cp_comm.value());
}

// PyTorch's experimental context_parallel (torchtitan) against Transformer Engine's ring on the
// same plan: its eager fp32 merges add HBM traffic to every ring step, so compute grows with cp
// beyond the ring's; K and V repeated to every head and gathered behind the diagonal step only
// expose communication over a slow network that the GQA-width ring hides. Without CP the two
// are the same run.
TEST(EstimatorTest, TorchContextParallelCostsMoreThanTheRingAndGrowsWithCp) {
  ModelSpec m = Model("llama3-70b");
  TrainingSpec ring = FlashTraining(64);
  TrainingSpec torch = ring;
  torch.cp_attention = CpAttention::kTorch;
  double prev_gap = 0;
  for (int cp : {1, 2, 4, 8}) {
    ParallelPlan plan{
        .tp = 8, .pp = 4, .dp = 8 / cp, .cp = cp, .mbs = 1, .sequence_parallel = true};
    plan.recompute = Recompute::kFull;
    StepEstimate a = EstimateOf(m, plan, ring, H100s(256));
    StepEstimate b = EstimateOf(m, plan, torch, H100s(256));
    double gap = (b.compute + b.recompute - a.compute - a.recompute).value();
    if (cp == 1) {
      EXPECT_EQ(b.step.value(), a.step.value());
    } else {
      EXPECT_GT(gap, prev_gap) << "cp" << cp;
    }
    prev_gap = gap;
  }
  ParallelPlan plan{.tp = 8, .pp = 4, .dp = 1, .cp = 8, .mbs = 1, .sequence_parallel = true};
  plan.recompute = Recompute::kFull;
  EXPECT_GT(EstimateOf(m, plan, torch, H100s(256, 50)).cp_comm.value(),
            EstimateOf(m, plan, ring, H100s(256, 50)).cp_comm.value());
}

// PyTorch's ring under torch.compile (fused_elementwise): a functional collective traced into the
// graph is waited on at once, so every CP transfer is exposed. Eager, the ring hides its gathers
// and hops behind the attention steps on NVLink but for the last dK/dV exchange, which the
// backward waits on after its loop with nothing beside it.
TEST(EstimatorTest, CompiledTorchContextParallelExposesEveryTransfer) {
  ModelSpec m = Model("llama3-70b");
  m.seq = 131072;  // 16k tokens a rank: each ring step outlasts its NVLink transfer
  TrainingSpec compiled = FlashTraining(64);
  compiled.cp_attention = CpAttention::kTorch;
  TrainingSpec eager = compiled;
  eager.fused_elementwise = false;
  ParallelPlan plan{.tp = 1, .pp = 1, .dp = 1, .cp = 8, .mbs = 1};
  plan.recompute = Recompute::kFull;
  StepEstimate c = EstimateOf(m, plan, compiled, H100s(8));
  StepEstimate e = EstimateOf(m, plan, eager, H100s(8));
  EXPECT_GT(e.cp_comm.value(), 0.0);
  EXPECT_GT(c.cp_comm.value(), 3 * e.cp_comm.value());
  // Only the CP transfers differ between the two beyond the eager element-wise kernels.
  EXPECT_EQ(c.tp_comm.value(), e.tp_comm.value());
}

// Llama 3's all-gather CP runs one attention kernel per local query chunk instead of cp ring
// steps with their merges, so its compute is below the ring's and falls further behind as cp
// grows; but its gather is exposed, where the ring hides its hops behind the steps.
TEST(EstimatorTest, AllGatherContextParallelTradesMergesForExposedGather) {
  ModelSpec m = Model("llama3-70b");
  TrainingSpec ring = FlashTraining(64);
  TrainingSpec gather = ring;
  gather.cp_attention = CpAttention::kAllGather;
  double prev_gap = 0;
  for (int cp : {2, 4, 8}) {
    ParallelPlan plan{
        .tp = 8, .pp = 4, .dp = 8 / cp, .cp = cp, .mbs = 1, .sequence_parallel = true};
    StepEstimate a = EstimateOf(m, plan, ring, H100s(256));
    StepEstimate b = EstimateOf(m, plan, gather, H100s(256));
    double gap = (a.compute - b.compute).value();
    EXPECT_GT(gap, prev_gap) << "cp" << cp;
    prev_gap = gap;
    EXPECT_GT(b.cp_comm.value(), a.cp_comm.value()) << "cp" << cp;
  }
}

// DeepSpeed's pipeline engine sends and receives one blocking call at a time: four transfers per
// micro-batch on the critical path where Megatron's batched calls have two. Nothing else moves.
TEST(EstimatorTest, SerialPipelineP2pDoublesPipelineCommunication) {
  ModelSpec m = Model("gpt3-175b");
  ParallelPlan batched{.tp = 8, .pp = 8, .dp = 8, .mbs = 1, .recompute = Recompute::kFull};
  ParallelPlan serial = batched;
  serial.batched_pp_p2p = false;
  StepEstimate a = EstimateOf(m, batched, Training(256), A100s(512));
  StepEstimate b = EstimateOf(m, serial, Training(256), A100s(512));
  ASSERT_GT(a.pp_comm.value(), 0);
  EXPECT_NEAR(b.pp_comm.value() / a.pp_comm.value(), 2.0, 1e-12);
  EXPECT_NEAR((b.step - b.pp_comm).value(), (a.step - a.pp_comm).value(), 1e-12);
  EXPECT_NE(PlanToString(serial).find("serial-p2p"), std::string::npos);
}

// Small layers are launch-bound: the step cannot go below the host's dispatch time, and the
// GPUs' idle share shows as "launch"; large layers never hit the floor.
TEST(EstimatorTest, SmallLayersAreLaunchBound) {
  ModelSpec small = Model("gpt-1.7b");
  small.hidden = 1024;
  small.heads = small.kv_heads = 16;
  small.ffn = 4096;
  small.layers = 12;
  small.seq = 1024;
  ParallelPlan p{.tp = 8, .pp = 1, .dp = 1, .mbs = 1, .recompute = Recompute::kFull};
  StepEstimate e = EstimateOf(small, p, Training(16), A100s(8));
  const Calibration& c = A100s(8).calib;
  const double host = c.host_layer_pass_s;
  ASSERT_GT(host, 0);
  EXPECT_GT(e.launch.value(), 0);
  // 16 micro-batches x (12 layers x ((forward + recomputation + 2 backward) passes + 6 TP
  // all-reduces of 7 ring steps) + the micro-batch's host work outside the layers).
  EXPECT_NEAR(e.step.value() - e.optimizer.value(),
              16 * (12 * (4 * host + 6 * 7 * c.host_collective_step_s) + c.host_microbatch_s),
              1e-9);

  StepEstimate big =
      EstimateOf(Model("gpt3-175b"),
                 ParallelPlan{.tp = 8, .pp = 8, .dp = 8, .mbs = 1, .recompute = Recompute::kFull},
                 Training(256), A100s(512));
  EXPECT_EQ(big.launch.value(), 0);
}

// The launch floor grows with the TP group (each collective is a rendezvous of tp ranks behind
// a ring of tp - 1 dependent steps) and carries a per-micro-batch host cost: the vTrain
// single-node set's TP 8 points, launch-bound, ran 17 % slower than a per-layer floor alone.
TEST(EstimatorTest, LaunchFloorCountsTensorParallelCollectivesAndMicroBatches) {
  ModelSpec small = Model("gpt-1.7b");
  small.hidden = 1024;
  small.heads = small.kv_heads = 16;
  small.ffn = 4096;
  small.layers = 12;
  small.seq = 1024;
  SystemSpec sys = A100s(8);
  sys.calib.host_layer_pass_s = 1e-3;
  sys.calib.host_collective_step_s = 50e-6;
  sys.calib.host_microbatch_s = 5e-3;
  auto floor_of = [&](const ParallelPlan& p, int gbs) {
    StepEstimate e = EstimateOf(small, p, Training(gbs), sys);
    EXPECT_GT(e.launch.value(), 0);
    return (e.step - e.optimizer - e.dp_comm).value();
  };
  // TP 8, full recomputation, no sequence parallelism: 2 all-reduces forward, 2 backward, 2 in
  // the replay, each 7 ring steps; 16 micro-batches.
  ParallelPlan tp8{.tp = 8, .pp = 1, .dp = 1, .mbs = 1, .recompute = Recompute::kFull};
  EXPECT_NEAR(floor_of(tp8, 16), 16 * (12 * (4 * 1e-3 + 6 * 7 * 50e-6) + 5e-3), 1e-9);
  // TP 2: one ring step per collective.
  ParallelPlan tp2 = tp8;
  tp2.tp = 2;
  tp2.dp = 4;
  EXPECT_NEAR(floor_of(tp2, 64), 16 * (12 * (4 * 1e-3 + 6 * 1 * 50e-6) + 5e-3), 1e-9);
  // With sequence parallelism: 2 all-gathers + 2 reduce-scatters forward, 1.5x that backward.
  ParallelPlan sp = tp8;
  sp.sequence_parallel = true;
  EXPECT_NEAR(floor_of(sp, 16), 16 * (12 * (4 * 1e-3 + 4 * 3.5 * 7 * 50e-6) + 5e-3), 1e-9);
  // No TP: the layer passes and the micro-batch only.
  ParallelPlan tp1 = tp8;
  tp1.tp = 1;
  tp1.dp = 8;
  EXPECT_NEAR(floor_of(tp1, 128), 16 * (12 * 4 * 1e-3 + 5e-3), 1e-9);
}

TEST(EstimatorTest, PartsAddUpAndRatesAreConsistent) {
  ModelSpec m = Model("llama3-70b");
  TrainingSpec t = Training(512, topo::Dtype::kBf16);
  t.flash_attention = true;
  ShortSystem s;
  s.gpus = 512;
  auto sys = SystemFromShort(s);
  ASSERT_TRUE(sys.ok());
  ParallelPlan plan{.tp = 8,
                    .pp = 4,
                    .dp = 16,
                    .mbs = 1,
                    .vp = 5,
                    .recompute = Recompute::kSelective,
                    .sequence_parallel = true,
                    .zero = 1};
  auto e = Estimate(m, plan, t, *sys);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE(e->feasible()) << ExplainRejection(EvalContext(m, t, *sys), plan, *e);
  double sum = (e->compute + e->recompute + e->tp_comm + e->cp_comm + e->ep_comm + e->pp_comm +
                e->dp_comm + e->bubble + e->optimizer + e->launch)
                   .value();
  EXPECT_NEAR(sum, e->step.value(), 1e-12 * sum);
  EXPECT_NEAR(e->tokens_per_second, 512.0 * m.seq / e->step.value(), 1e-6);
  EXPECT_GT(e->mfu, 0.2);
  // Causal counting drops half the attention square: 2 s^2 h per layer, forward, times 3.
  double half_square = 3.0 * 512 * 2 * double(m.seq) * m.seq * m.hidden * m.layers;
  EXPECT_NEAR(e->mfu - e->mfu_causal, e->mfu * half_square / e->model_flops_per_step.value(),
              1e-12);
  EXPECT_LT(e->mfu, 0.7);
  EXPECT_GE(e->hfu, e->mfu);
  EXPECT_EQ(EstimateStepTime(m, plan, t, *sys), e->step);
}

TEST(EstimatorTest, IsDeterministic) {
  ModelSpec m = Model("megatron-1t");
  SystemSpec sys = A100s(3072);
  ParallelPlan plan{.tp = 8, .pp = 64, .dp = 6, .mbs = 1, .vp = 2, .recompute = Recompute::kFull};
  StepEstimate a = EstimateOf(m, plan, Training(3072), sys);
  StepEstimate b = EstimateOf(m, plan, Training(3072), sys);
  // Bit for bit, not just ==.
  EXPECT_EQ(std::bit_cast<std::uint64_t>(a.step.value()),
            std::bit_cast<std::uint64_t>(b.step.value()));
  EXPECT_EQ(a.mfu, b.mfu);
  EXPECT_EQ(a.memory.total(), b.memory.total());
}

TEST(EstimatorTest, OutOfMemoryIsAValueWithAReason) {
  ModelSpec m = Model("megatron-22b");
  SystemSpec sys = A100s(8);
  TrainingSpec t = Training(4);
  ParallelPlan plan{.tp = 8, .pp = 1, .dp = 1, .mbs = 4, .recompute = Recompute::kNone};
  auto e = Estimate(m, plan, t, sys);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->feasible());
  EXPECT_EQ(e->rejection, Rejection::kOutOfMemory);
  std::string why = ExplainRejection(EvalContext(m, t, sys), plan, *e);
  EXPECT_NE(why.find("needs "), std::string::npos) << why;
  EXPECT_NE(why.find("GiB per GPU, has 80.0 (74.1 usable)"), std::string::npos) << why;
  EXPECT_TRUE(std::isinf(EstimateStepTime(m, plan, t, sys).value()));
}

TEST(EstimatorTest, BadInputNamesTheField) {
  ModelSpec m = Model("gpt3-175b");
  SystemSpec sys = A100s(64);
  struct Case {
    ParallelPlan plan;
    int gbs;
    const char* field;
  };
  for (Case c : {Case{{.tp = 5, .pp = 8, .dp = 1, .mbs = 1}, 64, "plan.tp"},
                 Case{{.tp = 8, .pp = 7, .dp = 1, .mbs = 1}, 64, "plan.pp"},
                 Case{{.tp = 8, .pp = 8, .dp = 1, .mbs = 1}, -5, "training.global_batch"},
                 Case{{.tp = 8, .pp = 4, .dp = 1, .mbs = 1}, 64, "plan.dp"},
                 Case{{.tp = 8, .pp = 8, .dp = 1, .mbs = 3}, 64, "plan.mbs"},
                 Case{{.tp = 8, .pp = 8, .dp = 1, .mbs = 1, .vp = 5}, 64, "plan.vp"},
                 Case{{.tp = 8, .pp = 8, .dp = 1, .mbs = 1, .zero = 4}, 64, "plan.zero"},
                 Case{{.tp = 1, .pp = 8, .dp = 8, .mbs = 1, .sequence_parallel = true},
                      64,
                      "plan.sequence_parallel"},
                 Case{{.tp = 8, .pp = 8, .dp = 1, .ep = 2, .mbs = 1}, 64, "plan.ep"}}) {
    auto e = Estimate(m, c.plan, Training(c.gbs), sys);
    ASSERT_FALSE(e.ok()) << c.field;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find(c.field), std::string::npos) << e.status().ToString();
  }
  TrainingSpec fp8 = Training(64, topo::Dtype::kFp8);
  auto e = Estimate(m, ParallelPlan{.tp = 8, .pp = 8, .dp = 1}, fp8, sys);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("training.dtype"), std::string::npos);
}

// A GPU type a cluster declares without a family has no calibrated constants: the planner refuses
// it naming the field to add, where it once priced it as Hopper without a word.
TEST(EstimatorTest, SystemFromClusterRefusesAGpuOfNoFamily) {
  auto build = [](topo::GpuFamily family) {
    topo::ClusterBuilder b("lab");
    topo::GpuSpec h20;
    h20.name = "H20";
    h20.family = family;
    h20.bf16 = TFlops(148);
    h20.hbm = GiB(96);
    topo::NodeShape shape;
    shape.name = "s";
    shape.gpu = *b.AddGpuType(h20);
    shape.nic_bandwidth = Gbps(400);
    auto id = *b.AddShape(shape);
    EXPECT_TRUE(b.AddNode("n0", id).ok());
    return std::move(b.Build()).value();
  };
  auto refused = SystemFromCluster(build(topo::GpuFamily::kUnknown));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("gpu_types.H20.family"), std::string::npos)
      << refused.status().ToString();
  auto hopper = SystemFromCluster(build(topo::GpuFamily::kHopper));
  ASSERT_TRUE(hopper.ok()) << hopper.status().ToString();
  EXPECT_EQ(hopper->calib.gemm_peak_fraction,
            DefaultCalibration(topo::GpuFamily::kHopper).gemm_peak_fraction);
}

TEST(EstimatorTest, SystemFromClusterReadsTheTiers) {
  auto cluster = topo::BuildPreset("superpod-h100");
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  auto sys = SystemFromCluster(*cluster, 1024);
  ASSERT_TRUE(sys.ok()) << sys.status().ToString();
  EXPECT_EQ(sys->gpus, 1024);
  EXPECT_EQ(sys->gpu.family, topo::GpuFamily::kHopper);
  ASSERT_GE(sys->tier_count, 2);
  EXPECT_EQ(sys->tiers[0].level, topo::Level::kNode);
  EXPECT_EQ(sys->tiers[0].gpus, 8);
  EXPECT_GT(sys->tiers[0].link.bandwidth, sys->tiers[1].link.bandwidth);
  EXPECT_FALSE(SystemFromCluster(*cluster, -1).ok());
  ShortSystem bad;
  bad.nic_gbits_per_gpu = 0;
  auto b = SystemFromShort(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("system.nic_gbits_per_gpu"), std::string::npos);
}

// GB200 NVL72: trays of 4 GPUs in one NVLink domain of 72. Data parallelism across trays stays on
// NVLink inside the rack, where 4-GPU nodes would send it over the NICs.
TEST(EstimatorTest, AnNvlinkDomainSpansSeveralNodes) {
  ShortSystem s;
  s.gpu = "GB200";
  s.gpus = 144;
  s.gpus_per_node = 4;
  s.nvlink_domain_gpus = 72;
  s.nodes_per_leaf = 72;
  auto nvl = SystemFromShort(s);
  ASSERT_TRUE(nvl.ok()) << nvl.status().ToString();
  EXPECT_EQ(nvl->tiers[0].level, topo::Level::kNvlinkDomain);
  EXPECT_EQ(nvl->tiers[0].gpus, 72);
  EXPECT_EQ(nvl->tiers[1].gpus, 288);
  s.nvlink_domain_gpus = 0;
  auto trays = SystemFromShort(s);
  ASSERT_TRUE(trays.ok());
  EXPECT_EQ(trays->tiers[0].gpus, 4);
  ModelSpec m = Model("llama3-8b");
  TrainingSpec t = Training(144, topo::Dtype::kBf16);
  ParallelPlan plan{.tp = 4, .dp = 36, .zero = 1};
  StepEstimate in_rack = EstimateOf(m, plan, t, *nvl);
  StepEstimate over_nics = EstimateOf(m, plan, t, *trays);
  ASSERT_TRUE(in_rack.feasible());
  ASSERT_TRUE(over_nics.feasible());
  EXPECT_LT(in_rack.dp_comm, over_nics.dp_comm);
  for (int bad : {-1, 70, 2048}) {
    s.nvlink_domain_gpus = bad;
    auto r = SystemFromShort(s);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("system.nvlink_domain_gpus"), std::string::npos);
  }
}

TEST(EstimatorTest, CheckpointIntervalIsYoungDaly) {
  ModelSpec m = Model("gpt3-175b");
  TrainingSpec t = Training(1536);
  t.tokens_to_train = 300e9;
  t.dollars_per_gpu_hour = 2;
  t.checkpoint_bandwidth = GBps(50);
  t.mtbf = Hours(10);
  ParallelPlan plan{.tp = 8, .pp = 12, .dp = 16, .mbs = 1, .recompute = Recompute::kFull};
  StepEstimate e = EstimateOf(m, plan, t, A100s(1536));
  TrainingTotals tt = ComputeTotals(m, t, e, 1536);
  EXPECT_NEAR(tt.checkpoint_size.value(), 14 * m.TotalParams(), 1);
  EXPECT_NEAR(tt.checkpoint_write.value(), tt.checkpoint_size.value() / 50e9, 1e-9);
  EXPECT_NEAR(tt.checkpoint_interval.value(), std::sqrt(2 * tt.checkpoint_write.value() * 36000.0),
              1e-9);
  double steps = std::ceil(300e9 / (1536.0 * 2048));
  EXPECT_NEAR(tt.time_to_train.value(), steps * e.step.value(), 1e-6);
  EXPECT_NEAR(tt.cost_dollars, tt.gpu_hours * 2, 1e-6);
}

// torchtitan's per-op SAC (Recompute::kOps) keeps the odd matmuls' outputs and the attention
// output, far less than Megatron's selective mode; Llama 3 8B with FSDP on 8 H100s at 2 x 8k
// tokens ran with it (torchtitan's December 2024 table, 82 GiB on 96 GB parts) where the
// selective model needs more than the GPU has. It costs a recomputation of the even matmuls.
// Apex's DistributedFusedAdam with dtype=bf16 (dgxc-benchmarking's Nemotron-4 340B config) keeps
// Adam's state in 6 bytes per parameter, not 12: the 128-GPU layout (tp 8, pp 8, dp 2, vp 12),
// which ran without recomputation as fast per GPU as the 256-GPU one, fits only with it.
TEST(EstimatorTest, Bf16AdamStateLetsNemotron340BRunAtDp2WithoutRecompute) {
  ModelSpec m = Model("gpt3-175b");
  m.layers = 96;
  m.hidden = 18432;
  m.heads = 96;
  m.kv_heads = 8;
  m.ffn = 73728;
  m.seq = 4096;
  m.vocab = 256000;
  m.dropout = false;
  m.tied_embeddings = false;
  m.learned_positions = false;
  TrainingSpec t = FlashTraining(32);
  t.fp32_grads = false;
  ParallelPlan plan{
      .tp = 8, .pp = 8, .dp = 2, .mbs = 1, .vp = 12, .sequence_parallel = true, .zero = 1};
  StepEstimate fp32_state = EstimateOf(m, plan, t, H100s(128));
  t.bf16_optimizer_state = true;
  StepEstimate bf16_state = EstimateOf(m, plan, t, H100s(128));
  EXPECT_NEAR(bf16_state.memory.optimizer.value() / fp32_state.memory.optimizer.value(), 0.5, 1e-9);
  EXPECT_EQ(fp32_state.rejection, Rejection::kOutOfMemory);
  EXPECT_TRUE(bf16_state.feasible()) << ToGiB(bf16_state.memory.total());
  EXPECT_LT(bf16_state.optimizer.value(), fp32_state.optimizer.value());
}

TEST(EstimatorTest, PerOpCheckpointingFitsWhereSelectiveDoesNot) {
  ModelSpec m = Model("llama3-8b");
  m.seq = 8192;
  TrainingSpec t = FlashTraining(16);
  SystemSpec sys = H100s(8);
  ParallelPlan plan{.dp = 8, .mbs = 2, .zero = 3};
  plan.recompute = Recompute::kSelective;
  StepEstimate selective = EstimateOf(m, plan, t, sys);
  plan.recompute = Recompute::kOps;
  StepEstimate ops = EstimateOf(m, plan, t, sys);
  EXPECT_LT(ops.memory.activations.value(), 0.6 * selective.memory.activations.value());
  EXPECT_GT(ops.recompute.value(), 0);
  EXPECT_GT(ops.hfu, ops.mfu);
  auto parsed = ParseRecompute("ops");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, Recompute::kOps);
}

// MLP recomputation (Megatron-Core's --recompute-modules core_attn mlp; MaxText's custom remat
// policy keeping the q / k / v / out projections) saves the attention projections and reruns core
// attention and the MLP block: for Llama 2 70B (MLP 10.5 h^2 of the layer's 12.75 h^2 GEMM
// weights) most of full recomputation's time and FLOPs, with activations between none and full.
TEST(EstimatorTest, MlpRecomputationRerunsCoreAttentionAndTheMlp) {
  ModelSpec m = Model("llama2-70b");
  TrainingSpec t = FlashTraining(128);
  t.dtype = topo::Dtype::kFp8;
  SystemSpec sys = H100s(64);
  ParallelPlan plan{.dp = 64, .mbs = 2, .zero = 3};
  auto with = [&](Recompute rc) {
    plan.recompute = rc;
    return EstimateOf(m, plan, t, sys);
  };
  StepEstimate none = with(Recompute::kNone), sel = with(Recompute::kSelective);
  StepEstimate full = with(Recompute::kFull), mlp = with(Recompute::kMlp);
  const double share = (mlp.recompute.value() - sel.recompute.value()) /
                       (full.recompute.value() - sel.recompute.value());
  EXPECT_GT(share, 0.7);
  EXPECT_LT(share, 0.95);
  const double flops_share =
      (mlp.hardware_flops_per_step.value() - sel.hardware_flops_per_step.value()) /
      (full.hardware_flops_per_step.value() - sel.hardware_flops_per_step.value());
  EXPECT_NEAR(flops_share, 10.5 / 12.75, 0.02);
  EXPECT_LT(mlp.memory.activations.value(), 0.6 * none.memory.activations.value());
  EXPECT_GT(mlp.memory.activations.value(), 2 * full.memory.activations.value());
  auto parsed = ParseRecompute("mlp");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, Recompute::kMlp);
}

// A fused attention kernel's backward costs 2.5 x its forward (FlashAttention-2 recomputes the
// scores): the step's attention share grows with the sequence faster than 3 x the forward.
TEST(EstimatorTest, FlashBackwardIsTwoAndAHalfForwards) {
  ModelSpec m = Model("llama3-8b");
  SystemSpec sys = H100s(8);
  ParallelPlan plan{.dp = 8, .mbs = 1, .zero = 3};
  plan.recompute = Recompute::kFull;
  m.seq = 65536;
  StepEstimate e = EstimateOf(m, plan, FlashTraining(8), sys);
  // Forward + backward of the layers alone would be 3 x the recomputed forward without the
  // extra half; with it, compute is more than that (logits aside, which are small here).
  double layers_fwd = e.recompute.value();
  EXPECT_GT(e.compute.value(), 3.2 * layers_fwd);
}

// A part capped below its rated power (torchtitan's 500 W H100s) runs its tensor cores at
// (P / R)^power_cap_exponent of the datasheet clock; MFU still divides by the datasheet peak.
TEST(EstimatorTest, PowerCapSlowsTheTensorCores) {
  ShortSystem sh;
  sh.gpu = "H100-SXM";
  sh.gpus = 8;
  auto rated = SystemFromShort(sh);
  sh.power_limit_w = 500;
  auto capped = SystemFromShort(sh);
  ASSERT_TRUE(rated.ok() && capped.ok());
  EXPECT_DOUBLE_EQ(rated->power_fraction, 1.0);
  EXPECT_NEAR(capped->power_fraction, 500.0 / 700.0, 1e-12);
  ModelSpec m = Model("llama3-8b");
  ParallelPlan plan{.dp = 8, .mbs = 1, .zero = 3};
  plan.recompute = Recompute::kFull;
  StepEstimate a = EstimateOf(m, plan, FlashTraining(8), *rated);
  capped->calib.power_cap_exponent = 1.0 / 3.0;
  StepEstimate b = EstimateOf(m, plan, FlashTraining(8), *capped);
  const double cbrt_clock = std::cbrt(500.0 / 700.0);
  EXPECT_GT(b.compute.value(), a.compute.value() * 1.05);
  EXPECT_LE(b.compute.value(), a.compute.value() / cbrt_clock * 1.0001);
  // A steeper exponent (static power, the DVFS voltage floor) costs more, never more than
  // clocking in proportion to power.
  capped->calib.power_cap_exponent = 0.8;
  StepEstimate c = EstimateOf(m, plan, FlashTraining(8), *capped);
  EXPECT_GT(c.compute.value(), b.compute.value() * 1.1);
  EXPECT_LE(c.compute.value(), a.compute.value() / std::pow(500.0 / 700.0, 0.8) * 1.0001);
  // The rated part does not depend on the exponent.
  rated->calib.power_cap_exponent = 0.8;
  EXPECT_DOUBLE_EQ(EstimateOf(m, plan, FlashTraining(8), *rated).compute.value(),
                   a.compute.value());
  sh.power_limit_w = -1;
  auto bad = SystemFromShort(sh);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("power_limit_w"), std::string::npos);
}

// The 96 GB H100 SXM part's HBM2e (ShortSystem::hbm_tbps, 2.41 TB/s) slows the memory-bound
// kernels (norms, eager element-wise ops, fp8 casts, the optimizer), not the GEMMs.
TEST(EstimatorTest, SlowerHbmSlowsTheMemoryBoundKernels) {
  ShortSystem sh;
  sh.gpu = "H100-SXM";
  sh.gpus = 8;
  auto hbm3 = SystemFromShort(sh);
  sh.hbm_gib = 94.5;
  sh.hbm_tbps = 2.41;
  auto hbm2e = SystemFromShort(sh);
  ASSERT_TRUE(hbm3.ok() && hbm2e.ok());
  EXPECT_DOUBLE_EQ(hbm2e->gpu.hbm_bandwidth.value(), 2.41e12);
  ModelSpec m = Model("llama3-8b");
  ParallelPlan plan{.dp = 8, .mbs = 1, .zero = 3};
  TrainingSpec eager = FlashTraining(8);
  eager.fused_elementwise = false;
  StepEstimate a = EstimateOf(m, plan, eager, *hbm3);
  StepEstimate b = EstimateOf(m, plan, eager, *hbm2e);
  EXPECT_GT(b.compute.value(), a.compute.value() * 1.01);
  EXPECT_GT(b.optimizer.value(), a.optimizer.value());
  // At most the memory-bound share scales by 3.35 / 2.41.
  EXPECT_LT(b.compute.value(), a.compute.value() * 3.35 / 2.41);
  sh.hbm_tbps = -1;
  auto bad = SystemFromShort(sh);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("hbm_tbps"), std::string::npos);
}

// PyTorch's async TP (TrainingSpec::async_tp) hides its own share of TP communication, apart
// from Transformer Engine's userbuffer overlap; the Hopper fit has it hide less.
TEST(EstimatorTest, AsyncTpHidesItsOwnShare) {
  ShortSystem sh;
  sh.gpu = "H100-SXM";
  sh.gpus = 64;
  auto sys = SystemFromShort(sh);
  ASSERT_TRUE(sys.ok());
  sys->calib.tp_overlap_fraction = 1.0;
  sys->calib.async_tp_overlap_fraction = 0.4;
  ModelSpec m = Model("llama3-8b");
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 3};
  plan.sequence_parallel = true;
  TrainingSpec te = FlashTraining(64);
  TrainingSpec async = te;
  async.async_tp = true;
  plan.tp_comm_overlap = false;
  StepEstimate none = EstimateOf(m, plan, te, *sys);
  plan.tp_comm_overlap = true;
  StepEstimate ub = EstimateOf(m, plan, te, *sys);
  StepEstimate at = EstimateOf(m, plan, async, *sys);
  ASSERT_GT(none.tp_comm.value(), 0);
  EXPECT_LT(ub.tp_comm.value(), 0.5 * none.tp_comm.value());
  EXPECT_NEAR(at.tp_comm.value(), 0.6 * none.tp_comm.value(), 1e-9 * none.tp_comm.value());
  EXPECT_GT(at.step.value(), ub.step.value());
  EXPECT_LT(at.step.value(), none.step.value());
  // Without the plan's overlap, async_tp changes nothing.
  plan.tp_comm_overlap = false;
  EXPECT_DOUBLE_EQ(EstimateOf(m, plan, async, *sys).step.value(), none.step.value());
  // The built-in Hopper profile at torchtitan's benchmark shape (Llama 3 8B, TP 8, DTensor): async
  // TP, bounded by the GEMMs it is fused with, hides less than the userbuffer overlap.
  SystemSpec h100 = H100s(64);
  async.dtensor_tp = true;
  plan.tp_comm_overlap = false;
  StepEstimate dt_none = EstimateOf(m, plan, async, h100);
  plan.tp_comm_overlap = true;
  StepEstimate dt_async = EstimateOf(m, plan, async, h100);
  ASSERT_GT(dt_none.tp_comm.value(), 0);
  EXPECT_GT(dt_async.tp_comm.value() / dt_none.tp_comm.value(), 1 - h100.calib.tp_overlap_fraction);
}

// Transformer Engine's userbuffer overlap hides each collective behind its one GEMM, split in tp
// chunks of which one's transfer has nothing beside it: even a perfect overlap
// (tp_overlap_fraction 1) leaves 1 / tp of the forward's four split collectives and the
// backward's two exposed (the backward's four bulk ones can hide whole), and at TP 2 half.
TEST(EstimatorTest, UserbufferOverlapLeavesOneChunkInTpExposed) {
  ShortSystem sh;
  sh.gpu = "H100-SXM";
  sh.gpus = 64;
  auto sys = SystemFromShort(sh);
  ASSERT_TRUE(sys.ok());
  sys->calib.tp_overlap_fraction = 1.0;
  ModelSpec m = Model("llama3-8b");
  TrainingSpec t = FlashTraining(64);
  for (int tp : {2, 8}) {
    ParallelPlan plan{.tp = tp, .dp = 64 / tp, .mbs = 2, .zero = 1};
    plan.sequence_parallel = true;
    plan.tp_comm_overlap = false;
    StepEstimate none = EstimateOf(m, plan, t, *sys);
    plan.tp_comm_overlap = true;
    StepEstimate ub = EstimateOf(m, plan, t, *sys);
    ASSERT_GT(none.tp_comm.value(), 0) << tp;
    // none = 10 collectives' worth (4 forward, 6 backward); at least 6 / tp of one stay exposed.
    EXPECT_GE(ub.tp_comm.value(), (6.0 / tp) / 10 * none.tp_comm.value() * (1 - 1e-9)) << tp;
    EXPECT_LT(ub.tp_comm.value(), none.tp_comm.value()) << tp;
    EXPECT_LT(ub.step.value(), none.step.value()) << tp;
  }
}

// Transformer Engine's pipelined reduce-scatters take 16 of H100's 132 SMs from the projection's
// and fc2's forward GEMMs (set_sm_margin): with almost nothing hidden (tp_overlap_fraction
// 1e-6) the overlap costs more than no overlap, by at most 132 / 116 - 1 of the forward's GEMM
// time; a profile whose overlap hides nothing (0, A100's) pays nothing for it.
TEST(EstimatorTest, UserbufferOverlapTakesSmsFromItsForwardGemms) {
  ShortSystem sh;
  sh.gpu = "H100-SXM";
  sh.gpus = 64;
  auto sys = SystemFromShort(sh);
  ASSERT_TRUE(sys.ok());
  sys->calib.tp_overlap_fraction = 1e-6;
  ModelSpec m = Model("llama3-8b");
  TrainingSpec t = FlashTraining(64);
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 1};
  plan.sequence_parallel = true;
  plan.tp_comm_overlap = false;
  StepEstimate none = EstimateOf(m, plan, t, *sys);
  plan.tp_comm_overlap = true;
  StepEstimate ub = EstimateOf(m, plan, t, *sys);
  const double extra = ub.tp_comm.value() - none.tp_comm.value();
  EXPECT_GT(extra, 0);
  EXPECT_LT(extra, (132.0 / 116 - 1) * none.compute.value() / 3);
  EXPECT_GT(ub.step.value(), none.step.value());
  sys->calib.tp_overlap_fraction = 0.0;
  EXPECT_DOUBLE_EQ(EstimateOf(m, plan, t, *sys).step.value(), none.step.value());
}

// Megatron's TP backward moves as much as the forward without sequence parallelism and 1.5 times
// as much with it (the re-gather of the saved shard for the weight gradient), not twice.
TEST(EstimatorTest, TensorParallelBackwardIsOneOrOneAndAHalfForwards) {
  ModelSpec m = Model("llama3-8b");
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 1};
  plan.tp_comm_overlap = false;
  TrainingSpec t = FlashTraining(64);
  SystemSpec s = H100s(64);
  StepEstimate plain = EstimateOf(m, plan, t, s);
  plan.sequence_parallel = true;
  StepEstimate sp = EstimateOf(m, plan, t, s);
  ASSERT_GT(plain.tp_comm.value(), 0);
  // Same forward traffic either way (2 all-reduces' worth per layer); the backward differs.
  EXPECT_NEAR(sp.tp_comm.value() / plain.tp_comm.value(), 2.5 / 2.0, 1e-9);
}

// The output layer runs in 16 bits under fp8: a larger vocabulary adds the same time in fp8 as
// in bf16, where the transformer layers' GEMMs run at the fp8 rate.
TEST(EstimatorTest, OutputLayerStaysSixteenBitUnderFp8) {
  ModelSpec small = Model("llama3-8b");
  ModelSpec large = small;
  large.vocab = 8 * small.vocab;
  ParallelPlan plan{.tp = 1, .dp = 8, .mbs = 1, .zero = 1};
  SystemSpec s = H100s(8);
  TrainingSpec bf16 = FlashTraining(8);
  TrainingSpec fp8 = bf16;
  fp8.dtype = topo::Dtype::kFp8;
  auto added = [&](const TrainingSpec& t) {
    return EstimateOf(large, plan, t, s).compute.value() -
           EstimateOf(small, plan, t, s).compute.value();
  };
  ASSERT_GT(added(bf16), 0);
  EXPECT_NEAR(added(fp8) / added(bf16), 1.0, 0.02);
  // ... while the layers themselves do get faster.
  EXPECT_LT(EstimateOf(small, plan, fp8, s).compute.value(),
            0.9 * EstimateOf(small, plan, bf16, s).compute.value());
}

// JAX's fp8 keeps no fp8 weight from one call to the next: every input and weight is quantised
// and transposed per call by kernels of their own (Fp8Recipe::kJax), where Transformer Engine in
// PyTorch fuses the input's cast into its producer and caches the fp8 weights across
// micro-batches. The casts are HBM-bound, torchao tensorwise's bytes; a weight's casts are shared
// by the tokens of one call, so they weigh less next to the GEMMs of a larger micro-batch.
TEST(EstimatorTest, JaxFp8CastsEveryInputAndWeightPerCall) {
  SystemSpec s = H100s(16);
  ModelSpec m = Model("gpt-7.5b");  // h 4096, as Paxml's GPT-3 5B
  auto extra = [&](int mbs, Fp8Recipe recipe) {
    ParallelPlan plan{.tp = 1, .dp = 16, .mbs = mbs, .recompute = Recompute::kFull, .zero = 3};
    plan.fsdp_group = 8;
    TrainingSpec delayed = FlashTraining(16 * mbs);
    delayed.dtype = topo::Dtype::kFp8;
    TrainingSpec other = delayed;
    other.fp8_recipe = recipe;
    auto busy = [&](const TrainingSpec& t) {
      StepEstimate e = EstimateOf(m, plan, t, s);
      return e.compute.value() + e.recompute.value();
    };
    return busy(other) / busy(delayed) - 1;
  };
  EXPECT_GT(extra(4, Fp8Recipe::kJax), 0.05);
  EXPECT_GT(extra(1, Fp8Recipe::kJax), extra(8, Fp8Recipe::kJax) + 0.02);
  // torchao's dynamic tensorwise scale costs one more read per cast than JAX's history scale.
  EXPECT_GT(extra(4, Fp8Recipe::kTensorwise), extra(4, Fp8Recipe::kJax));
}

// torchao's dynamic tensorwise amax (torch.max(torch.abs(x)) over the whole tensor) is a full
// reduction the cast must wait for, so Inductor runs it as its own kernel: every activation cast
// (forward, replayed by full recomputation) and every gradient cast (backward) reads its 16-bit
// source once more, 2 bytes per element, beyond JAX's casts, which take the scale from the amax
// history. Rowwise scales fuse with their row-wise casts, but its column-wise backward casts
// (gradient, input and weight for the weight-gradient GEMM) pay the same extra read.
TEST(EstimatorTest, TorchaoDynamicAmaxReadsEachCastSourceOnceMore) {
  SystemSpec s = H100s(16);
  s.calib.fp8_rowwise_gemm_speedup = s.calib.fp8_gemm_speedup;  // the same GEMMs: casts only
  ModelSpec m = Model("gpt-7.5b");
  ParallelPlan plan{.tp = 1, .dp = 16, .mbs = 2, .recompute = Recompute::kFull, .zero = 3};
  const TrainingSpec jax = Fp8(FlashTraining(32), Fp8Recipe::kJax);
  const TrainingSpec tensorwise = Fp8(FlashTraining(32), Fp8Recipe::kTensorwise);
  const TrainingSpec rowwise = Fp8(FlashTraining(32), Fp8Recipe::kRowwise);
  auto busy = [&](const TrainingSpec& t) {
    StepEstimate e = EstimateOf(m, plan, t, s);
    return e.compute.value() + e.recompute.value();
  };
  const double tokens = 2.0 * m.seq, h = m.hidden, ffn = m.ffn;
  const double kvd = double(m.kv_heads) * m.head_dim();
  const double mats = m.ffn_kind == FfnKind::kSwiGlu ? 3 : 2;
  const double hbm = s.gpu.hbm_bandwidth.value() * s.calib.hbm_efficiency;
  const double micro = 32.0 / (16 * 2);
  // Forward inputs: QKV and fc1 (h each, counted as the two gathered inputs), projection (h),
  // fc2 (ffn); backward gradients of the QKV, fc1 (and gate), projection and fc2 outputs.
  const double inputs = tokens * (3 * h + ffn);
  const double grads = tokens * ((h + 2 * kvd) + 2 * h + (mats - 1) * ffn);
  const double weights = (h * (h + 2 * kvd) + h * h + mats * h * ffn);
  // Tensorwise: forward and its replay read each input once more, the backward each gradient.
  const double tensorwise_extra = micro * m.layers * 2 * (2 * inputs + grads) / hbm;
  EXPECT_NEAR(busy(tensorwise) - busy(jax), tensorwise_extra, 1e-9 * busy(jax));
  // Rowwise against its own fused-cast bytes (forward 3, backward 6 / 3 / 3 per element).
  const double rowwise_fused =
      micro * m.layers *
      (2 * 3 * (inputs + weights) + 6 * grads + 3 * (tokens * (2 * h + h + ffn) + weights)) / hbm;
  const double jax_bytes =
      micro * m.layers *
      (2 * 3 * (inputs + weights) + 3 * grads + 2 * (tokens * (2 * h + h + ffn) + weights)) / hbm;
  const double rowwise_extra =
      micro * m.layers * 2 * (grads + tokens * (3 * h + ffn) + weights) / hbm;
  EXPECT_NEAR(busy(rowwise) - busy(jax), rowwise_fused - jax_bytes + rowwise_extra,
              1e-9 * busy(jax));
}

TEST(EstimatorTest, CrossEntropyMovesFiftyTwoBytesPerLogit) {
  // Each added vocabulary entry costs the output layer's GEMM (forward and two backward
  // products) plus the unfused vocab-parallel cross-entropy's HBM traffic: 38 bytes per logit
  // forward (fp32 cast, max, subtract, exp, sum, divide) and 14 backward (scale the saved softmax,
  // cast back to bf16), not three times a 12-byte forward.
  ModelSpec small = Model("llama3-8b");
  ModelSpec large = small;
  large.vocab = 2 * small.vocab;
  ParallelPlan plan{.tp = 1, .dp = 8, .mbs = 1, .zero = 1};
  SystemSpec s = H100s(8);
  TrainingSpec t = FlashTraining(8);
  EvalContext ctx(small, t, s);
  const StepEstimate a = EstimateOf(small, plan, t, s);
  const StepEstimate b = EstimateOf(large, plan, t, s);
  const double added = (b.compute.value() - a.compute.value()) / a.micro_batches;
  const Calibration& c = s.calib;
  const double tokens = small.seq, h = small.hidden, dv = large.vocab - small.vocab;
  const double gflop = 2e-9 * tokens * h * h;
  const double rate = ctx.gemm_peak * c.gemm_peak_fraction * h / (h + c.gemm_half_dim) * tokens /
                      (tokens + c.gemm_half_tokens) * gflop / (gflop + c.gemm_half_gflop);
  const double gemm = 3 * 2 * tokens * h * dv / rate;
  const double bytes = (added - gemm) * ctx.hbm_bytes_per_s / (tokens * dv);
  EXPECT_NEAR(bytes, 52, 0.5);
}

// Calibration::gemm_half_gflop: a layer GEMM call of W GFLOPs runs at W / (W + half) of the rate
// its sides give. GPT 1.7B at TP 8 (2 x 2048 x 288 x 2304: 2.7 GFLOP a call) runs its GEMMs
// 2.7x slower at half 4.5 (its whole compute 1.7x: attention, norms and logits stay); GPT-3 175B
// at TP 8 (77 GFLOP) 6 % slower.
TEST(EstimatorTest, SmallGemmCallsRunBelowTheCurveOfTheirSides) {
  SystemSpec off = A100s(8);
  off.calib.gemm_half_gflop = 0;
  SystemSpec on = off;
  on.calib.gemm_half_gflop = 4.5;
  ParallelPlan plan{.tp = 8, .dp = 1, .mbs = 1};
  TrainingSpec t = Training(8);
  t.flash_attention = true;
  auto slowdown = [&](const char* name) {
    ModelSpec m = Model(name);
    m.layers = 4;  // one stage's worth; the ratio is per layer
    return EstimateOf(m, plan, t, on).compute.value() / EstimateOf(m, plan, t, off).compute.value();
  };
  const double small = slowdown("gpt-1.7b"), large = slowdown("gpt3-175b");
  EXPECT_GT(small, 1.5) << "GEMMs are most of a 1.7B layer's time";
  EXPECT_LT(small, 2.7);
  EXPECT_GT(large, 1.03);
  EXPECT_LT(large, 1.06);
}

// Gradient accumulation outside the weight-gradient GEMM (TrainingSpec::grad_accum) is one
// element-wise pass over the stage's gradients per micro-batch: Megatron-LM 2021's fp32 main_grad
// add moves 10 bytes per parameter every micro-batch, autograd's 16-bit add 6 on all but the
// first; the fused GEMM (the default) and ZeRO-3 pay nothing.
TEST(EstimatorTest, GradientAccumulationOutsideTheGemmCostsItsBytes) {
  ModelSpec m = Model("gpt3-175b");
  ParallelPlan plan{.tp = 8, .pp = 8, .dp = 1, .mbs = 1, .vp = 3};
  plan.recompute = Recompute::kFull;
  SystemSpec s = A100s(64);
  TrainingSpec t = Training(64);
  EvalContext ctx(m, t, s);
  const StepEstimate fused = EstimateOf(m, plan, t, s);
  t.grad_accum = GradAccum::kFp32;
  const StepEstimate fp32 = EstimateOf(m, plan, t, s);
  t.grad_accum = GradAccum::kAutograd;
  const StepEstimate autograd = EstimateOf(m, plan, t, s);
  ASSERT_TRUE(fused.feasible() && fp32.feasible() && autograd.feasible());
  const double mb = fused.micro_batches;
  ASSERT_EQ(mb, 64);
  // 16-bit weights: 2 bytes per parameter of the stage.
  const double stage_params = fused.memory.weights.value() / 2;
  const double fp32_bytes =
      (fp32.compute.value() - fused.compute.value()) / mb * ctx.hbm_bytes_per_s / stage_params;
  const double autograd_bytes =
      (autograd.compute.value() - fused.compute.value()) / mb * ctx.hbm_bytes_per_s / stage_params;
  EXPECT_NEAR(fp32_bytes, 10, 1e-6);
  EXPECT_NEAR(autograd_bytes, 6 * (mb - 1) / mb, 1e-6);
  // Part of every micro-batch, so the bubble grows with it.
  EXPECT_GT(fp32.bubble.value(), fused.bubble.value());
  // One micro-batch: autograd takes the first gradient over, nothing to add.
  ParallelPlan single = plan;
  single.vp = 1;
  TrainingSpec one = Training(1);
  const StepEstimate one_fused = EstimateOf(m, single, one, s);
  one.grad_accum = GradAccum::kAutograd;
  const StepEstimate one_autograd = EstimateOf(m, single, one, s);
  ASSERT_TRUE(one_fused.feasible());
  EXPECT_DOUBLE_EQ(one_autograd.step.value(), one_fused.step.value());
  // ZeRO-3 / FSDP reduce-scatters every pass's gradients: no accumulation pass.
  ModelSpec small = Model("llama3-8b");
  ParallelPlan fsdp{.dp = 8, .mbs = 1, .zero = 3};
  TrainingSpec ft = FlashTraining(64);
  const StepEstimate f0 = EstimateOf(small, fsdp, ft, H100s(8));
  ft.grad_accum = GradAccum::kFp32;
  EXPECT_DOUBLE_EQ(EstimateOf(small, fsdp, ft, H100s(8)).step.value(), f0.step.value());
}

// PyTorch DTensor's TP (torchtitan) keeps the all-gathered input its matmuls saved: the backward
// runs the forward's four collectives' conjugates and no re-gather, 2 forwards' worth against
// Megatron's 2.5 with sequence parallelism.
TEST(EstimatorTest, DTensorTensorParallelBackwardDoesNotRegather) {
  ModelSpec m = Model("llama3-8b");
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 1};
  plan.tp_comm_overlap = false;
  plan.sequence_parallel = true;
  TrainingSpec t = FlashTraining(64);
  SystemSpec s = H100s(64);
  StepEstimate megatron = EstimateOf(m, plan, t, s);
  t.dtensor_tp = true;
  StepEstimate dtensor = EstimateOf(m, plan, t, s);
  ASSERT_GT(megatron.tp_comm.value(), 0);
  // 4 reduce-scatter-sized collectives per layer and pass against 2 all-reduces (the same bytes,
  // two more fixed per-call costs).
  EXPECT_NEAR(dtensor.tp_comm.value() / megatron.tp_comm.value(), 2.0 / 2.5, 0.05);
  EXPECT_LT(dtensor.step.value(), megatron.step.value());
}

// torchtitan's per-op checkpointing saves the reduce-scatters' outputs but reruns the
// all-gathers: half the forward's TP traffic again, exactly.
TEST(EstimatorTest, DTensorOpCheckpointingRerunsTheAllGathers) {
  ModelSpec m = Model("llama3-8b");
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 3};
  plan.tp_comm_overlap = false;
  plan.sequence_parallel = true;
  TrainingSpec t = FlashTraining(64);
  t.dtensor_tp = true;
  SystemSpec s = H100s(64);
  StepEstimate none = EstimateOf(m, plan, t, s);
  plan.recompute = Recompute::kOps;
  StepEstimate ops = EstimateOf(m, plan, t, s);
  ASSERT_GT(none.tp_comm.value(), 0);
  EXPECT_NEAR(ops.tp_comm.value() / none.tp_comm.value(), 2.5 / 2.0, 1e-9);
}

// torchao's tensorwise TP casts the sharded block inputs and output gradients to fp8 before their
// all-gathers: of each pass's four collectives the two all-gathers move half the bytes, so
// exposed TP traffic is 3/4 of bf16's; the rowwise recipe runs torchtitan's plain bf16 TP.
TEST(EstimatorTest, TensorwiseFp8TpGathersInFp8) {
  ModelSpec m = Model("llama3-70b");
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 3};
  plan.tp_comm_overlap = false;
  plan.sequence_parallel = true;
  plan.recompute = Recompute::kFull;
  TrainingSpec bf16 = FlashTraining(64);
  bf16.dtensor_tp = true;
  TrainingSpec tensorwise = bf16;
  tensorwise.dtype = topo::Dtype::kFp8;
  tensorwise.fp8_recipe = Fp8Recipe::kTensorwise;
  TrainingSpec rowwise = tensorwise;
  rowwise.fp8_recipe = Fp8Recipe::kRowwise;
  SystemSpec s = H100s(64);
  const double base = EstimateOf(m, plan, bf16, s).tp_comm.value();
  ASSERT_GT(base, 0);
  // Each collective's fixed per-call costs keep the ratio a little above 3/4.
  const double ratio = EstimateOf(m, plan, tensorwise, s).tp_comm.value() / base;
  EXPECT_GT(ratio, 0.75);
  EXPECT_LT(ratio, 0.77);
  EXPECT_EQ(EstimateOf(m, plan, rowwise, s).tp_comm.value(), base);
}

// Async TP hides a collective only behind the GEMM it is fused with. Where that GEMM is shorter
// than the collective (fp8 at h / tp = 512), less is hidden than in bf16, whose traffic is the
// same under delayed scaling (torchao gathers in fp8 only with dynamic scaling); torchao's
// rowwise recipe fuses only the matmul-reduce-scatters, so with GEMMs long enough to hide
// everything (tp 2) its all-gathers and their conjugates stay exposed, where the tensorwise
// recipe hides all four collectives and gathers in fp8.
TEST(EstimatorTest, AsyncTpHidesAtMostTheFusedGemm) {
  ModelSpec m = Model("llama3-8b");
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 3};
  plan.tp_comm_overlap = true;
  plan.sequence_parallel = true;
  TrainingSpec bf16 = FlashTraining(64);
  bf16.dtensor_tp = true;
  bf16.async_tp = true;
  TrainingSpec fp8 = bf16;
  fp8.dtype = topo::Dtype::kFp8;
  fp8.fp8_recipe = Fp8Recipe::kDelayed;
  SystemSpec s = H100s(64);
  s.calib.async_tp_overlap_fraction = 0.7;
  const double a = 0.7;
  EXPECT_GT(EstimateOf(m, plan, fp8, s).tp_comm.value(),
            1.05 * EstimateOf(m, plan, bf16, s).tp_comm.value());

  ModelSpec big = Model("llama3-405b");  // h / tp = 8192: every fused GEMM outlasts its collective
  ParallelPlan tp2{.tp = 2, .pp = 2, .dp = 16, .mbs = 1, .zero = 1};
  tp2.tp_comm_overlap = true;
  tp2.sequence_parallel = true;
  TrainingSpec rowwise = fp8;
  rowwise.global_batch = 64;
  rowwise.fp8_recipe = Fp8Recipe::kRowwise;
  TrainingSpec tensorwise = rowwise;
  tensorwise.fp8_recipe = Fp8Recipe::kTensorwise;
  double hidden_both = EstimateOf(big, tp2, tensorwise, s).tp_comm.value();
  double hidden_rs = EstimateOf(big, tp2, rowwise, s).tp_comm.value();
  ASSERT_GT(hidden_both, 0);
  // Per pass: (1 - a) (2 g + 2 r) exposed against 2 r + 2 (1 - a) r, with g (an fp8 gather) about
  // r / 2 (a little above, for its fixed per-call cost).
  EXPECT_NEAR(hidden_rs / hidden_both, (2 - a) / (1.5 * (1 - a)), 0.1);
}

// torchao's float8 linears gain nothing over bf16 below the GEMM shapes its H100
// microbenchmarks mark (tensorwise: K <= 4096 and N <= 1024; rowwise: N <= 2048, K <= 1024, or
// N <= 4096 and K <= 2048; torchao float8_linear_utils.py), so those GEMMs run at the 16-bit
// rate whatever the fp8 speed-up. Llama 3 8B at TP 8: under rowwise no layer GEMM gains, so the
// step does not depend on the rowwise speed-up; under tensorwise q, k and v (K = 4,096, N = 512
// and 128) do not gain but the projection and the MLP do. Transformer Engine's recipe keeps its
// speed-up on every GEMM, and at 70B (h / tp = 1,024) rowwise's MLP GEMMs gain again.
TEST(EstimatorTest, TorchaoFp8GainsNothingBelowItsMeasuredShapes) {
  ParallelPlan plan{.tp = 8, .dp = 8, .mbs = 2, .zero = 3};
  plan.tp_comm_overlap = false;
  plan.sequence_parallel = true;
  TrainingSpec dtensor = FlashTraining(64);
  dtensor.dtensor_tp = true;
  const TrainingSpec te = Fp8(dtensor, Fp8Recipe::kDelayed);
  const TrainingSpec tensorwise = Fp8(dtensor, Fp8Recipe::kTensorwise);
  const TrainingSpec rowwise = Fp8(dtensor, Fp8Recipe::kRowwise);
  // The change in compute time when the fp8 GEMM speed-up goes from 1.5 to 2.
  auto gain = [&](const ModelSpec& m, const TrainingSpec& t) {
    auto busy = [&](double speedup) {
      SystemSpec s = H100s(64);
      s.calib.fp8_gemm_speedup = speedup;
      s.calib.fp8_rowwise_gemm_speedup = speedup;
      StepEstimate e = EstimateOf(m, plan, t, s);
      return e.compute.value() + e.recompute.value();
    };
    return busy(1.5) - busy(2.0);
  };
  ModelSpec m = Model("llama3-8b");
  const double h = m.hidden, ffn = m.ffn, kvd = double(m.kv_heads) * m.head_dim();
  const double all = h * (h + 2 * kvd) + h * h + 3 * h * ffn;
  const double delayed = gain(m, te);
  ASSERT_GT(delayed, 0);
  EXPECT_NEAR(gain(m, rowwise), 0.0, 1e-12);
  EXPECT_NEAR(gain(m, tensorwise) / delayed, (h * h + 3 * h * ffn) / all, 1e-9);
  ModelSpec big = Model("llama3-70b");
  const double bh = big.hidden, bffn = big.ffn, bkvd = double(big.kv_heads) * big.head_dim();
  const double big_all = bh * (bh + 2 * bkvd) + bh * bh + 3 * bh * bffn;
  EXPECT_NEAR(gain(big, rowwise) / gain(big, te), 3 * bh * bffn / big_all, 1e-9);
  EXPECT_NEAR(gain(big, tensorwise), gain(big, te), 1e-9 * gain(big, te));
}

// cuDNN's fused attention (Transformer Engine's choice on Hopper) runs the flash kernels' work at
// Calibration::cudnn_attention_speedup times their rate, and only for a stack that runs it.
// Selective recomputation reruns core attention alone, so its time is the kernel's.
TEST(EstimatorTest, CudnnAttentionRunsAtItsSpeedupOverFlashAttention) {
  ModelSpec m = Model("llama3-8b");
  SystemSpec sys = H100s(8);
  sys.calib.cudnn_attention_speedup = 1.5;
  ParallelPlan plan{.dp = 8, .mbs = 1, .zero = 1};
  plan.recompute = Recompute::kSelective;
  TrainingSpec flash = FlashTraining(64);
  TrainingSpec cudnn = flash;
  cudnn.attention_kernel = AttentionKernel::kCudnn;
  StepEstimate f = EstimateOf(m, plan, flash, sys);
  StepEstimate c = EstimateOf(m, plan, cudnn, sys);
  ASSERT_GT(f.recompute.value(), 0);
  EXPECT_NEAR(c.recompute.value(), f.recompute.value() / 1.5, 1e-9 * f.recompute.value());
  EXPECT_LT(c.step.value(), f.step.value());
  // At a speedup of 1 the two kernels cost the same.
  sys.calib.cudnn_attention_speedup = 1.0;
  EXPECT_DOUBLE_EQ(EstimateOf(m, plan, cudnn, sys).step.value(),
                   EstimateOf(m, plan, flash, sys).step.value());
}

// The fused loss keeps the 16-bit logits and their gradient (4 bytes a logit) instead of the
// logits and an fp32 softmax (6), and moves 2 + 4 bytes a logit instead of 38 + 14.
TEST(EstimatorTest, AFusedLossHoldsAndMovesFewerBytesPerLogit) {
  ModelSpec m = Model("llama3-8b");
  SystemSpec sys = H100s(8);
  ParallelPlan plan{.dp = 8, .mbs = 1, .zero = 3};
  TrainingSpec unfused = FlashTraining(64);
  TrainingSpec fused = unfused;
  fused.fused_loss = true;
  StepEstimate u = EstimateOf(m, plan, unfused, sys);
  StepEstimate f = EstimateOf(m, plan, fused, sys);
  ASSERT_TRUE(u.feasible());
  ASSERT_TRUE(f.feasible());
  const double logits = double(m.seq) * m.vocab;  // one sequence per micro-batch, tp 1
  EXPECT_NEAR((u.memory.buffers - f.memory.buffers).value(), 2 * logits, 1e-6 * logits);
  const double moved = (38 + 14 - 2 - 4) * logits * u.micro_batches;
  EXPECT_NEAR((u.compute - f.compute).value(),
              moved / (sys.gpu.hbm_bandwidth.value() * sys.calib.hbm_efficiency),
              1e-6 * u.compute.value());
}

}  // namespace
}  // namespace baton::perf
