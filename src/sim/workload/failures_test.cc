#include "sim/workload/failures.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "topology/builders/fabrics.h"

namespace baton::sim {
namespace {

TEST(FailureModelTest, Llama3DefaultsReproduceTheReportedRate) {
  // 16,384 GPUs for 54 days should see about 419 interruptions, 58.7 % of them GPU faults.
  topo::FatTreeParams p;
  p.layout.nodes = 2048;
  auto cluster = topo::BuildFatTree(p);
  ASSERT_TRUE(cluster.ok());
  FailureGenerator gen(*cluster, FailureModel::Llama3(), 11);
  int total = 0, gpu = 0;
  for (FailureEvent e = gen.Next(); e.time < Hours(24 * 54); e = gen.Next()) {
    ++total;
    gpu += e.cause == 0;
    ASSERT_LT(e.node.value(), cluster->nodes().size());
    ASSERT_GT(e.repair.value(), 0);
  }
  EXPECT_NEAR(total, 419, 3 * std::sqrt(419.0));  // Poisson: within 3 sigma
  EXPECT_NEAR(static_cast<double>(gpu) / total, 0.587, 0.08);
}

TEST(FailureModelTest, DeterministicAndValidated) {
  auto cluster = topo::BuildPreset("superpod-h100");
  ASSERT_TRUE(cluster.ok());
  FailureModel m = FailureModel::Llama3();
  m.interruptions_per_gpu_day = 0.01;
  FailureGenerator a(*cluster, m, 5), b(*cluster, m, 5);
  for (int i = 0; i < 50; ++i) {
    FailureEvent x = a.Next(), y = b.Next();
    EXPECT_EQ(x.time, y.time);
    EXPECT_EQ(x.node, y.node);
  }
  m.causes[0].share = 0.9;
  EXPECT_NE(m.Validate().message().find("shares sum to"), std::string::npos);
  m = FailureModel::Llama3();
  m.causes[1].repair_median = Seconds(0);
  EXPECT_NE(m.Validate().message().find("cause network: field 'repair_median'"), std::string::npos);
}

TEST(FailureTraceTest, ReadsAndRejectsWithLineNumbers) {
  auto cluster = topo::BuildPreset("superpod-h100");
  ASSERT_TRUE(cluster.ok());
  std::istringstream in(
      "time_s,node,cause,repair_s\n10,gpu001,xid79,3600\n20,gpu002,link,60\n5,gpu003,xid,1\n");
  FailureTraceReader r(in, "f.csv", *cluster);
  auto a = r.Next();
  ASSERT_TRUE(a.ok() && a->has_value());
  EXPECT_EQ((*a)->node, *cluster->FindNode("gpu001"));
  auto b = r.Next();
  ASSERT_TRUE(b.ok() && b->has_value());
  EXPECT_EQ((*b)->cause, 1);
  auto c = r.Next();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "f.csv:4: field 'time_s': failures must be in time order");

  std::istringstream bad("1,nosuch,x,1\n");
  FailureTraceReader r2(bad, "g.csv", *cluster);
  EXPECT_EQ(r2.Next().status().message(), "g.csv:1: field 'node': no node 'nosuch'");
}

TEST(FailureTraceTest, FarFutureTimesAndLongLinesAreRefused) {
  topo::FatTreeParams p;
  p.layout.nodes = 4;
  p.tiers = 2;
  p.nodes_per_leaf = 2;
  p.leaves_per_spine = 2;
  auto cluster = topo::BuildFatTree(p);
  ASSERT_TRUE(cluster.ok());
  // A repair due in 1e20 s kept the simulator sampling until memory ran out.
  for (const char* text : {"1e20,gpu001,x,60\n", "10,gpu001,x,1e20\n"}) {
    std::istringstream in(text);
    FailureTraceReader r(in, "f.csv", *cluster);
    auto e = r.Next();
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_NE(e.status().message().find("f.csv:1:"), std::string::npos);
    EXPECT_NE(e.status().message().find("horizon"), std::string::npos) << e.status().ToString();
  }
  std::istringstream long_line(std::string(1 << 20, 'x') + "\n");
  FailureTraceReader r(long_line, "f.csv", *cluster);
  EXPECT_NE(r.Next().status().message().find("longer than"), std::string::npos);
}

}  // namespace
}  // namespace baton::sim
