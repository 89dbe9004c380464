#include "sched/history/history.h"

#include <gtest/gtest.h>

#include <sstream>

#include "topology/builders/fabrics.h"
#include "topology/io/cluster_yaml.h"

namespace baton::sched::history {
namespace {

topo::Cluster SmallCluster() {
  topo::FatTreeParams p;
  p.layout.nodes = 4;
  p.layout.node_prefix = "n";
  p.tiers = 2;
  p.nodes_per_leaf = 2;
  Result<topo::Cluster> c = topo::BuildFatTree(p);
  return std::move(*c);
}

GangJob FullJob() {
  GangJob j;
  j.id = JobId(7);
  j.name = "train";
  j.tenant = "team-a";
  j.gpus = 16;
  j.gpus_per_task = 8;
  j.one_task_per_node = true;
  j.gpu_types = {"H100-SXM"};
  j.topology.required = topo::Level::kSpine;
  j.topology.preferred = topo::Level::kLeaf;
  j.sub_groups = {{8, topo::Level::kNode}};
  j.priority = -3;
  j.preemptible = false;
  j.grace_period = Seconds(12.5);
  j.elastic = {8, 16, 8};
  j.estimated_runtime = Seconds(3600);
  j.checkpoint_interval = Seconds(600);
  j.restart_cost = Seconds(30);
  j.max_retries = 1;
  j.spread = topo::FailureDomainKind::kRack;
  j.node_requirements = {{"zone", NodeRequirement::Op::kIn, {"a", "b"}, 0},
                         {"nic_gbps_per_gpu", NodeRequirement::Op::kGreaterEqual, {}, 400}};
  j.cpu_milli = 4000;
  j.memory_mib = 1024;
  j.extended = {{"nvme_gb", 500}, {"rdma_nic", 2}};
  j.has_plan = true;
  j.plan_key = 3;
  j.submit_time = TimePoint{Seconds(1764590000.123456789)};
  return j;
}

std::string History(const topo::Cluster& c, const std::vector<std::string>& cycles) {
  std::string out = HeaderLine() + "\n";
  out += EncodeRun({1, TimePoint{Seconds(1764590000)}, topo::ExportClusterYaml(c), ""}) + "\n";
  for (const std::string& line : cycles) out += line + "\n";
  return out;
}

std::vector<Reader::Item> ReadAll(const std::string& text, Status* error = nullptr) {
  std::istringstream in(text);
  Reader reader(in, "h.jsonl");
  std::vector<Reader::Item> out;
  while (true) {
    Result<std::optional<Reader::Item>> item = reader.Next();
    if (!item.ok()) {
      if (error != nullptr) *error = item.status();
      return out;
    }
    if (!item->has_value()) return out;
    out.push_back(**item);
  }
}

TEST(History, EveryEventAndDecisionRoundTrips) {
  topo::Cluster c = SmallCluster();
  const GangJob job = FullJob();
  std::vector<Event> events = {Event::Submit(job), Event::Cancel(JobId(2)), Event::Finish(JobId(3)),
                               Event::Checkpoint(JobId(4)),
                               Event::NodeHealth(topo::NodeId(1), topo::NodeHealth::kDraining)};
  Placement p;
  p.nodes = {{topo::NodeId(0), 0xff}, {topo::NodeId(3), 0xff}};
  p.span = SpanOf(c, p.nodes);
  events.push_back(Event::Adopt(job, p, TimePoint{Seconds(1764580000.25)}));
  events.back().bad_nodes = {topo::NodeId(2)};
  events[0].bad_nodes = {topo::NodeId(1), topo::NodeId(2)};
  Decisions d;
  d.binds.push_back({JobId(9), p, true});
  d.replacements.push_back({JobId(10), topo::NodeId(1), topo::NodeId(2), p, 0});
  d.resizes.push_back({JobId(11), p});
  d.preemptions.push_back({JobId(12), JobId(9), TimePoint{Seconds(1764590031.5)}, 0});
  d.rejections.push_back({JobId(13), "admission", "too big", RejectionKind::kInvalid});
  d.requeues.push_back({JobId(14), "node down", 0});
  const TimePoint now{Seconds(1764590001.000001)};
  std::string text = History(c, {EncodeCycle(c, 1, 1, now, events, d)});

  Status error;
  std::vector<Reader::Item> items = ReadAll(text, &error);
  ASSERT_TRUE(error.ok()) << error.ToString();
  ASSERT_EQ(items.size(), 2u);
  const auto& run = std::get<Reader::RunStart>(items[0]);
  EXPECT_EQ(run.run.run, 1);
  EXPECT_EQ(run.cluster->nodes().size(), c.nodes().size());
  const Cycle& got = std::get<Reader::CycleRead>(items[1]).cycle;
  EXPECT_EQ(got.now, now);  // exact: times round-trip bit for bit
  ASSERT_EQ(got.events.size(), events.size());
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(got.events[i].kind, events[i].kind) << i;
    EXPECT_EQ(got.events[i].job_id, events[i].job_id) << i;
    EXPECT_EQ(got.events[i].bad_nodes, events[i].bad_nodes) << i;
  }
  const GangJob& j = got.events[0].job;
  EXPECT_EQ(j.id, job.id);
  EXPECT_EQ(j.name, job.name);
  EXPECT_EQ(j.tenant, job.tenant);
  EXPECT_EQ(j.gpus, job.gpus);
  EXPECT_EQ(j.gpus_per_task, job.gpus_per_task);
  EXPECT_EQ(j.one_task_per_node, job.one_task_per_node);
  EXPECT_EQ(j.gpu_types, job.gpu_types);
  EXPECT_EQ(j.topology.required, job.topology.required);
  EXPECT_EQ(j.topology.preferred, job.topology.preferred);
  ASSERT_EQ(j.sub_groups.size(), 1u);
  EXPECT_EQ(j.sub_groups[0].gpus, 8);
  EXPECT_EQ(j.priority, job.priority);
  EXPECT_EQ(j.preemptible, job.preemptible);
  EXPECT_EQ(j.grace_period, job.grace_period);
  EXPECT_EQ(j.elastic.max_gpus, 16);
  EXPECT_EQ(j.estimated_runtime, job.estimated_runtime);
  EXPECT_EQ(j.checkpoint_interval, job.checkpoint_interval);
  EXPECT_EQ(j.restart_cost, job.restart_cost);
  EXPECT_EQ(j.max_retries, job.max_retries);
  EXPECT_EQ(j.spread, job.spread);
  ASSERT_EQ(j.node_requirements.size(), 2u);
  EXPECT_EQ(j.node_requirements[0].values, job.node_requirements[0].values);
  EXPECT_EQ(j.node_requirements[1].op, NodeRequirement::Op::kGreaterEqual);
  EXPECT_EQ(j.node_requirements[1].bound, 400);
  EXPECT_EQ(j.cpu_milli, job.cpu_milli);
  EXPECT_EQ(j.memory_mib, job.memory_mib);
  EXPECT_EQ(j.extended, job.extended);
  EXPECT_TRUE(j.has_plan);
  EXPECT_EQ(j.plan_key, 3u);
  EXPECT_EQ(j.submit_time, job.submit_time);
  EXPECT_EQ(got.events[4].node, topo::NodeId(1));
  EXPECT_EQ(got.events[4].health, topo::NodeHealth::kDraining);
  EXPECT_EQ(got.events[5].placement, p);
  EXPECT_EQ(got.events[5].adopted_start, events[5].adopted_start);
  ASSERT_EQ(got.binds.size(), 1u);
  EXPECT_EQ(got.binds[0], (Placed{JobId(9), p}));
  EXPECT_EQ(got.replacements[0], (Placed{JobId(10), p}));
  EXPECT_EQ(got.resizes[0], (Placed{JobId(11), p}));
  EXPECT_EQ(got.preemptions[0], (Preempted{JobId(12), JobId(9), TimePoint{Seconds(1764590031.5)}}));
  EXPECT_EQ(got.rejections, std::vector<JobId>{JobId(13)});
  EXPECT_EQ(got.requeues, std::vector<JobId>{JobId(14)});
}

// Each malformed line is refused with the file, the line and the field.
TEST(History, MalformedLinesNameLineAndField) {
  topo::Cluster c = SmallCluster();
  const std::string ok = EncodeCycle(c, 1, 1, TimePoint{Seconds(5)}, {}, {});
  struct Case {
    std::string line;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"{not json", "h.jsonl:3:"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[],"x":1})", "h.jsonl:3: field 'x'"},
      {R"({"type":"cycle","run":1,"cycle":2,"now":5,"events":[]})", "missing cycles"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":-5,"events":[]})", "field 'now'"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[{"kind":"boom"}]})",
       "field 'events[0].kind': unknown event kind"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[{"kind":"node","node":"nope","health":"down"}]})",
       "field 'events[0].node'"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[{"kind":"submit","job":{"id":1,"gpus":1}}]})",
       "field 'events[0].job.submit_time': is required"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[],"placed":[{"job":1,"nodes":[["n1","0x1ff"]]}]})",
       "field 'placed[0].nodes[0]'"},
      {R"({"type":"cycle","run":1,"cycle":1,"cycle":1,"now":5,"events":[]})", "duplicate key"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[[[[[[[[[[1]]]]]]]]]]})",
       "nested deeper"},
      {R"({"type":"cycle","run":2,"cycle":1,"now":5,"events":[]})", "field 'run'"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[{"kind":"submit","job":{"id":1,"gpus":1,"submit_time":1,"extended":{"rdma_nic":-1}}}]})",
       "field 'events[0].job.extended.rdma_nic': must be a whole amount"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[{"kind":"submit","job":{"id":1,"gpus":1,"submit_time":1,"extended":{"RDMA":1}}}]})",
       "field 'events[0].job.extended.RDMA': extended resource name"},
      {R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[{"kind":"submit","job":{"id":1,"gpus":1,"submit_time":1,"extended":[1]}}]})",
       "field 'events[0].job.extended': must be an object"},
  };
  for (const Case& k : cases) {
    Status error;
    ReadAll(History(c, {k.line}), &error);
    EXPECT_FALSE(error.ok()) << k.line;
    EXPECT_NE(error.message().find(k.want), std::string::npos) << error.message();
    EXPECT_NE(error.message().find("h.jsonl:3"), std::string::npos) << error.message();
  }
  // The good line passes, so the cases above fail for their own reason.
  Status error;
  EXPECT_EQ(ReadAll(History(c, {ok}), &error).size(), 2u);
  EXPECT_TRUE(error.ok()) << error.ToString();
  // A record written before extended resources existed still decodes, with none.
  const std::string old_submit =
      R"({"type":"cycle","run":1,"cycle":1,"now":5,"events":[{"kind":"submit","job":{"id":1,"gpus":1,"submit_time":1,"cpu_milli":100}}]})";
  auto records = ReadAll(History(c, {old_submit}), &error);
  EXPECT_TRUE(error.ok()) << error.ToString();
  ASSERT_EQ(records.size(), 2u);
  const Cycle& old_cycle = std::get<Reader::CycleRead>(records[1]).cycle;
  ASSERT_EQ(old_cycle.events.size(), 1u);
  EXPECT_TRUE(old_cycle.events[0].job.extended.empty());
  EXPECT_EQ(old_cycle.events[0].job.cpu_milli, 100);
}

TEST(History, RefusesAFileThatIsNotAHistory) {
  Status error;
  ReadAll("", &error);
  EXPECT_NE(error.message().find("empty file"), std::string::npos);
  ReadAll(R"({"format":"baton-daemon-history","version":2})"
          "\n",
          &error);
  EXPECT_NE(error.message().find("h.jsonl:1: field 'version'"), std::string::npos)
      << error.message();
  ReadAll(R"({"name":"a trace"})"
          "\n",
          &error);
  EXPECT_NE(error.message().find("h.jsonl:1: field 'format'"), std::string::npos)
      << error.message();
}

// Retention cuts the oldest lines: cycles before the first run line left are skipped, counted.
TEST(History, CyclesBeforeTheFirstRunAreSkipped) {
  topo::Cluster c = SmallCluster();
  std::string text = HeaderLine() + "\n" + EncodeCycle(c, 1, 7, TimePoint{Seconds(1)}, {}, {}) +
                     "\n" + EncodeRun({2, TimePoint{Seconds(2)}, topo::ExportClusterYaml(c), ""}) +
                     "\n" + EncodeCycle(c, 2, 1, TimePoint{Seconds(3)}, {}, {}) + "\n";
  std::istringstream in(text);
  Reader reader(in, "h.jsonl");
  int items = 0;
  while (true) {
    Result<std::optional<Reader::Item>> item = reader.Next();
    ASSERT_TRUE(item.ok()) << item.status().ToString();
    if (!item->has_value()) break;
    ++items;
  }
  EXPECT_EQ(items, 2);
  EXPECT_EQ(reader.skipped_cycles(), 1);
}

}  // namespace
}  // namespace baton::sched::history
