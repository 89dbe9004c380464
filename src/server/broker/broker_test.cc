// The broker's checks that need no site: admission against the sites file and quotas, token
// resolution, what-if answers that contradict a site's capacity, the API's time format, the
// shipped sites file. Routing, dispatch and re-dispatch against real sites are
// tests/federation/federation_e2e.sh.
#include "server/broker/broker.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace baton::server {
namespace {

constexpr const char* kSites = R"(sites:
  shenzhen:
    url: http://127.0.0.1:1
    token_env: SZ_TOKEN
    regions: [cn, cn-south]
    datasets:
      corpus-zh: {size_gib: 3072}
  hefei:
    url: http://127.0.0.1:2
    token_env: HF_TOKEN
    regions: [cn]
wan:
  - {between: [shenzhen, hefei], gbps: 10, latency_ms: 28}
)";

const char* AllTokens(const char* name) {
  if (std::strcmp(name, "SZ_TOKEN") == 0) return "sz-token-0123456789";
  if (std::strcmp(name, "HF_TOKEN") == 0) return "hf-token-0123456789";
  if (std::strcmp(name, "BATON_TOKEN") == 0) return "broker-own-token-0123456789";
  return nullptr;
}
const char* OnlyShenzhen(const char* name) {
  if (std::strcmp(name, "SZ_TOKEN") == 0) return "sz-token-0123456789";
  if (std::strcmp(name, "BATON_TOKEN") == 0) return "broker-own-token-0123456789";
  return nullptr;
}

std::unique_ptr<Broker> MakeBroker(BrokerOptions options = {}) {
  Result<federation::Sites> sites = federation::ParseSites(kSites, "sites.yaml");
  EXPECT_TRUE(sites.ok()) << sites.status().ToString();
  static SystemClock clock;
  Result<std::unique_ptr<Broker>> b =
      Broker::Create(std::move(sites).value(), std::move(options), clock, &AllTokens);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return b.ok() ? std::move(b).value() : nullptr;
}

JobSpec Spec(std::string_view body) {
  Result<JobSpec> spec = ParseJobSpec(body, BodyFormat::kJson);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  JobSpec s = std::move(spec).value();
  if (!s.tenant) s.tenant = "team-a";
  return s;
}

TEST(BrokerTest, ATokenVariableThatIsNotSetNamesTheSite) {
  Result<federation::Sites> sites = federation::ParseSites(kSites, "sites.yaml");
  ASSERT_TRUE(sites.ok());
  SystemClock clock;
  Result<std::unique_ptr<Broker>> b =
      Broker::Create(std::move(sites).value(), {}, clock, &OnlyShenzhen);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "site 'hefei': its token variable $HF_TOKEN is not set");
}

// The broker's own token (set here as $BATON_TOKEN) is never sent to a site in place of one of
// its own: the site is refused at start, naming the file, the line and the field.
TEST(BrokerTest, ASiteWithoutItsOwnTokenIsRefused) {
  std::string text = kSites;
  text.replace(text.find("    token_env: HF_TOKEN\n"), 24, "");
  Result<federation::Sites> sites = federation::ParseSites(text, "sites.yaml");
  ASSERT_TRUE(sites.ok()) << sites.status().ToString();
  SystemClock clock;
  Result<std::unique_ptr<Broker>> b =
      Broker::Create(std::move(sites).value(), {}, clock, &AllTokens);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(),
            "sites.yaml:8: field 'sites.hefei.token_env': missing: the broker needs a token of "
            "its own for each site (it never sends its own)");
}

TEST(BrokerTest, AnUnknownPolicyIsRefused) {
  Result<federation::Sites> sites = federation::ParseSites(kSites, "sites.yaml");
  ASSERT_TRUE(sites.ok());
  SystemClock clock;
  BrokerOptions o;
  o.policy = "fastest";
  Result<std::unique_ptr<Broker>> b =
      Broker::Create(std::move(sites).value(), o, clock, &AllTokens);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("predicted-completion"), std::string::npos);
}

struct AdmitCase {
  const char* body;
  const char* field;  // "": admitted
  const char* message_part;
};

class BrokerAdmits : public ::testing::TestWithParam<AdmitCase> {};

TEST_P(BrokerAdmits, ByTheSitesFileAndTheQuota) {
  BrokerOptions o;
  o.quota_gpus = {{"team-a", 64}};
  auto broker = MakeBroker(o);
  ASSERT_NE(broker, nullptr);
  const AdmitCase& c = GetParam();
  Status st = broker->Admit(Spec(c.body));
  if (std::string(c.field).empty()) {
    EXPECT_TRUE(st.ok()) << st.ToString();
    return;
  }
  ASSERT_FALSE(st.ok()) << c.body;
  EXPECT_EQ(st.field(), c.field);
  EXPECT_NE(st.message().find(c.message_part), std::string::npos) << st.message();
}

INSTANTIATE_TEST_SUITE_P(
    Table, BrokerAdmits,
    ::testing::Values(
        AdmitCase{R"({"name": "a", "gpus": 8, "federation": {"datasets": ["corpus-zh"],
                     "home_site": "hefei", "require_regions": ["cn"]}})",
                  "", ""},
        AdmitCase{R"({"name": "a", "gpus": 8, "federation": {"datasets": ["corpus-en"]}})",
                  "federation.datasets[0]", "no site stores a dataset 'corpus-en'"},
        AdmitCase{R"({"name": "a", "gpus": 8, "federation": {"home_site": "beijing"}})",
                  "federation.home_site", "unknown site 'beijing'"},
        AdmitCase{R"({"name": "a", "gpus": 8, "federation": {"require_regions": ["eu"]}})",
                  "federation.require_regions[0]", "no site is in region 'eu'"},
        AdmitCase{R"({"name": "a", "gpus": 8, "stage": [{"kind": "dataset", "name": "x",
                     "from": "hefei"}]})",
                  "stage", "the broker fills it"},
        AdmitCase{R"({"name": "a", "gpus": 128})", "gpus",
                  "in flight across the federation (64)"}));

struct LieCase {
  int free_gpus;
  int total_gpus;
  std::int64_t capacity;  // what the site last reported; 0: not known
  std::int64_t job_gpus;
  bool refused;
  const char* contradiction;  // "": none
};

class BrokerJudgesWhatIf : public ::testing::TestWithParam<LieCase> {};

TEST_P(BrokerJudgesWhatIf, AgainstTheSitesLastReportedCapacity) {
  const LieCase& c = GetParam();
  federation::SiteAnswer a;
  a.reachable = true;
  a.free_gpus = c.free_gpus;
  a.total_gpus = c.total_gpus;
  if (c.refused) a.refusal = "400 never fits";
  EXPECT_EQ(ContradictsCapacity(a, c.capacity, c.job_gpus), c.contradiction);
}

INSTANTIATE_TEST_SUITE_P(
    Table, BrokerJudgesWhatIf,
    ::testing::Values(LieCase{16, 64, 64, 8, false, ""},  // honest
                      LieCase{0, 0, 64, 8, false, ""},    // counts not given
                      LieCase{16, 64, 0, 8, false, ""},   // capacity not known yet
                      LieCase{0, 64, 64, 128, true, ""},  // too large, and says so
                      LieCase{65, 64, 0, 8, false, "says 65 GPUs are free of its 64"},
                      LieCase{4096, 4096, 64, 8, false,
                              "says it has 4096 GPUs; it last reported 64"},
                      LieCase{100, 0, 64, 8, false, "says 100 GPUs are free of its 0"},
                      LieCase{0, 64, 64, 128, false,
                              "would take a 128-GPU job; it last reported 64 GPUs in all"}));

const char* ShippedTokens(const char* name) {
  return std::string_view(name).starts_with("BATON_SITE_") ? "site-token-0123456789" : nullptr;
}

// data/federation/sites.yaml is what an operator starts from: the broker takes it, and a job can
// name every dataset it stores and be routed (from each site's answer) to some site.
TEST(BrokerTest, TheShippedSitesFileValidatesAndRoutesItsOwnDatasets) {
  Result<federation::Sites> sites = federation::LoadSitesFile("data/federation/sites.yaml");
  ASSERT_TRUE(sites.ok()) << sites.status().ToString();
  const federation::Sites copy = *sites;
  SystemClock clock;
  Result<std::unique_ptr<Broker>> broker =
      Broker::Create(std::move(sites).value(), {}, clock, &ShippedTokens);
  ASSERT_TRUE(broker.ok()) << broker.status().ToString();
  Result<const federation::RoutingPolicy*> policy =
      federation::FindRoutingPolicy("predicted-completion");
  ASSERT_TRUE(policy.ok());
  std::vector<federation::SiteAnswer> answers(copy.sites().size());
  for (federation::SiteAnswer& a : answers) {
    a.reachable = true;
    a.free_gpus = a.total_gpus = 512;
  }
  int datasets = 0;
  for (const federation::Site& site : copy.sites()) {
    for (const federation::Dataset& d : site.datasets) {
      ++datasets;
      JobSpec spec = Spec(fmt::format(
          R"({{"name": "ft", "gpus": 8, "estimated_runtime_s": 3600,
               "federation": {{"datasets": ["{}"]}}}})",
          d.name));
      Status st = (*broker)->Admit(spec);
      EXPECT_TRUE(st.ok()) << d.name << ": " << st.ToString();
      federation::JobNeeds needs;
      needs.name = "ft";
      needs.gpus = 8;
      needs.datasets = {d.name};
      needs.estimated_runtime = Seconds(3600);
      Result<federation::RouteDecision> r =
          federation::Route(needs, copy, answers, TimePoint{Seconds(1e9)}, **policy);
      ASSERT_TRUE(r.ok()) << d.name << ": " << r.status().ToString();
      // With every site alike, the data decides: the job runs where its dataset is.
      EXPECT_EQ(copy.sites()[r->site].name, site.name) << d.name << ": " << r->explanation;
    }
  }
  EXPECT_EQ(datasets, 21);
}

TEST(BrokerTest, ReadsTheApiTimeFormat) {
  std::optional<TimePoint> t = ParseApiTime("2026-12-01T18:00:00.250Z");
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->since_epoch.value(), 1796148000.25);  // date -d 2026-12-01T18:00:00Z +%s
  EXPECT_TRUE(ParseApiTime("2026-12-01T18:00:00Z"));
  EXPECT_FALSE(ParseApiTime("2026-12-01 18:00:00Z"));
  EXPECT_FALSE(ParseApiTime("2026-12-01T18:00:00.2x0Z"));
  EXPECT_FALSE(ParseApiTime(""));
}

}  // namespace
}  // namespace baton::server
