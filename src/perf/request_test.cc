#include "perf/request.h"

#include <gtest/gtest.h>

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

struct BadCase {
  const char* body;
  PlanQuestion question;
  const char* field;
  const char* message_part;
};

TEST(PlanRequestTest, BadRequestsNameTheField) {
  const BadCase cases[] = {
      {"{", PlanQuestion::kEstimate, "", "not valid JSON"},
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

}  // namespace
}  // namespace baton::perf
