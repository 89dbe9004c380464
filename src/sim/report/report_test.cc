#include "sim/report/report.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace baton::sim {
namespace {

SimResult RunOf(std::string policy, double avg_jct_h, std::int64_t preemptions, double lost_gpu_h,
                std::int64_t completed = 10) {
  SimResult r;
  r.summary.policy = std::move(policy);
  r.summary.jobs = 10;
  r.summary.completed = completed;
  r.summary.avg_jct_s = avg_jct_h * 3600;
  r.summary.preemptions = preemptions;
  r.summary.lost_gpu_hours = lost_gpu_h;
  return r;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(VerdictTest, NamesTheLowestMeanJctAndSetsItsCostAgainstTheNextBest) {
  const std::vector<SimResult> runs = {RunOf("fifo", 4.0, 0, 80), RunOf("backfill", 3.2, 41, 120),
                                       RunOf("first-fit", 3.9, 0, 95.3)};
  auto v = ComputeVerdict(runs);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->winner, 1u);
  ASSERT_TRUE(v->runner_up.has_value());
  EXPECT_EQ(*v->runner_up, 2u);
  EXPECT_DOUBLE_EQ(v->mean_jct_s, 3.2 * 3600);
  EXPECT_NEAR(v->below_runner_up_pct, 100 * (3.9 - 3.2) / 3.9, 1e-9);
  EXPECT_EQ(v->preemptions, 41);
  EXPECT_DOUBLE_EQ(v->lost_gpu_hours, 120);
  EXPECT_FALSE(v->completed_more.has_value());
  EXPECT_EQ(VerdictLine(*v, runs),
            "Verdict: backfill has the lowest mean JCT (3.20 h, 17.9% below first-fit, the next "
            "best) at 41 preemptions and 120.0 lost GPU-hours (first-fit: 0 and 95.3)");
}

TEST(VerdictTest, RunsThatCompletedNothingCannotWin) {
  const std::vector<SimResult> runs = {RunOf("las", 0, 5, 1, /*completed=*/0),
                                       RunOf("fifo", 2.0, 0, 0)};
  auto v = ComputeVerdict(runs);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->winner, 1u);
  EXPECT_FALSE(v->runner_up.has_value());
  EXPECT_EQ(VerdictLine(*v, runs),
            "Verdict: fifo has the lowest mean JCT (2.00 h; no other policy completed a job) at 0 "
            "preemptions and 0.0 lost GPU-hours");
  EXPECT_FALSE(ComputeVerdict({RunOf("las", 0, 0, 0, 0)}).has_value());
  EXPECT_FALSE(ComputeVerdict({}).has_value());
}

TEST(VerdictTest, ATieGoesToTheFirstRunAndSaysSo) {
  const std::vector<SimResult> runs = {RunOf("backfill", 2.5, 0, 1), RunOf("topo", 2.5, 0, 2)};
  auto v = ComputeVerdict(runs);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->winner, 0u);
  EXPECT_EQ(v->below_runner_up_pct, 0);
  EXPECT_EQ(VerdictLine(*v, runs),
            "Verdict: backfill has the lowest mean JCT (2.50 h, tied with topo) at 0 preemptions "
            "and 1.0 lost GPU-hours (topo: 0 and 2.0)");
}

TEST(VerdictTest, OneRunAndAWinnerThatCompletedFewerJobs) {
  const std::vector<SimResult> one = {RunOf("backfill", 1.5, 3, 4.34)};
  auto v = ComputeVerdict(one);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(VerdictLine(*v, one),
            "Verdict: one policy run, backfill: mean JCT 1.50 h at 3 preemptions and 4.3 lost "
            "GPU-hours");

  const std::vector<SimResult> runs = {RunOf("fifo", 3.0, 0, 0, 10), RunOf("las", 1.0, 9, 7, 8)};
  v = ComputeVerdict(runs);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->winner, 1u);
  ASSERT_TRUE(v->completed_more.has_value());
  EXPECT_EQ(*v->completed_more, 0u);
  EXPECT_NE(VerdictLine(*v, runs).find("; fifo completed more jobs (10 against 8)"),
            std::string::npos);
}

TEST(ReportTest, SummaryTableEndsWithTheVerdictAndAlignsLongLabels) {
  const std::vector<SimResult> runs = {RunOf("backfill", 3.0, 0, 0),
                                       RunOf("backfill/rigid", 2.0, 0, 0)};
  const std::vector<std::string> lines = Lines(SummaryTable(runs));
  ASSERT_EQ(lines.size(), 4u);
  // Every row's "jobs" column ends where the header's does.
  const std::size_t jobs_end = lines[0].find("jobs") + 4;
  for (std::size_t i = 1; i < 3; ++i) {
    EXPECT_EQ(lines[i].substr(jobs_end - 2, 2), "10") << lines[i];
    EXPECT_EQ(lines[i].size(), lines[0].size()) << lines[i];
  }
  EXPECT_EQ(lines[3].rfind("Verdict: backfill/rigid has the lowest mean JCT (2.00 h", 0), 0u);
}

TEST(ReportTest, HtmlStatesTheVerdict) {
  const std::vector<SimResult> runs = {RunOf("fifo", 4.0, 0, 80), RunOf("las", 2.0, 36, 146.3)};
  const std::string html = ReportHtml({"t", "c", 1, false}, runs);
  EXPECT_NE(html.find("<p class=\"verdict\"><strong>Verdict: las has the lowest mean JCT (2.00 h, "
                      "50.0% below fifo, the next best) at 36 preemptions and 146.3 lost "
                      "GPU-hours (fifo: 0 and 80.0)</strong></p>"),
            std::string::npos);
}

}  // namespace
}  // namespace baton::sim
