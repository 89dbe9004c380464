#include "server/http/job_spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

namespace baton::server {
namespace {

struct BadCase {
  const char* body;
  const char* field;
  const char* message_part;
};

class JobSpecRejects : public ::testing::TestWithParam<BadCase> {};

TEST_P(JobSpecRejects, NamesTheField) {
  const BadCase& c = GetParam();
  Result<JobSpec> r = ParseJobSpec(c.body, BodyFormat::kJson);
  ASSERT_FALSE(r.ok()) << c.body;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().field(), c.field) << r.status().message();
  EXPECT_NE(r.status().message().find(c.message_part), std::string::npos) << r.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, JobSpecRejects,
    ::testing::Values(
        BadCase{"{", "", "malformed JSON"}, BadCase{"", "", "malformed JSON"},
        BadCase{"[1,2]", "", "must be an object"}, BadCase{R"({"gpus": 8})", "name", "is required"},
        BadCase{R"({"name": "a"})", "gpus", "is required"},
        BadCase{R"({"name": "a", "gpus": 0})", "gpus", "must be >= 1"},
        BadCase{R"({"name": "a", "gpus": 1, "gpu_milli": 0})", "gpu_milli", "got 0"},
        BadCase{R"({"name": "a", "gpus": 1, "gpu_milli": 1001})", "gpu_milli", "got 1001"},
        BadCase{R"({"name": "a", "gpus": 2, "gpu_milli": 500})", "gpu_milli", "needs gpus: 1"},
        BadCase{R"({"name": "a", "gpus": 1, "cpu_milli": -1})", "cpu_milli", "got -1"},
        BadCase{R"({"name": "a", "gpus": 1, "memory_mib": "8Gi"})", "memory_mib", "got string"},
        BadCase{R"({"name": "a", "gpus": 1, "resources": {"example.com/fpga": 1}})", "resources",
                "the field 'extended'"},
        BadCase{R"({"name": "a", "gpus": 1, "extended": {"rdma_nic": -1}})", "extended.rdma_nic",
                "got -1"},
        BadCase{R"({"name": "a", "gpus": 1, "extended": {"rdma_nic": 1.5}})", "extended.rdma_nic",
                "integer"},
        BadCase{R"({"name": "a", "gpus": 1, "extended": {"rdma_nic": "1"}})", "extended.rdma_nic",
                "got string"},
        BadCase{R"({"name": "a", "gpus": 1, "extended": {"RDMA": 1}})", "extended.RDMA",
                "lower-case letter"},
        BadCase{R"({"name": "a", "gpus": 1, "extended": {"a b": 1}})", "extended.a b",
                "only [a-z0-9_./-]"},
        BadCase{R"({"name": "a", "gpus": 1, "extended": [1]})", "extended", "must be an object"},
        BadCase{R"({"name": "a", "gpus": 1, "extended": {"r0": 1, "r1": 1, "r2": 1, "r3": 1,
                "r4": 1, "r5": 1, "r6": 1, "r7": 1, "r8": 1}})",
                "extended", "at most 8"},
        BadCase{R"({"name": "a", "gpus": 0, "extended": {"rdma_nic": 0}})", "gpus", "must be >= 1"},
        BadCase{R"({"name": "a", "gpus": -3})", "gpus", "got -3"},
        BadCase{R"({"name": "a", "gpus": 1000000000})", "gpus", "got 1000000000"},
        BadCase{R"({"name": "a", "gpus": 18446744073709551615})", "gpus", "between"},
        BadCase{R"({"name": "a", "gpus": 1e300})", "gpus", "between"},
        BadCase{R"({"name": "a", "gpus": 8.5})", "gpus", "integer"},
        BadCase{R"({"name": "a", "gpus": "8"})", "gpus", "got string"},
        BadCase{R"({"name": "", "gpus": 8})", "name", "1-128"},
        BadCase{R"({"name": "a b", "gpus": 8})", "name", "1-128"},
        BadCase{R"({"name": 5, "gpus": 8})", "name", "must be a string"},
        BadCase{R"({"name": "a", "gpus": 8, "gpus_per_node": 3})", "gpus_per_node", "divide"},
        BadCase{R"({"name": "a", "gpus": 4, "gpus_per_node": 8})", "gpus_per_node", "exceed"},
        BadCase{R"({"name": "a", "gpus": 128, "gpus_per_node": 128})", "gpus_per_node",
                "between 1 and 64"},
        BadCase{R"({"name": "a", "gpus": 8, "gpu_type": "TPU v5!"})", "gpu_type", "TPU v5"},
        BadCase{R"({"name": "a", "gpus": 8, "priority": 5000})", "priority", "-1000 and 1000"},
        BadCase{R"({"name": "a", "gpus": 8, "preemptible": "yes"})", "preemptible",
                "true or false"},
        BadCase{R"({"name": "a", "gpus": 8, "grace_period_s": -1})", "grace_period_s", "seconds"},
        BadCase{R"({"name": "a", "gpus": 8, "estimated_runtime_s": 1e12})", "estimated_runtime_s",
                "seconds"},
        BadCase{R"({"name": "a", "gpus": 8, "command": "python train.py"})", "command",
                "list of strings"},
        BadCase{R"({"name": "a", "gpus": 8, "command": ["python", 3]})", "command[1]",
                "must be a string"},
        // Elastic ranges (issue 27).
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 8, "max_gpus": 4}})", "elastic.max_gpus",
                "must be >= min_gpus (8)"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 0, "max_gpus": 4}})", "elastic.min_gpus",
                "between 1 and"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 2, "max_gpus": 4, "step_gpus": 0}})",
                "elastic.step_gpus", "between 1 and"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 6, "max_gpus": 16, "step_gpus": 4}})",
                "elastic.min_gpus", "multiple of step_gpus (4)"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 8, "max_gpus": 18, "step_gpus": 4}})",
                "elastic.max_gpus", "multiple of step_gpus (4)"},
        BadCase{R"({"name": "a", "elastic": {"max_gpus": 4}})", "elastic.min_gpus", "is required"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 4}})", "elastic.max_gpus", "is required"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 2, "max_gpus": 4, "stepgpus": 2}})",
                "elastic.stepgpus", "unknown field"},
        BadCase{R"({"name": "a", "elastic": [2, 4]})", "elastic", "must be an object"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": "2", "max_gpus": 4}})", "elastic.min_gpus",
                "got string"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 2.5, "max_gpus": 4}})", "elastic.min_gpus",
                "integer"},
        BadCase{R"({"name": "a", "gpus": 8, "elastic": {"min_gpus": 2, "max_gpus": 4}})", "gpus",
                "must lie within elastic's [2, 4]"},
        BadCase{R"({"name": "a", "gpus": 6, "elastic": {"min_gpus": 4, "max_gpus": 8,
                "step_gpus": 4}})",
                "gpus", "multiple of elastic.step_gpus (4)"},
        BadCase{R"({"name": "a", "gpus": 4, "gpus_per_node": 2,
                "elastic": {"min_gpus": 2, "max_gpus": 8}})",
                "elastic", "gpus_per_node"},
        BadCase{R"({"name": "a", "gpus": 1, "gpu_milli": 500,
                "elastic": {"min_gpus": 1, "max_gpus": 2}})",
                "elastic", "share of a GPU"},
        BadCase{R"({"name": "a", "cpu_milli": 1000, "elastic": {"min_gpus": 1, "max_gpus": 2}})",
                "elastic", "not elastic"},
        BadCase{R"({"name": "a", "elastic": {"min_gpus": 8, "max_gpus": 8},
                "plan": {"model": "llama3-8b"}})",
                "elastic", "plan"},
        BadCase{R"({"name": "a", "gpus": 8, "topology": {"required": "rack"}})",
                "topology.required", "unknown topology level"},
        BadCase{R"({"name": "a", "gpus": 8, "topology": {"prefered": "leaf"}})",
                "topology.prefered", "unknown field"},
        BadCase{R"({"name": "a", "gpus": 8, "topology": {"required": "node",
                "preferred": "spine"}})",
                "topology.preferred", "looser"},
        BadCase{R"({"name": "a", "gpus": 8, "gpu": 8})", "gpu", "unknown field"},
        BadCase{R"({"name": "a", "gpus": 8, "stage": {}})", "stage", "list of objects"},
        BadCase{R"({"name": "a", "gpus": 8, "stage": [{"kind": "model", "name": "x",
                   "from": "s"}]})",
                "stage[0].kind", "dataset or checkpoint"},
        BadCase{R"({"name": "a", "gpus": 8, "stage": [{"kind": "dataset", "name": "x"}]})",
                "stage[0].from", "is required"},
        BadCase{R"({"name": "a", "gpus": 8, "stage": [{"kind": "dataset", "name": "../x",
                   "from": "s"}]})",
                "stage[0].name", "1-128"},
        BadCase{R"({"name": "a", "gpus": 8, "stage": [{"kind": "dataset", "name": "x",
                   "from": "s", "size_gib": -1}]})",
                "stage[0].size_gib", "between 0"},
        BadCase{R"({"name": "a", "gpus": 8, "federation": {"datasets": ["c", "c"]}})",
                "federation.datasets[1]", "listed twice"},
        BadCase{R"({"name": "a", "gpus": 8, "federation": {"deadline": "tomorrow"}})",
                "federation.deadline", "UTC time"},
        BadCase{R"({"name": "a", "gpus": 8, "federation": {"deadline": "2026-02-31T00:00:00Z"}})",
                "federation.deadline", "UTC time"},
        BadCase{R"({"name": "a", "gpus": 8, "federation": {"require_regions": ["cn"],
                   "exclude_regions": ["cn"]}})",
                "federation.exclude_regions", "both required and excluded"},
        BadCase{R"({"name": "a", "gpus": 8, "federation": {"site": "x"}})", "federation.site",
                "unknown field"},
        BadCase{R"({"name": "a", "gpus": 8, "tenant": "../etc"})", "tenant", "1-64"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": "llama3-8b"})", "plan", "must be an object"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": {"tp": 8}})", "plan.model", "required"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": {"model": "llama9-1t"}})", "plan.model",
                "llama9-1t"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": {"model": "/etc/passwd", "tp": 8}})",
                "plan.model", "passwd"},
        BadCase{R"({"name": "a", "gpus": 64, "plan": {"model": "llama3-70b", "tp": 8, "pp": 4,
                "dp": 4}})",
                "plan.dp", "128 GPUs, but 64 are given"},
        BadCase{R"({"name": "a", "gpus": 60, "plan": {"model": "llama3-70b", "tp": 8}})", "plan.dp",
                "60 GPUs cannot be split into tp 8"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": {"model": "llama3-8b", "tp": 8,
                "batch": 512}})",
                "plan.batch", "unknown field"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": {"model": "llama3-8b", "tp": "8"}})", "plan.tp",
                "integer"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": {"model": "llama3-8b", "tp": 8,
                "dtype": "fp4"}})",
                "plan.dtype", "fp4"},
        BadCase{R"({"name": "a", "gpus": 8, "plan": {"model": "llama3-8b",
                "global_batch": 512}})",
                "plan.global_batch", "explicit plan"}));

TEST(JobSpecTest, AcceptsAFullSpecAndCanonicalises) {
  Result<JobSpec> r = ParseJobSpec(R"({
      "name": "llama-70b", "gpus": 1024, "gpus_per_node": 8, "gpu_type": "h100",
      "priority": 10, "preemptible": false, "grace_period_s": 120,
      "estimated_runtime_s": 86400, "command": ["torchrun", "train.py"],
      "topology": {"required": "spine", "preferred": "leaf"}})",
                                   BodyFormat::kJson);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus, 1024);
  EXPECT_EQ(r->gpu_type, "H100-SXM");
  EXPECT_FALSE(r->preemptible);
  EXPECT_EQ(r->topology_required, "spine");
  EXPECT_EQ(r->command.size(), 2u);
  std::string canonical = CanonicalJson(*r);
  Result<JobSpec> again = ParseJobSpec(canonical, BodyFormat::kJson);
  ASSERT_TRUE(again.ok()) << canonical << ": " << again.status().ToString();
  EXPECT_EQ(CanonicalJson(*again), canonical);
}

TEST(JobSpecTest, ResourcesAndSharesRoundTrip) {
  auto r = ParseJobSpec(
      R"({"name": "half", "gpus": 1, "gpu_milli": 500, "cpu_milli": 6000, "memory_mib": 12288})",
      BodyFormat::kJson);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpu_milli, 500);
  EXPECT_EQ(r->cpu_milli, 6000);
  EXPECT_EQ(r->memory_mib, 12288);
  auto back = ParseJobSpec(CanonicalJson(*r), BodyFormat::kJson);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(CanonicalJson(*back), CanonicalJson(*r));
  // A CPU-only job; gpu_milli 1000 is a whole GPU.
  auto cpu = ParseJobSpec(R"({"name": "c", "gpus": 0, "cpu_milli": 2000})", BodyFormat::kJson);
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  auto whole = ParseJobSpec(R"({"name": "w", "gpus": 1, "gpu_milli": 1000})", BodyFormat::kJson);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->gpu_milli, 0);
}

TEST(JobSpecTest, ExtendedResourcesRoundTrip) {
  auto r = ParseJobSpec(R"({"name": "x", "gpus": 8, "extended": {"rdma_nic": 4, "nvme_gb": 500}})",
                        BodyFormat::kJson);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  using Entry = std::pair<std::string, std::int64_t>;
  EXPECT_EQ(r->extended, (std::vector<Entry>{{"nvme_gb", 500}, {"rdma_nic", 4}}));
  const std::string canonical = CanonicalJson(*r);
  EXPECT_NE(canonical.find(R"("extended":{"nvme_gb":500,"rdma_nic":4})"), std::string::npos)
      << canonical;
  auto back = ParseJobSpec(canonical, BodyFormat::kJson);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->extended, r->extended);
  // YAML takes the same field; a job of extended resources alone is CPU-only.
  auto yaml =
      ParseJobSpec("name: y\ngpus: 0\nextended: {example.com/fpga: 1}\n", BodyFormat::kYaml);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  EXPECT_EQ(yaml->extended, (std::vector<Entry>{{"example.com/fpga", 1}}));
}

TEST(JobSpecTest, MinimalSpecGetsDefaults) {
  Result<JobSpec> r = ParseJobSpec(R"({"name": "a", "gpus": 1})", BodyFormat::kJson);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->preemptible);
  EXPECT_EQ(r->grace_period_s, 30);
  EXPECT_FALSE(r->tenant.has_value());
  EXPECT_EQ(CanonicalJson(*r),
            R"({"command":[],"estimated_runtime_s":0.0,"gpus":1,"grace_period_s":30.0,)"
            R"("name":"a","preemptible":true,"priority":0,"topology":{}})");
}

TEST(JobSpecTest, PlanIsValidatedAndRoundTrips) {
  Result<JobSpec> r = ParseJobSpec(R"({"name": "pretrain", "gpus": 64,
      "plan": {"model": "Llama3-70B", "tp": 8, "pp": 4, "mbs": 1, "recompute": "selective",
               "global_batch": 1024}})",
                                   BodyFormat::kJson);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->plan.has_value());
  const perf::JobPlanRequest& p = r->plan->request;
  EXPECT_EQ(p.model.name, "llama3-70b");
  ASSERT_TRUE(p.plan.has_value());
  EXPECT_EQ(p.plan->dp, 2);  // what 64 GPUs leave after tp 8 x pp 4
  EXPECT_EQ(p.plan->gpus(), 64);
  EXPECT_EQ(p.plan->recompute, perf::Recompute::kSelective);
  EXPECT_EQ(p.training.global_batch, 1024);
  std::string canonical = CanonicalJson(*r);
  EXPECT_NE(canonical.find(R"("plan":{"global_batch":1024,"mbs":1,"model":"llama3-70b",)"),
            std::string::npos)
      << canonical;
  Result<JobSpec> again = ParseJobSpec(canonical, BodyFormat::kJson);
  ASSERT_TRUE(again.ok()) << canonical << ": " << again.status().ToString();
  EXPECT_EQ(CanonicalJson(*again), canonical);
  EXPECT_EQ(again->plan->request.plan, p.plan);

  // The model alone: the planner's best plan for the job's GPUs, with its default training.
  r = ParseJobSpec("name: best\ngpus: 16\nplan: {model: llama3-8b}\n", BodyFormat::kYaml);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->plan.has_value());
  EXPECT_FALSE(r->plan->request.plan.has_value());
  EXPECT_GT(r->plan->request.training.global_batch, 0);
  canonical = CanonicalJson(*r);
  EXPECT_NE(canonical.find(R"("plan":{"model":"llama3-8b"})"), std::string::npos) << canonical;
  again = ParseJobSpec(canonical, BodyFormat::kJson);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(CanonicalJson(*again), canonical);

  // No plan: none in the canonical form either.
  r = ParseJobSpec(R"({"name": "a", "gpus": 8})", BodyFormat::kJson);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(CanonicalJson(*r).find("plan"), std::string::npos);
}

TEST(JobSpecTest, YamlBodiesUseTheSameRules) {
  Result<JobSpec> r = ParseJobSpec(
      "name: bert\ngpus: 16\ngpus_per_node: 8\npreemptible: false\ncommand: [python, '8']\n"
      "topology:\n  required: leaf\n",
      BodyFormat::kYaml);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus, 16);
  EXPECT_EQ(r->command[1], "8");
  EXPECT_EQ(r->topology_required, "leaf");

  auto field_of = [](std::string_view body) {
    Result<JobSpec> bad = ParseJobSpec(body, BodyFormat::kYaml);
    return bad.ok() ? std::string("(accepted)") : bad.status().field();
  };
  EXPECT_EQ(field_of("name: a\ngpus: '8'\n"), "gpus");
  EXPECT_EQ(field_of("name: a\ngpus: 0\n"), "gpus");
  EXPECT_EQ(field_of("name: [a\n"), "");
  EXPECT_EQ(field_of("name: a\ngpus: 8\ntopology: {required: x}\n"), "topology.required");
}

TEST(JobSpecTest, HostileYamlIsRejectedNotExpanded) {
  // "Billion laughs": each level references the previous one nine times.
  std::string doc = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string name(1, c);
    doc += fmt::format("{0}: &{0} [", name);
    for (int i = 0; i < 9; ++i) doc += (i ? ", *" : "*") + prev;
    doc += "]\n";
    prev = name;
  }
  Result<JobSpec> r = ParseJobSpec(doc, BodyFormat::kYaml);
  ASSERT_FALSE(r.ok());
  // Refused by LoadYamlBounded's walk, before the JSON conversion spends its own budget.
  EXPECT_NE(r.status().message().find("YAML nodes once aliases are expanded"), std::string::npos)
      << r.status().message();

  std::string deep(5000, '[');
  EXPECT_FALSE(ParseJobSpec(deep, BodyFormat::kYaml).ok());
  EXPECT_FALSE(ParseJobSpec(deep, BodyFormat::kJson).ok());
}

// Found by fuzz_job_spec: yaml-cpp passes any bytes through, and the canonical JSON would have
// replaced them, so the stored command differed from the submitted one.
TEST(JobSpecTest, YamlStringsMustBeUtf8) {
  Result<JobSpec> r = ParseJobSpec("name: bert\ngpus: 16\ncommand: [python3, \"\xff\x96.py\"]\n",
                                   BodyFormat::kYaml);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().field(), "command[1]");
  EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos) << r.status().message();
  EXPECT_TRUE(ParseJobSpec("name: bert\ngpus: 16\ncommand: [python3, \"\xc3\xa9t\xc3\xa9.py\"]\n",
                           BodyFormat::kYaml)
                  .ok());
}

TEST(JobSpecTest, ContentTypes) {
  EXPECT_EQ(BodyFormatFromContentType("").value(), BodyFormat::kJson);
  EXPECT_EQ(BodyFormatFromContentType("application/json; charset=utf-8").value(),
            BodyFormat::kJson);
  EXPECT_EQ(BodyFormatFromContentType("application/yaml").value(), BodyFormat::kYaml);
  EXPECT_EQ(BodyFormatFromContentType("Text/YAML").value(), BodyFormat::kYaml);
  EXPECT_FALSE(BodyFormatFromContentType("text/plain").ok());
}

// Regression (issue 15): ~120 KB of nested brackets inside `plan` (or a plan request's `model`)
// crashed the daemon: the JSON was serialised recursively while the error was built. Depth is
// now bounded before anything recursive sees the document.
TEST(JobSpecTest, DeepNestingIsRefusedWithoutRecursion) {
  const std::string deep = std::string(60'000, '[') + std::string(60'000, ']');
  for (const std::string& body : {R"({"name": "a", "gpus": 8, "plan": {"model": )" + deep + "}}",
                                  R"({"name": "a", "gpus": 8, "plan": {"tp": )" + deep + "}}",
                                  R"({"name": "a", "gpus": 8, "command": )" + deep + "}"}) {
    Result<JobSpec> r = ParseJobSpec(body, BodyFormat::kJson);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("nested deeper than 32"), std::string::npos)
        << r.status().message();
  }
  Result<JobSpec> y =
      ParseJobSpec("name: a\ngpus: 8\nplan: {model: " + deep + "}\n", BodyFormat::kYaml);
  EXPECT_FALSE(y.ok());
  for (perf::PlanQuestion q : {perf::PlanQuestion::kEstimate, perf::PlanQuestion::kSearch}) {
    Result<perf::PlanRequest> p =
        perf::ParsePlanRequest(R"({"gpus": 8, "model": )" + deep + "}", q, nullptr);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(p.status().message().find("nested deeper than"), std::string::npos)
        << p.status().message();
  }
}

// Regression (issue 15): the last of two equal keys used to win silently.
TEST(JobSpecTest, DuplicateKeysAreRefused) {
  Result<JobSpec> r = ParseJobSpec(R"({"name": "a", "gpus": 8, "gpus": 4096})", BodyFormat::kJson);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key 'gpus'"), std::string::npos)
      << r.status().message();
  r = ParseJobSpec("name: a\ngpus: 8\ngpus: 4096\n", BodyFormat::kYaml);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key 'gpus'"), std::string::npos)
      << r.status().message();
  r = ParseJobSpec(R"({"name": "a", "gpus": 8, "plan": {"model": "llama3-8b", "tp": 1, "tp": 8}})",
                   BodyFormat::kJson);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key 'tp'"), std::string::npos)
      << r.status().message();
}

TEST(JobSpecTest, ElasticRangeDefaultsAndRoundTrips) {
  Result<JobSpec> r = ParseJobSpec(R"({"name": "el", "elastic": {"min_gpus": 16, "max_gpus": 64}})",
                                   BodyFormat::kJson);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus, 16);  // starts at its smallest size
  ASSERT_TRUE(r->elastic.has_value());
  EXPECT_EQ(r->elastic->min_gpus, 16);
  EXPECT_EQ(r->elastic->max_gpus, 64);
  EXPECT_EQ(r->elastic->step_gpus, 0);  // the daemon's default for its cluster
  const std::string canonical = CanonicalJson(*r);
  EXPECT_NE(canonical.find(R"("elastic":{"max_gpus":64,"min_gpus":16})"), std::string::npos)
      << canonical;
  Result<JobSpec> again = ParseJobSpec(canonical, BodyFormat::kJson);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(CanonicalJson(*again), canonical);
  // YAML, a step and a starting size inside the range.
  r = ParseJobSpec("name: el\ngpus: 24\nelastic: {min_gpus: 16, max_gpus: 64, step_gpus: 8}\n",
                   BodyFormat::kYaml);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->gpus, 24);
  EXPECT_EQ(r->elastic->step_gpus, 8);
  // Duplicate keys inside the range are refused, as everywhere.
  r = ParseJobSpec(R"({"name": "el", "elastic": {"min_gpus": 2, "max_gpus": 4, "max_gpus": 64}})",
                   BodyFormat::kJson);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key 'max_gpus'"), std::string::npos)
      << r.status().message();
  r = ParseJobSpec("name: el\nelastic:\n  min_gpus: 2\n  min_gpus: 1\n  max_gpus: 4\n",
                   BodyFormat::kYaml);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("duplicate key 'min_gpus'"), std::string::npos)
      << r.status().message();
}

TEST(JobSpec, StageAndFederationRoundTrip) {
  const char* body = R"({"name": "a", "gpus": 8,
      "stage": [{"kind": "dataset", "name": "corpus-zh", "from": "shenzhen", "size_gib": 3072}],
      "federation": {"datasets": ["corpus-zh"], "home_site": "hefei", "require_regions": ["cn"],
                     "deadline": "2026-12-01T18:00:00Z", "checkpoint_gib": 120}})";
  Result<JobSpec> spec = ParseJobSpec(body, BodyFormat::kJson);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->stage.size(), 1u);
  EXPECT_EQ(spec->stage[0].from, "shenzhen");
  EXPECT_EQ(spec->stage[0].size_gib, 3072);
  ASSERT_TRUE(spec->federation);
  EXPECT_EQ(spec->federation->home_site, "hefei");
  ASSERT_TRUE(spec->federation->deadline_unix_s);
  EXPECT_EQ(*spec->federation->deadline_unix_s, 1796148000.0);  // date -d ... +%s
  std::string canonical = CanonicalJson(*spec);
  Result<JobSpec> again = ParseJobSpec(canonical, BodyFormat::kJson);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(CanonicalJson(*again), canonical);
}

}  // namespace
}  // namespace baton::server
