#include "server/broker/broker.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <future>
#include <limits>
#include <random>

#include "core/bounded_input.h"
#include "core/log.h"

namespace baton::server {
namespace {

std::chrono::milliseconds Millis(Seconds s) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::llround(s.value() * 1e3)));
}

// The INSTANCE of a key PREFIX-INSTANCE-JOB-ATTEMPT (the prefix may hold '-'); empty if none.
std::string InstanceOfKey(std::string_view key) {
  std::size_t attempt = key.rfind('-');
  if (attempt == std::string_view::npos || attempt == 0) return "";
  std::size_t job = key.rfind('-', attempt - 1);
  if (job == std::string_view::npos || job == 0) return "";
  std::size_t instance = key.rfind('-', job - 1);
  if (instance == std::string_view::npos) return "";
  return std::string(key.substr(instance + 1, job - instance - 1));
}

Bytes Gib(double gib) { return Bytes(gib * 1024.0 * 1024.0 * 1024.0); }

// A broker instance id: 16 hex digits, random.
std::string NewInstanceId() {
  std::random_device rd;
  std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  return fmt::format("{:016x}", v);
}

bool IsInstanceId(std::string_view s) {
  return s.size() == 16 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

const char* Broker::DefaultGetenv(const char* name) { return std::getenv(name); }

Result<std::unique_ptr<Broker>> Broker::Create(federation::Sites sites, BrokerOptions options,
                                               const Clock& clock,
                                               const char* (*getenv)(const char*)) {
  ASSIGN_OR_RETURN(const federation::RoutingPolicy* policy,
                   federation::FindRoutingPolicy(options.policy));
  if (!(options.site_timeout.value() > 0) || !(options.poll_interval.value() > 0) ||
      !(options.request_timeout.value() > 0) || !(options.whatif_timeout.value() > 0)) {
    return InvalidArgumentError(
        "the site timeout, poll interval, request timeout and what-if timeout must be > 0");
  }
  for (const auto& [tenant, gpus] : options.quota_gpus) {
    if (gpus < 0) {
      return InvalidArgumentError(fmt::format("quota for tenant '{}' is negative", tenant));
    }
  }
  std::vector<std::string> tokens;
  for (const federation::Site& site : sites.sites()) {
    // No fallback to the broker's own token: a site would then hold a credential of the
    // broker (in the README, an admin's), usable at the broker and at every other site.
    if (site.token_env.empty()) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: field 'sites.{}.token_env': missing: the broker needs a token of its own for "
          "each site (it never sends its own)",
          sites.source(), site.line, site.name));
    }
    const char* token = getenv(site.token_env.c_str());
    if (token == nullptr || *token == '\0') {
      return InvalidArgumentError(
          fmt::format("site '{}': its token variable ${} is not set", site.name, site.token_env));
    }
    tokens.emplace_back(token);
  }
  auto broker =
      std::unique_ptr<Broker>(new Broker(std::move(sites), std::move(options), *policy, clock));
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    broker->site_state_[i].client = std::make_unique<SiteClient>(
        broker->sites_.sites()[i].url, tokens[i], broker->options_.request_timeout);
  }
  return broker;
}

Broker::Broker(federation::Sites sites, BrokerOptions options,
               const federation::RoutingPolicy& policy, const Clock& clock)
    : sites_(std::move(sites)),
      options_(std::move(options)),
      policy_(policy),
      clock_(clock),
      site_state_(sites_.sites().size()) {}

Broker::~Broker() { Stop(); }

std::int64_t Broker::QuotaFor(const std::string& tenant) const {
  auto it = options_.quota_gpus.find(tenant);
  if (it == options_.quota_gpus.end()) it = options_.quota_gpus.find("*");
  if (it != options_.quota_gpus.end()) return it->second;
  const sched::TenantPolicy* p = options_.tenancy.Find(tenant);
  return p != nullptr && p->max_gpus ? *p->max_gpus : -1;
}

Status Broker::Admit(const JobSpec& spec) const {
  if (!spec.stage.empty()) {
    return InvalidFieldError("stage",
                             "the broker fills it from its routing plan; give federation.datasets");
  }
  std::int64_t quota = spec.tenant ? QuotaFor(*spec.tenant) : -1;
  if (quota >= 0 && spec.gpus > quota) {
    return InvalidFieldError(
        "gpus", fmt::format("{} is more than tenant '{}' may have in flight across the federation "
                            "({})",
                            spec.gpus, *spec.tenant, quota));
  }
  const FederationFields none;
  const FederationFields& f = spec.federation ? *spec.federation : none;
  for (std::size_t i = 0; i < f.datasets.size(); ++i) {
    bool found = false;
    for (const federation::Site& s : sites_.sites()) found = found || s.FindDataset(f.datasets[i]);
    if (!found) {
      return InvalidFieldError(fmt::format("federation.datasets[{}]", i),
                               fmt::format("no site stores a dataset '{}'", f.datasets[i]));
    }
  }
  if (!f.home_site.empty() && sites_.Find(f.home_site) < 0) {
    return InvalidFieldError("federation.home_site", fmt::format("unknown site '{}'", f.home_site));
  }
  if (f.home_site.empty() && policy_.name == "home-site") {
    return InvalidFieldError("federation.home_site", "the home-site policy needs one");
  }
  for (std::size_t i = 0; i < f.require_regions.size(); ++i) {
    bool any = false;
    for (const federation::Site& s : sites_.sites()) any = any || s.InRegion(f.require_regions[i]);
    if (!any) {
      return InvalidFieldError(fmt::format("federation.require_regions[{}]", i),
                               fmt::format("no site is in region '{}'", f.require_regions[i]));
    }
  }
  return Status::Ok();
}

void Broker::OnJobSubmitted(const JobRecord& job, JobSpec spec) {
  FedJob fed;
  fed.record = job;
  fed.spec = std::move(spec);
  std::lock_guard lock(inbox_mu_);
  submitted_.push_back(std::move(fed));
  wake_.notify_one();
}

void Broker::OnJobCancelRequested(const JobRecord& job) {
  std::lock_guard lock(inbox_mu_);
  cancelled_.push_back(job);
  wake_.notify_one();
}

std::optional<PlacementView> Broker::JobPlacement(JobId job) const {
  std::lock_guard lock(view_mu_);
  auto it = job_views_.find(job);
  if (it == job_views_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::vector<SiteView>> Broker::Sites() const {
  std::lock_guard lock(view_mu_);
  return site_views_;
}

Status Broker::Start(JobStore& store, Registry& metrics) {
  store_ = &store;
  dispatches_ = &metrics.AddCounter("baton_federation_dispatches_total",
                                    "Dispatches to sites by site and result (created, replayed, "
                                    "refused, unavailable).",
                                    {"site", "result"});
  site_up_ = &metrics.AddGauge("baton_federation_site_up",
                               "1 when the site answered its health check within the site "
                               "timeout.",
                               {"site"});
  RETURN_IF_ERROR(Recover());
  Publish();
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void Broker::Stop() {
  {
    std::lock_guard lock(inbox_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Rebuilds the loop's state from the store's attempt rows: the jobs not finished, each with its
// current attempt, the sites that refused it and where its checkpoint is, and every job's copies
// left at sites to cancel.
Status Broker::Recover() {
  // The instance id is in every key this store made: any attempt row names it.
  for (SiteAttemptState state :
       {SiteAttemptState::kDispatching, SiteAttemptState::kDispatched, SiteAttemptState::kOrphaned,
        SiteAttemptState::kCancelled, SiteAttemptState::kRefused, SiteAttemptState::kEnded}) {
    if (!instance_.empty()) break;
    ASSIGN_OR_RETURN(std::vector<SiteAttempt> rows, store_->SiteAttempts(0, state));
    for (const SiteAttempt& a : rows) {
      if (std::string inst = InstanceOfKey(a.idempotency_key); IsInstanceId(inst)) {
        instance_ = inst;
        break;
      }
    }
  }
  ASSIGN_OR_RETURN(std::vector<SiteAttempt> orphaned,
                   store_->SiteAttempts(0, SiteAttemptState::kOrphaned));
  for (SiteAttempt& a : orphaned) {
    int site = sites_.Find(a.site);
    Result<JobRecord> r = store_->Get(a.job);
    if (site < 0 || !r.ok()) {
      LOG_WARN(
          "federation job {}: its copy at '{}' is left alone: the site is not in the sites "
          "file, or the job is gone",
          a.job, a.site);
      continue;
    }
    orphans_.push_back({r->tenant, site, std::move(a)});
  }
  JobFilter filter;
  filter.limit = 1000;
  for (JobState state : {JobState::kQueued, JobState::kRunning, JobState::kCancelling}) {
    filter.state = state;
    filter.after = 0;
    while (true) {
      ASSIGN_OR_RETURN(JobPage page, store_->List(filter));
      for (JobRecord& r : page.jobs) {
        ASSIGN_OR_RETURN(std::vector<SiteAttempt> attempts,
                         store_->SiteAttempts(r.id, std::nullopt));
        FedJob job;
        for (const SiteAttempt& a : attempts) {
          job.attempts_made = std::max(job.attempts_made, a.number);
          int site = sites_.Find(a.site);
          if (site < 0) continue;
          if (a.site_refused) job.refused.insert(site);
          if (a.state == SiteAttemptState::kDispatching ||
              a.state == SiteAttemptState::kDispatched) {
            job.current = Attempt{a.number, site, a.idempotency_key, a.body, a.site_job, {}};
            // The previous broker may have renewed its lease just before it stopped.
            if (a.site_job != 0) job.current->renewed_at = clock_.Now();
          } else if (a.state != SiteAttemptState::kRefused) {
            job.checkpoint_site = site;  // it ran there, or may have
          }
        }
        Result<JobSpec> spec = ParseJobSpec(r.spec_json, BodyFormat::kJson);
        if (!spec.ok()) {
          LOG_ERROR("federation job {}: its stored spec no longer parses: {}", r.id,
                    spec.status().ToString());
          continue;
        }
        job.spec = std::move(spec).value();
        job.record = std::move(r);
        jobs_.emplace(job.record.id, std::move(job));
      }
      if (!page.next_after) break;
      filter.after = *page.next_after;
    }
  }
  if (instance_.empty()) {
    // No dispatch recorded in this store: no site holds a key made from it, so any new id is
    // safe; a random one keeps this store's keys apart from those of every earlier broker (a
    // broker restarted on a fresh database numbers its jobs from 1 again).
    instance_ = NewInstanceId();
    LOG_INFO("federation: broker instance {} (new)", instance_);
  } else {
    LOG_INFO("federation: broker instance {} (from the store)", instance_);
  }
  if (!jobs_.empty() || !orphans_.empty()) {
    LOG_INFO("federation: {} jobs in progress and {} copies to cancel at sites after restart",
             jobs_.size(), orphans_.size());
  }
  return Status::Ok();
}

void Broker::Loop() {
  while (true) {
    RunOnce();
    std::unique_lock lock(inbox_mu_);
    wake_.wait_for(lock, Millis(options_.poll_interval),
                   [this] { return stop_ || !submitted_.empty() || !cancelled_.empty(); });
    if (stop_) return;
  }
}

void Broker::Drain() {
  std::vector<FedJob> submitted;
  std::vector<JobRecord> cancelled;
  {
    std::lock_guard lock(inbox_mu_);
    submitted.swap(submitted_);
    cancelled.swap(cancelled_);
  }
  for (FedJob& job : submitted) {
    const JobId id = job.record.id;
    jobs_.emplace(id, std::move(job));
  }
  for (const JobRecord& r : cancelled) {
    auto it = jobs_.find(r.id);
    if (it != jobs_.end()) it->second.record.state = r.state;
  }
}

void Broker::CheckHealth() {
  const TimePoint now = clock_.Now();
  // With its health, each site's GPU count: what its what-if answers are checked against.
  std::vector<std::future<std::pair<Status, Result<std::int64_t>>>> answers;
  for (SiteState& s : site_state_) {
    s.skip_pass = false;
    answers.push_back(std::async(std::launch::async, [&s] {
      Status health = s.client->Health();
      Result<std::int64_t> gpus = UnavailableError("unhealthy");
      if (health.ok()) gpus = s.client->Gpus();
      return std::pair{std::move(health), std::move(gpus)};
    }));
  }
  for (std::size_t i = 0; i < site_state_.size(); ++i) {
    SiteState& s = site_state_[i];
    auto [st, gpus] = answers[i].get();
    if (gpus.ok()) s.capacity = *gpus;
    if (st.ok()) {
      if (s.failing) LOG_INFO("site {} answers again", sites_.sites()[i].name);
      s.last_ok = now;
      s.failing = false;
      s.last_error.clear();
    } else {
      if (!s.failing) {
        s.failing = true;
        s.down_since = now;
        LOG_WARN("site {}: {}", sites_.sites()[i].name, st.message());
      }
      s.last_error = std::string(st.message());
      s.skip_pass = true;
    }
    site_up_->WithLabels({sites_.sites()[i].name}).Set(SiteDown(static_cast<int>(i)) ? 0 : 1);
  }
}

std::int64_t Broker::LeaseSeconds() const {
  return std::max<std::int64_t>(1, std::llround(options_.site_timeout.value() / 2));
}

bool Broker::LeaseLapsed(const Attempt& a) const {
  if (!a.renewed_at) return true;
  // The site renewed it no later than its answer reached the broker. The margin covers the two
  // clocks' rates (5 %) and the site's loop, which fences at its next pass.
  const Seconds lease(static_cast<double>(LeaseSeconds()));
  return clock_.Now() - *a.renewed_at >= lease * 1.05 + Seconds(1);
}

bool Broker::SiteDown(int site) const {
  const SiteState& s = site_state_[site];
  return s.failing && clock_.Now() - s.down_since >= options_.site_timeout;
}

void Broker::Event(JobId job, std::string_view kind, const std::string& message) {
  Status st = store_->AppendEvent(job, kind, message);
  if (!st.ok()) LOG_ERROR("federation job {}: cannot record {}: {}", job, kind, st.ToString());
}

// Cancels the copies left at sites, once their site answers.
void Broker::CancelOrphans() {
  std::vector<Orphan> finished;  // abandoned copies that had succeeded anyway
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    Orphan& o = *it;
    SiteState& s = site_state_[o.site];
    if (s.failing || s.skip_pass) {
      ++it;
      continue;
    }
    const std::string& site = sites_.sites()[o.site].name;
    SiteAttempt& row = o.row;
    if (row.site_job == 0) {
      // The site may or may not have made the job: the same key and body find it if it did (and
      // make it, cancelled at once, if it did not).
      Result<SiteJob> found = s.client->Submit(o.tenant, row.body, row.idempotency_key);
      if (!found.ok()) {
        if (found.status().code() == StatusCode::kUnavailable) {
          s.skip_pass = true;
          ++it;
          continue;
        }
        row.state = SiteAttemptState::kCancelled;
        Put(row);
        Event(row.job, "orphan_cancelled",
              fmt::format("attempt {} at {}: nothing to cancel there ({})", row.number, site,
                          found.status().message()));
        it = orphans_.erase(it);
        continue;
      }
      row.site_job = found->id;
    }
    Result<SiteJob> st = s.client->Cancel(o.tenant, row.site_job);
    if (!st.ok()) {
      s.skip_pass = true;
      ++it;
      continue;
    }
    LOG_INFO("federation job {}: cancelled the abandoned copy at {} (job {}): {}", row.job, site,
             row.site_job, st->state);
    row.state = SiteAttemptState::kCancelled;
    Put(row);
    Event(row.job, "orphan_cancelled",
          fmt::format("attempt {} at {} (its job {}) cancelled there; it was {}", row.number, site,
                      row.site_job, st->state));
    if (st->state == "succeeded") finished.push_back(o);
    it = orphans_.erase(it);
  }
  for (const Orphan& o : finished) OrphanSucceeded(o);
}

// An abandoned copy had succeeded before its site was lost (the broker had not heard it yet).
// The job's work is done: if the job has not finished at the broker, it succeeds now, from that
// copy, and its later attempt is cancelled; if a later attempt finished too, the job ran twice,
// which is recorded and counted once.
void Broker::OrphanSucceeded(const Orphan& o) {
  const std::string& site = sites_.sites()[o.site].name;
  const SiteAttempt& row = o.row;
  auto it = jobs_.find(row.job);
  if (it == jobs_.end() || IsTerminal(it->second.record.state)) {
    Event(row.job, "superseded_finished",
          fmt::format("its abandoned copy at {} (job {}) had succeeded too, before {} was lost: "
                      "the job ran twice; counted once",
                      site, row.site_job, site));
    return;
  }
  FedJob& job = it->second;
  Event(
      row.job, "superseded_finished",
      fmt::format("its abandoned copy at {} (job {}) had succeeded before {} was lost: the job "
                  "is done{}",
                  site, row.site_job, site, job.current ? "; its later attempt is cancelled" : ""));
  if (job.current) Abandon(job, "superseded", "the job already succeeded at " + site);
  Finish(job, JobState::kSucceeded,
         fmt::format("succeeded at {} (job {}), by an attempt abandoned when {} was lost", site,
                     row.site_job, site));
}

std::string Broker::SiteSpec(const JobSpec& spec) const {
  JobSpec site = spec;
  site.federation.reset();
  site.tenant.reset();  // the site takes the tenant from the broker's Baton-Tenant header
  site.stage.clear();
  return CanonicalJson(site);
}

void Broker::RunOnce() {
  Drain();
  CheckHealth();
  CancelOrphans();
  std::map<std::string, std::int64_t> in_flight;
  for (const auto& [id, job] : jobs_) {
    if (job.current) in_flight[job.record.tenant] += job.spec.gpus;
  }
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    FedJob& job = it->second;
    if (job.record.state == JobState::kQueued && !job.current) {
      Route(job, in_flight[job.record.tenant]);
      if (job.current) in_flight[job.record.tenant] += job.spec.gpus;
    } else {
      Step(job);
    }
    if (IsTerminal(job.record.state)) {
      it = jobs_.erase(it);
    } else {
      ++it;
    }
  }
  Publish();
}

SiteAttempt Broker::Row(const FedJob& job, const Attempt& a, SiteAttemptState state) const {
  return {job.record.id, a.number, sites_.sites()[a.site].name,  a.key, a.body,
          a.site_job,    state,    job.refused.contains(a.site), {}};
}

void Broker::Put(const SiteAttempt& row) {
  if (Status st = store_->PutSiteAttempt(row); !st.ok()) {
    LOG_ERROR("federation job {}: cannot record attempt {} ({}): {}", row.job, row.number,
              SiteAttemptStateName(row.state), st.ToString());
  }
}

// Drops the current attempt, leaving its copy (if the site made one) to be cancelled there.
void Broker::Abandon(FedJob& job, std::string_view kind, const std::string& why) {
  Attempt& a = *job.current;
  const std::string& site = sites_.sites()[a.site].name;
  Event(job.record.id, kind, why);
  SiteAttempt row = Row(job, a, SiteAttemptState::kOrphaned);
  Put(row);
  orphans_.push_back({job.record.tenant, a.site, std::move(row)});
  Event(job.record.id, "orphaned",
        a.site_job != 0
            ? fmt::format("attempt {} abandoned: its copy at {} (job {}) is cancelled there when "
                          "the site answers",
                          a.number, site, a.site_job)
            : fmt::format("attempt {} abandoned: a copy {} may have made is cancelled there when "
                          "the site answers",
                          a.number, site));
  job.checkpoint_site = a.site;
  job.current.reset();
  job.site_state.clear();
}

void Broker::Finish(FedJob& job, JobState to, const std::string& message) {
  std::vector<JobState> from = {job.record.state};
  Result<JobRecord> r = store_->Transition(
      job.record.id, {from, to, std::string(JobStateName(to)), message, std::nullopt, {}});
  if (!r.ok()) {
    LOG_ERROR("federation job {}: {}", job.record.id, r.status().ToString());
    return;
  }
  job.record = std::move(r).value();
}

void Broker::Step(FedJob& job) {
  const JobId id = job.record.id;
  const bool cancel =
      job.record.state == JobState::kCancelling || job.record.state == JobState::kCancelled;
  if (!job.current) {
    if (cancel && job.record.state == JobState::kCancelling) {
      Finish(job, JobState::kCancelled, "cancelled before it reached a site");
    }
    return;
  }
  Attempt& a = *job.current;
  SiteState& s = site_state_[a.site];
  const std::string& site = sites_.sites()[a.site].name;
  if (cancel) {
    if (a.site_job == 0 || SiteDown(a.site)) {
      Abandon(job, "cancel_pending",
              fmt::format("cancelled; its copy at {} is cancelled there "
                          "once the site answers",
                          site));
      if (job.record.state == JobState::kCancelling) {
        Finish(job, JobState::kCancelled, "cancelled by the broker");
      }
      return;
    }
    if (s.skip_pass) return;  // asked again next pass
    if (Result<SiteJob> st = s.client->Cancel(job.record.tenant, a.site_job); !st.ok()) {
      s.skip_pass = true;
    } else {
      Put(Row(job, a, SiteAttemptState::kCancelled));
      if (job.record.state == JobState::kCancelling) {
        Finish(job, JobState::kCancelled,
               fmt::format("cancelled at {} (job {})", site, a.site_job));
      } else {
        Event(id, "site_cancelled", fmt::format("cancelled at {} (job {})", site, a.site_job));
      }
      job.current.reset();
    }
    return;
  }
  if (a.site_job == 0) {
    // Sent, not confirmed: resend the same body with the same key.
    if (SiteDown(a.site)) {
      Abandon(job, "dispatch_abandoned",
              fmt::format("{} did not confirm attempt {} within the site timeout ({:.0f} s)", site,
                          a.number, options_.site_timeout.value()));
      return;
    }
    if (!s.skip_pass) SendDispatch(job);
    return;
  }
  Result<SiteJob> got = s.skip_pass ? Result<SiteJob>(UnavailableError("skipped in this pass"))
                                    : s.client->Get(job.record.tenant, a.site_job);
  // Answered: the look renewed the attempt's lease there, at the latest now.
  if (got.ok()) a.renewed_at = clock_.Now();
  if (!got.ok() && got.status().code() == StatusCode::kUnavailable) s.skip_pass = true;
  if (!got.ok()) {
    if (got.status().code() == StatusCode::kNotFound) {
      job.refused.insert(a.site);
      Abandon(job, "refused",
              fmt::format("{} lost attempt {} (its job {})", site, a.number, a.site_job));
    } else if (SiteDown(a.site) && LeaseLapsed(a)) {
      Abandon(job, "site_lost",
              fmt::format("{} unreachable for {:.0f} s (site timeout): attempt {} abandoned, the "
                          "job goes elsewhere from its checkpoint at {}",
                          site, (clock_.Now() - s.down_since).value(), a.number, site));
    } else {
      return;  // a blip: ask again next time
    }
    Result<JobRecord> r = store_->Transition(
        id, {{JobState::kRunning}, JobState::kQueued, "requeued", "to be routed again", {}, {}});
    if (r.ok()) job.record = std::move(r).value();
    return;
  }
  if (got->checkpoint_step && job.record.state == JobState::kRunning) {
    // The current attempt's checkpoint (a superseded copy is never asked): recorded in the
    // broker's store, where a move stages it from, and where the job's owner sees it.
    CheckpointRecord c{job.record.attempts, *got->checkpoint_step, clock_.Now(),
                       got->checkpoint_bytes};
    if (!job.record.checkpoint || c.step != job.record.checkpoint->step ||
        c.attempt != job.record.checkpoint->attempt) {
      Result<bool> recorded = store_->RecordCheckpoint(id, c);
      if (recorded.ok() && *recorded) job.record.checkpoint = c;
    }
  }
  if (got->state != job.site_state) {
    if (got->state == "running" && job.site_state != "running") {
      Event(id, "site_running", fmt::format("running at {} (job {})", site, a.site_job));
    }
    job.site_state = got->state;
    version_.fetch_add(1);
  }
  if (got->state == "succeeded") {
    Put(Row(job, a, SiteAttemptState::kEnded));
    Finish(job, JobState::kSucceeded, fmt::format("succeeded at {} (job {})", site, a.site_job));
    job.current.reset();
  } else if (got->state == "failed") {
    Put(Row(job, a, SiteAttemptState::kEnded));
    Finish(job, JobState::kFailed,
           fmt::format("failed at {} (job {}): {}", site, a.site_job, got->detail));
    job.current.reset();
  } else if (got->state == "cancelled" || got->state == "cancelling") {
    // Not by the broker: the site refused to go on with it.
    job.refused.insert(a.site);
    job.current->site_job = 0;  // nothing left there to cancel
    Abandon(job, "refused",
            fmt::format("{} cancelled attempt {}: {}", site, a.number, got->detail));
    Result<JobRecord> r = store_->Transition(
        id, {{JobState::kRunning}, JobState::kQueued, "requeued", "to be routed again", {}, {}});
    if (r.ok()) job.record = std::move(r).value();
  }
}

void Broker::Route(FedJob& job, std::int64_t tenant_in_flight) {
  const JobId id = job.record.id;
  const TimePoint now = clock_.Now();
  auto wait = [&](std::string why) {
    if (why != job.waiting) {
      Event(id, "waiting", why);
      job.waiting = std::move(why);
      version_.fetch_add(1);
    }
  };
  std::int64_t quota = QuotaFor(job.record.tenant);
  if (quota >= 0 && tenant_in_flight + job.spec.gpus > quota) {
    return wait(fmt::format("quota: tenant '{}' has {} of its {} federation GPUs in flight",
                            job.record.tenant, tenant_in_flight, quota));
  }
  const FederationFields none;
  const FederationFields& f = job.spec.federation ? *job.spec.federation : none;
  federation::JobNeeds needs;
  needs.name = job.spec.name;
  needs.gpus = static_cast<int>(job.spec.gpus);
  needs.home_site = f.home_site;
  needs.datasets = f.datasets;
  // What to stage when the job moves: the checkpoint its last site reported (its measured size),
  // or, when none was reported, the size the spec declares.
  const Bytes checkpoint_size =
      job.record.checkpoint ? job.record.checkpoint->bytes : Gib(f.checkpoint_gib);
  if (job.checkpoint_site >= 0 && checkpoint_size.value() > 0) {
    needs.checkpoint_site = sites_.sites()[job.checkpoint_site].name;
    needs.checkpoint_size = checkpoint_size;
  }
  needs.require_regions = f.require_regions;
  needs.exclude_regions = f.exclude_regions;
  needs.estimated_runtime = Seconds(job.spec.estimated_runtime_s);
  if (f.deadline_unix_s) needs.deadline = TimePoint{Seconds(*f.deadline_unix_s)};

  // Ask every site that could take it, in parallel, with one deadline for the whole round: each
  // exchange is cut off there, so the round is over by then whatever a site does.
  const std::string spec = SiteSpec(job.spec);
  const auto& all = sites_.sites();
  std::vector<federation::SiteAnswer> answers(all.size());
  std::vector<WhatIfResult> results(all.size());
  std::vector<std::future<void>> asks;
  const Deadline deadline =
      std::chrono::steady_clock::now() +
      std::chrono::microseconds(std::llround(options_.whatif_timeout.value() * 1e6));
  for (std::size_t i = 0; i < all.size(); ++i) {
    const int site = static_cast<int>(i);
    // Not reachable, or already slow in this pass: not asked.
    if (site_state_[i].failing || site_state_[i].skip_pass) continue;
    if (job.refused.contains(site)) {
      answers[i].reachable = true;
      answers[i].refusal = "refused or lost this job before";
      continue;
    }
    bool excluded = false;
    for (const auto& r : f.exclude_regions) excluded = excluded || all[i].InRegion(r);
    for (const auto& r : f.require_regions) excluded = excluded || !all[i].InRegion(r);
    if (excluded) continue;  // Predict says why
    asks.push_back(std::async(std::launch::async, [&, i] {
      results[i] = site_state_[i].client->WhatIf(job.record.tenant, spec, deadline);
    }));
  }
  for (auto& a : asks) a.get();
  for (std::size_t i = 0; i < all.size(); ++i) {
    SiteState& s = site_state_[i];
    WhatIfResult& r = results[i];
    std::string left_out;
    if (r.failure == CallFailure::kDeadline) {
      left_out = fmt::format(
          "slow: no full what-if answer for job {} within the round's {:.1f} s deadline; left out "
          "of the round",
          id, options_.whatif_timeout.value());
    } else if (r.failure != CallFailure::kNone) {
      left_out = fmt::format("left out of the what-if round for job {}: {}", id, r.error);
    } else if (std::string lie = ContradictsCapacity(r.answer, s.capacity, job.spec.gpus);
               !lie.empty()) {
      left_out = fmt::format("what-if answer for job {} ignored: it {}", id, lie);
    } else if (!r.answer.reachable) {
      continue;  // not asked
    }
    if (!left_out.empty()) {
      if (left_out != s.left_out) LOG_WARN("site {}: {}", all[i].name, left_out);
      s.left_out = std::move(left_out);
      // Slow, oversized or unreadable: not asked again this pass. A contradiction is cheap to
      // receive; the site is asked again for the next job.
      if (r.failure != CallFailure::kNone) s.skip_pass = true;
      continue;
    }
    s.left_out.clear();
    answers[i] = std::move(r.answer);
    s.last_answer_at = now;
    s.last_answer =
        !answers[i].refusal.empty()
            ? "refuses job " + std::to_string(id) + ": " + answers[i].refusal
            : fmt::format(
                  "job {}: queue position {}, start {}", id, answers[i].queue_position,
                  answers[i].estimated_start
                      ? fmt::format("+{:.0f} s", (*answers[i].estimated_start - now).value())
                      : std::string("unknown"));
  }
  // Every site the job may go to has refused it (this round or before: a priority outside the
  // tenant's range there, a quota, a job larger than the site): the job fails with the sites' own
  // refusals, each naming its field, as a direct submission would. A site that did not answer
  // might still take it: then the job waits.
  {
    std::vector<std::string> refusals;
    bool all_refused = true;
    for (std::size_t i = 0; i < all.size() && all_refused; ++i) {
      bool excluded = false;
      for (const auto& r : f.exclude_regions) excluded = excluded || all[i].InRegion(r);
      for (const auto& r : f.require_regions) excluded = excluded || !all[i].InRegion(r);
      if (excluded) continue;
      all_refused = answers[i].reachable && !answers[i].refusal.empty();
      refusals.push_back(all[i].name + ": " + answers[i].refusal);
    }
    if (all_refused && !refusals.empty()) {
      Finish(job, JobState::kFailed,
             fmt::format("refused by every site: {}", fmt::join(refusals, "; ")));
      return;
    }
  }
  Result<federation::RouteDecision> decision =
      federation::Route(needs, sites_, answers, now, policy_);
  if (!decision.ok()) {
    return wait(std::string(decision.status().message()));
  }
  const int chosen = decision->site;
  // The staging plan: each input not at the chosen site, from its nearest holder (as Predict
  // prices it).
  JobSpec dispatched = job.spec;
  // The site holds the job until the broker's first look and fences it when the looks stop
  // (FederationFields::lease_s).
  dispatched.federation = FederationFields{};
  dispatched.federation->lease_s = LeaseSeconds();
  dispatched.tenant.reset();  // the site takes it from the Baton-Tenant header
  dispatched.stage.clear();
  for (const std::string& name : f.datasets) {
    if (all[chosen].FindDataset(name) != nullptr) continue;
    int from = -1;
    Seconds best(std::numeric_limits<double>::infinity());
    Bytes size(0);
    for (std::size_t h = 0; h < all.size(); ++h) {
      const federation::Dataset* d = all[h].FindDataset(name);
      if (d == nullptr) continue;
      Seconds t = federation::TransferTime(d->size, sites_.Link(static_cast<int>(h), chosen));
      if (t < best) {
        best = t;
        from = static_cast<int>(h);
        size = d->size;
      }
    }
    if (from >= 0) {
      dispatched.stage.push_back(
          {"dataset", name, all[from].name, size.value() / (1024.0 * 1024.0 * 1024.0)});
    }
  }
  if (!needs.checkpoint_site.empty() && job.checkpoint_site != chosen) {
    dispatched.stage.push_back({"checkpoint", fmt::format("{}-{}", job.spec.name, id),
                                needs.checkpoint_site,
                                needs.checkpoint_size.value() / (1024.0 * 1024.0 * 1024.0)});
  }
  Event(id, "routed", decision->explanation);
  LOG_INFO("federation job {}: {}", id, decision->explanation);
  Attempt a;
  a.number = ++job.attempts_made;
  a.site = chosen;
  a.key = fmt::format("{}-{}-{}-{}", options_.key_prefix, instance_, id, a.number);
  a.body = CanonicalJson(dispatched);
  // The intent is durable before anything is sent: after a crash, the same key goes to the same
  // site with the same body.
  Put(Row(job, a, SiteAttemptState::kDispatching));
  Event(id, "dispatching",
        fmt::format("attempt {} to {} (key {})", a.number, all[chosen].name, a.key));
  job.current = std::move(a);
  job.waiting.clear();
  SendDispatch(job);
}

void Broker::SendDispatch(FedJob& job) {
  Attempt& a = *job.current;
  const std::string& site = sites_.sites()[a.site].name;
  Result<SiteJob> r = site_state_[a.site].client->Submit(job.record.tenant, a.body, a.key);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kUnavailable) {
      dispatches_->WithLabels({site, "unavailable"}).Increment();
      site_state_[a.site].skip_pass = true;
      return;  // resent next time, same key
    }
    dispatches_->WithLabels({site, "refused"}).Increment();
    job.refused.insert(a.site);
    Put(Row(job, a, SiteAttemptState::kRefused));
    Event(job.record.id, "refused",
          fmt::format("{} refused attempt {}: {}", site, a.number, r.status().message()));
    job.current.reset();
    return;
  }
  dispatches_->WithLabels({site, r->replayed ? "replayed" : "created"}).Increment();
  a.site_job = r->id;
  job.site_state = r->state;
  Put(Row(job, a, SiteAttemptState::kDispatched));
  Result<JobRecord> moved = store_->Transition(
      job.record.id,
      {{JobState::kQueued},
       JobState::kRunning,
       "dispatched",
       fmt::format("attempt {} at {} as its job {} (key {})", a.number, site, r->id, a.key),
       {},
       {}});
  if (!moved.ok()) {
    LOG_ERROR("federation job {}: {}", job.record.id, moved.status().ToString());
    return;
  }
  job.record = std::move(moved).value();
}

void Broker::Publish() {
  std::map<JobId, PlacementView> views;
  std::vector<int> in_flight(sites_.sites().size(), 0);
  for (const auto& [id, job] : jobs_) {
    PlacementView v;
    v.phase = job.current ? "dispatched" : "pending";
    v.waiting = job.waiting;
    if (job.current) {
      v.site = sites_.sites()[job.current->site].name;
      v.site_job = job.current->site_job;
      v.site_state = job.site_state;
      ++in_flight[job.current->site];
    }
    views.emplace(id, std::move(v));
  }
  std::vector<SiteView> sites;
  for (std::size_t i = 0; i < sites_.sites().size(); ++i) {
    const federation::Site& site = sites_.sites()[i];
    const SiteState& s = site_state_[i];
    SiteView v;
    v.name = site.name;
    v.url = site.url;
    v.regions = site.regions;
    v.healthy = !s.failing;
    v.last_ok = s.last_ok;
    // Left out of its last what-if round: shown as the site's error (slow, and why) until it
    // answers a round in full and in time.
    v.last_error = s.last_error.empty() || s.left_out.empty() ? s.last_error + s.left_out
                                                              : s.last_error + "; " + s.left_out;
    v.jobs_in_flight = in_flight[i];
    v.last_answer_at = s.last_answer_at;
    v.last_answer = s.last_answer;
    sites.push_back(std::move(v));
  }
  std::lock_guard lock(view_mu_);
  job_views_ = std::move(views);
  site_views_ = std::move(sites);
  version_.fetch_add(1);
}

}  // namespace baton::server
