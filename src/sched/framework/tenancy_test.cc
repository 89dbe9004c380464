#include "sched/framework/tenancy.h"

#include <gtest/gtest.h>

#include "sched/framework/config.h"
#include "sched/framework/scheduler.h"
#include "sched/testing.h"

namespace baton::sched {
namespace {

using testing::At;
using testing::Job;
using testing::SmallTree;

SchedulerConfig Parse(std::string_view yaml) {
  auto c = ParseSchedulerConfig(yaml);
  CHECK(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::unique_ptr<Scheduler> Make(SchedulerConfig c) {
  auto s = Scheduler::Create(SmallTree(), std::move(c));
  CHECK(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

GangJob TenantJob(std::uint64_t id, int gpus, std::string tenant, int priority = 0) {
  GangJob j = Job(id, gpus, priority);
  j.tenant = std::move(tenant);
  return j;
}

// The attack from issue 15: a tenant raises its own job's priority and evicts another tenant's
// whole-cluster job. Without a policy saying so, it may not.
TEST(TenancyTest, ATenantCannotEvictAnotherTenantsJobByDefault) {
  auto s = Make(SchedulerConfig{});
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(TenantJob(1, 64, "victim"))}});
  auto d =
      s->RunCycle({At(3600), std::vector<Event>{Event::Submit(TenantJob(2, 64, "attacker", 10))}});
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_EQ(s->job(JobId(1))->phase, JobPhase::kRunning);
  // Its own lower-priority work it may still evict.
  auto own = Make(SchedulerConfig{});
  own->RunCycle({At(0), std::vector<Event>{Event::Submit(TenantJob(1, 64, "a"))}});
  d = own->RunCycle({At(3600), std::vector<Event>{Event::Submit(TenantJob(2, 64, "a", 10))}});
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, JobId(1));
}

TEST(TenancyTest, MayPreemptGrantsEvictionOfNamedTenantsOnly) {
  auto s = Make(Parse(R"(
tenancy:
  tenants:
    prod: {may_preempt: [batch]}
)"));
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(TenantJob(1, 32, "batch")),
                                         Event::Submit(TenantJob(2, 32, "research"))}});
  auto d = s->RunCycle({At(3600), std::vector<Event>{Event::Submit(TenantJob(3, 32, "prod", 10))}});
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, JobId(1));
  // research may evict nobody but itself; cross_tenant_preemption: allow opens it for tenants
  // without a list.
  auto open = Make(Parse("tenancy: {cross_tenant_preemption: allow}"));
  open->RunCycle({At(0), std::vector<Event>{Event::Submit(TenantJob(1, 64, "batch"))}});
  d = open->RunCycle(
      {At(3600), std::vector<Event>{Event::Submit(TenantJob(2, 64, "research", 1))}});
  EXPECT_EQ(d.preemptions.size(), 1u);
}

TEST(TenancyTest, PriorityOutsideTheTenantsRangeIsRefused) {
  const SchedulerConfig c = Parse(R"(
tenancy:
  tenants:
    a: {priority: {min: 0, max: 5}}
    "*": {priority: {max: 0}}
)");
  // The hook the API calls before storing a job.
  EXPECT_TRUE(c.tenancy.CheckPriority("a", 5).ok());
  Status s = c.tenancy.CheckPriority("a", 10);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("field 'priority'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("0..5"), std::string::npos) << s.message();
  EXPECT_FALSE(c.tenancy.CheckPriority("someone", 1).ok());
  EXPECT_TRUE(c.tenancy.CheckPriority("someone", -3).ok());
  // The scheduler refuses it at admission too (a driver that skipped the API).
  auto sched = Make(c);
  auto d = sched->RunCycle({At(0), std::vector<Event>{Event::Submit(TenantJob(1, 8, "a", 10))}});
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].plugin, "admission");
  EXPECT_TRUE(d.binds.empty());
}

// Churn from issue 15: a job evicted less than a second after it was placed. A victim must have
// run min_run_time (default 60 s) first; the blocked job is woken when it has.
TEST(TenancyTest, AJobYoungerThanMinRunTimeIsNotAVictim) {
  auto s = Make(SchedulerConfig{});
  EXPECT_EQ(SchedulerConfig{}.tenancy.min_run_time, Seconds(60));
  s->RunCycle({At(0), std::vector<Event>{Event::Submit(Job(1, 64))}});
  auto d = s->RunCycle({At(1), std::vector<Event>{Event::Submit(Job(2, 64, 10))}});
  EXPECT_TRUE(d.preemptions.empty());
  ASSERT_TRUE(d.wake_at.has_value());
  EXPECT_EQ(*d.wake_at, At(60));
  d = s->RunCycle({At(60), {}});
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].victim, JobId(1));
  // min_run_time: 0 restores eviction at any age.
  auto eager = Make(Parse("min_run_time: 0"));
  eager->RunCycle({At(0), std::vector<Event>{Event::Submit(Job(1, 64))}});
  d = eager->RunCycle({At(1), std::vector<Event>{Event::Submit(Job(2, 64, 10))}});
  EXPECT_EQ(d.preemptions.size(), 1u);
}

TEST(TenancyTest, QuotasPerTenantAndPerGpuType) {
  const std::string type = SmallTree().shape_of(topo::NodeId(0)).gpu->name;
  auto s = Make(Parse(R"(
tenancy:
  tenants:
    a: {quota: {gpus: 16}}
    b: {quota: {gpu_types: {)" +
                      type + R"(: 8}}}
)"));
  auto d = s->RunCycle(
      {At(0), std::vector<Event>{
                  Event::Submit(TenantJob(1, 8, "a")), Event::Submit(TenantJob(2, 8, "a")),
                  Event::Submit(TenantJob(3, 8, "a")),   // over a's 16: waits
                  Event::Submit(TenantJob(4, 32, "a")),  // never fits: rejected
                  Event::Submit(TenantJob(5, 8, "b")),
                  Event::Submit(TenantJob(6, 8, "b")),  // over b's 8 of type
              }});
  std::set<JobId> bound;
  for (const auto& b : d.binds) bound.insert(b.job);
  EXPECT_EQ(bound, (std::set<JobId>{JobId(1), JobId(2), JobId(5)}));
  ASSERT_EQ(d.rejections.size(), 1u);
  EXPECT_EQ(d.rejections[0].job, JobId(4));
  // A finished job makes room within the quota.
  d = s->RunCycle({At(10), std::vector<Event>{Event::Finish(JobId(1)), Event::Finish(JobId(5))}});
  bound.clear();
  for (const auto& b : d.binds) bound.insert(b.job);
  EXPECT_EQ(bound, (std::set<JobId>{JobId(3), JobId(6)}));
}

TEST(TenancyTest, BadPoliciesAreRefusedNamingTheField) {
  struct Case {
    const char* yaml;
    const char* field;
  };
  for (const Case& c : {
           Case{"tenancy: {tenants: {a: {priority: {min: 5, max: 1}}}}",
                "tenancy.tenants.a.priority"},
           Case{"tenancy: {tenants: {a: {priority: {min: x}}}}", "tenancy.tenants.a.priority.min"},
           Case{"tenancy: {tenants: {a: {quota: {gpu_types: {Z9000: 8}}}}}",
                "tenancy.tenants.a.quota.gpu_types.Z9000"},
           Case{"tenancy: {tenants: {a: {quota: {gpus: -1}}}}", "tenancy.tenants.a.quota.gpus"},
           Case{"tenancy: {tenants: {a: {colour: red}}}", "tenancy.tenants.a.colour"},
           Case{"tenancy: {cross_tenant_preemption: maybe}", "tenancy.cross_tenant_preemption"},
           Case{"tenancy: {tenants: {a: {may_preempt: b}}}", "tenancy.tenants.a.may_preempt"},
           Case{"min_run_time: 1e12", "min_run_time"},
           Case{"min_run_time: -1", "min_run_time"},
       }) {
    auto r = ParseSchedulerConfig(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_NE(r.status().message().find(std::string("field '") + c.field + "'"), std::string::npos)
        << c.yaml << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace baton::sched
