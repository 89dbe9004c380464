#include "server/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace baton::server {
namespace {

TEST(MetricsTest, RendersTextFormat004) {
  Registry r;
  auto& requests = r.AddCounter("baton_submissions_total", "Jobs submitted.", {"tenant"});
  auto& jobs = r.AddGauge("baton_jobs", "Jobs by state.", {"state"});
  auto& latency = r.AddHistogram("baton_http_request_duration_seconds", "Request latency.",
                                 {"method", "route", "code"}, {0.01, 0.1});
  requests.WithLabels({"a\"b\\c\nd"}).Increment(3);
  jobs.WithLabels({"queued"}).Set(2);
  jobs.WithLabels({"running"}).Set(0.5);
  auto& h = latency.WithLabels({"POST", "/api/v1/jobs", "201"});
  h.Observe(0.005);
  h.Observe(0.01);  // on a bound: counts in that bucket (le is inclusive)
  h.Observe(3);
  EXPECT_EQ(r.Render(),
            "# HELP baton_submissions_total Jobs submitted.\n"
            "# TYPE baton_submissions_total counter\n"
            "baton_submissions_total{tenant=\"a\\\"b\\\\c\\nd\"} 3\n"
            "# HELP baton_jobs Jobs by state.\n"
            "# TYPE baton_jobs gauge\n"
            "baton_jobs{state=\"queued\"} 2\n"
            "baton_jobs{state=\"running\"} 0.5\n"
            "# HELP baton_http_request_duration_seconds Request latency.\n"
            "# TYPE baton_http_request_duration_seconds histogram\n"
            "baton_http_request_duration_seconds_bucket{method=\"POST\",route=\"/api/v1/jobs\","
            "code=\"201\",le=\"0.01\"} 2\n"
            "baton_http_request_duration_seconds_bucket{method=\"POST\",route=\"/api/v1/jobs\","
            "code=\"201\",le=\"0.1\"} 2\n"
            "baton_http_request_duration_seconds_bucket{method=\"POST\",route=\"/api/v1/jobs\","
            "code=\"201\",le=\"+Inf\"} 3\n"
            "baton_http_request_duration_seconds_sum{method=\"POST\",route=\"/api/v1/jobs\","
            "code=\"201\"} 3.015\n"
            "baton_http_request_duration_seconds_count{method=\"POST\",route=\"/api/v1/jobs\","
            "code=\"201\"} 3\n");
}

TEST(MetricsTest, UnlabelledMetricsAndHooks) {
  Registry r;
  auto& up = r.AddGauge("baton_up", "1 when serving.");
  int calls = 0;
  r.AddCollectHook([&] {
    ++calls;
    up.WithLabels({}).Set(1);
  });
  EXPECT_EQ(r.Render(), "# HELP baton_up 1 when serving.\n# TYPE baton_up gauge\nbaton_up 1\n");
  EXPECT_EQ(calls, 1);
}

TEST(MetricsTest, ConcurrentUpdatesAreNotLost) {
  Registry r;
  auto& c = r.AddCounter("baton_x_total", "x", {"k"});
  auto& h = r.AddHistogram("baton_y_seconds", "y", {}, LatencyBuckets());
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        c.WithLabels({"v"}).Increment();
        h.WithLabels({}).Observe(0.001);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.WithLabels({"v"}).value(), 40000);
  EXPECT_EQ(h.WithLabels({}).count(), 40000u);
}

TEST(MetricsDeathTest, BadNamesAreProgrammingErrors) {
  Registry r;
  EXPECT_DEATH(r.AddCounter("bad-name", "x"), "bad metric name");
  EXPECT_DEATH(r.AddCounter("ok", "x", {"__reserved"}), "bad label name");
}

}  // namespace
}  // namespace baton::server
