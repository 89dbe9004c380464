// Checks the estimator against the published runs in data/published/runs.csv (and, when the
// shared data set is present, the vTrain single-node measurements).
#include "perf/validation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "perf/calibrate.h"
#include "perf/search.h"

namespace baton::perf {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// The one row of a table a test builds; a parse error fails the test and gives a default row.
PublishedRun ParseOne(const std::string& csv) {
  auto runs = ParsePublishedRuns(csv, "t.csv");
  if (!runs.ok() || runs->size() != 1) {
    ADD_FAILURE() << (runs.ok() ? "not one row" : runs.status().ToString());
    return {};
  }
  return (*runs)[0];
}

// A table whose one row has a bad value: refused, and the error names the column.
void ExpectRefusedNaming(const std::string& csv, std::string_view column) {
  auto runs = ParsePublishedRuns(csv, "t.csv");
  ASSERT_FALSE(runs.ok()) << "accepted a bad " << column;
  EXPECT_NE(runs.status().message().find(column), std::string::npos) << runs.status().ToString();
}

// MT-NLG (Smith et al. 2022; DeepSpeed's pipeline engine + Megatron TP) reports 60.1 / 50.2 /
// 44.4 s per step on 2240 / 2800 / 3360 GPUs (tp 8, pp 35, dp 8 / 10 / 12, gbs 1920) and does not
// print its micro-batch size. The rows read it from the figures themselves: plain 1F1B takes
// (m + p - 1) micro-batch times, so over the n = gbs / dp sequences of one pipeline the step is
// n x (time per sequence) + (p - 1) x mbs x (time per sequence) + the per-step rest (all-reduce,
// optimizer: under 0.5 s). The three points give 0.197 s per sequence and a 12.7 s intercept,
// i.e. mbs 1.9; at mbs 1 the model would owe 6 s per step to nothing it could name (what was
// checked at mbs 1: data/published/README.md). This test recomputes it from the table.
TEST(ValidationTest, MtNlgMicroBatchIsWhatItsStepTimesImply) {
  auto runs = LoadPublishedRuns(SourceDir() + "/data/published/runs.csv");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  std::vector<std::pair<double, double>> points;  // sequences per pipeline, step seconds
  int pp = 0, mbs = 0;
  for (const PublishedRun& r : *runs) {
    if (!r.id.starts_with("mtnlg-")) continue;
    points.emplace_back(double(r.training.global_batch) / r.plan.dp, r.value);
    pp = r.plan.pp;
    mbs = r.plan.mbs;
  }
  ASSERT_EQ(points.size(), 3u);
  double mx = 0, my = 0;
  for (auto [x, y] : points) mx += x / 3, my += y / 3;
  double sxy = 0, sxx = 0;
  for (auto [x, y] : points) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
  const double per_sequence = sxy / sxx, intercept = my - per_sequence * mx;
  const double implied = intercept / ((pp - 1) * per_sequence);
  EXPECT_NEAR(per_sequence, 0.197, 0.001);
  EXPECT_NEAR(intercept, 12.7, 0.1);
  EXPECT_NEAR(implied, 1.9, 0.05);
  EXPECT_EQ(mbs, std::lround(implied));
}

// ValidationTest.AllDevTablesRegressionGuard: issue 28's acceptance for `baton plan validate` on
// every dev table, mean |error| <= 5 % and p90 <= 10 % (the built-in profile: 4.0 / 8.1 %).
constexpr double kDevTablesMaeGuard = 0.05;
constexpr double kDevTablesP90Guard = 0.10;

// runs.csv under the built-in profile, which is the least-squares fit on every dev table: one
// Ampere calibration serves the 2021-22 Megatron-LM and DeepSpeed rows and the 2024 FSDP stacks
// (torchtitan, IBM) together. Bounds: what the fit reaches (mean 4.5 %, max 10.1 %), plus slack.
constexpr double kRunsCsvMean = 0.055;
constexpr double kRunsCsvMax = 0.12;

TEST(ValidationTest, PublishedRunsWithinBounds) {
  auto runs = LoadPublishedRuns(SourceDir() + "/data/published/runs.csv");
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_GE(runs->size(), 43u);
  auto rep = RunValidation(*runs);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  std::printf("%s", FormatValidationReport(*rep).c_str());

  double sum = 0, worst = 0;
  int n = 0;
  for (const ValidationRow& row : rep->rows) {
    double err = std::abs(row.error);
    if (IsMemoryMetric(row.run.metric)) {
      EXPECT_LE(err, 0.10) << row.run.id;
    } else {
      sum += err;
      worst = std::max(worst, err);
      ++n;
      EXPECT_LE(err, kRunsCsvMax) << row.run.id;
    }
  }
  ASSERT_GT(n, 0);
  EXPECT_EQ(n, rep->perf_rows);
  EXPECT_NEAR(sum / n, rep->perf_mae, 1e-12);
  EXPECT_LE(sum / n, kRunsCsvMean);
  EXPECT_LE(worst, kRunsCsvMax);
}

TEST(ValidationTest, BadTableNamesLineAndColumn) {
  auto r = ParsePublishedRuns("id,model,layers\nx,GPT 1.7B,abc\n", "t.csv");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("t.csv:2"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("layers"), std::string::npos) << r.status().ToString();
}

// Every CSV the planner reads is bounded row by row while reading (kPerfCsvLimits): a runs
// table with one 10 MB line is refused naming file:line, and /dev/zero (one endless line, which
// grew to 23 GB when the table was read whole first) is refused after one line's worth of bytes.
TEST(ValidationTest, CsvRowsAreBoundedWhileReading) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "validation_long_line.csv").string();
  {
    std::ofstream out(path);
    out << "id,model\n" << std::string(10 << 20, 'x') << "\n";
  }
  for (auto load : {+[](const std::string& p) { return LoadPublishedRuns(p).status(); },
                    +[](const std::string& p) { return LoadAttentionTable(p).status(); },
                    +[](const std::string& p) { return ValidateVtrain(p).status(); },
                    +[](const std::string& p) { return LoadPublishedTables(p).status(); }}) {
    Status st = load(path);
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
    EXPECT_NE(st.message().find(path + ":2: line longer than 16384 bytes"), std::string::npos)
        << st.ToString();
    Status zero = load("/dev/zero");
    EXPECT_EQ(zero.code(), StatusCode::kResourceExhausted) << zero.ToString();
    EXPECT_NE(zero.message().find("/dev/zero:1: line longer than"), std::string::npos)
        << zero.ToString();
  }
  std::filesystem::remove(path);
  std::string many = "id\n";
  for (std::size_t i = 0; i < kPerfCsvLimits.max_lines; ++i) many += "\n";
  auto runs = ParsePublishedRuns(many, "many.csv");
  ASSERT_FALSE(runs.ok());
  EXPECT_NE(runs.status().message().find("many.csv:100001: more than 100000 lines"),
            std::string::npos)
      << runs.status().ToString();
}

TEST(ValidationTest, PipelineP2pColumn) {
  std::string head =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,gpus,gpu,"
      "network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,dp_overlap,pp_p2p\n";
  std::string row =
      "x,s,GPT-3 175B,175,96,12288,96,96,49152,2048,51200,64,1,64,A100-SXM4-80GB,"
      "DGX-A100 8xHDR200,8,8,1,1,1,full,no,0,fp16,iteration_time_s,18,secondary,no,no,";
  const PublishedRun serial = ParseOne(head + row + "serial\n");
  EXPECT_FALSE(serial.plan.batched_pp_p2p);
  const PublishedRun blank = ParseOne(head + row + "\n");
  EXPECT_TRUE(blank.plan.batched_pp_p2p);
  ExpectRefusedNaming(head + row + "async\n", "pp_p2p");
}

// A cell may be quoted and hold commas (the shared tables' `source` cells do); a header naming a
// column twice is refused rather than letting the last one win.
TEST(ValidationTest, QuotedCellsAndDuplicateColumns) {
  std::string head =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,gpus,gpu,"
      "network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,dp_overlap\n";
  std::string row =
      "x,\"Figure 5a, image \"\"175b-trend\"\"\",GPT-3 175B,175,96,12288,96,96,49152,2048,51200,64,"
      "1,64,A100-SXM4-80GB,DGX-A100 8xHDR200,8,8,1,1,1,full,no,0,fp16,iteration_time_s,18,"
      "secondary,no,no\n";
  const PublishedRun r = ParseOne(head + row);
  EXPECT_EQ(r.source, "Figure 5a, image \"175b-trend\"");
  EXPECT_EQ(r.value, 18);
  ExpectRefusedNaming("id,id,source\nx,y,z\n", "column 'id' appears twice");
  ExpectRefusedNaming(head + "x,\"unterminated,GPT-3 175B\n", "t.csv:2");
}

TEST(ValidationTest, MfuAttentionColumn) {
  std::string head =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,gpus,gpu,"
      "network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,dp_overlap,pp_p2p,mfu_attention\n";
  std::string row =
      "x,s,Llama 3 405B,405,126,16384,128,8,53248,131072,128256,128,1,16384,H100-SXM5-80GB,"
      "RoCE 400G per GPU,8,16,8,16,,none,yes,2,bf16,mfu,0.38,secondary,yes,yes,,";
  auto causal = ParsePublishedRuns(head + row + "causal\n", "t.csv");
  ASSERT_TRUE(causal.ok()) << causal.status().ToString();
  auto full = ParsePublishedRuns(head + row + "\n", "t.csv");
  ASSERT_TRUE(full.ok()) << full.status().ToString();
  EXPECT_TRUE((*causal)[0].causal_attention_flops);
  EXPECT_FALSE((*full)[0].causal_attention_flops);
  // At 128k tokens attention is over half the model FLOPs: the causal count is much lower.
  auto a = ValidateRun((*causal)[0]);
  auto b = ValidateRun((*full)[0]);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_LT(a->predicted, 0.8 * b->predicted);
  EXPECT_GT(a->predicted, 0.6 * b->predicted);
  ExpectRefusedNaming(head + row + "sparse\n", "mfu_attention");
}

// Issue 3's search acceptance: Llama 3 405B on 8,192 H100s (2,048 x 8k tokens) comes out within
// the range published runs of that model on H100 reach in the dev tables, and the plans two
// teams tuned at that scale are near the best the search finds: Meta's (TP 8, PP 16) and
// NVIDIA's H100 recipe (NVIDIA/dgxc-benchmarking, llama3.1: TP 8, PP 8, CP 2, VP 8, MBS 1).
// The range: Meta's production runs, 38-43 % MFU counting causal attention on 8,192-16,384 GPUs
// (runs.csv llama3-405b-*), up to NVIDIA's benchmark of the same model and GPU, 54.5-55.8 % MFU
// counting the full square on 576-2,304 GPUs (runs-2024.csv dgxc-l31-405b-bf16-{576,1152,2304}g
// -mfu; 52.4-53.6 % causal). This test used to demand Meta's band alone; but NVIDIA's rows show
// the same model on the same GPUs running 25 % faster than Meta's at a quarter of the scale, so a
// plan above 43 % is not implausible in itself.
TEST(ValidationTest, Llama3SearchFindsThePublishedPlansNearTheTop) {
  ModelSpec model = *FindModel("llama3-405b");
  TrainingSpec training;
  training.global_batch = 2048;
  training.dtype = topo::Dtype::kBf16;
  ShortSystem sh;
  sh.gpu = "H100-SXM";
  sh.gpus = 8192;
  auto system = SystemFromShort(sh);
  ASSERT_TRUE(system.ok()) << system.status().ToString();
  SearchOptions options;
  options.top_k = 20;
  auto found = Search(model, training, *system, DefaultSearchSpace(model, {8192}), options);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  ASSERT_FALSE(found->top.empty());
  const StepEstimate& best = found->top[0].estimate;
  EXPECT_GE(best.mfu_causal, 0.38);
  EXPECT_LE(best.mfu, 0.5578) << PlanToString(found->top[0].plan);

  auto published = [&](int tp, int pp, int cp) {
    ParallelPlan p;
    p.tp = tp;
    p.pp = pp;
    p.cp = cp;
    p.dp = 8192 / (tp * pp * cp);
    p.vp = 8;
    p.sequence_parallel = true;
    p.zero = 2;
    p.uneven_pp = true;
    return p;
  };
  for (const ParallelPlan& p : {published(8, 16, 1), published(8, 8, 2)}) {
    auto e = Estimate(model, p, training, *system);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ASSERT_TRUE(e->feasible()) << PlanToString(p);
    // Within 12 %: the CV error of the Hopper rows (the profile's band) is about that.
    EXPECT_LE(e->step.value(), 1.12 * best.step.value()) << PlanToString(p);
  }
}

// vTrain: small GPT models (hidden 1024/2048) on one node, a regime far below the published
// large runs, where the host's kernel launches bound the step (Calibration::host_layer_pass_s).
// Without that floor the mean error was 22.7 % (median -12 %).
TEST(ValidationTest, VtrainSingleNode) {
  std::string path = SourceDir() + "/../shared/data/published/vtrain-single-node.csv";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << "vTrain data not present at " << path << " (optional shared data set)";
  }
  auto rep = ValidateVtrain(path);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  std::printf("vTrain: %d points, mean |error| %.1f%%, median %+.1f%%, max %.1f%%\n", rep->points,
              100 * rep->mae, 100 * rep->median, 100 * rep->max);
  EXPECT_EQ(rep->points, 1440);
  ASSERT_EQ(rep->rows.size(), 1440u);
  EXPECT_EQ(rep->rows[0].plan.pp, 2);  // the file's first row: 2 GPUs, pp 2, 2 micro-batches
  EXPECT_EQ(rep->rows[0].micro_batches, 2);
  EXPECT_LE(rep->mae, 0.12);
  EXPECT_LE(std::abs(rep->median), 0.05);
}

// Every dev table (runs.csv + runs-2024.csv, each source's FLOP and MFU convention) against the
// acceptance bounds; `baton plan validate` prints the figures per source.
TEST(ValidationTest, AllDevTablesRegressionGuard) {
  std::string dir = SourceDir() + "/data/published";
  auto runs = LoadPublishedTables(DevTables(dir));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_GE(runs->size(), 398u);
  auto rep = RunValidation(*runs);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  std::printf("dev tables: %d rows, mean |error| %.1f%%, p90 %.1f%%, max %.1f%%, OOM %d\n",
              rep->perf_rows, 100 * rep->perf_mae, 100 * rep->perf_p90, 100 * rep->perf_max,
              rep->oom_rows);
  for (const GroupError& g : rep->groups) {
    std::printf("  %-16s %4d rows  mean %5.1f%%  max %6.1f%%\n", g.group.c_str(), g.rows,
                100 * g.mae, 100 * g.max);
  }
  EXPECT_LE(rep->perf_mae, kDevTablesMaeGuard);
  EXPECT_LE(rep->perf_p90, kDevTablesP90Guard);
  EXPECT_LE(rep->memory_max, 0.10);
  // No run that really ran is declared out of memory (14 were, before per-op SAC, HSDP and the
  // 1F1B rows were read as the sources describe them).
  EXPECT_EQ(rep->oom_rows, 0);
  // The breakdown covers every performance row once per dimension.
  int source_rows = 0;
  for (const BucketError& b : rep->breakdown) {
    if (b.dimension == "source") source_rows += b.rows;
  }
  EXPECT_EQ(source_rows, rep->perf_rows);
}

TEST(ValidationTest, TablesRejectDuplicateIdsAcrossFiles) {
  std::string dir = SourceDir() + "/data/published";
  auto twice = LoadPublishedTables(dir + "/runs.csv," + dir + "/runs.csv");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("already in"), std::string::npos)
      << twice.status().ToString();
}

// FSDP as it runs: on a slow network the per-unit gathers stop hiding behind one unit's compute
// and the step grows; HSDP (shard within a node) gathers over NVLink only and is faster there.
TEST(ValidationTest, FsdpPerUnitGathersAndHsdp) {
  ModelSpec m = *FindModel("llama2-70b");
  TrainingSpec t;
  t.global_batch = 256;
  ShortSystem sh;
  sh.gpu = "A100-80GB";
  sh.gpus = 128;
  sh.nic_gbits_per_gpu = 50;
  auto sys = SystemFromShort(sh);
  ASSERT_TRUE(sys.ok());
  ParallelPlan p;
  p.dp = 128;
  p.mbs = 2;
  p.zero = 3;
  p.recompute = Recompute::kFull;
  auto slow = Estimate(m, p, t, *sys);
  sh.nic_gbits_per_gpu = 400;
  auto fast = Estimate(m, p, t, *SystemFromShort(sh));
  ASSERT_TRUE(slow.ok() && fast.ok());
  EXPECT_GT(slow->dp_comm.value(), 2 * fast->dp_comm.value());
  sh.nic_gbits_per_gpu = 50;
  ParallelPlan h = p;
  h.fsdp_group = 8;
  auto hsdp = Estimate(m, h, t, *SystemFromShort(sh));
  ASSERT_TRUE(hsdp.ok());
  EXPECT_LT(hsdp->dp_comm.value(), slow->dp_comm.value());
  EXPECT_GT(hsdp->memory.weights_grads_optimizer().value(),
            slow->memory.weights_grads_optimizer().value());
}

// dgxc's Nemotron-4 MFU counts K and V projections at full width: on a GQA model the full-mha
// count is above the GQA one by 4 h (h - kv_heads x head_dim) x 3 FLOPs per token and layer.
TEST(ValidationTest, FullMhaConventionCountsKvAtFullWidth) {
  std::string head =
      "id,source,group,model,params_b,layers,hidden,heads,kv_heads,ffn,ffn_kind,seq,vocab,gbs,"
      "mbs,gpus,gpu,network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,"
      "confidence,flash_attention,flops\n";
  std::string row =
      "x,s,dgxc,Nemotron4-15B,,32,6144,48,8,24576,gelu,4096,256000,64,4,16,H100-SXM,"
      "IB 400G per GPU,4,1,4,1,1,selective,yes,1,bf16,mfu,0.5,secondary,yes,";
  auto mha = ParsePublishedRuns(head + row + "full-mha\n", "t.csv");
  auto gqa = ParsePublishedRuns(head + row + "full\n", "t.csv");
  ASSERT_TRUE(mha.ok() && gqa.ok()) << mha.status().ToString();
  auto a = ValidateRun((*mha)[0]);
  auto b = ValidateRun((*gqa)[0]);
  ASSERT_TRUE(a.ok() && b.ok());
  // NeMo's formula: 77.81 vs 87.81 h^2-terms per token and layer for this shape.
  EXPECT_NEAR(a->predicted / b->predicted, 87.81 / 77.81, 0.002);
  ExpectRefusedNaming(head + row + "mha\n", "flops");
}

// NeMo 24.07's SFT table packs SQuAD samples into 4,096-token sequences and counts 6 x the
// parameters but the token embedding per token, without the s x s attention term: its LLAMA2-7B
// SFT row prints 16,891 tokens/s and 673 TFLOP/s per GPU, 3.984e10 FLOPs per token.
TEST(ValidationTest, PackedConventionCountsTheGemmsOfSixNWithoutAttention) {
  std::string head =
      "id,source,group,model,params_b,layers,hidden,heads,kv_heads,ffn,ffn_kind,seq,vocab,gbs,"
      "mbs,gpus,gpu,network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,"
      "confidence,flash_attention,flops\n";
  std::string row =
      "x,s,nemo-2407,LLAMA2-7B (SFT),,32,4096,32,32,11008,swiglu,4096,32000,32,1,8,H100-SXM,"
      "IB 400G per GPU,1,1,8,1,1,none,no,1,bf16,";
  auto packed =
      ParsePublishedRuns(head + row + "tflops_per_gpu,673,secondary,yes,packed\n", "t.csv");
  auto tps =
      ParsePublishedRuns(head + row + "tokens_per_s_per_gpu,16891,secondary,yes,\n", "t.csv");
  ASSERT_TRUE(packed.ok() && tps.ok()) << packed.status().ToString();
  EXPECT_EQ((*packed)[0].flops, FlopConvention::kPacked);
  auto a = ValidateRun((*packed)[0]);
  auto b = ValidateRun((*tps)[0]);
  ASSERT_TRUE(a.ok() && b.ok());
  // Per token: 6 x (32 layers x 202,375,168 + 131,072,000 output weights) = 3.964e10 (with the
  // norms), the printed pair's 3.984e10 to 0.5 %.
  double per_token = a->predicted * 1e12 / b->predicted;
  EXPECT_NEAR(per_token / 3.984e10, 1.0, 0.006);
  // The full-square count would put the same run 16 % higher.
  auto full = ParsePublishedRuns(head + row + "tflops_per_gpu,673,secondary,yes,full\n", "t.csv");
  ASSERT_TRUE(full.ok());
  auto c = ValidateRun((*full)[0]);
  ASSERT_TRUE(c.ok());
  EXPECT_GT(c->predicted / a->predicted, 1.15);
}

TEST(ValidationTest, BucketsNameParallelismAndSequence) {
  ParallelPlan p;
  EXPECT_EQ(ParallelismKind(p), "dp");
  p.tp = 8;
  EXPECT_EQ(ParallelismKind(p), "3d");
  p.cp = 2;
  EXPECT_EQ(ParallelismKind(p), "cp");
  p.zero = 3;
  EXPECT_EQ(ParallelismKind(p), "fsdp");
  EXPECT_EQ(SequenceBucket(8192), "<=8k");
  EXPECT_EQ(SequenceBucket(8193), "8k-32k");
  EXPECT_EQ(SequenceBucket(131072), "32k-128k");
  EXPECT_EQ(SequenceBucket(262144), ">128k");
}

const PublishedRun* FindRun(const std::vector<PublishedRun>& runs, std::string_view id) {
  for (const PublishedRun& r : runs) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

// torchtitan's async-TP benchmark ran the same plan in bf16, float8 tensorwise and float8
// rowwise: rowwise was the slowest of the three (3,708 tokens/s per GPU against 4,378 in bf16 and
// 5,078 tensorwise, Llama 3 8B on 64 H100s). The table used to say only `fp8`, and both float8
// rows got the same estimate (7,670); now each recipe's casts and GEMM rate are priced.
TEST(ValidationTest, Fp8RecipesAreToldApart) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const PublishedRun* bf16 = FindRun(*runs, "tt-asynctp-8b-0");
  const PublishedRun* tensorwise = FindRun(*runs, "tt-asynctp-8b-2");
  const PublishedRun* rowwise = FindRun(*runs, "tt-asynctp-8b-4");
  ASSERT_TRUE(bf16 != nullptr && tensorwise != nullptr && rowwise != nullptr);
  EXPECT_EQ(tensorwise->training.fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_EQ(rowwise->training.fp8_recipe, Fp8Recipe::kRowwise);
  auto b = ValidateRun(*bf16);
  auto t = ValidateRun(*tensorwise);
  auto r = ValidateRun(*rowwise);
  ASSERT_TRUE(b.ok() && t.ok() && r.ok());
  EXPECT_GT(t->predicted, 1.05 * r->predicted);  // tokens/s: tensorwise clearly ahead
  EXPECT_GT(t->predicted, b->predicted);
  // Every NVIDIA fp8 row on PyTorch takes Transformer Engine's recipe; dgxc's MaxText and Paxml
  // rows (JAX) cast per call.
  for (const PublishedRun& run : *runs) {
    if (run.training.dtype == topo::Dtype::kFp8 && run.group != "torchtitan") {
      const bool jax = run.id.find("-maxtext-") != std::string::npos ||
                       run.id.find("-pax-") != std::string::npos;
      EXPECT_EQ(run.training.fp8_recipe, jax ? Fp8Recipe::kJax : Fp8Recipe::kDelayed) << run.id;
    }
  }
}

// torchtitan's December 2024 table ran Llama 3 8B with and without torch.compile: 5,762 against
// 6,667 tokens/s per GPU. Both rows used to get one estimate (7,860); eager element-wise kernels
// now cost their extra HBM traffic.
TEST(ValidationTest, EagerElementwiseKernelsCostTime) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const PublishedRun* eager = FindRun(*runs, "tt-dec24-t1-fsdp");
  const PublishedRun* compiled = FindRun(*runs, "tt-dec24-t1-fsdp-compile");
  ASSERT_TRUE(eager != nullptr && compiled != nullptr);
  EXPECT_FALSE(eager->training.fused_elementwise);
  EXPECT_TRUE(compiled->training.fused_elementwise);
  auto e = ValidateRun(*eager);
  auto c = ValidateRun(*compiled);
  ASSERT_TRUE(e.ok() && c.ok());
  // Measured 1.157x; the kernel count gives 5-20 % on this 8B model at HBM3's 3.35 TB/s, up to
  // 22 % on this part's 2.41 TB/s HBM2e (the kernels are memory-bound).
  EXPECT_GT(c->predicted, 1.05 * e->predicted);
  EXPECT_LT(c->predicted, 1.22 * e->predicted);
}

// dgxc's Paxml rows do not print their rematerialisation; Paxml's GPT configs inherit
// CHECKPOINT_POLICY = SAVE_NOTHING (full recomputation). Searched as "fastest that fits", the 5B
// rows ran without recomputation in the model and came out 21-27 % fast.
TEST(ValidationTest, PaxmlRowsRecomputeEveryLayer) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int pax = 0;
  for (const PublishedRun& r : *runs) {
    if (!r.id.starts_with("dgxc-pax-")) continue;
    ++pax;
    EXPECT_TRUE(r.recompute_published) << r.id;
    EXPECT_EQ(r.plan.recompute, Recompute::kFull) << r.id;
    if (r.id == "dgxc-pax-gpt3-5b-bf16-16g-step") {
      auto v = ValidateRun(r);
      ASSERT_TRUE(v.ok());
      EXPECT_LT(std::abs(v->error), 0.10) << v->predicted;
    }
  }
  EXPECT_EQ(pax, 26);
}

// torchtitan's 405B row "Float8 + async TP" says so in lower case ("async tp"); the converter
// matched only "AsyncTP" and timed that run with its TP communication exposed.
// torchtitan's 96 GB H100s are the HBM2e part (2.41 TB/s); the 80 GB H100 and the H200 keep
// their catalogue bandwidth.
TEST(ValidationTest, NinetySixGigabyteH100sRunHbm2e) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const PublishedRun* tt = FindRun(*runs, "tt-dec24-t1-fsdp");
  const PublishedRun* h200 = FindRun(*runs, "tt-trainy-h200-4n");
  const PublishedRun* ibm = FindRun(*runs, "ibm-fsdp-7B-h100-tps");
  ASSERT_TRUE(tt != nullptr && h200 != nullptr && ibm != nullptr);
  EXPECT_DOUBLE_EQ(tt->system.hbm_tbps, 2.41);
  EXPECT_DOUBLE_EQ(h200->system.hbm_tbps, 0.0);
  EXPECT_DOUBLE_EQ(ibm->system.hbm_tbps, 0.0);
}

TEST(ValidationTest, AsyncTpRowsOverlapTheirTpCommunication) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  for (const char* id : {"tt-405b-h100-128g-2-wps", "tt-405b-h100-128g-2-mfu",
                         "tt-dec24-t4-2d-asynctp", "tt-asynctp-8b-1"}) {
    const PublishedRun* r = FindRun(*runs, id);
    ASSERT_TRUE(r != nullptr) << id;
    EXPECT_TRUE(r->plan.tp_comm_overlap) << id;
    // PyTorch's async TP, not Transformer Engine's userbuffer overlap (tp_overlap = async).
    EXPECT_TRUE(r->training.async_tp) << id;
  }
  for (const char* id : {"tt-405b-h100-128g-1-wps", "tt-asynctp-8b-0", "tt-dec24-t4-2d"}) {
    const PublishedRun* r = FindRun(*runs, id);
    ASSERT_TRUE(r != nullptr) << id;
    EXPECT_FALSE(r->plan.tp_comm_overlap) << id;
  }
  // NeMo's overlap is Transformer Engine's.
  for (const PublishedRun& r : *runs) {
    if (r.group != "torchtitan") {
      EXPECT_FALSE(r.training.async_tp) << r.id;
    }
  }
  std::string head =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,gpus,gpu,"
      "network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,tp_overlap\n";
  std::string row =
      "x,src,llama3-8b,8,32,4096,32,8,14336,8192,128256,8,1,8,H100-SXM,RoCE 400G per GPU,8,1,1,"
      "1,1,none,yes,0,bf16,iteration_time_s,1,v,yes,";
  const PublishedRun async = ParseOne(head + row + "async\n");
  EXPECT_TRUE(async.plan.tp_comm_overlap && async.training.async_tp);
  const PublishedRun te = ParseOne(head + row + "yes\n");
  EXPECT_TRUE(te.plan.tp_comm_overlap && !te.training.async_tp);
  ExpectRefusedNaming(head + row + "sometimes\n", "tp_overlap");
}

// torchtitan's Interleaved 1F1B row does not print its stages per rank; torchtitan's default
// without split points is two (generate_split_points). Searched as the fastest, it ran with 8 in
// the model, which hid nearly all of its bubble: +43 % against +11 % for the 1F1B row beside it.
TEST(ValidationTest, TorchtitanInterleavedRunsTwoStagesPerRank) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const PublishedRun* r = FindRun(*runs, "tt-dec24-t5-interleaved1f1b");
  ASSERT_TRUE(r != nullptr);
  EXPECT_TRUE(r->vp_published);
  EXPECT_EQ(r->plan.vp, 2);
  auto v = ValidateRun(*r);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->plan.vp, 2);
}

// fms-fsdp's README does not print its network; it is the IBM team's table from the same
// 128-A100 cluster as the PyTorch blog (3,760 against 3,700 tokens/s for 7B), whose network the
// blog prints (400 Gb/s Ethernet per node). It was read as a DGX A100 with 8 x HDR 200, and its
// HSDP rows came out 25-32 % fast.
TEST(ValidationTest, FmsFsdpRunsOnTheBlogsCluster) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  for (const char* id : {"fmsfsdp-7b", "fmsfsdp-13b", "fmsfsdp-34b", "fmsfsdp-70b"}) {
    const PublishedRun* r = FindRun(*runs, id);
    ASSERT_TRUE(r != nullptr) << id;
    const PublishedRun* blog = FindRun(*runs, "ibm-fsdp-7B-a100-tps");
    ASSERT_TRUE(blog != nullptr);
    EXPECT_EQ(r->network, blog->network) << id;
    EXPECT_DOUBLE_EQ(r->system.nic_gbits_per_gpu, blog->system.nic_gbits_per_gpu) << id;
    EXPECT_TRUE(r->system.ethernet) << id;
    // fms-fsdp's bfSixteen policy reduces gradients in bf16.
    EXPECT_FALSE(r->training.fp32_grads) << id;
  }
}

TEST(ValidationTest, Fp8RecipeAndCompiledColumnsAreChecked) {
  std::string header =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,gpus,gpu,"
      "network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,fp8_recipe,compiled\n";
  std::string row =
      "x,src,llama3-8b,8,32,4096,32,8,14336,8192,128256,8,1,8,H100-SXM,RoCE 400G per GPU,1,1,8,"
      "1,1,none,no,3,";
  const PublishedRun ok = ParseOne(header + row + "fp8,iteration_time_s,1,v,yes,rowwise,no\n");
  EXPECT_EQ(ok.training.fp8_recipe, Fp8Recipe::kRowwise);
  EXPECT_FALSE(ok.training.fused_elementwise);
  ExpectRefusedNaming(header + row + "bf16,iteration_time_s,1,v,yes,rowwise,\n", "fp8_recipe");
  ExpectRefusedNaming(header + row + "fp8,iteration_time_s,1,v,yes,blockwise,\n", "fp8_recipe");
  ExpectRefusedNaming(header + row + "fp8,iteration_time_s,1,v,yes,,maybe\n", "compiled");
}

// NeMo 24.03's long-sequence runs start from the launcher's Llama 2 7B config, which leaves
// Transformer Engine's userbuffer TP overlap off (ub_tp_comm_overlap: False); their TP 2-8 rows
// must not be priced with the overlap NVIDIA's tuned recipes turn on.
TEST(ValidationTest, NemoLongSequenceRowsRunWithoutTpOverlap) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int tp_rows = 0;
  for (const PublishedRun& r : *runs) {
    if (r.group != "nemo-longseq" || r.plan.tp == 1) continue;
    EXPECT_FALSE(r.plan.tp_comm_overlap) << r.id;
    ++tp_rows;
  }
  EXPECT_EQ(tp_rows, 7);
}

// torchtitan's CP rows ran PyTorch's experimental context_parallel; the column says so, every
// other CP row keeps Transformer Engine's ring, and a value that is neither is refused by name.
TEST(ValidationTest, CpAttentionColumnIsReadAndChecked) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int torch_rows = 0;
  for (const PublishedRun& r : *runs) {
    bool torch = r.training.cp_attention == CpAttention::kTorch;
    EXPECT_EQ(torch, r.group == "torchtitan" && r.plan.cp > 1) << r.id;
    torch_rows += torch ? 1 : 0;
  }
  EXPECT_EQ(torch_rows, 6);
  const PublishedRun* llama = FindRun(*runs, "llama3-405b-128k");
  ASSERT_TRUE(llama != nullptr);
  EXPECT_EQ(llama->training.cp_attention, CpAttention::kAllGather);
  std::string header =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,gpus,gpu,"
      "network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,cp_attention\n";
  std::string row =
      "x,src,llama3-8b,8,32,4096,32,8,14336,8192,128256,8,1,8,H100-SXM,RoCE 400G per GPU,1,1,4,"
      "2,1,none,no,3,bf16,iteration_time_s,1,v,yes,";
  const PublishedRun ok = ParseOne(header + row + "torch\n");
  EXPECT_EQ(ok.training.cp_attention, CpAttention::kTorch);
  const PublishedRun ag = ParseOne(header + row + "allgather\n");
  EXPECT_EQ(ag.training.cp_attention, CpAttention::kAllGather);
  ExpectRefusedNaming(header + row + "ulysses\n", "cp_attention");
}

// torchtitan's TP rows ran PyTorch DTensor's tensor parallelism (tp_impl dtensor); every other
// row Megatron's layers; a value that is neither is refused by name.
TEST(ValidationTest, TpImplColumnIsReadAndChecked) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int dtensor_rows = 0;
  for (const PublishedRun& r : *runs) {
    EXPECT_EQ(r.training.dtensor_tp, r.group == "torchtitan" && r.plan.tp > 1) << r.id;
    dtensor_rows += r.training.dtensor_tp ? 1 : 0;
  }
  EXPECT_EQ(dtensor_rows, 26);
  std::string header =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,gpus,gpu,"
      "network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,tp_impl\n";
  std::string row =
      "x,src,llama3-8b,8,32,4096,32,8,14336,8192,128256,8,1,8,H100-SXM,RoCE 400G per GPU,8,1,1,"
      "1,1,none,yes,3,bf16,iteration_time_s,1,v,yes,";
  const PublishedRun ok = ParseOne(header + row + "dtensor\n");
  EXPECT_TRUE(ok.training.dtensor_tp);
  const PublishedRun megatron = ParseOne(header + row + "megatron\n");
  EXPECT_FALSE(megatron.training.dtensor_tp);
  ExpectRefusedNaming(header + row + "deepspeed\n", "tp_impl");
}

// The stack column names the software stack a row trained on (leave-one-stack-out CV); a blank
// or absent one takes the group, so a user's own file is one stack unless it says otherwise.
TEST(ValidationTest, StackColumnDefaultsToTheGroup) {
  std::string header =
      "id,source,group,stack,model,params_b,layers,hidden,heads,kv_heads,ffn,seq,vocab,gbs,mbs,"
      "gpus,gpu,network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,"
      "flash_attention\n";
  std::string row =
      ",llama3-8b,8,32,4096,32,8,14336,8192,128256,8,1,8,H100-SXM,RoCE 400G per GPU,1,1,8,1,1,"
      "none,no,3,bf16,iteration_time_s,1,yes\n";
  const PublishedRun named = ParseOne(header + "x,Src page,lab,torchtitan" + row);
  EXPECT_EQ(named.group, "lab");
  EXPECT_EQ(named.stack, "torchtitan");
  const PublishedRun blank = ParseOne(header + "x,Src page,lab," + row);
  EXPECT_EQ(blank.stack, "lab");
  // Every dev-table row names one of the stacks data/published/README.md lists, and a stack spans
  // sources (dgxc's NeMo rows train on Megatron-Core like NeMo's own tables; its MaxText and
  // Paxml rows on JAX).
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const std::set<std::string> stacks = {
      "megatron-lm-2022", "megatron-deepspeed", "llama3", "megatron-core", "jax",
      "torchtitan",       "pytorch-fsdp"};
  std::map<std::string, std::set<std::string>> groups_of;
  for (const PublishedRun& r : *runs) {
    EXPECT_TRUE(stacks.contains(r.stack)) << r.id << ": stack '" << r.stack << "'";
    groups_of[r.stack].insert(r.group);
  }
  EXPECT_EQ(groups_of["megatron-core"],
            (std::set<std::string>{"dgxc", "megatron-bridge", "megatron-lm", "nemo-2407",
                                   "nemo-longseq"}));
  EXPECT_EQ(groups_of["jax"], std::set<std::string>{"dgxc"});
}

// fms-fsdp's README runs its 7B and 13B models as HSDP (one 8-GPU node per shard group); the
// blog's table says "HSDP for 7b/13b" and the converter once missed the 7B rows (it tested
// " 7B" against the name's last three characters, "-7B"), sharding them over every GPU.
TEST(ValidationTest, IbmSevenAndThirteenBillionRowsRunHsdp) {
  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int rows = 0;
  for (const PublishedRun& r : *runs) {
    if (!r.id.starts_with("ibm-fsdp-")) continue;
    bool small = r.id.starts_with("ibm-fsdp-7B-") || r.id.starts_with("ibm-fsdp-13B-");
    EXPECT_EQ(r.plan.fsdp_group, small ? 8 : 0) << r.id;
    // The team's follow-up post starts from these tables' 57 % MFU and only then adds
    // torch.compile: they ran eager PyTorch.
    EXPECT_FALSE(r.training.fused_elementwise) << r.id;
    rows += small ? 1 : 0;
  }
  EXPECT_EQ(rows, 12);
}

// NeMo's GPT-3 configs keep GPT-3's dropout (hidden 0.1 in all: NeMo-Framework-Launcher
// conf/training/gpt3/*.yaml, dgxc nemo_megatron/gpt3_175b_hydra.yaml), except NeMo 24.07's MLPerf
// run (175b_mlperf.yaml: 0.0); the 2024 tables' other stacks train without it. The rows say so in
// their dropout column, and its element-wise kernels and masks cost those runs time.
TEST(ValidationTest, NemoGpt3RowsTrainWithDropout) {
  std::string header =
      "id,source,model,params_b,layers,hidden,heads,kv_heads,ffn,ffn_kind,seq,vocab,gbs,mbs,gpus,"
      "gpu,network,tp,pp,dp,cp,vp,recompute,seq_parallel,zero,dtype,metric,value,confidence,"
      "flash_attention,dropout\n";
  std::string row =
      "x,src,GPT3-5B,5,24,4096,32,32,16384,gelu,2048,51200,256,4,64,H100-SXM,IB 400G per GPU,1,1,"
      "64,1,1,none,no,1,fp8,tflops_per_gpu,765,secondary,yes,";
  const PublishedRun yes = ParseOne(header + row + "yes\n");
  EXPECT_TRUE(yes.model.dropout);
  const PublishedRun blank = ParseOne(header + row + "\n");
  EXPECT_FALSE(blank.model.dropout);  // the 2024 tables' default
  ExpectRefusedNaming(header + row + "0.1\n", "dropout");

  auto runs = LoadPublishedTables(DevTables(SourceDir() + "/data/published"));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int with_dropout = 0;
  for (const PublishedRun& r : *runs) {
    const bool nemo_gpt3 = r.model.name.starts_with("GPT3-") && !r.id.starts_with("nemo2407-03") &&
                           (r.group == "nemo-2407" || r.id.starts_with("dgxc-gpt3-175b-nemo-"));
    if (r.group == "nemo-2407" || r.group == "dgxc") {
      EXPECT_EQ(r.model.dropout, nemo_gpt3) << r.id;
    }
    // Megatron-LM's README table runs the stack's defaults: dropout 0.1.
    if (r.group == "megatron-lm") {
      EXPECT_TRUE(r.model.dropout) << r.id;
    }
    with_dropout += r.model.dropout && nemo_gpt3;
  }
  EXPECT_EQ(with_dropout, 26);  // nemo2407-00..02 and dgxc's ten NeMo GPT-3 175B runs, 2 metrics
  const PublishedRun* gpt3 = FindRun(*runs, "nemo2407-00-tflops");
  ASSERT_NE(gpt3, nullptr);
  PublishedRun off = *gpt3;
  off.model.dropout = false;
  auto with = ValidateRun(*gpt3);
  auto without = ValidateRun(off);
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_LT(with->predicted, 0.98 * without->predicted);  // TFLOP/s: dropout's kernels cost time
}

}  // namespace
}  // namespace baton::perf
