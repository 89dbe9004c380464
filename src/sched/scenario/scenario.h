// Scheduler scenarios as data: a YAML file gives a topology, a scheduler config and a list of
// steps; each step reports events (running jobs to adopt, submissions, finishes, checkpoints,
// node health changes) at a time, runs one cycle and checks the decisions it expects (binds with
// exact nodes, preemptions, rejections and waiting reasons by substring, requeues). One runner
// executes every file in tests/scenarios/. The format is documented in tests/scenarios/README.md.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace baton::sched {

// Runs the scenario in `yaml` (`source` names it in messages). OK when every expectation held;
// otherwise the first parse error, or FailedPrecondition listing every mismatch.
Status RunScenario(std::string_view yaml, std::string_view source);
Status RunScenarioFile(const std::string& path);

}  // namespace baton::sched
