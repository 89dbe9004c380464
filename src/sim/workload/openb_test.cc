#include "sim/workload/openb.h"

#include <gtest/gtest.h>

#include <sstream>

namespace baton::sim {
namespace {

TEST(OpenbTest, ReadsFullAndShortPodListsKeepingEveryPod) {
  std::istringstream full(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
      "deletion_time,scheduled_time\n"
      "p0,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
      "p1,6000,12288,1,460,V100M16|V100M32,LS,Pending,5,,\n"
      "p2,4000,8192,0,0,,BE,Failed,7,,\n");
  auto pods = ReadOpenbPods(full, "full.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 3u);  // the never-scheduled and the CPU-only pod are demand too
  EXPECT_EQ((*pods)[1].gpu_milli, 460);
  EXPECT_EQ((*pods)[1].gpu_spec, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ((*pods)[2].num_gpu, 0);
  EXPECT_EQ((*pods)[2].cpu_milli, 4000);

  std::istringstream shortlist(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "a,1000,100,8,1000\n"
      "b,2000,200,1,250\n");
  pods = ReadOpenbPods(shortlist, "short.csv");
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[0].TotalGpuMilli(), 8000);
}

TEST(OpenbTest, ColumnsParseRowsInAnyOrderAndKeepTimes) {
  const std::vector<std::string_view> header = {"gpu_milli",  "num_gpu",   "name",
                                                "memory_mib", "cpu_milli", "creation_time",
                                                "gpu_spec",   "extra"};
  auto cols = OpenbPodColumns::FromHeader(header);
  ASSERT_TRUE(cols.ok()) << cols.status().ToString();
  auto p = cols->Parse(SplitOpenbCsv("250, 1, p0, 100, 2000, 42.5, A|B|A, whatever"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->name, "p0");
  EXPECT_EQ(p->gpu_milli, 250);
  EXPECT_EQ(p->gpu_spec, (std::vector<std::string>{"A", "B"}));  // duplicates once
  ASSERT_TRUE(p->creation_time.has_value());
  EXPECT_DOUBLE_EQ(*p->creation_time, 42.5);
  EXPECT_FALSE(p->deletion_time.has_value());
  auto bad = cols->Parse(SplitOpenbCsv("250,1,p0,100,2000,-1,,x"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("creation_time"), std::string::npos);
  EXPECT_FALSE(OpenbPodColumns::FromHeader(std::vector<std::string_view>{"name"}).ok());
}

TEST(OpenbTest, ErrorsNameFileLineAndField) {
  auto err = [](std::string text) {
    std::istringstream in(std::move(text));
    auto r = ReadOpenbPods(in, "x.csv");
    return r.ok() ? std::string() : r.status().ToString();
  };
  EXPECT_NE(err("name,cpu_milli,memory_mib,num_gpu\na,1,1,1\n").find("gpu_milli"),
            std::string::npos);
  EXPECT_NE(err("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,2,500\n").find("x.csv:2"),
            std::string::npos);
  EXPECT_NE(err("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,1,1001\n").find("gpu_milli"),
            std::string::npos);
  EXPECT_NE(err("name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1,1,1\n").find("expected 5"),
            std::string::npos);
  EXPECT_NE(err("name,name,cpu_milli,memory_mib,num_gpu,gpu_milli\n").find("twice"),
            std::string::npos);
  EXPECT_NE(err("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + std::string(5000, 'a') + "\n")
                .find("longer"),
            std::string::npos);
  // A row is bounded before it is read: an endless line is refused having taken no more than the
  // limit from the stream, where std::getline held all of it (/dev/zero grew without end).
  std::istringstream endless("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" +
                             std::string(1 << 20, 'a'));
  auto pods = ReadOpenbPods(endless, "zero.csv");
  ASSERT_FALSE(pods.ok());
  EXPECT_NE(pods.status().message().find("zero.csv:2: line longer than 4096 bytes"),
            std::string::npos)
      << pods.status().ToString();
  EXPECT_LE(static_cast<std::size_t>(endless.tellg()), std::size_t{44 + 4096 + 1});
}

TEST(OpenbTest, ClusterDeclaresUnknownGpuModels) {
  std::istringstream in(
      "sn,cpu_milli,memory_mib,gpu,model\n"
      "n0,64000,262144,2,P100\n"
      "n1,96000,393216,8,G2\n"
      "n2,96000,393216,8,G2\n");
  auto nodes = ReadOpenbNodes(in, "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  auto c = OpenbCluster(*nodes);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->counts().total, 18);
  EXPECT_EQ(c->shapes().size(), 2u);
  auto g2 = c->FindGpuType("g2");
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ((*g2)->name, "G2");
  EXPECT_FALSE(c->FindGpuType("Z9").ok());
}

}  // namespace
}  // namespace baton::sim
