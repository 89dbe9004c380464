// Broker: the controller of `baton federate`, a daemon in front of several sites (each a `baton
// serve`). It plugs into the same Server as the scheduling daemon (server.h: API, tenants and
// tokens, connection guards, bounded bodies, the job store), so the broker's API, client and
// store are serve's; a job spec carries its federation fields (http/job_spec.h FederationFields).
//
// For each job the broker asks every eligible site's POST /api/v1/whatif (in parallel, with one
// deadline for the whole round: a site that has not answered by then is left out of the round and
// shown as slow in /api/v1/sites; an answer that contradicts the site's last reported GPU count is
// ignored and logged), routes with federation::Route under the configured policy, records the
// explanation in the job's events and dispatches the job to the chosen site with an
// Idempotency-Key derived from (broker instance, broker job id, attempt). It follows each
// dispatched job by polling it at its site and every site's /healthz, and re-dispatches (a new
// attempt, a new key) when the site refuses or loses the job, or stays unreachable past the site
// timeout; the old copy is cancelled at its site as soon as that site answers again.
//
// What the broker guarantees (ARCHITECTURE.md, federation):
//  * No duplicate from a retry: every dispatch is first recorded in the store ("dispatching",
//    with its site, key and body), then sent; a broker that crashes or times out in between
//    resends the same body with the same key to the same site, which answers with the job it
//    already created (site side: http/api.cc, before any other check).
//  * One live attempt: a new attempt is made only after the previous one was refused, lost by
//    its site, or its site was unreachable for the whole site timeout; the abandoned copy is
//    recorded ("orphaned") and cancelled at its site when the site answers again, and its outcome
//    is never taken for the job's.
//  * Not guaranteed: a site that is partitioned from the broker but alive keeps running the
//    abandoned copy until the broker reaches it again (sites hold no lease from the broker), so
//    during a partition longer than the site timeout the job may run at two sites at once.
//
// Threading: one loop thread does all the network calls and store writes after Start; the
// Controller calls (from HTTP threads) only enqueue or read a snapshot under a mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/units.h"
#include "federation/routing.h"
#include "federation/sites.h"
#include "sched/framework/tenancy.h"
#include "server/broker/site_client.h"
#include "server/controller.h"
#include "server/metrics.h"

namespace baton::server {

struct BrokerOptions {
  std::string policy = "predicted-completion";  // federation::RoutingPolicies() by name
  // A site that has not answered for this long is down: its jobs are re-dispatched elsewhere.
  Seconds site_timeout{30};
  Seconds poll_interval{2};  // how often sites and dispatched jobs are polled
  // The deadline of each call to a site on the dispatch path (submit, poll, cancel) and of each
  // health check: the whole exchange, not each read.
  Seconds request_timeout{5};
  // The deadline of a what-if round: every eligible site is asked at once, and a site that has
  // not answered in full by then is left out of the round (and of the rest of that pass).
  Seconds whatif_timeout{3};
  // GPUs a federation tenant may have in flight (dispatched, not finished), by tenant; "*" for
  // every tenant not listed. Absent: unlimited. Jobs past it wait at the broker.
  std::map<std::string, std::int64_t> quota_gpus;
  // The federation's own tenancy policy (the `tenancy:` section of a scheduler config,
  // docs/tenancy.md): each tenant's priority range, checked at submit before any site is asked,
  // and its GPU quota (quota.gpus) as GPUs in flight, where quota_gpus names none. Sites apply
  // their own policies on top.
  sched::TenancyPolicy tenancy;
  // Idempotency keys are "<prefix>-<instance>-<job>-<attempt>": the instance id is random when
  // the broker's store has recorded no dispatch yet and read back from the store after, so a
  // broker restarted on a fresh database never reuses an earlier broker's key; the prefix keeps
  // brokers sharing a site apart by name.
  std::string key_prefix = "baton-fed";
};

class Broker final : public Controller {
 public:
  static const char* DefaultGetenv(const char* name);
  // Resolves each site's token from its own token_env variable through `getenv` (never the
  // broker's token: a site may be hostile); kInvalidArgument naming the sites file, the site's
  // line and the field for a site without token_env, naming the site and the variable when it
  // is unset, or for an unknown policy or a non-positive interval. `clock` (not owned) outlives the
  // broker.
  static Result<std::unique_ptr<Broker>> Create(
      federation::Sites sites, BrokerOptions options, const Clock& clock,
      const char* (*getenv)(const char*) = &DefaultGetenv);
  ~Broker() override;

  Status Start(JobStore& store, Registry& metrics) override;
  void Stop() override;
  void OnJobSubmitted(const JobRecord& job, JobSpec spec) override;
  void OnJobCancelRequested(const JobRecord& job) override;
  void OnNodeAdminChanged(const NodeAdminState&) override {}
  // The federation fields against the sites file (known datasets and sites, regions some site
  // carries), no `stage` (the broker fills it), and the tenant's quota.
  Status Admit(const JobSpec& spec) const override;
  Status CheckTenantPolicy(std::string_view tenant, int priority) const override {
    return options_.tenancy.CheckPriority(tenant, priority);
  }
  std::optional<PlacementView> JobPlacement(JobId job) const override;
  std::optional<std::vector<SiteView>> Sites() const override;
  std::int64_t StateVersion() const override { return version_.load(); }

 private:
  struct Attempt {
    int number = 0;
    int site = -1;
    std::string key;
    std::string body;           // what was sent (resent as it was on a retry)
    std::int64_t site_job = 0;  // 0: not confirmed by the site yet
    // When the broker last heard the site answer about this attempt (each such look renews the
    // attempt's lease there); unset: never since this broker started (none was granted by it).
    std::optional<TimePoint> renewed_at;
  };
  struct FedJob {
    JobRecord record;
    JobSpec spec;
    int attempts_made = 0;
    std::optional<Attempt> current;
    std::string site_state;
    std::set<int> refused;     // sites that refused or lost this job
    int checkpoint_site = -1;  // where its last checkpoint is (the site it last ran at)
    std::string waiting;       // why it waits at the broker
  };
  struct Orphan {
    std::string tenant;  // the job's: the site knows the copy as that tenant's
    int site = -1;
    SiteAttempt row;  // the abandoned attempt, as stored
  };
  struct SiteState {
    std::unique_ptr<SiteClient> client;
    std::optional<TimePoint> last_ok;
    TimePoint down_since;  // first failed health check since last_ok
    bool failing = false;
    std::string last_error;
    std::optional<TimePoint> last_answer_at;
    std::string last_answer;
    std::int64_t capacity = 0;  // GPUs, from its last topology answer; 0: not known
    // Why it was left out of its last what-if round (slow, too large, garbage, a contradiction);
    // empty when it answered that round. Shown with last_error in /api/v1/sites.
    std::string left_out;
    // A call to it missed its deadline or got no answer in this pass of the loop: it is not
    // asked again until the next pass, so one slow site costs a pass one deadline, not one per
    // job.
    bool skip_pass = false;
  };

  Broker(federation::Sites sites, BrokerOptions options, const federation::RoutingPolicy& policy,
         const Clock& clock);

  void Loop();
  void RunOnce();
  Status Recover();
  void CheckHealth();
  bool SiteDown(int site) const;  // unreachable for the whole site timeout
  // The lease a site grants a dispatched attempt, renewed by every look at it (LeaseSeconds).
  std::int64_t LeaseSeconds() const;
  // Whether the site's lease on `a` has surely lapsed: the attempt is fenced there, so the job
  // may run elsewhere.
  bool LeaseLapsed(const Attempt& a) const;
  void CancelOrphans();
  void OrphanSucceeded(const Orphan& o);
  void Drain();  // takes the inbox
  void Step(FedJob& job);
  void Route(FedJob& job, std::int64_t tenant_in_flight);
  void SendDispatch(FedJob& job);
  void Abandon(FedJob& job, std::string_view kind, const std::string& why);
  // The store's row for attempt `a` of `job` in `state`; Put writes it (a failure is logged).
  SiteAttempt Row(const FedJob& job, const Attempt& a, SiteAttemptState state) const;
  void Put(const SiteAttempt& row);
  void Finish(FedJob& job, JobState to, const std::string& message);
  void Event(JobId job, std::string_view kind, const std::string& message);
  void Publish();
  std::string SiteSpec(const JobSpec& spec) const;
  std::int64_t QuotaFor(const std::string& tenant) const;  // -1: unlimited

  const federation::Sites sites_;
  const BrokerOptions options_;
  const federation::RoutingPolicy& policy_;
  const Clock& clock_;
  std::vector<SiteState> site_state_;  // loop thread only
  std::string instance_;               // this store's broker instance id; set by Recover
  JobStore* store_ = nullptr;
  Family<Counter>* dispatches_ = nullptr;
  Family<Gauge>* site_up_ = nullptr;

  std::map<JobId, FedJob> jobs_;  // loop thread only: the jobs not finished
  std::vector<Orphan> orphans_;   // loop thread only

  std::mutex inbox_mu_;
  std::condition_variable wake_;
  std::vector<FedJob> submitted_;  // with the spec the API parsed
  std::vector<JobRecord> cancelled_;
  bool stop_ = false;

  mutable std::mutex view_mu_;  // what the HTTP threads read
  std::map<JobId, PlacementView> job_views_;
  std::vector<SiteView> site_views_;
  std::atomic<std::int64_t> version_{0};

  std::thread thread_;
};

}  // namespace baton::server
