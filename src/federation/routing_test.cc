#include "federation/routing.h"

#include <gtest/gtest.h>

namespace baton::federation {
namespace {

// The seed article's case: the data in Shenzhen, the free capacity in Hefei.
constexpr const char* kSites = R"(sites:
  shenzhen:
    url: http://127.0.0.1:8081
    regions: [cn, cn-south]
    price_per_gpu_hour: 2.0
    datasets: {corpus-zh: {size_gib: 3072}}
  hefei:
    url: http://127.0.0.1:8082
    regions: [cn]
    price_per_gpu_hour: 1.5
  frankfurt:
    url: http://127.0.0.1:8083
    regions: [eu]
    price_per_gpu_hour: 1.0
wan:
  - {between: [shenzhen, hefei], gbps: 10, latency_ms: 28}
  - {between: [hefei, frankfurt], gbps: 10, latency_ms: 200}
  - {between: [frankfurt, shenzhen], gbps: 1, latency_ms: 220}
)";

class RoutingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = ParseSites(kSites, "sites.yaml");
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    sites_ = *std::move(s);
    for (SiteAnswer& a : answers_) {
      a.reachable = true;
      a.total_gpus = 1024;
      a.free_gpus = 512;
    }
    job_.name = "pretrain";
    job_.gpus = 256;
    job_.home_site = "shenzhen";
    job_.datasets = {"corpus-zh"};
    job_.estimated_runtime = Hours(10);
  }
  const RoutingPolicy& Policy(std::string_view name) { return **FindRoutingPolicy(name); }

  Sites sites_;
  std::array<SiteAnswer, 3> answers_;
  JobNeeds job_;
  TimePoint now_{Seconds(1e9)};
};

TEST_F(RoutingTest, PredictedCompletionWeighsQueueWaitAgainstStaging) {
  answers_[0].estimated_start = now_ + Hours(6);  // Shenzhen: the data, but a long queue
  answers_[0].queue_position = 12;
  auto d = Route(job_, sites_, answers_, now_, Policy("predicted-completion"));
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  // Hefei: 3 TiB over 10 Gb/s is 44 min of staging, and no queue.
  EXPECT_EQ(sites_.sites()[d->site].name, "hefei");
  EXPECT_NEAR(d->predictions[1].staging.value(), 3.0 * (1ull << 40) * 8 / 1e10 + 0.028, 1e-3);
  EXPECT_EQ(d->predictions[1].start, now_ + d->predictions[1].staging);
  EXPECT_EQ(d->explanation,
            "hefei by predicted-completion: start +44 min, staging 44 min → done 5.27 h earlier "
            "than shenzhen");
  // Home-site routing keeps it in Shenzhen whatever the queue.
  d = Route(job_, sites_, answers_, now_, Policy("home-site"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->site, 0);
}

TEST_F(RoutingTest, FasterGpusCountThroughTheStepTime) {
  job_.datasets.clear();
  job_.steps = 1000;
  answers_[0].step_time = Seconds(13);
  answers_[1].step_time = Seconds(10);  // 1.3x faster
  answers_[2].step_time = Seconds(20);
  auto d = Route(job_, sites_, answers_, now_, Policy("predicted-completion"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->site, 1);
  EXPECT_DOUBLE_EQ(d->predictions[1].run.value(), 10'000);
  EXPECT_NE(d->explanation.find("1.30x faster"), std::string::npos) << d->explanation;
}

TEST_F(RoutingTest, LeastLoadedTakesTheLargestFreeShare) {
  answers_[2].free_gpus = 1000;
  auto d = Route(job_, sites_, answers_, now_, Policy("least-loaded"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->site, 2);
}

TEST_F(RoutingTest, RegionsAndReachabilityDecideEligibility) {
  answers_[2].free_gpus = 1000;
  job_.require_regions = {"cn"};  // data sovereignty: Frankfurt is out
  auto d = Route(job_, sites_, answers_, now_, Policy("least-loaded"));
  ASSERT_TRUE(d.ok());
  EXPECT_NE(d->site, 2);
  EXPECT_EQ(d->predictions[2].why_not, "not in region 'cn'");

  job_.require_regions.clear();
  job_.exclude_regions = {"cn-south"};
  answers_[1].reachable = false;
  answers_[2].refusal = "quota";
  d = Route(job_, sites_, answers_, now_, Policy("predicted-completion"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(d.status().message(),
            "no site for job 'pretrain' under predicted-completion: shenzhen: in excluded region "
            "'cn-south'; hefei: unreachable; frankfurt: refuses: quota");
}

TEST_F(RoutingTest, CheapestByDeadlineMeetsTheDeadlineAtTheLowestCost) {
  job_.datasets.clear();
  job_.deadline = now_ + Hours(12);
  answers_[2].estimated_start = now_ + Hours(1);  // Frankfurt: cheapest, done at +11 h
  auto d = Route(job_, sites_, answers_, now_, Policy("cheapest-by-deadline"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->site, 2);
  answers_[2].estimated_start = now_ + Hours(3);  // now too late: Hefei is next cheapest
  d = Route(job_, sites_, answers_, now_, Policy("cheapest-by-deadline"));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->site, 1);
}

TEST_F(RoutingTest, BadJobsAreRefusedNamingTheField) {
  job_.deadline = now_ + Minutes(10);   // 3 TiB cannot leave Shenzhen in 10 minutes...
  job_.exclude_regions = {"cn-south"};  // ...and Shenzhen itself is excluded
  auto d = Route(job_, sites_, answers_, now_, Policy("predicted-completion"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "field 'deadline': dataset 'corpus-zh' (3072 GiB) cannot reach any eligible site "
            "before the deadline (in 10 min) over the WAN links of the sites file");
  job_ = JobNeeds{};
  job_.datasets = {"corpus-en"};
  EXPECT_EQ(Route(job_, sites_, answers_, now_, Policy("home-site")).status().message(),
            "field 'datasets[0]': no site stores dataset 'corpus-en'");
  job_.datasets.clear();
  job_.checkpoint_site = "wuhan";
  EXPECT_EQ(Route(job_, sites_, answers_, now_, Policy("home-site")).status().message(),
            "field 'checkpoint_site': unknown site 'wuhan'");
  EXPECT_FALSE(FindRoutingPolicy("random").ok());
  EXPECT_EQ(FindRoutingPolicy("random").status().message(),
            "unknown routing policy 'random' (known: home-site, least-loaded, "
            "predicted-completion, cheapest-by-deadline)");
}

}  // namespace
}  // namespace baton::federation
