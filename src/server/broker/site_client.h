// SiteClient: the federation broker's calls to one site, a `baton serve` reached over its HTTP
// API with the broker's token for it: the what-if for a job, an idempotent submit, a job's state,
// a cancel and /healthz. Each call opens its own connection and is bounded by the timeout, so a
// dead or slow site costs at most that; no call retries (the broker's loop does).
//
// Thread-safe: the object is immutable, calls share nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/clock.h"
#include "core/status.h"
#include "core/units.h"
#include "federation/routing.h"

namespace baton::server {

// A site's answer about one of its jobs.
struct SiteJob {
  std::int64_t id = 0;
  std::string state;      // the site's JobState name ("queued", "running", "succeeded", ...)
  std::string detail;     // for a failed or cancelled job: the site's last event message
  bool replayed = false;  // the submit found the job its idempotency key named
};

class SiteClient {
 public:
  // `url` is "http://host:port" or "https://host:port" (no path); `token` the bearer token.
  SiteClient(std::string url, std::string token, Seconds timeout);

  const std::string& url() const { return url_; }

  // The site's what-if for `spec_json` (POST /api/v1/whatif): reachable and its forecast, or
  // reachable with `refusal` set (the site would refuse the job, and why), or not reachable.
  federation::SiteAnswer WhatIf(std::string_view spec_json, std::string* error) const;

  // POST /api/v1/jobs with `key` as its Idempotency-Key. kUnavailable: the site did not answer
  // (the job may or may not exist there: retry with the same key); kInvalidArgument,
  // kPermissionDenied, kAlreadyExists (same key, other body): the site refused the job, with its
  // message.
  Result<SiteJob> Submit(std::string_view spec_json, std::string_view key) const;

  // GET /api/v1/jobs/{id}. kNotFound: the site has no such job (lost it); kUnavailable: no answer.
  Result<SiteJob> Get(std::int64_t id) const;

  // POST /api/v1/jobs/{id}:cancel. OK also when it was already cancelled or finished, or is
  // unknown there (kNotFound is reported as OK: nothing runs).
  Status Cancel(std::int64_t id) const;

  // GET /healthz: OK when the site answers 200.
  Status Health() const;

 private:
  std::string url_;
  std::string token_;
  Seconds timeout_;
};

// Parses the API's time format ("2026-12-01T18:00:00.123Z"); nullopt for anything else.
std::optional<TimePoint> ParseApiTime(std::string_view text);

}  // namespace baton::server
