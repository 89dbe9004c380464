#include "server/broker/site_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/bounded_input.h"
#include "core/strings.h"
#include "server/http/auth.h"

namespace baton::server {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

Deadline After(Seconds s) {
  return SteadyClock::now() + std::chrono::microseconds(std::llround(s.value() * 1e6));
}

// One finished exchange: the site's status and body, or why there is none.
struct Answer {
  int status = 0;
  std::string body;
  CallFailure failure = CallFailure::kNone;
  std::string error;
};

// Sends `req` to `url` and reads the answer into at most `max_bytes`, all over by `deadline`.
// httplib bounds each read, not the exchange: a site that drips a header line a second never
// trips its read timeout. So the request runs on its own thread while this one waits for the
// deadline; past it, the client's socket is shut down (ClientImpl::stop, the one call httplib
// makes safe from another thread) until the request returns. Shutting down before the request
// has its socket does nothing, hence the repeat.
Answer Exchange(const std::string& url, httplib::Request req, Deadline deadline,
                std::size_t max_bytes) {
  Answer out;
  const auto left = deadline - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) {
    out.failure = CallFailure::kDeadline;
    out.error = "no time left before the deadline";
    return out;
  }
  httplib::Client client(url);
  const auto usecs = std::chrono::duration_cast<std::chrono::microseconds>(left).count() + 1;
  const auto secs = static_cast<time_t>(usecs / 1'000'000);
  const auto rest = static_cast<time_t>(usecs % 1'000'000);
  client.set_connection_timeout(secs, rest);
  client.set_read_timeout(secs, rest);
  client.set_write_timeout(secs, rest);
  client.set_keep_alive(false);

  bool too_large = false;  // written by the request's thread, read after the join
  std::string body;
  req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
    if (n > max_bytes - body.size()) {
      too_large = true;
      return false;  // stop reading: the rest is never taken off the socket
    }
    body.append(data, n);
    return true;
  };

  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  bool sent = false;
  std::thread request([&] {
    bool ok = client.send(req, res, error);
    std::lock_guard lock(mu);
    sent = ok;
    done = true;
    done_cv.notify_one();
  });
  bool late = false;
  {
    std::unique_lock lock(mu);
    if (!done_cv.wait_until(lock, deadline, [&] { return done; })) {
      late = true;
      while (!done) {
        lock.unlock();
        client.stop();
        lock.lock();
        done_cv.wait_for(lock, std::chrono::milliseconds(20), [&] { return done; });
      }
    }
  }
  request.join();
  // The socket's read timeout is the time left at the start, so a dripping site's read can time
  // out at the deadline on the request's thread before this one wakes to cut it off (a loaded
  // machine): an exchange that failed by the deadline was not answered by it either.
  if (!sent && SteadyClock::now() >= deadline) late = true;

  if (too_large) {
    out.failure = CallFailure::kTooLarge;
    out.error =
        fmt::format("the answer passed the {} KiB limit (reading stopped there)", max_bytes / 1024);
  } else if (late) {
    out.failure = CallFailure::kDeadline;
    out.error = "not answered by the deadline";
  } else if (!sent) {
    out.failure = CallFailure::kUnreachable;
    out.error = httplib::to_string(error);
  } else {
    out.status = res.status;
    out.body = std::move(body);
  }
  return out;
}

// Exchange with the first of `urls` that leads, starting at `leader` (site_client.h).
Answer ExchangeWithLeader(const std::vector<std::string>& urls, std::atomic<std::size_t>& leader,
                          const httplib::Request& req, Deadline deadline, std::size_t max_bytes) {
  const std::size_t first = leader.load() % urls.size();
  Answer out;
  for (std::size_t i = 0; i < urls.size(); ++i) {
    const std::size_t k = (first + i) % urls.size();
    out = Exchange(urls[k], req, deadline, max_bytes);
    const bool next =
        urls.size() > 1 &&
        (out.failure == CallFailure::kUnreachable ||
         (out.failure == CallFailure::kNone && (out.status == 307 || out.status == 503)));
    if (!next) {
      leader = k;
      return out;
    }
  }
  return out;
}

// `tenant`: the tenant the broker acts for (the site's Baton-Tenant header); empty: none.
httplib::Request MakeRequest(std::string method, std::string path, const std::string& token,
                             std::string_view tenant = {}) {
  httplib::Request req;
  req.method = std::move(method);
  req.path = std::move(path);
  if (!token.empty()) req.set_header("Authorization", "Bearer " + token);
  if (!tenant.empty()) req.set_header(std::string(kBrokerTenantHeader), std::string(tenant));
  return req;
}

void SetJsonBody(httplib::Request& req, std::string_view body) {
  req.set_header("Content-Type", "application/json");
  req.body = std::string(body);
}

Result<json> ParseAnswer(const std::string& body) {
  JsonLimits limits;
  limits.max_bytes = SiteClient::kMaxAnswerBytes;
  return ParseJsonBounded(body, limits);
}

// The message of an API error body, or the status line when it has none.
std::string ErrorMessage(const Answer& res) {
  Result<json> body = ParseAnswer(res.body);
  if (body.ok() && body->is_object() && body->contains("error") && (*body)["error"].is_object()) {
    const json& e = (*body)["error"];
    if (e.contains("message") && e["message"].is_string()) {
      // The field the site named, unless its message already starts with it.
      std::string message = Printable(e["message"].get<std::string>(), 300);
      std::string field;
      if (e.contains("field") && e["field"].is_string()) {
        field = "field '" + Printable(e["field"].get<std::string>(), 64) + "':";
        if (message.starts_with(field)) field.clear();
      }
      return fmt::format("{}{}{} {}", res.status, field.empty() ? "" : " ", field, message);
    }
  }
  return fmt::format("HTTP {}", res.status);
}

// kUnavailable for an exchange that got no answer, naming the call.
Status Unanswered(std::string_view call, const Answer& res) {
  return UnavailableError(fmt::format("{}: {}", call, res.error));
}

Result<SiteJob> ReadJob(const Answer& res) {
  Result<json> body = ParseAnswer(res.body);
  if (!body.ok() || !body->is_object() || !(*body)["id"].is_number_integer() ||
      !(*body)["state"].is_string()) {
    return UnavailableError("the site's job answer is not a job");
  }
  SiteJob job;
  job.id = (*body)["id"].get<std::int64_t>();
  job.state = Printable((*body)["state"].get<std::string>(), 32);
  if (auto c = body->find("checkpoint"); c != body->end() && c->is_object()) {
    auto step = c->find("step");
    auto bytes = c->find("bytes");
    if (step != c->end() && bytes != c->end() && step->is_number_integer() && bytes->is_number() &&
        step->get<std::int64_t>() >= 0 && bytes->get<double>() >= 0 &&
        bytes->get<double>() < 1e18) {
      job.checkpoint_step = step->get<std::int64_t>();
      job.checkpoint_bytes = Bytes(bytes->get<double>());
    }
  }
  return job;
}

}  // namespace

std::optional<TimePoint> ParseApiTime(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS[.fff]Z
  if (text.size() < 20 || text.back() != 'Z' || text[4] != '-' || text[7] != '-' ||
      text[10] != 'T' || text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  auto num = [&](std::size_t at, std::size_t n) -> int {
    std::optional<std::int64_t> v = ParseInt64(text.substr(at, n));
    return v && *v >= 0 ? static_cast<int>(*v) : -1;
  };
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(5, 2) - 1;
  tm.tm_mday = num(8, 2);
  tm.tm_hour = num(11, 2);
  tm.tm_min = num(14, 2);
  tm.tm_sec = num(17, 2);
  if (tm.tm_year < 70 || tm.tm_mon < 0 || tm.tm_mday < 1 || tm.tm_hour < 0 || tm.tm_min < 0 ||
      tm.tm_sec < 0) {
    return std::nullopt;
  }
  double fraction = 0;
  std::string_view rest = text.substr(19, text.size() - 20);
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() > 10) return std::nullopt;
    std::optional<double> f = ParseDouble("0" + std::string(rest));
    if (!f) return std::nullopt;
    fraction = *f;
  }
  return TimePoint{Seconds(static_cast<double>(timegm(&tm)) + fraction)};
}

SiteClient::SiteClient(std::string url, std::string token, Seconds timeout)
    : url_(std::move(url)), token_(std::move(token)), timeout_(timeout) {
  for (std::string_view u : Split(url_, ',')) {
    if (!Trim(u).empty()) urls_.emplace_back(Trim(u));
  }
  if (urls_.empty()) urls_.push_back(url_);  // refused by the first call, naming it
}

WhatIfResult SiteClient::WhatIf(std::string_view tenant, std::string_view spec_json,
                                Deadline deadline) const {
  WhatIfResult out;
  httplib::Request req = MakeRequest("POST", "/api/v1/whatif", token_, tenant);
  SetJsonBody(req, spec_json);
  Answer res = ExchangeWithLeader(urls_, leader_, req, deadline, kMaxAnswerBytes);
  auto fail = [&](CallFailure failure, std::string error) {
    out.failure = failure;
    out.error = "what-if: " + std::move(error);
    return out;
  };
  if (res.failure != CallFailure::kNone) return fail(res.failure, res.error);
  if (res.status == 400 || res.status == 403) {
    out.answer.reachable = true;
    out.answer.refusal = ErrorMessage(res);
    return out;
  }
  if (res.status != 200) return fail(CallFailure::kUnreachable, ErrorMessage(res));
  Result<json> body = ParseAnswer(res.body);
  if (!body.ok() || !body->is_object()) {
    return fail(CallFailure::kMalformed, "the answer is not a JSON object");
  }
  federation::SiteAnswer& answer = out.answer;
  const json& b = *body;
  // Counts no cluster could have make the whole answer suspect, not just the field.
  constexpr std::int64_t kMaxSiteGpus = 10'000'000;
  auto count = [&](const char* key, std::int64_t max, int* to) {
    if (!b.contains(key)) return true;
    if (!b[key].is_number_integer()) return false;
    std::int64_t v = b[key].get<std::int64_t>();
    if (v < 0 || v > max) return false;
    *to = static_cast<int>(v);
    return true;
  };
  if (!count("queue_position", kMaxSiteGpus, &answer.queue_position) ||
      !count("free_gpus", kMaxSiteGpus, &answer.free_gpus) ||
      !count("total_gpus", kMaxSiteGpus, &answer.total_gpus)) {
    return fail(CallFailure::kMalformed, "a count is not a number from 0 to 10,000,000");
  }
  if (b.contains("estimated_start") && b["estimated_start"].is_string()) {
    answer.estimated_start = ParseApiTime(b["estimated_start"].get<std::string>());
  }
  if (b.contains("gpu_type") && b["gpu_type"].is_string()) {
    answer.gpu_type = Printable(b["gpu_type"].get<std::string>(), 64);
  }
  if (b.contains("step_time_s") && b["step_time_s"].is_number()) {
    double s = b["step_time_s"].get<double>();
    if (std::isfinite(s) && s > 0) answer.step_time = Seconds(s);
  }
  answer.reachable = true;
  return out;
}

Result<SiteJob> SiteClient::Submit(std::string_view tenant, std::string_view spec_json,
                                   std::string_view key) const {
  httplib::Request req = MakeRequest("POST", "/api/v1/jobs", token_, tenant);
  req.set_header("Idempotency-Key", std::string(key));
  SetJsonBody(req, spec_json);
  Answer res = ExchangeWithLeader(urls_, leader_, req, After(timeout_), kMaxAnswerBytes);
  if (res.failure != CallFailure::kNone) return Unanswered("submit", res);
  if (res.status == 200 || res.status == 201) {
    ASSIGN_OR_RETURN(SiteJob job, ReadJob(res));
    job.replayed = res.status == 200;
    return job;
  }
  std::string message = "submit refused: " + ErrorMessage(res);
  switch (res.status) {
    case 400:
    case 413:
    case 415:
      return InvalidArgumentError(message);
    case 401:
    case 403:
      return PermissionDeniedError(message);
    case 409:
      return AlreadyExistsError(message);
    default:
      return UnavailableError(message);  // 429, 5xx: the site may take it later
  }
}

Result<SiteJob> SiteClient::Get(std::string_view tenant, std::int64_t id) const {
  // One deadline for the job and, when it failed, its events.
  const Deadline deadline = After(timeout_);
  Answer res = ExchangeWithLeader(
      urls_, leader_, MakeRequest("GET", fmt::format("/api/v1/jobs/{}", id), token_, tenant),
      deadline, kMaxAnswerBytes);
  if (res.failure != CallFailure::kNone) return Unanswered("get job", res);
  if (res.status == 404) return NotFoundError(fmt::format("the site has no job {}", id));
  if (res.status != 200) return UnavailableError("get job: " + ErrorMessage(res));
  ASSIGN_OR_RETURN(SiteJob job, ReadJob(res));
  if (job.state == "failed" || job.state == "cancelled") {
    // The reason is the job's last event.
    Answer ev = ExchangeWithLeader(
        urls_, leader_,
        MakeRequest("GET", fmt::format("/api/v1/jobs/{}/events", id), token_, tenant), deadline,
        kMaxAnswerBytes);
    if (ev.failure == CallFailure::kNone && ev.status == 200) {
      Result<json> body = ParseAnswer(ev.body);
      if (body.ok() && body->is_object() && (*body)["events"].is_array() &&
          !(*body)["events"].empty()) {
        const json& last = (*body)["events"].back();
        if (last.is_object() && last.contains("message") && last["message"].is_string()) {
          job.detail = Printable(last["message"].get<std::string>(), 300);
        }
      }
    }
  }
  return job;
}

Result<SiteJob> SiteClient::Cancel(std::string_view tenant, std::int64_t id) const {
  httplib::Request req =
      MakeRequest("POST", fmt::format("/api/v1/jobs/{}:cancel", id), token_, tenant);
  SetJsonBody(req, "");
  Answer res = ExchangeWithLeader(urls_, leader_, req, After(timeout_), kMaxAnswerBytes);
  if (res.failure != CallFailure::kNone) return Unanswered("cancel", res);
  if (res.status == 200 || res.status == 202) return ReadJob(res);
  if (res.status == 404) return SiteJob{.id = id, .state = "gone"};
  // 409: it had already ended; nothing runs. How it ended decides whether it counts.
  if (res.status == 409) {
    Result<SiteJob> ended = Get(tenant, id);
    if (ended.ok() || ended.status().code() != StatusCode::kNotFound) return ended;
    return SiteJob{.id = id, .state = "gone"};
  }
  return UnavailableError("cancel: " + ErrorMessage(res));
}

Status SiteClient::Health() const {
  Answer res = ExchangeWithLeader(urls_, leader_, MakeRequest("GET", "/healthz", ""),
                                  After(timeout_), kMaxAnswerBytes);
  if (res.failure != CallFailure::kNone) return Unanswered("healthz", res);
  if (res.status != 200) return UnavailableError("healthz: " + ErrorMessage(res));
  return Status::Ok();
}

Result<std::int64_t> SiteClient::Gpus() const {
  Answer res = ExchangeWithLeader(urls_, leader_,
                                  MakeRequest("GET", "/api/v1/topology", token_, kTopologyTenant),
                                  After(timeout_), kMaxAnswerBytes);
  if (res.failure != CallFailure::kNone) return Unanswered("topology", res);
  if (res.status != 200) return UnavailableError("topology: " + ErrorMessage(res));
  Result<json> body = ParseAnswer(res.body);
  if (!body.ok() || !body->is_object() || !(*body)["gpus"].is_number_integer() ||
      (*body)["gpus"].get<std::int64_t>() <= 0) {
    return UnavailableError("topology: no GPU count");
  }
  return (*body)["gpus"].get<std::int64_t>();
}

std::string ContradictsCapacity(const federation::SiteAnswer& answer, std::int64_t capacity,
                                std::int64_t job_gpus) {
  if (!answer.reachable) return "";
  if (answer.free_gpus > answer.total_gpus) {
    return fmt::format("says {} GPUs are free of its {}", answer.free_gpus, answer.total_gpus);
  }
  if (capacity <= 0) return "";
  if (answer.total_gpus > 0 && answer.total_gpus != capacity) {
    return fmt::format("says it has {} GPUs; it last reported {}", answer.total_gpus, capacity);
  }
  if (answer.free_gpus > capacity) {
    return fmt::format("says {} GPUs are free; it last reported {} in all", answer.free_gpus,
                       capacity);
  }
  if (answer.refusal.empty() && job_gpus > capacity) {
    return fmt::format("would take a {}-GPU job; it last reported {} GPUs in all", job_gpus,
                       capacity);
  }
  return "";
}

}  // namespace baton::server
