#include "sched/framework/job.h"

#include <gtest/gtest.h>

#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::Job;
using testing::SmallTree;

struct BadCase {
  const char* what;
  void (*mutate)(GangJob&);
  const char* field;
};

TEST(ValidateJobTest, RejectsBadInputNamingTheField) {
  const topo::Cluster c = SmallTree();  // 64 GPUs
  const BadCase cases[] = {
      {"zero gpus", [](GangJob& j) { j.gpus = 0; }, "field 'gpus'"},
      {"negative gpus", [](GangJob& j) { j.gpus = -8; }, "field 'gpus'"},
      {"more than exist", [](GangJob& j) { j.gpus = 1000000000; }, "field 'gpus'"},
      {"task too big", [](GangJob& j) { j.gpus_per_task = 16; }, "field 'gpus_per_task'"},
      {"task does not divide", [](GangJob& j) { j.gpus_per_task = 3; }, "field 'gpus_per_task'"},
      {"unknown gpu", [](GangJob& j) { j.gpu_types = {"TPUv9"}; }, "field 'gpu_types[0]'"},
      {"gpu not in cluster", [](GangJob& j) { j.gpu_types = {"A100-80GB"}; }, "field 'gpu_types'"},
      {"unknown level", [](GangJob& j) { j.topology.required = topo::Level::kGroup; },
       "field 'topology.required'"},
      {"preferred above required",
       [](GangJob& j) {
         j.topology.required = topo::Level::kLeaf;
         j.topology.preferred = topo::Level::kSpine;
       },
       "field 'topology.preferred'"},
      {"sub-group does not divide",
       [](GangJob& j) {
         j.sub_groups = {{24, topo::Level::kLeaf}};
       },
       "field 'sub_groups[0].gpus'"},
      {"negative runtime", [](GangJob& j) { j.estimated_runtime = Seconds(-1); },
       "field 'estimated_runtime'"},
      {"negative grace", [](GangJob& j) { j.grace_period = Seconds(-5); }, "field 'grace_period'"},
      {"elastic without step",
       [](GangJob& j) {
         j.elastic = {8, 32, 0};
       },
       "field 'elastic.step_gpus'"},
      // 16 GPUs are two 8-GPU tasks: a step of 4 could never add or remove a whole one.
      {"elastic step not a whole task",
       [](GangJob& j) {
         j.elastic = {8, 32, 4};
       },
       "field 'elastic.step_gpus'"},
      {"elastic min not a multiple of step",
       [](GangJob& j) {
         j.elastic = {12, 32, 8};
       },
       "field 'elastic.min_gpus'"},
      {"elastic max below min",
       [](GangJob& j) {
         j.elastic = {16, 8, 8};
       },
       "field 'elastic.max_gpus'"},
      {"missing id", [](GangJob& j) { j.id = JobId(); }, "field 'id'"},
  };
  for (const auto& tc : cases) {
    GangJob j = Job(1, 16);
    tc.mutate(j);
    Status s = ValidateJob(j, c);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << tc.what;
    EXPECT_NE(s.message().find(tc.field), std::string::npos) << tc.what << ": " << s.message();
  }
}

TEST(ValidateJobTest, AcceptsGoodSpecs) {
  const topo::Cluster c = SmallTree();
  GangJob j = Job(1, 32);
  j.gpu_types = {"h100"};
  j.topology.required = topo::Level::kSpine;
  j.topology.preferred = topo::Level::kLeaf;
  j.sub_groups = {{8, topo::Level::kNode}, {16, topo::Level::kLeaf}};
  j.elastic = {16, 32, 16};
  EXPECT_TRUE(ValidateJob(j, c).ok()) << ValidateJob(j, c).ToString();
  EXPECT_EQ(EffectiveTaskGpus(j, c), 8);
  EXPECT_EQ(EffectiveTaskGpus(Job(2, 3), c), 3);
}

TEST(ValidateJobTest, DefaultElasticStepIsOneGpuOnANodeElseATask) {
  const topo::Cluster c = SmallTree();  // 8-GPU nodes
  GangJob j = Job(1, 2);
  j.elastic = {2, 8, 0};
  EXPECT_EQ(DefaultElasticStep(j, c), 1);  // the whole range on one node
  j.elastic = {2, 16, 0};
  EXPECT_EQ(DefaultElasticStep(j, c), 2);  // tasks of its initial 2 GPUs
  j = Job(2, 16);
  j.elastic = {16, 64, 0};
  EXPECT_EQ(DefaultElasticStep(j, c), 8);  // whole nodes
  j.elastic.step_gpus = DefaultElasticStep(j, c);
  EXPECT_TRUE(ValidateJob(j, c).ok()) << ValidateJob(j, c).ToString();
}

}  // namespace
}  // namespace baton::sched
