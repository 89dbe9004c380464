#include "perf/request.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "perf/report.h"
#include "perf/stack.h"

namespace baton::perf {
namespace {

Result<PlanRequest> Parse(std::string_view body, PlanQuestion q, std::string* field) {
  return ParsePlanRequest(body, q, field);
}

TEST(PlanRequestTest, EstimateFillsDataParallelFromGpus) {
  std::string field;
  auto r = Parse(R"({"model": "llama3-70b", "gpus": 1024,
                     "training": {"global_batch": 512, "dtype": "bf16"},
                     "plan": {"tp": 8, "pp": 4, "vp": 5, "recompute": "selective",
                              "sequence_parallel": true, "zero": 1}})",
                 PlanQuestion::kEstimate, &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model.layers, 80);
  EXPECT_EQ(r->plan.dp, 32);
  EXPECT_EQ(r->plan.gpus(), 1024);
  EXPECT_EQ(r->plan.recompute, Recompute::kSelective);
  EXPECT_TRUE(r->plan.sequence_parallel);
  EXPECT_EQ(r->training.global_batch, 512);
}

TEST(PlanRequestTest, HybridShardingIsAPlanField) {
  std::string field;
  auto r = Parse(R"({"model": "llama3-8b", "gpus": 64, "plan": {"zero": 3, "fsdp_group": 8}})",
                 PlanQuestion::kEstimate, &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->plan.fsdp_group, 8);
  EXPECT_EQ(PlanToJson(r->plan)["fsdp_group"], 8);
}

TEST(PlanRequestTest, InlineModelAndTokenBatch) {
  std::string field;
  auto r = Parse(R"({"model": {"name": "tiny", "layers": 4, "hidden": 512, "heads": 8,
                               "vocab": 32000, "seq": 1024},
                     "gpus": 8, "training": {"global_batch_tokens": 65536}})",
                 PlanQuestion::kEstimate, &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->model.name, "tiny");
  EXPECT_EQ(r->training.global_batch, 64);
  EXPECT_EQ(r->plan.dp, 8);
}

TEST(PlanRequestTest, SearchRestrictsTheDefaultSpace) {
  std::string field;
  auto r = Parse(R"({"model": "gpt3-175b", "gpus": 1024,
                     "search": {"tp": [4, 8], "recompute": ["full"], "top": 3,
                                "objective": "mfu"}})",
                 PlanQuestion::kSearch, &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->space.tp, (std::vector<int>{4, 8}));
  EXPECT_EQ(r->space.recompute, (std::vector<Recompute>{Recompute::kFull}));
  EXPECT_EQ(r->space.gpus, (std::vector<int>{1024}));
  EXPECT_EQ(r->top_k, 3);
  EXPECT_EQ(r->objective, Objective::kMfu);
  EXPECT_FALSE(r->space.pp.empty());
}

TEST(PlanRequestTest, TheStackIsPartOfTraining) {
  std::string field;
  auto r = Parse(R"({"model": "llama3-8b", "gpus": 64,
                     "training": {"dtype": "fp8", "grads": "bf16", "fp8_recipe": "rowwise",
                                  "compiled": false, "cp_attention": "torch",
                                  "async_tp": "yes"}})",
                 PlanQuestion::kSearch, &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->training.fp32_grads);
  EXPECT_EQ(r->training.fp8_recipe, Fp8Recipe::kRowwise);
  EXPECT_FALSE(r->training.fused_elementwise);
  EXPECT_EQ(r->training.cp_attention, CpAttention::kTorch);
  EXPECT_TRUE(r->training.async_tp);
  // Every stack setting is a training field of the API (and of a job's flat plan).
  for (const StackSetting& s : StackSettings()) {
    std::string word(s.values.substr(0, s.values.find('|')));
    std::string body = fmt::format(
        R"({{"model": "llama3-8b", "gpus": 8, "training": {{"dtype": "fp8", "{}": "{}"}}}})",
        s.name, word);
    EXPECT_TRUE(Parse(body, PlanQuestion::kEstimate, &field).ok()) << body;
    std::string flat = fmt::format(
        R"({{"model": "llama3-8b", "dtype": "fp8", "tp": 8, "{}": "{}"}})", s.name, word);
    EXPECT_TRUE(ParseJobPlan(flat, 8, &field).ok()) << flat;
  }
}

struct BadCase {
  const char* body;
  PlanQuestion question;
  const char* field;
  const char* message_part;
};

TEST(PlanRequestTest, BadRequestsNameTheField) {
  const BadCase cases[] = {
      {"{", PlanQuestion::kEstimate, "", "malformed JSON"},
      {"[1]", PlanQuestion::kEstimate, "", "must be a JSON object"},
      {R"({"gpus": 8})", PlanQuestion::kEstimate, "model", "required"},
      {R"({"model": "no-such-model", "gpus": 8})", PlanQuestion::kEstimate, "model", "no-such"},
      {R"({"model": "/etc/passwd", "gpus": 8})", PlanQuestion::kEstimate, "model", "model"},
      {R"({"model": "llama3-8b"})", PlanQuestion::kEstimate, "gpus", "required"},
      {R"({"model": "llama3-8b", "gpus": 0})", PlanQuestion::kEstimate, "gpus", "not in"},
      {R"({"model": "llama3-8b", "gpus": 8.5})", PlanQuestion::kEstimate, "gpus", "integer"},
      {R"({"model": "llama3-8b", "gpus": 99999999999999999999})", PlanQuestion::kEstimate, "gpus",
       "integer"},
      {R"({"model": "llama3-8b", "gpus": 18446744073709551615})", PlanQuestion::kEstimate, "gpus",
       "not in"},
      {R"({"model": "llama3-8b", "gpus": 8, "colour": 1})", PlanQuestion::kEstimate, "colour",
       "unknown field"},
      {R"({"model": "llama3-8b", "gpus": 8, "search": {}})", PlanQuestion::kEstimate, "search",
       "unknown field"},
      {R"({"model": "llama3-8b", "gpus": 8, "plan": {}})", PlanQuestion::kSearch, "plan",
       "unknown field"},
      {R"({"model": "llama3-8b", "gpus": 8, "plan": {"tp": 3}})", PlanQuestion::kEstimate, "gpus",
       "cannot be split"},
      {R"({"model": "llama3-8b", "gpus": 8, "plan": {"tp": "8"}})", PlanQuestion::kEstimate,
       "plan.tp", "integer"},
      {R"({"model": "llama3-8b", "gpus": 8, "plan": {"zero": 4}})", PlanQuestion::kEstimate,
       "plan.zero", "0..3"},
      {R"({"model": "llama3-8b", "gpus": 16, "plan": {"zero": 1, "fsdp_group": 8}})",
       PlanQuestion::kEstimate, "plan", "fsdp_group: 8 needs zero 3"},
      {R"({"model": "llama3-8b", "gpus": 16, "plan": {"zero": 3, "fsdp_group": 3}})",
       PlanQuestion::kEstimate, "plan", "fsdp_group: 3 does not divide dp x cp = 16"},
      {R"({"model": "llama3-8b", "gpus": 16, "plan": {"zero": 3, "fsdp_group": -1}})",
       PlanQuestion::kEstimate, "plan.fsdp_group", "not in"},
      {R"({"model": "llama3-8b", "gpus": 8, "plan": {"recompute": "most"}})",
       PlanQuestion::kEstimate, "plan.recompute", "most"},
      {R"({"model": "llama3-8b", "gpus": 8, "plan": {"dp": 2}})", PlanQuestion::kEstimate, "plan",
       ""},
      {R"({"model": "llama3-8b", "gpus": 8, "training": {"dtype": "int3"}})",
       PlanQuestion::kEstimate, "training.dtype", "int3"},
      {R"({"model": "llama3-8b", "gpus": 8, "training": {"global_batch": -1}})",
       PlanQuestion::kEstimate, "training.global_batch", "not in"},
      {R"({"model": "llama3-8b", "gpus": 8, "training": {"tokens": -5}})", PlanQuestion::kEstimate,
       "training.tokens", ">= 0"},
      {R"({"model": "llama3-8b", "gpus": 8, "training": {"grads": "fp16"}})",
       PlanQuestion::kEstimate, "training.grads", "is not fp32, bf16 or bf16-adam"},
      {R"({"model": "llama3-8b", "gpus": 8, "training": {"fp8_recipe": "rowwise"}})",
       PlanQuestion::kEstimate, "training.fp8_recipe", "given for a bf16 run"},
      {R"({"model": "llama3-8b", "gpus": 8, "training": {"cp_attention": 1}})",
       PlanQuestion::kEstimate, "training.cp_attention", "must be a string"},
      {R"({"model": "llama3-8b", "gpus": 8, "training": {"grads": true}})", PlanQuestion::kEstimate,
       "training.grads", "must be a string"},
      {R"({"model": "llama3-8b", "gpus": 8, "search": {"pp": [1, "x"]}})", PlanQuestion::kSearch,
       "search.pp[1]", "integer"},
      {R"({"model": "llama3-8b", "gpus": 8, "search": {"tp": []}})", PlanQuestion::kSearch,
       "search.tp", "non-empty"},
      {R"({"model": "llama3-8b", "gpus": 8, "search": {"top": 1000}})", PlanQuestion::kSearch,
       "search.top", "1..100"},
      {R"({"model": "llama3-8b", "gpus": 8, "search": {"objective": "cost"}})",
       PlanQuestion::kSearch, "search.objective", "cost"},
  };
  for (const BadCase& c : cases) {
    std::string field = "unset";
    auto r = Parse(c.body, c.question, &field);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    if (std::string_view(c.field) == "plan") {
      EXPECT_EQ(field.rfind("plan", 0), 0u) << c.body << " -> " << field;
    } else {
      EXPECT_EQ(field, c.field) << c.body << " -> " << r.status().message();
    }
    EXPECT_NE(r.status().message().find(c.message_part), std::string::npos)
        << c.body << " -> " << r.status().message();
  }
}

TEST(JobPlanTest, FlatObjectNamesItsFields) {
  std::string field;
  auto r =
      ParseJobPlan(R"({"model": "llama3-70b", "tp": 8, "pp": 4, "global_batch": 512})", 64, &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->plan.has_value());
  EXPECT_EQ(r->plan->dp, 2);
  EXPECT_EQ(r->training.global_batch, 512);

  r = ParseJobPlan(R"({"model": "llama3-8b"})", 16, &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->plan.has_value());
  EXPECT_EQ(r->training.global_batch, (4 << 20) / r->model.seq);

  struct Bad {
    const char* object;
    int gpus;
    const char* field;
  };
  for (const Bad& b :
       {Bad{R"({"model": "nope", "tp": 2})", 8, "plan.model"},
        Bad{R"({"model": "nope"})", 8, "plan.model"},
        Bad{R"({"model": {"layers": 2}})", 8, "plan.model"},
        Bad{R"({"model": "llama3-8b", "tp": 8, "pp": 2})", 12, "plan.dp"},
        Bad{R"({"model": "llama3-8b", "tp": 8, "dp": 2})", 8, "plan.dp"},
        Bad{R"({"model": "llama3-8b", "mbs": 0})", 8, "plan.mbs"},
        Bad{R"({"model": "llama3-8b", "tp": 1, "global_batch": 0})", 8, "plan.global_batch"},
        Bad{R"({"model": "llama3-8b", "dtype": "bf16"})", 8, "plan.dtype"},
        Bad{R"({"model": "llama3-8b", "tpp": 8})", 8, "plan.tpp"}, Bad{R"([1])", 8, "plan"}}) {
    field.clear();
    auto bad = ParseJobPlan(b.object, b.gpus, &field);
    ASSERT_FALSE(bad.ok()) << b.object;
    EXPECT_EQ(field, b.field) << b.object << ": " << bad.status().message();
    EXPECT_EQ(bad.status().message().rfind(std::string(b.field) + ": ", 0), 0u)
        << bad.status().message();
  }
}

TEST(JobPlanTest, ResolvesOnTheSystemOrSaysWhyNot) {
  Result<SystemSpec> system = SystemFromShort({.gpus = 64});
  ASSERT_TRUE(system.ok()) << system.status().ToString();
  std::string field;
  auto given = ParseJobPlan(R"({"model": "llama3-8b", "tp": 8, "zero": 1})", 64, &field);
  ASSERT_TRUE(given.ok());
  Result<ParallelPlan> plan = ResolveJobPlan(*given, *system, &field);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(*plan, *given->plan);

  auto oom = ParseJobPlan(R"({"model": "llama3-70b", "zero": 0})", 64, &field);
  ASSERT_TRUE(oom.ok());
  plan = ResolveJobPlan(*oom, *system, &field);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(field, "plan");
  EXPECT_NE(plan.status().message().find("out-of-memory"), std::string::npos)
      << plan.status().message();

  auto best = ParseJobPlan(R"({"model": "llama3-8b"})", 64, &field);
  ASSERT_TRUE(best.ok());
  plan = ResolveJobPlan(*best, *system, &field);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->gpus(), 64);

  system->gpus = 1;
  auto none = ParseJobPlan(R"({"model": "llama3-405b"})", 1, &field);
  ASSERT_TRUE(none.ok());
  plan = ResolveJobPlan(*none, *system, &field);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("no feasible plan"), std::string::npos)
      << plan.status().message();
}

}  // namespace
}  // namespace baton::perf
