// The jobs, what-if and plan handlers of the HTTP API (api_routes.h).
#include <fmt/format.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/bounded_input.h"
#include "core/log.h"
#include "core/strings.h"
#include "perf/estimator.h"
#include "perf/report.h"
#include "perf/search.h"
#include "server/http/api_routes.h"
#include "server/http/job_spec.h"

namespace baton::server {

// The planner on the daemon's own cluster: estimate one plan, or search the space. Pure
// computation on this worker thread (a search is bounded by perf::kMaxRequestSearchSpace and
// takes milliseconds for the catalogue's models); nothing is stored.
void Api::Routes::Plan(const httplib::Request& req, std::string_view body, httplib::Response& res,
                       perf::PlanQuestion question) {
  Result<BodyFormat> format = BodyFormatFromContentType(req.get_header_value("Content-Type"));
  if (!format.ok() || *format != BodyFormat::kJson) {
    return SendError(res, 415, "UNSUPPORTED_MEDIA_TYPE",
                     "plan requests are JSON (Content-Type: application/json)", "Content-Type");
  }
  std::string field;
  Result<perf::PlanRequest> request = perf::ParsePlanRequest(body, question, &field);
  if (!request.ok()) {
    return SendError(res, 400, "INVALID_ARGUMENT", request.status().message(), field);
  }
  Result<perf::SystemSpec> cluster = api.controller_.PlanningSystem();
  if (!cluster.ok()) return SendStatus(res, cluster.status());
  perf::SystemSpec system = std::move(cluster).value();
  if (request->gpus > system.gpus) {
    return SendError(
        res, 400, "INVALID_ARGUMENT",
        fmt::format("gpus: {} is more than the cluster's {} GPUs", request->gpus, system.gpus),
        "gpus");
  }
  system.gpus = request->gpus;
  if (question == perf::PlanQuestion::kEstimate) {
    Result<perf::StepEstimate> e =
        perf::Estimate(request->model, request->plan, request->training, system);
    if (!e.ok()) return SendStatus(res, e.status());
    // The daemon's --profile (perf::InstallProfileFile) or the built-in one, as for the CLI.
    json out =
        perf::EstimateReportJson(request->model, request->training, system, request->plan, *e);
    out["band"] =
        perf::EstimateBandJson(perf::EstimateBand(perf::ActiveProfile(), request->model, system,
                                                  request->plan, e->feasible() ? e->mfu : 0.0),
                               *e);
    return SendJson(res, 200, out);
  }
  perf::SearchOptions options;
  options.top_k = request->top_k;
  options.objective = request->objective;
  Result<perf::SearchResult> r =
      perf::Search(request->model, request->training, system, request->space, options);
  if (!r.ok()) return SendStatus(res, r.status());
  perf::AttachTrust(perf::ActiveProfile(), request->model, system, request->gpus, &*r);
  json out = perf::SearchToJson(*r);
  out["model"] = request->model.name;
  out["system"] = system.name;
  out["gpus"] = request->gpus;
  out["global_batch"] = request->training.global_batch;
  SendJson(res, 200, out);
}

// A job's plan must be feasible on the daemon's cluster: checked here, before the job is
// stored, with the planner itself (pure computation on this worker thread, as the plan
// endpoints do; the controller's PlannerEstimator is touched only by its own thread). Without a
// scheduler there is no cluster to check against: the plan is accepted, and a controller that
// cannot use it later fails the job with the reason.
Status Api::Routes::CheckPlan(const JobSpec& spec) {
  Result<perf::SystemSpec> cluster = api.controller_.PlanningSystem();
  if (!cluster.ok()) return Status::Ok();
  perf::SystemSpec system = std::move(cluster).value();
  if (spec.gpus > system.gpus) {
    return InvalidFieldError(
        "gpus", fmt::format("{} is more than the cluster's {} GPUs, so the plan cannot run",
                            spec.gpus, system.gpus));
  }
  system.gpus = static_cast<int>(spec.gpus);
  std::string field;
  Result<perf::ParallelPlan> plan = perf::ResolveJobPlan(spec.plan->request, system, &field);
  if (plan.ok()) return Status::Ok();
  std::string_view message = plan.status().message();  // "plan: ..."
  if (message.starts_with(field + ":")) message.remove_prefix(field.size() + 1);
  return InvalidFieldError(field, std::string(Trim(message)));
}

// The answer to a submit whose Idempotency-Key already names `original`: that job (200) when
// the request is the same (canonical spec), else 409.
void Api::Routes::Replay(const JobRecord& original, std::string_view spec_json,
                         const std::string& key, httplib::Response& res) {
  if (original.spec_json != spec_json) {
    SendError(res, 409, "IDEMPOTENCY_KEY_REUSED",
              "Idempotency-Key '" + key + "' was used for a different request (job " +
                  std::to_string(original.id) + ")",
              "Idempotency-Key");
    return;
  }
  api.submissions_.WithLabels({original.tenant, "replayed"}).Increment();
  res.set_header("Idempotent-Replayed", "true");
  SendJson(res, 200, JobJson(original, api.controller_));
}

// The job spec of a submit or what-if body: its Content-Type (415), the spec itself (400 naming
// the field) and its tenant, which must be the caller's unless the caller is an admin (403;
// `verb` says what was refused: "submit jobs for"); a spec without one gets the caller's. On
// failure the error is sent and the HTTP status returned; 0 and `*spec` set on success.
int Api::Routes::ReadJobSpec(const httplib::Request& req, std::string_view body,
                             const Principal& who, std::string_view verb, httplib::Response& res,
                             std::optional<JobSpec>* spec) {
  Result<BodyFormat> format = BodyFormatFromContentType(req.get_header_value("Content-Type"));
  if (!format.ok()) {
    SendError(res, 415, "UNSUPPORTED_MEDIA_TYPE", format.status().message(), "Content-Type");
    return 415;
  }
  Result<JobSpec> parsed = ParseJobSpec(body, *format);
  if (!parsed.ok()) {
    SendStatus(res, parsed.status());
    return 400;
  }
  if (parsed->tenant && *parsed->tenant != who.tenant && who.role != Role::kAdmin) {
    SendError(res, 403, "PERMISSION_DENIED",
              fmt::format("{} may only {} tenant {}", who.name, verb, who.tenant), "tenant");
    return 403;
  }
  if (parsed->federation && parsed->federation->lease_s > 0 && who.via.empty()) {
    SendError(res, 400, "INVALID_ARGUMENT",
              "only a federation broker leases a job (the field is the broker's to set)",
              "federation.lease_s");
    return 400;
  }
  if (!parsed->tenant) parsed->tenant = who.tenant;
  *spec = std::move(*parsed);
  return 0;
}

void Api::Routes::Submit(const httplib::Request& req, std::string_view body, httplib::Response& res,
                         const Principal& who) {
  std::optional<JobSpec> spec;
  if (int refused = ReadJobSpec(req, body, who, "submit jobs for", res, &spec); refused != 0) {
    // A body of another media type is not counted as a submission.
    if (refused != 415) api.submissions_.WithLabels({who.tenant, "rejected"}).Increment();
    return;
  }
  // A retry is answered from the store before the checks below: the job it names was admitted
  // when it was created, and a retry must get it back (never a refusal that would make its
  // sender submit it elsewhere) even if the cluster or the policy changed since.
  std::string key = req.get_header_value("Idempotency-Key");
  if (req.has_header("Idempotency-Key")) {
    if (!ValidIdempotencyKey(key)) {
      SendError(res, 400, "INVALID_ARGUMENT",
                "Idempotency-Key must be 1-255 printable ASCII characters", "Idempotency-Key");
      return;
    }
    Result<std::optional<JobRecord>> original = api.store_.FindByIdempotencyKey(*spec->tenant, key);
    if (!original.ok()) return SendStatus(res, original.status());
    if (*original) return Replay(**original, CanonicalJson(*spec), key, res);
  }
  // Admission: what can never run on this cluster is refused now, not failed later.
  if (Status admitted = api.controller_.Admit(*spec); !admitted.ok()) {
    api.submissions_.WithLabels({who.tenant, "rejected"}).Increment();
    SendStatus(res, admitted);
    return;
  }
  // The tenancy policy's priority range (docs/tenancy.md): a tenant may not lift its own jobs
  // above what the policy allows it.
  if (Status allowed = api.controller_.CheckTenantPolicy(*spec->tenant, spec->priority);
      !allowed.ok()) {
    api.submissions_.WithLabels({who.tenant, "rejected"}).Increment();
    SendError(res, 400, "INVALID_ARGUMENT", allowed.message(), "priority");
    return;
  }
  if (spec->plan) {
    Status planned = CheckPlan(*spec);
    if (!planned.ok()) {
      api.submissions_.WithLabels({who.tenant, "rejected"}).Increment();
      SendStatus(res, planned);
      return;
    }
  }
  NewJob job{*spec->tenant, spec->name, CanonicalJson(*spec), key};
  Result<SubmitResult> r = api.store_.Submit(job);
  if (!r.ok()) {
    LOG_ERROR("submit for tenant {} failed: {}", job.tenant, r.status().ToString());
    SendStatus(res, r.status());
    return;
  }
  if (!r->created) return Replay(r->job, job.spec_json, key, res);
  api.submissions_.WithLabels({job.tenant, "created"}).Increment();
  api.controller_.OnJobSubmitted(r->job, *std::move(spec));
  res.set_header("Location", "/api/v1/jobs/" + std::to_string(r->job.id));
  SendJson(res, 201, JobJson(r->job, api.controller_));
}

// POST /api/v1/whatif: the job spec of a submit, answered with what the scheduler would do with
// it now (queue position, estimated start, GPU type, placement, the planner's step time there).
// Stores nothing and changes nothing. The same checks as a submit, answered the same way.
void Api::Routes::WhatIf(const httplib::Request& req, std::string_view body, httplib::Response& res,
                         const Principal& who) {
  std::optional<JobSpec> spec;
  if (ReadJobSpec(req, body, who, "ask about jobs of", res, &spec) != 0) return;
  if (Status admitted = api.controller_.Admit(*spec); !admitted.ok()) {
    return SendStatus(res, admitted);
  }
  if (Status allowed = api.controller_.CheckTenantPolicy(*spec->tenant, spec->priority);
      !allowed.ok()) {
    return SendError(res, 400, "INVALID_ARGUMENT", allowed.message(), "priority");
  }
  if (spec->plan) {
    if (Status planned = CheckPlan(*spec); !planned.ok()) return SendStatus(res, planned);
  }
  Result<WhatIfView> w = api.controller_.WhatIf(*spec);
  if (!w.ok()) return SendStatus(res, w.status());
  json out = {{"queue_position", w->queue_position}, {"waiting_kind", w->waiting_kind}};
  if (w->estimated_start) out["estimated_start"] = Rfc3339(*w->estimated_start);
  if (!w->gpu_type.empty()) out["gpu_type"] = w->gpu_type;
  if (!w->nodes.empty()) {
    PlacementView p;
    p.nodes = w->nodes;
    p.level = w->level;
    out["placement"] = PlacementJson(p);
  }
  if (w->step_time_s) out["step_time_s"] = *w->step_time_s;
  out["free_gpus"] = w->free_gpus;
  out["total_gpus"] = w->total_gpus;
  SendJson(res, 200, out);
}

void Api::Routes::List(const httplib::Request& req, httplib::Response& res, const Principal& who) {
  JobFilter filter;
  for (const auto& [name, value] : req.params) {
    if (name != "tenant" && name != "state" && name != "limit" && name != "cursor") {
      SendError(res, 400, "INVALID_ARGUMENT",
                "unknown query parameter (expected tenant, state, limit or cursor)",
                Printable(name, 64));
      return;
    }
  }
  if (req.has_param("tenant")) filter.tenant = req.get_param_value("tenant");
  if (who.role != Role::kAdmin) {
    if (filter.tenant && *filter.tenant != who.tenant) {
      SendError(res, 403, "PERMISSION_DENIED",
                who.name + " may only list jobs of tenant " + who.tenant, "tenant");
      return;
    }
    filter.tenant = who.tenant;
  }
  if (req.has_param("state")) {
    Result<JobState> state = ParseJobState(req.get_param_value("state"));
    if (!state.ok())
      return SendError(res, 400, "INVALID_ARGUMENT", state.status().message(), "state");
    filter.state = *state;
  }
  if (req.has_param("limit")) {
    std::optional<std::int64_t> limit = ParseInt64(req.get_param_value("limit"));
    if (!limit || *limit < 1 || *limit > 1000) {
      return SendError(res, 400, "INVALID_ARGUMENT", "limit must be an integer in 1..1000",
                       "limit");
    }
    filter.limit = static_cast<int>(*limit);
  }
  if (req.has_param("cursor")) {
    std::optional<std::int64_t> after = ParseInt64(req.get_param_value("cursor"));
    if (!after || *after < 0) {
      return SendError(res, 400, "INVALID_ARGUMENT", "cursor is not one this API returned",
                       "cursor");
    }
    filter.after = *after;
  }
  Result<JobPage> page = api.store_.List(filter);
  if (!page.ok()) return SendStatus(res, page.status());
  json jobs = json::array();
  for (const JobRecord& j : page->jobs) jobs.push_back(JobJson(j, api.controller_));
  json body = {{"jobs", std::move(jobs)}, {"next_cursor", nullptr}};
  if (page->next_after) body["next_cursor"] = std::to_string(*page->next_after);
  SendJson(res, 200, body);
}

void Api::Routes::Cancel(const httplib::Request& req, httplib::Response& res,
                         const Principal& who) {
  std::optional<JobRecord> job = VisibleJob(req, res, who);
  if (!job) return;
  if (job->state == JobState::kCancelling || job->state == JobState::kCancelled) {
    return SendJson(res, 200, JobJson(*job, api.controller_));  // cancelling twice is not an error
  }
  std::string by = "by " + who.name;
  Result<JobRecord> r =
      api.store_.Transition(job->id, {{JobState::kQueued}, JobState::kCancelled, "cancelled", by});
  if (!r.ok() && r.status().code() == StatusCode::kFailedPrecondition) {
    r = api.store_.Transition(
        job->id, {{JobState::kRunning}, JobState::kCancelling, "cancel_requested", by});
  }
  if (!r.ok()) return SendStatus(res, r.status());
  api.controller_.OnJobCancelRequested(*r);
  SendJson(res, 202, JobJson(*r, api.controller_));
}

void Api::Routes::Events(const httplib::Request& req, httplib::Response& res,
                         const Principal& who) {
  std::optional<JobRecord> job = VisibleJob(req, res, who);
  if (!job) return;
  Result<std::vector<JobEvent>> events = api.store_.Events(job->id, 1000);
  if (!events.ok()) return SendStatus(res, events.status());
  json list = json::array();
  for (const JobEvent& e : *events) {
    list.push_back({{"time", Rfc3339(e.time)}, {"kind", e.kind}, {"message", e.message}});
  }
  SendJson(res, 200, json{{"job", job->id}, {"events", std::move(list)}});
}

}  // namespace baton::server
