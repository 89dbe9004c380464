#include "perf/stack.h"

#include <gtest/gtest.h>

#include <string>

namespace baton::perf {
namespace {

TEST(StackTest, EverySettingRoundTripsEveryWord) {
  for (const StackSetting& s : StackSettings()) {
    std::string words(s.values);
    std::size_t start = 0;
    while (start <= words.size()) {
      std::size_t bar = words.find('|', start);
      std::string word = words.substr(start, bar == std::string::npos ? bar : bar - start);
      TrainingSpec t;
      t.dtype = topo::Dtype::kFp8;
      ASSERT_TRUE(ApplyStackSetting(s.name, word, s.name, &t).ok()) << s.name << "=" << word;
      EXPECT_EQ(StackSettingValue(s.name, t), word) << s.name;
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
  }
}

TEST(StackTest, TheFirstWordIsTheDefault) {
  TrainingSpec defaults;
  for (const StackSetting& s : StackSettings()) {
    std::string_view first = s.values.substr(0, s.values.find('|'));
    EXPECT_EQ(StackSettingValue(s.name, defaults), first) << s.name;
  }
}

TEST(StackTest, SettingsReachTheTrainingSpec) {
  TrainingSpec t;
  ASSERT_TRUE(ApplyStackSetting("grads", "BF16-Adam", "--grads", &t).ok());
  EXPECT_FALSE(t.fp32_grads);
  EXPECT_TRUE(t.bf16_optimizer_state);
  ASSERT_TRUE(ApplyStackSetting("cp_attention", "torch", "x", &t).ok());
  EXPECT_EQ(t.cp_attention, CpAttention::kTorch);
  ASSERT_TRUE(ApplyStackSetting("compiled", "no", "x", &t).ok());
  EXPECT_FALSE(t.fused_elementwise);
  ASSERT_TRUE(ApplyStackSetting("async_tp", "yes", "x", &t).ok());
  EXPECT_TRUE(t.async_tp);
  ASSERT_TRUE(ApplyStackSetting("attn_kernel", "cuDNN", "x", &t).ok());
  EXPECT_EQ(t.attention_kernel, AttentionKernel::kCudnn);
  ASSERT_TRUE(ApplyStackSetting("loss", "fused", "x", &t).ok());
  EXPECT_TRUE(t.fused_loss);
  t.dtype = topo::Dtype::kFp8;
  ASSERT_TRUE(ApplyStackSetting("fp8_recipe", "rowwise", "x", &t).ok());
  EXPECT_EQ(t.fp8_recipe, Fp8Recipe::kRowwise);
  ASSERT_TRUE(ApplyStackSetting("fp8_recipe", "jax", "x", &t).ok());
  EXPECT_EQ(t.fp8_recipe, Fp8Recipe::kJax);
  EXPECT_EQ(StackSettingValue("fp8_recipe", t), "jax");
}

TEST(StackTest, TheSummaryNamesOnlyWhatDiffersFromTheDefaults) {
  TrainingSpec t;
  EXPECT_EQ(StackSummary(t), "");
  ASSERT_TRUE(ApplyStackSetting("cp_attention", "torch", "x", &t).ok());
  ASSERT_TRUE(ApplyStackSetting("grads", "bf16", "x", &t).ok());
  ASSERT_TRUE(ApplyStackSetting("tp_impl", "megatron", "x", &t).ok());  // the default: not named
  EXPECT_EQ(StackSummary(t), "grads bf16, cp_attention torch");
}

TEST(StackTest, BadWordsNameTheFieldAndChangeNothing) {
  TrainingSpec t;
  Status st = ApplyStackSetting("grads", "fp16", "training.grads", &t);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "training.grads: 'fp16' is not fp32, bf16 or bf16-adam");
  EXPECT_TRUE(t.fp32_grads);
  st = ApplyStackSetting("fp8_recipe", "rowwise", "--fp8-recipe", &t);  // a bf16 run
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "--fp8-recipe: 'rowwise' given for a bf16 run");
  EXPECT_EQ(t.fp8_recipe, Fp8Recipe::kDelayed);
  st = ApplyStackSetting("flash", "yes", "training.flash", &t);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(), "training.flash: not a stack setting");
}

}  // namespace
}  // namespace baton::perf
