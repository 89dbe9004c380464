#include "perf/search.h"

#include <gtest/gtest.h>

#include "perf/report.h"

namespace baton::perf {
namespace {

struct Fixture {
  ModelSpec model;
  TrainingSpec training;
  SystemSpec system;
};

Fixture Small() {
  Fixture f;
  f.model = *FindModel("gpt-7.5b");
  f.training.global_batch = 64;
  f.training.dtype = topo::Dtype::kBf16;
  ShortSystem s;
  s.gpu = "A100-80GB";
  s.gpus = 32;
  s.nic_gbits_per_gpu = 200;
  f.system = *SystemFromShort(s);
  return f;
}

SearchSpace SmallSpace(const ModelSpec& m) {
  SearchSpace s = DefaultSearchSpace(m, {16, 32});
  s.tp = {1, 2, 3, 4, 8};
  s.pp = {1, 2, 3, 4, 5};
  s.cp = {1, 2};
  s.mbs = {1, 2, 3, 4};
  s.vp = {1, 2, 3};
  return s;
}

TEST(SearchTest, IsExhaustiveAndMatchesPlanByPlanEvaluation) {
  Fixture f = Small();
  SearchSpace space = SmallSpace(f.model);
  SearchOptions opts;
  opts.top_k = 5;
  auto r = Search(f.model, f.training, f.system, space, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->space, space.size());
  EXPECT_EQ(r->feasible + r->rejected_total(), space.size());

  // Brute force: evaluate every combination one by one.
  EvalContext ctx(f.model, f.training, f.system);
  std::uint64_t feasible = 0, oom = 0, total = 0;
  double best = 1e30;
  for (int n : space.gpus)
    for (int tp : space.tp)
      for (int pp : space.pp)
        for (int cp : space.cp)
          for (int ep : space.ep)
            for (int mbs : space.mbs)
              for (int vp : space.vp)
                for (bool sp : space.sequence_parallel)
                  for (Recompute rc : space.recompute)
                    for (int zero : space.zero)
                      for (bool ov : space.overlap_dp_comm) {
                        ++total;
                        if (n % (tp * pp * cp) != 0) continue;
                        ParallelPlan p{.tp = tp,
                                       .pp = pp,
                                       .dp = n / (tp * pp * cp),
                                       .cp = cp,
                                       .ep = ep,
                                       .mbs = mbs,
                                       .vp = vp,
                                       .recompute = rc,
                                       .sequence_parallel = sp,
                                       .zero = zero,
                                       .overlap_dp_comm = ov,
                                       .uneven_pp = f.model.layers % pp != 0};
                        StepEstimate e;
                        Evaluate(ctx, p, n, nullptr, &e);
                        if (e.feasible()) {
                          ++feasible;
                          best = std::min(best, e.step.value());
                        }
                        if (e.rejection == Rejection::kOutOfMemory) ++oom;
                      }
  EXPECT_EQ(total, space.size());
  EXPECT_EQ(r->feasible, feasible);
  EXPECT_EQ(r->rejected[static_cast<int>(Rejection::kOutOfMemory)], oom);
  ASSERT_FALSE(r->top.empty());
  EXPECT_DOUBLE_EQ(r->top[0].estimate.step.value(), best);
  for (std::size_t i = 1; i < r->top.size(); ++i) {
    EXPECT_LE(r->top[i - 1].estimate.step, r->top[i].estimate.step);
  }
}

TEST(SearchTest, ThreadsGiveTheSameAnswer) {
  Fixture f = Small();
  SearchSpace space = SmallSpace(f.model);
  SearchOptions one;
  one.top_k = 8;
  SearchOptions four = one;
  four.threads = 4;
  auto a = Search(f.model, f.training, f.system, space, one);
  auto b = Search(f.model, f.training, f.system, space, four);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->feasible, b->feasible);
  EXPECT_EQ(a->rejected, b->rejected);
  ASSERT_EQ(a->top.size(), b->top.size());
  for (std::size_t i = 0; i < a->top.size(); ++i) {
    EXPECT_EQ(a->top[i].plan, b->top[i].plan) << i;
    EXPECT_EQ(a->top[i].estimate.step, b->top[i].estimate.step) << i;
  }
}

TEST(SearchTest, ProgressReachesTheTotal) {
  Fixture f = Small();
  SearchSpace space = SmallSpace(f.model);
  SearchOptions opts;
  std::uint64_t last = 0, total = 0;
  opts.progress = [&](std::uint64_t d, std::uint64_t t) {
    EXPECT_GE(d, last);
    last = d;
    total = t;
  };
  ASSERT_TRUE(Search(f.model, f.training, f.system, space, opts).ok());
  EXPECT_EQ(last, space.size());
  EXPECT_EQ(total, space.size());
}

TEST(SearchTest, BadSpaceNamesTheField) {
  Fixture f = Small();
  SearchSpace space = SmallSpace(f.model);
  space.tp = {};
  auto r = Search(f.model, f.training, f.system, space, SearchOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("search.tp"), std::string::npos);
  space = SmallSpace(f.model);
  space.gpus = {-8};
  r = Search(f.model, f.training, f.system, space, SearchOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("search.gpus"), std::string::npos);
  TrainingSpec bad = f.training;
  bad.global_batch = -1;
  r = Search(f.model, bad, f.system, SmallSpace(f.model), SearchOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("training.global_batch"), std::string::npos);
}

// Plans faster than any validated run of the model's size are marked, one by one, in the table,
// the JSON and the HTML report (issue 13: never rank an extrapolation first without saying so).
TEST(SearchTest, PlansAboveTheValidatedMfuAreMarked) {
  Fixture f = Small();
  SearchSpace space = SmallSpace(f.model);
  SearchOptions opts;
  opts.top_k = 5;
  auto r = Search(f.model, f.training, f.system, space, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GE(r->top.size(), 2u);
  // An envelope between the best and the last plan's MFU: the best is beyond, the last is not.
  double best = r->top.front().estimate.mfu, last = r->top.back().estimate.mfu;
  ASSERT_GT(best, last);
  SystemProfile p;
  FamilyProfile fam;
  fam.family = "ampere";
  fam.mfu_envelope = {{7, (best + last) / 2}};  // runs of 7B+ (the model: 7.5B)
  p.families.push_back(fam);
  MarkBeyondEnvelope(p, f.model, f.system, &*r);
  EXPECT_DOUBLE_EQ(r->mfu_reached, (best + last) / 2);
  EXPECT_TRUE(r->top.front().beyond_envelope);
  EXPECT_FALSE(r->top.back().beyond_envelope);
  std::string table = FormatSearchTable(*r);
  EXPECT_NE(table.find("! EXTRAPOLATION"), std::string::npos) << table;
  auto j = SearchToJson(*r);
  EXPECT_TRUE(j["top"][0]["beyond_envelope"].get<bool>());
  EXPECT_FALSE(j["top"].back()["beyond_envelope"].get<bool>());
  EXPECT_NE(SearchReportHtml("t", *r).find("Extrapolation (!)"), std::string::npos);
  // Without runs of that size nothing is known, and nothing is marked.
  p.families[0].mfu_envelope.clear();
  MarkBeyondEnvelope(p, f.model, f.system, &*r);
  EXPECT_FALSE(r->top.front().beyond_envelope);
  EXPECT_EQ(FormatSearchTable(*r).find("! EXTRAPOLATION"), std::string::npos);
}

TEST(SearchTest, MoeSearchUsesExpertParallelism) {
  ModelSpec m = *FindModel("mixtral-8x7b");
  TrainingSpec t;
  t.global_batch = 256;
  ShortSystem s;
  s.gpus = 64;
  SystemSpec sys = *SystemFromShort(s);
  SearchSpace space = DefaultSearchSpace(m, {64});
  space.pp = {1, 2, 4};
  SearchOptions opts;
  opts.top_k = 3;
  auto r = Search(m, t, sys, space, opts);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_FALSE(r->top.empty());
  EXPECT_EQ(r->feasible + r->rejected_total(), r->space);
  EXPECT_GT(r->top[0].estimate.mfu, 0.1);
}

}  // namespace
}  // namespace baton::perf
