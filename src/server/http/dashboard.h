// The dashboard's side of the API: the embedded static files at / and /ui/, the cluster as the
// heatmap draws it (/api/v1/cluster), and the live-update stream (/api/v1/stream). What a
// principal sees follows the auth policy: a tenant sees its own jobs on the heatmap and other
// tenants' GPUs only as "taken" (job -1), never their job ids or tenant names.
#pragma once

#include <httplib.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string_view>

#include "server/controller.h"
#include "server/http/auth.h"

namespace baton::server {

// Answers a GET for an embedded file; false when `path` is not one (the caller answers 404).
bool ServeWebAsset(std::string_view path, httplib::Response& res);

// {"name", "gpus", "gpus_allocated", "nodes": [{"name", "path", "domain", "health", "gpus":
// [job id, 0 = free, -1 = another tenant's]}], "jobs": {"ID": {"tenant"}}}, filtered for `who`.
nlohmann::json ClusterJson(const ClusterView& view, const Principal& who);

// Concurrent streams at most; more get 503 (each holds one HTTP worker thread).
inline constexpr int kMaxEventStreams = 16;

// Starts a text/event-stream answer: "event: change" whenever controller.StateVersion() grows
// (checked every 200 ms), a comment line every 15 s to keep proxies from closing it, and the end
// of the stream after 45 s, within the connection guard's request deadline (clients reconnect at
// once, and the first event of a new stream makes them read again). The caller has already
// incremented `open_streams` for this stream; it is decremented when the answer is destroyed.
void StartEventStream(const Controller& controller, std::atomic<int>& open_streams,
                      httplib::Response& res);

}  // namespace baton::server
