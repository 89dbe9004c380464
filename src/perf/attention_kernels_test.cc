#include "perf/attention_kernels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "perf/estimator.h"
#include "perf/model.h"

namespace baton::perf {
namespace {

std::string SourceDir() {
  const char* dir = std::getenv("BATON_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

std::string Table() { return SourceDir() + "/data/published/attention-kernels.csv"; }

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

const AttentionKernelFit* FitOf(const std::vector<AttentionKernelFit>& fits,
                                std::string_view family, AttentionKernel k) {
  for (const AttentionKernelFit& f : fits) {
    if (f.family == family && f.kernel == k) return &f;
  }
  return nullptr;
}

TEST(AttentionKernelsTest, TheChartsTableNamesEveryKernel) {
  auto points = LoadAttentionKernelTable(Table());
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  EXPECT_EQ(points->size(), 328u);
  std::set<AttentionKernel> kernels;
  for (const AttentionKernelPoint& p : *points) kernels.insert(p.kernel);
  EXPECT_EQ(kernels.size(), static_cast<std::size_t>(kAttentionKernelCount));
  for (int k = 0; k < kAttentionKernelCount; ++k) {
    EXPECT_FALSE(AttentionKernelName(static_cast<AttentionKernel>(k)).empty());
  }
}

TEST(AttentionKernelsTest, ABadRowIsRefusedNamingItsLineAndColumn) {
  const std::string header = "source,gpu,kernel,head_dim,causal,seq,batch,direction,tflops\n";
  struct Case {
    std::string row, want;
  };
  for (const Case& c : std::vector<Case>{
           {"\"a, b\",A100 80GB SXM4,Mystery kernel,64,false,512,32,fwd+bwd,36", ":2: kernel"},
           {"x,A100 80GB SXM4,FlashAttention-2,64,maybe,512,32,fwd+bwd,36", ":2: causal"},
           {"x,A100 80GB SXM4,FlashAttention-2,64,false,512,32,bwd,36", ":2: direction"},
           {"x,A100 80GB SXM4,FlashAttention-2,64,false,512,32,fwd,-1", ":2: tflops"},
           {"x,Z9000,FlashAttention-2,64,false,512,32,fwd,1", ":2: gpu"},
           {"x,A100 80GB SXM4,FlashAttention-2,64,false,512,32,fwd", "expected 9 columns"},
           {"\"unterminated,A100,FlashAttention-2,64,false,512,32,fwd,1", "quote"},
       }) {
    auto r = LoadAttentionKernelTable(WriteTemp("attn-bad.csv", header + c.row + "\n"));
    ASSERT_FALSE(r.ok()) << c.row;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().ToString();
  }
}

TEST(AttentionKernelsTest, EachKernelIsFittedAsARatioToFlashAttention2) {
  auto points = LoadAttentionKernelTable(Table());
  ASSERT_TRUE(points.ok()) << points.status().ToString();
  SystemProfile profile = BuiltinProfile();
  auto fits = FitAttentionKernels(*points, &profile);
  ASSERT_TRUE(fits.ok()) << fits.status().ToString();
  for (const AttentionKernelFit& f : *fits) {
    EXPECT_LT(f.rms_log_error, 0.15) << f.family << " " << AttentionKernelName(f.kernel);
  }
  // FlashAttention-3 on Hopper: 1.5-2.3x FlashAttention-2 in its release's forward charts.
  const AttentionKernelFit* fa3 = FitOf(*fits, "hopper", AttentionKernel::kFlash3);
  ASSERT_NE(fa3, nullptr);
  EXPECT_TRUE(fa3->forward_only);
  EXPECT_GT(fa3->rate, 1.5);
  EXPECT_GT(fa3->head_dim_exponent, 0);  // larger heads gain more
  // No FlashAttention-3 chart on Ampere (it runs on Hopper only): left at 0, refused.
  EXPECT_EQ(FitOf(*fits, "ampere", AttentionKernel::kFlash3), nullptr);
  EXPECT_EQ(profile.Find("ampere")->calib.flash3_attention_rate, 0);
  // PyTorch's math attention computes the masked half too: a causal mask halves its counted rate.
  const AttentionKernelFit* math = FitOf(*fits, "ampere", AttentionKernel::kMath);
  ASSERT_NE(math, nullptr);
  EXPECT_LT(math->causal_factor, 0.6);
  EXPECT_LT(math->rate, 0.6);
  // cuDNN's rate is fitted on runs: the charts' fit is reported, not written.
  const AttentionKernelFit* cudnn = FitOf(*fits, "hopper", AttentionKernel::kCudnn);
  ASSERT_NE(cudnn, nullptr);
  EXPECT_FALSE(cudnn->written);
  EXPECT_EQ(profile.Find("hopper")->calib.cudnn_attention_speedup,
            BuiltinProfile().Find("hopper")->calib.cudnn_attention_speedup);
  // The profile written with the fit reads back.
  EXPECT_TRUE(ParseProfile(ProfileToYaml(profile), "fitted").ok());
}

SystemSpec System(const char* gpu) {
  ShortSystem s;
  s.gpu = gpu;
  s.gpus = 64;
  s.nic_gbits_per_gpu = 400;
  auto sys = SystemFromShort(s);
  EXPECT_TRUE(sys.ok()) << sys.status().ToString();
  return sys.ok() ? *sys : SystemSpec{};
}

TEST(AttentionKernelsTest, ThePlannerPricesEachKernelAndRefusesOneNeverMeasured) {
  auto model = FindModel("llama3-8b");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ModelSpec m = *model;
  m.seq = 16384;  // attention-heavy, where the kernel matters
  const ParallelPlan plan{.tp = 4, .pp = 1, .dp = 16, .mbs = 1, .recompute = Recompute::kFull};
  TrainingSpec t;
  t.global_batch = 64;
  t.dtype = topo::Dtype::kBf16;
  auto step = [&](AttentionKernel k, const char* gpu) {
    t.attention_kernel = k;
    return Estimate(m, plan, t, System(gpu));
  };
  auto fa2 = step(AttentionKernel::kFlash, "H100-SXM");
  auto fa3 = step(AttentionKernel::kFlash3, "H100-SXM");
  auto fa1 = step(AttentionKernel::kFlash1, "H100-SXM");
  auto math = step(AttentionKernel::kMath, "H100-SXM");
  ASSERT_TRUE(fa2.ok() && fa3.ok() && fa1.ok() && math.ok());
  EXPECT_LT(fa3->step.value(), fa2->step.value());
  EXPECT_GT(fa1->step.value(), fa2->step.value());
  EXPECT_GT(math->step.value(), fa1->step.value());
  // Without recomputation the math kernel keeps the scores for the backward (s x s per head).
  ParallelPlan kept = plan;
  kept.recompute = Recompute::kNone;
  m.seq = 4096;
  t.attention_kernel = AttentionKernel::kMath;
  auto math_kept = Estimate(m, kept, t, System("H100-SXM"));
  t.attention_kernel = AttentionKernel::kFlash;
  auto fa2_kept = Estimate(m, kept, t, System("H100-SXM"));
  ASSERT_TRUE(math_kept.ok() && fa2_kept.ok());
  EXPECT_GT(math_kept->memory.activations.value(), 1.5 * fa2_kept->memory.activations.value());
  m.seq = 16384;

  auto refused = step(AttentionKernel::kFlash3, "A100-80GB");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("training.attn_kernel"), std::string::npos)
      << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("Hopper only"), std::string::npos);
  EXPECT_TRUE(step(AttentionKernel::kFlash1, "A100-80GB").ok());
}

}  // namespace
}  // namespace baton::perf
