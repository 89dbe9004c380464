#include "server/executors/dry_run_executor.h"

#include <fmt/format.h>

#include <algorithm>

namespace baton::server {

DryRunExecutor::DryRunExecutor(DryRunOptions options, const Clock& clock)
    : options_(options), clock_(clock), rng_(options.seed) {
  if (options_.speedup <= 0) options_.speedup = 1;
}

DryRunExecutor::Run DryRunExecutor::Plan(const LaunchRequest& request, TimePoint start) {
  Seconds simulated =
      request.estimated_runtime.value() > 0 ? request.estimated_runtime : options_.default_runtime;
  Run run;
  run.message =
      fmt::format("dry run of {:.0f} s (x{:g} speed-up)", simulated.value(), options_.speedup);
  if (options_.failure_probability > 0 && rng_.Bernoulli(options_.failure_probability)) {
    simulated = Seconds(simulated.value() * rng_.Uniform());
    run.kind = ExitKind::kFailed;
    run.message = fmt::format("simulated failure after {:.0f} s", simulated.value());
  }
  run.ends_at = start + Seconds(simulated.value() / options_.speedup);
  return run;
}

Status DryRunExecutor::Launch(const LaunchRequest& request) {
  if (request.ranks.empty()) return InvalidArgumentError("job has no ranks");
  if (request.gpu_milli < 0 || request.gpu_milli >= 1000 ||
      (request.gpu_milli > 0 && request.ranks.size() != 1)) {
    return InvalidArgumentError(
        "field 'gpu_milli': a GPU share is 1..999 thousandths of one rank's GPU");
  }
  running_[request.job] = Plan(request, clock_.Now());
  return Status::Ok();
}

void DryRunExecutor::Stop(std::int64_t job, Seconds grace) {
  auto it = running_.find(job);
  if (it == running_.end()) return;
  TimePoint stop_at = clock_.Now() + Seconds(grace.value() / options_.speedup);
  if (stop_at < it->second.ends_at) {
    it->second = {stop_at, ExitKind::kStopped, "stopped"};
  }
}

bool DryRunExecutor::Reattach(const LaunchRequest& request) {
  running_[request.job] = Plan(request, request.started_at);
  return true;
}

std::vector<ExitReport> DryRunExecutor::Poll() {
  std::vector<ExitReport> out;
  TimePoint now = clock_.Now();
  for (auto it = running_.begin(); it != running_.end();) {
    if (it->second.ends_at <= now) {
      out.push_back({it->first, it->second.kind, it->second.message});
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace baton::server
