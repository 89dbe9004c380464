// SiteClient: the federation broker's calls to one site, a `baton serve` reached over its HTTP
// API with the broker's token for it: the what-if for a job, an idempotent submit, a job's state,
// a cancel, /healthz and the site's GPU count. Each call opens its own connection and is bounded
// twice while it runs: by a deadline for the whole exchange (connect, request, every header line,
// the body), after which the connection is shut down however the site drips, and by a limit on
// the answer, past which reading stops (an answer is never buffered whole before it is checked).
// So a dead, slow or hostile site costs at most the deadline and the limit; no call retries (the
// broker's loop does).
//
// Thread-safe: calls share only which of a site's replicas answered last (an atomic).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "core/units.h"
#include "federation/routing.h"

namespace baton::server {

// When a whole exchange with a site must be over.
using Deadline = std::chrono::steady_clock::time_point;

// Why a call got no usable answer.
enum class CallFailure : std::uint8_t {
  kNone,
  kUnreachable,  // no connection, or it broke
  kDeadline,     // the exchange was not over by its deadline: a slow, hung or dripping site
  kTooLarge,     // the answer passed the limit (reading stopped there)
  kMalformed,    // not the answer the API gives
};

// A what-if answer, or why there is none (`answer.reachable` is false then).
struct WhatIfResult {
  federation::SiteAnswer answer;
  CallFailure failure = CallFailure::kNone;
  std::string error;  // with a failure: what happened, in one line
};

// A site's answer about one of its jobs.
struct SiteJob {
  std::int64_t id = 0;
  std::string state;      // the site's JobState name ("queued", "running", "succeeded", ...)
  std::string detail;     // for a failed or cancelled job: the site's last event message
  bool replayed = false;  // the submit found the job its idempotency key named
  // The newest checkpoint the site's job reported (its "checkpoint" field); unset: none, or an
  // answer whose checkpoint was not a well-formed {step >= 0, bytes >= 0} (a site is hostile).
  std::optional<std::int64_t> checkpoint_step;
  Bytes checkpoint_bytes;
};

class SiteClient {
 public:
  // Answers longer than this are refused (reading stops there): a site's answers are small.
  static constexpr std::size_t kMaxAnswerBytes = std::size_t{1} << 20;

  // The tenant the topology question is asked as (a broker principal names one on every request;
  // a site's topology is the same for every tenant).
  static constexpr std::string_view kTopologyTenant = "federation";

  // `url` is "http://host:port" or "https://host:port" (no path), or the URLs of a site's
  // replicas separated by commas: each call goes to the one that answered last and moves on to
  // the next after a refused or broken connection, a standby's redirect (307) or a 503, within
  // the call's deadline (every call is safe to resend: reads, the what-if, a submit with an
  // idempotency key, a cancel). `token` the bearer token, of a
  // principal with the broker role at the site. Every call about a job is made as the job's
  // `tenant` (the Baton-Tenant header): the site stores, limits and shows it as that tenant's.
  // `timeout` is the deadline of each call but the what-if, whose deadline the caller gives (one
  // for a whole round of sites).
  SiteClient(std::string url, std::string token, Seconds timeout);

  const std::string& url() const { return url_; }

  // The site's what-if for `spec_json` (POST /api/v1/whatif), over by `deadline`: reachable and
  // its forecast, or reachable with `refusal` set (the site would refuse the job, and why), or
  // not reachable with the failure. Counts are as the site gave them (ContradictsCapacity judges
  // them); out of range (negative, past any cluster) the answer is kMalformed.
  WhatIfResult WhatIf(std::string_view tenant, std::string_view spec_json, Deadline deadline) const;

  // POST /api/v1/jobs with `key` as its Idempotency-Key. kUnavailable: the site did not answer
  // (the job may or may not exist there: retry with the same key); kInvalidArgument,
  // kPermissionDenied, kAlreadyExists (same key, other body): the site refused the job, with its
  // message.
  Result<SiteJob> Submit(std::string_view tenant, std::string_view spec_json,
                         std::string_view key) const;

  // GET /api/v1/jobs/{id}. kNotFound: the site has no such job (lost it); kUnavailable: no answer.
  Result<SiteJob> Get(std::string_view tenant, std::int64_t id) const;

  // POST /api/v1/jobs/{id}:cancel: how the job stands after it. Its state is "cancelling" or
  // "cancelled" when the cancel took; for a job that had already ended (409), the state it ended
  // in (a second call, GET, tells which: "succeeded" or "failed"); "gone" when the site does not
  // know it (nothing runs). kUnavailable: no answer.
  Result<SiteJob> Cancel(std::string_view tenant, std::int64_t id) const;

  // GET /healthz: OK when the site answers 200.
  Status Health() const;

  // The site's GPUs (GET /api/v1/topology "gpus"), what its what-if answers are checked against.
  // kUnavailable when it does not say (no answer, no scheduler there).
  Result<std::int64_t> Gpus() const;

 private:
  std::string url_;
  std::vector<std::string> urls_;  // url_ split at commas
  std::string token_;
  Seconds timeout_;
  mutable std::atomic<std::size_t> leader_{0};  // index into urls_ of the last to answer
};

// Why a what-if answer cannot be true of a site that last reported `capacity` GPUs (0: not
// known), for a job of `job_gpus`: more free GPUs than it has or than it says it has, a total
// other than its capacity, or a job larger than the site taken without refusal. Empty: none.
std::string ContradictsCapacity(const federation::SiteAnswer& answer, std::int64_t capacity,
                                std::int64_t job_gpus);

// Parses the API's time format ("2026-12-01T18:00:00.123Z"); nullopt for anything else.
std::optional<TimePoint> ParseApiTime(std::string_view text);

}  // namespace baton::server
