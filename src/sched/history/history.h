// The daemon's scheduling history as data: every RunCycle input (its `now` and its events) with
// the placements the cycle decided, in baton's versioned JSON Lines format (docs in
// src/sim/README.md, "Replaying the daemon"). The daemon (server) writes it, the simulator (sim)
// replays it through the same Scheduler; this codec is the one both share, so the format has one
// definition.
//
//   {"format":"baton-daemon-history","version":1}                        the first line of a file
//   {"type":"run","run":3,"started":1764590000.5,"cluster":"...","scheduler":"..."}
//   {"type":"cycle","run":3,"cycle":1,"now":1764590000.52,"events":[...],"placed":[...],...}
//
// A "run" line is one daemon start: a fresh Scheduler over the cluster (baton cluster YAML, as
// topo::ExportClusterYaml wrote it) with the scheduler config (YAML text; empty: the daemon's
// default). Its cycles follow, numbered 1, 2, ... Nodes are named, never numbered; GPU masks are
// hex strings ("0xff"); times are seconds since the epoch as JSON doubles (exact round trip).
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/clock.h"
#include "core/status.h"
#include "sched/framework/types.h"
#include "topology/cluster.h"

namespace baton::sched::history {

inline constexpr std::string_view kFormat = "baton-daemon-history";
inline constexpr int kVersion = 1;
// The longest line read: a cycle that took a burst of thousands of submissions at once, or a run
// line with the YAML of a cluster of thousands of nodes, stays far below this.
inline constexpr std::size_t kMaxLineBytes = std::size_t{64} << 20;
// Nesting of a line: line -> events -> event -> job -> node_requirements -> requirement -> values.
inline constexpr int kMaxDepth = 8;

// One daemon start.
struct Run {
  std::int64_t run = 0;  // >= 1, increasing over the history
  TimePoint started;
  std::string cluster_yaml;    // topo::ExportClusterYaml of the daemon's cluster at start
  std::string scheduler_yaml;  // the scheduler config text; empty: the daemon's default
};

// A placement a cycle decided for a job (a bind, a node replacement or a resize).
struct Placed {
  JobId job;
  Placement placement;
  bool operator==(const Placed&) const = default;
};

// A preemption a cycle decided: the victim keeps its GPUs until release_at.
struct Preempted {
  JobId victim;
  JobId for_job;
  TimePoint release_at;
  auto operator<=>(const Preempted&) const = default;
};

// One RunCycle: its input and what it decided.
struct Cycle {
  std::int64_t run = 0;
  std::int64_t cycle = 0;  // 1, 2, ... within the run
  TimePoint now;
  std::vector<Event> events;
  std::vector<Placed> binds;
  std::vector<Placed> replacements;
  std::vector<Placed> resizes;
  std::vector<Preempted> preemptions;
  std::vector<JobId> rejections;
  std::vector<JobId> requeues;
};

// The first line of a history file.
std::string HeaderLine();
// One line each (no trailing newline).
std::string EncodeRun(const Run& run);
std::string EncodeCycle(const topo::Cluster& cluster, std::int64_t run, std::int64_t cycle,
                        TimePoint now, std::span<const Event> events, const Decisions& decisions);
// The decisions of `d` as a Cycle keeps them (for comparison with a recorded one).
void KeepDecisions(const Decisions& d, Cycle& out);

// Reads a history file line by line in constant memory (one line at a time, at most
// kMaxLineBytes). Every line is depth- and size-checked before it is parsed, duplicate keys and
// unknown fields are refused, node names are checked against the run's cluster, and every error
// reads "NAME:LINE: field 'F': why". Runs must increase, a run's cycles must be numbered
// 1, 2, ... with no gap and `now` must not go backwards within a run: a history with a hole is
// refused rather than replayed into a wrong answer. Lines before the first "run" line (their run
// was cut by the daemon's retention) are skipped and counted.
class Reader {
 public:
  struct RunStart {
    Run run;
    std::shared_ptr<const topo::Cluster> cluster;  // parsed from run.cluster_yaml
    std::int64_t line = 0;
  };
  struct CycleRead {
    Cycle cycle;
    std::int64_t line = 0;
  };
  using Item = std::variant<RunStart, CycleRead>;

  Reader(std::istream& in, std::string name) : in_(in), name_(std::move(name)) {}
  // nullopt at the end of the file.
  Result<std::optional<Item>> Next();
  std::int64_t lines() const { return line_; }
  std::int64_t skipped_cycles() const { return skipped_; }
  const std::string& name() const { return name_; }

 private:
  Status Error(std::string_view field, std::string_view why) const;
  std::istream& in_;
  std::string name_;
  std::int64_t line_ = 0;
  bool header_seen_ = false;
  std::shared_ptr<const topo::Cluster> cluster_;
  std::int64_t run_ = 0;
  std::int64_t cycle_ = 0;
  TimePoint last_now_;
  std::int64_t skipped_ = 0;
};

// "n01:0xff,n02:0xf" (for divergence reports).
std::string PlacementText(const topo::Cluster& cluster, const Placement& p);

}  // namespace baton::sched::history
