// DryRunExecutor: a simulated cluster. A job "runs" for its estimated runtime (or
// default_runtime when it has none) divided by `speedup`, then reports success; with
// failure_probability > 0 a run fails instead, at a random point. Nothing is started anywhere.
// The simulated cluster outlives the daemon: Reattach accounts for a job from its start time (a
// job whose run would be over by now exits at the next Poll).
#pragma once

#include <map>

#include "core/clock.h"
#include "core/rng.h"
#include "server/executors/executor.h"

namespace baton::server {

struct DryRunOptions {
  double speedup = 60;  // simulated seconds per real second; > 0
  Seconds default_runtime{600};
  double failure_probability = 0;  // per run, in [0, 1]
  std::uint64_t seed = 1;
};

class DryRunExecutor final : public Executor {
 public:
  // `clock` (not owned) must outlive the executor.
  DryRunExecutor(DryRunOptions options, const Clock& clock);
  std::string_view name() const override { return "dry-run"; }
  double TimeScale() const override { return 1.0 / options_.speedup; }
  Status Launch(const LaunchRequest& request) override;
  void Stop(std::int64_t job, Seconds grace) override;
  void Kill(std::int64_t job) override { running_.erase(job); }
  bool Reattach(const LaunchRequest& request) override;
  std::vector<ExitReport> Poll() override;
  void StopAll() override { running_.clear(); }

 private:
  struct Run {
    TimePoint ends_at;
    ExitKind kind = ExitKind::kSucceeded;
    std::string message;
  };
  Run Plan(const LaunchRequest& request, TimePoint start);

  DryRunOptions options_;
  const Clock& clock_;
  Rng rng_;
  std::map<std::int64_t, Run> running_;
};

}  // namespace baton::server
