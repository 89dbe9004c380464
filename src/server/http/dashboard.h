// The dashboard's side of the API: the embedded static files at / and /ui/, the cluster as the
// heatmap draws it (/api/v1/cluster), and the live-update stream (/api/v1/stream). What a
// principal sees follows the auth policy: a tenant sees its own jobs on the heatmap and other
// tenants' GPUs only as "taken" (job -1), never their job ids or tenant names.
#pragma once

#include <httplib.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "server/controller.h"
#include "server/http/auth.h"
#include "server/http/event_streams.h"

namespace baton::server {

// Answers a GET for an embedded file; false when `path` is not one (the caller answers 404).
bool ServeWebAsset(std::string_view path, httplib::Response& res);

// {"name", "gpus", "gpus_allocated", "nodes": [{"name", "path", "domain", "health", "gpus":
// [job id, 0 = free, -1 = another tenant's]}], "jobs": {"ID": {"tenant"}}}, filtered for `who`.
nlohmann::json ClusterJson(const ClusterView& view, const Principal& who);

// Starts a text/event-stream answer: "event: change" whenever controller.StateVersion() grows
// (checked every 200 ms), a comment line every 15 s to keep proxies from closing it, and the end
// of the stream after 45 s, within the connection guard's request deadline (clients reconnect at
// once, and the first event of a new stream makes them read again), or at once, with a 10 s
// reconnection delay ("retry"), when the ticket is asked to close. The answer holds `ticket`.
void StartEventStream(const Controller& controller, std::shared_ptr<EventStreams::Ticket> ticket,
                      httplib::Response& res);

}  // namespace baton::server
