#include "server/broker/site_client.h"

#include <fmt/format.h>
#include <httplib.h>

#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::server {
namespace {

using nlohmann::json;

// A site's answers are small; a larger one is refused unread past this (bounded parse).
constexpr std::size_t kMaxAnswerBytes = std::size_t{1} << 20;

std::unique_ptr<httplib::Client> Connect(const std::string& url, Seconds timeout) {
  auto client = std::make_unique<httplib::Client>(url);
  auto secs = static_cast<time_t>(std::floor(timeout.value()));
  auto usecs = static_cast<time_t>((timeout.value() - static_cast<double>(secs)) * 1e6);
  client->set_connection_timeout(secs, usecs);
  client->set_read_timeout(secs, usecs);
  client->set_write_timeout(secs, usecs);
  client->set_keep_alive(false);
  return client;
}

Result<json> ParseAnswer(const std::string& body) {
  JsonLimits limits;
  limits.max_bytes = kMaxAnswerBytes;
  return ParseJsonBounded(body, limits);
}

// The message of an API error body, or the status line when it has none.
std::string ErrorMessage(const httplib::Result& res) {
  Result<json> body = ParseAnswer(res->body);
  if (body.ok() && body->is_object() && body->contains("error") && (*body)["error"].is_object()) {
    const json& e = (*body)["error"];
    if (e.contains("message") && e["message"].is_string()) {
      return fmt::format("{} {}", res->status, Printable(e["message"].get<std::string>(), 300));
    }
  }
  return fmt::format("HTTP {}", res->status);
}

Result<SiteJob> ReadJob(const httplib::Result& res) {
  Result<json> body = ParseAnswer(res->body);
  if (!body.ok() || !body->is_object() || !(*body)["id"].is_number_integer() ||
      !(*body)["state"].is_string()) {
    return UnavailableError("the site's job answer is not a job");
  }
  SiteJob job;
  job.id = (*body)["id"].get<std::int64_t>();
  job.state = (*body)["state"].get<std::string>();
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
    : url_(std::move(url)), token_(std::move(token)), timeout_(timeout) {}

federation::SiteAnswer SiteClient::WhatIf(std::string_view spec_json, std::string* error) const {
  federation::SiteAnswer answer;
  auto client = Connect(url_, timeout_);
  httplib::Headers headers{{"Authorization", "Bearer " + token_}};
  httplib::Result res =
      client->Post("/api/v1/whatif", headers, std::string(spec_json), "application/json");
  if (!res) {
    *error = "what-if: " + httplib::to_string(res.error());
    return answer;
  }
  if (res->status == 400 || res->status == 403) {
    answer.reachable = true;
    answer.refusal = ErrorMessage(res);
    return answer;
  }
  if (res->status != 200) {
    *error = "what-if: " + ErrorMessage(res);
    return answer;
  }
  Result<json> body = ParseAnswer(res->body);
  if (!body.ok() || !body->is_object()) {
    *error = "what-if: the answer is not a JSON object";
    return answer;
  }
  answer.reachable = true;
  const json& b = *body;
  if (b.contains("queue_position") && b["queue_position"].is_number_integer()) {
    answer.queue_position = b["queue_position"].get<int>();
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
  // Counts a site could not have are ignored (least-loaded then sees an empty site as before).
  constexpr int kMaxSiteGpus = 10'000'000;
  if (b.contains("free_gpus") && b["free_gpus"].is_number_integer() && b.contains("total_gpus") &&
      b["total_gpus"].is_number_integer()) {
    std::int64_t free = b["free_gpus"].get<std::int64_t>();
    std::int64_t total = b["total_gpus"].get<std::int64_t>();
    if (free >= 0 && free <= total && total <= kMaxSiteGpus) {
      answer.free_gpus = static_cast<int>(free);
      answer.total_gpus = static_cast<int>(total);
    }
  }
  return answer;
}

Result<SiteJob> SiteClient::Submit(std::string_view spec_json, std::string_view key) const {
  auto client = Connect(url_, timeout_);
  httplib::Headers headers{{"Authorization", "Bearer " + token_},
                           {"Idempotency-Key", std::string(key)}};
  httplib::Result res =
      client->Post("/api/v1/jobs", headers, std::string(spec_json), "application/json");
  if (!res) return UnavailableError("submit: " + httplib::to_string(res.error()));
  if (res->status == 200 || res->status == 201) {
    ASSIGN_OR_RETURN(SiteJob job, ReadJob(res));
    job.replayed = res->status == 200;
    return job;
  }
  std::string message = "submit refused: " + ErrorMessage(res);
  switch (res->status) {
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

Result<SiteJob> SiteClient::Get(std::int64_t id) const {
  auto client = Connect(url_, timeout_);
  httplib::Headers headers{{"Authorization", "Bearer " + token_}};
  httplib::Result res = client->Get(fmt::format("/api/v1/jobs/{}", id), headers);
  if (!res) return UnavailableError("get job: " + httplib::to_string(res.error()));
  if (res->status == 404) return NotFoundError(fmt::format("the site has no job {}", id));
  if (res->status != 200) return UnavailableError("get job: " + ErrorMessage(res));
  ASSIGN_OR_RETURN(SiteJob job, ReadJob(res));
  if (job.state == "failed" || job.state == "cancelled") {
    // The reason is the job's last event.
    httplib::Result ev = client->Get(fmt::format("/api/v1/jobs/{}/events", id), headers);
    if (ev && ev->status == 200) {
      Result<json> body = ParseAnswer(ev->body);
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

Status SiteClient::Cancel(std::int64_t id) const {
  auto client = Connect(url_, timeout_);
  httplib::Headers headers{{"Authorization", "Bearer " + token_}};
  httplib::Result res =
      client->Post(fmt::format("/api/v1/jobs/{}:cancel", id), headers, "", "application/json");
  if (!res) return UnavailableError("cancel: " + httplib::to_string(res.error()));
  if (res->status == 200 || res->status == 202 || res->status == 404) return Status::Ok();
  // 409: the job already finished; nothing runs.
  if (res->status == 409) return Status::Ok();
  return UnavailableError("cancel: " + ErrorMessage(res));
}

Status SiteClient::Health() const {
  auto client = Connect(url_, timeout_);
  httplib::Result res = client->Get("/healthz");
  if (!res) return UnavailableError("healthz: " + httplib::to_string(res.error()));
  if (res->status != 200) return UnavailableError("healthz: " + ErrorMessage(res));
  return Status::Ok();
}

}  // namespace baton::server
