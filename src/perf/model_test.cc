#include "perf/model.h"

#include <gtest/gtest.h>

namespace baton::perf {
namespace {

TEST(ModelTest, CatalogueIsValidAndSizesMatchTheirNames) {
  struct Case {
    const char* name;
    double billions;
  };
  for (Case c : {Case{"gpt3-175b", 175}, Case{"megatron-1t", 1008}, Case{"mt-nlg-530b", 530},
                 Case{"bloom-176b", 176}, Case{"llama2-70b", 69}, Case{"llama3-8b", 8.0},
                 Case{"llama3-70b", 70.6}, Case{"llama3-405b", 405.8}, Case{"mixtral-8x7b", 46.7},
                 Case{"gpt-1.7b", 1.7}, Case{"megatron-22b", 22}}) {
    auto m = FindModel(c.name);
    ASSERT_TRUE(m.ok()) << c.name << ": " << m.status().ToString();
    EXPECT_TRUE(ValidateModel(*m).ok()) << c.name;
    EXPECT_NEAR(m->TotalParams() / 1e9, c.billions, c.billions * 0.04) << c.name;
  }
  for (const ModelSpec& m : BuiltinModels()) EXPECT_TRUE(ValidateModel(m).ok()) << m.name;
}

TEST(ModelTest, MixtralActiveParamsAreTopTwo) {
  auto m = FindModel("Mixtral 8x7B");
  ASSERT_TRUE(m.ok());
  EXPECT_NEAR(m->ActiveParams() / 1e9, 12.9, 0.5);
}

TEST(ModelTest, NamesAreMatchedLoosely) {
  EXPECT_TRUE(FindModel("Llama 3 405B").ok());
  EXPECT_TRUE(FindModel("GPT-3 175B").ok());
  EXPECT_TRUE(FindModel("MT-NLG 530B").ok());
  EXPECT_TRUE(FindModel("gpt3").ok());
}

TEST(ModelTest, UnknownModelNamesTheField) {
  auto m = FindModel("gpt-5-ultra");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("model:"), std::string::npos);
  EXPECT_NE(m.status().message().find("gpt-5-ultra"), std::string::npos);
}

TEST(ModelTest, ParsesYamlAndJson) {
  auto y = ParseModel(
      "name: tiny\nlayers: 4\nhidden: 256\nheads: 4\nkv_heads: 2\nffn: 688\nffn_kind: swiglu\n"
      "vocab: 1000\nseq: 512\nmoe: {experts: 4, top_k: 1, expert_ffn: 512}\n",
      "tiny.yaml");
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(y->kv_heads, 2);
  EXPECT_EQ(y->ffn_kind, FfnKind::kSwiGlu);
  EXPECT_EQ(y->moe.experts, 4);
  auto j = ParseModel(R"({"name": "j", "layers": 2, "hidden": 128, "heads": 2, "vocab": 100,
                         "seq": 64})",
                      "j.json");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ(j->ffn, 512);
  EXPECT_EQ(j->kv_heads, 2);
  auto b = ParseModel("base: llama3-8b\nseq: 4096\n", "b.yaml");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->seq, 4096);
  EXPECT_EQ(b->layers, 32);
}

TEST(ModelTest, BadFieldsAreNamed) {
  struct Case {
    const char* text;
    const char* field;
  };
  for (Case c :
       {Case{"name: x\nlayers: 0\nhidden: 8\nheads: 2\nvocab: 8\nseq: 8\n", "model.layers"},
        Case{"name: x\nlayers: 2\nhidden: 10\nheads: 4\nvocab: 8\nseq: 8\n", "model.heads"},
        Case{"name: x\nlayers: 2\nhidden: 8\nheads: 4\nkv_heads: 3\nvocab: 8\nseq: 8\n",
             "model.kv_heads"},
        Case{"name: x\nlayers: two\nhidden: 8\nheads: 2\nvocab: 8\nseq: 8\n", "model.layers"},
        Case{"name: x\nlayers: 2\nhidden: 8\nheads: 2\nvocab: 8\nseq: 8\nffn_kind: relu\n",
             "model.ffn_kind"},
        Case{"[1, 2]", "expected a mapping"}}) {
    auto m = ParseModel(c.text, "m.yaml");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(m.status().message().find(c.field), std::string::npos) << m.status().ToString();
    EXPECT_NE(m.status().message().find("m.yaml"), std::string::npos);
  }
}

}  // namespace
}  // namespace baton::perf

namespace baton::perf {
namespace {

// Found by fuzz_plan_request: a negative hidden size overflowed the default FFN (4 x hidden)
// before validation; and a typo must be an error, not a silently ignored key.
TEST(ModelTest, JunkAndTyposAreErrorsNamingTheField) {
  auto neg = ParseModel(R"({"name": "x", "layers": 1, "hidden": -564666000, "heads": 1})", "m");
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("model.hidden"), std::string::npos)
      << neg.status().message();
  auto typo = ParseModel("base: llama3-8b\nlayrs: 2\n", "m.yaml");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("model.layrs: unknown field"), std::string::npos)
      << typo.status().message();
  auto moe = ParseModel("base: mixtral-8x7b\nmoe: {experts: 8, topk: 2}\n", "m.yaml");
  ASSERT_FALSE(moe.ok());
  EXPECT_NE(moe.status().message().find("model.moe.topk"), std::string::npos)
      << moe.status().message();
}

}  // namespace
}  // namespace baton::perf
