// Node failures for simulation: a stream of (time, node, cause, repair time) events, either drawn
// from per-GPU failure rates — by default calibrated to Llama 3 405B's pre-training, 419
// unexpected interruptions in 54 days on 16,384 H100s, 58.7 % GPU faults and 8.4 % network — or
// read from a failure trace file (CSV: time_s,node,cause,repair_s). Generation is lazy: constant
// memory however long the horizon.
#pragma once

#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/status.h"
#include "core/units.h"
#include "topology/cluster.h"

namespace baton::sim {

struct FailureCause {
  std::string name;
  double share = 0;           // fraction of all interruptions
  Seconds repair_median;      // repair times are log-normal around this median
  double repair_sigma = 1.0;  // of the underlying normal
};

struct FailureModel {
  // Unexpected interruptions per GPU per day (Llama 3: 419 / (54 d x 16,384 GPUs) = 4.74e-4).
  double interruptions_per_gpu_day = 419.0 / (54.0 * 16384.0);
  std::vector<FailureCause> causes;

  // The Llama 3 405B mix (Dubey et al. 2024, Table 5): GPU faults 58.7 % (faulty GPU 30.1 %,
  // HBM3 17.2 %, other GPU 11.4 %), network switch/cable 8.4 %, the rest host, software and
  // unattributed. The paper gives no repair times: the medians here are assumptions (a GPU swap
  // takes hours, a cable or switch port less, a host reboot under an hour) and are documented as
  // such in the README.
  static FailureModel Llama3();
  // Checks shares (each >= 0, summing to 1 within 1e-6), rates and medians; errors name the field.
  Status Validate() const;
};

struct FailureEvent {
  Seconds time;
  topo::NodeId node;
  int cause = 0;  // index into FailureModel::causes, or into the trace's cause names
  Seconds repair;
};

// Draws failures over the cluster's nodes: each GPU fails at the model's rate, so a node with
// more GPUs fails proportionally more often. Deterministic for a given seed.
class FailureGenerator {
 public:
  FailureGenerator(const topo::Cluster& cluster, FailureModel model, std::uint64_t seed);
  // The next failure after the previous one (times increase strictly).
  FailureEvent Next();
  const FailureModel& model() const { return model_; }

 private:
  FailureModel model_;
  Rng rng_;
  std::vector<std::uint32_t> gpu_prefix_;  // cumulative GPUs per node, for sampling a node
  double total_rate_per_s_ = 0;
  Seconds now_;
};

// Reads a failure trace: a header line `time_s,node,cause,repair_s`, then one failure a line in
// time order. Node names must exist in the cluster. Errors name the file, line and field.
class FailureTraceReader {
 public:
  // Bounds on hostile input: a line's length, and the distinct causes kept (a real failure
  // taxonomy has a dozen or two: Llama 3's lists 16 root causes).
  static constexpr std::size_t kMaxFailureLineBytes = 4096;
  static constexpr std::size_t kMaxFailureCauses = 256;

  FailureTraceReader(std::istream& in, std::string name, const topo::Cluster& cluster);
  Result<std::optional<FailureEvent>> Next();
  const std::vector<std::string>& causes() const { return causes_; }

 private:
  std::istream& in_;
  std::string name_;
  const topo::Cluster& cluster_;
  std::int64_t line_ = 0;
  Seconds last_;
  std::vector<std::string> causes_;
};

}  // namespace baton::sim
