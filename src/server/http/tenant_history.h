// The dashboard's tenants view: per tenant, its quota, the GPUs it holds, the GPUs its queued jobs
// ask for and its fair share, now and over the last hour. A sampler thread measures every
// `interval` (10 s in the daemon) into a ring of at most `capacity` samples (360: one hour), each
// of at most kMaxTenantsPerSample tenants, so the history holds at most 360 x 256 points whatever
// the cluster does.
//
// Fair share is the weighted max-min share of the cluster's GPUs (water-filling): GPUs are
// offered in proportion to the tenants' weights (the `drf` queue's, 1 by default) among tenants
// that want more, and no tenant gets more than it wants (held + queued GPUs) or than its quota.
// It is what each tenant would hold if the cluster were shared fairly given today's demand, to
// compare with what it does hold.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "server/controller.h"
#include "server/http/auth.h"
#include "server/store/job_store.h"

namespace baton::server {

// One tenant's demand for FairShares.
struct TenantDemand {
  double wants = 0;           // GPUs held plus GPUs asked by its queued jobs
  std::optional<double> cap;  // its quota; nullopt: none
  double weight = 1;          // > 0
};

// Weighted max-min fair shares of `total` GPUs (water-filling). Each tenant gets at most
// min(wants, cap); the shares add up to min(total, sum of those). Tenants with weight <= 0 or
// nothing wanted get 0.
std::map<std::string, double> FairShares(double total,
                                         const std::map<std::string, TenantDemand>& demand);

inline constexpr std::size_t kMaxTenantsPerSample = 256;
// Queued jobs read per sample (their GPUs are the pending demand); beyond this the demand is
// undercounted, and the answer says so ("pending_truncated").
inline constexpr int kMaxQueuedJobsPerSample = 10'000;

class TenantHistory {
 public:
  struct Point {
    std::int64_t used = 0;     // GPUs held by its running jobs
    std::int64_t pending = 0;  // GPUs its queued jobs ask for
    double fair_share = 0;
  };
  struct Sample {
    double time = 0;  // seconds since the epoch
    std::int64_t cluster_gpus = 0;
    bool pending_truncated = false;
    std::map<std::string, Point> tenants;  // at most kMaxTenantsPerSample: the largest by demand
  };

  // Nothing is owned; both must outlive this object. The thread starts with Start().
  TenantHistory(JobStore& store, const Controller& controller,
                std::chrono::milliseconds interval = std::chrono::seconds(10),
                std::size_t capacity = 360);
  ~TenantHistory();  // stops and joins the sampler
  TenantHistory(const TenantHistory&) = delete;
  TenantHistory& operator=(const TenantHistory&) = delete;

  // Starts the sampler thread: a sample at once, then one per interval.
  void Start();

  // Measures now (reads the controller's snapshot and the store's queued jobs).
  Sample Measure() const;
  // Appends to the ring (the oldest sample goes when it is full).
  void Record(Sample sample);

  // {"interval_s", "capacity", "cluster_gpus", "pending_truncated", "tenants": [{"tenant",
  // "quota_gpus", "guaranteed_gpus", "borrowable_gpus", "weight", "used", "pending",
  // "fair_share"}], "history": {"time": [...], "tenants": {NAME: {"used": [...], "pending":
  // [...], "fair_share": [...]}}}}: the recorded samples followed by `now`. An admin sees every
  // tenant; a tenant principal only its own (its fair share is computed against everyone's
  // demand, but no other tenant's name or figures are in the answer).
  nlohmann::json Json(const Sample& now, const Principal& who) const;

 private:
  void Run();

  JobStore& store_;
  const Controller& controller_;
  const std::chrono::milliseconds interval_;
  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<Sample> ring_;
  std::thread thread_;
};

}  // namespace baton::server
