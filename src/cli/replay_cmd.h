// `baton sim --replay-daemon FILE`: the daemon's scheduling history (baton export) replayed
// through the scheduler (sim/replay/daemon_replay.h). Without policies, under the recorded config,
// comparing every placement; with policies (--policies, --scheduler-config), "what if": the
// record's metrics beside each policy's.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "sched/framework/config.h"

namespace baton::cli {

// `policies` empty: the same-config replay, which fails (kFailedPrecondition, after printing the
// report) when a placement differs. Prints to standard output.
Status RunReplayDaemon(const std::string& path,
                       const std::vector<std::pair<std::string, sched::SchedulerConfig>>& policies);

}  // namespace baton::cli
