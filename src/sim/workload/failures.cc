#include "sim/workload/failures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "sim/workload/line_reader.h"

namespace baton::sim {

FailureModel FailureModel::Llama3() {
  FailureModel m;
  m.causes = {
      {"gpu", 0.587, Hours(6), 0.8},
      {"network", 0.084, Hours(1), 0.8},
      {"host", 0.329, Minutes(30), 1.0},
  };
  return m;
}

Status FailureModel::Validate() const {
  if (!(interruptions_per_gpu_day >= 0) || interruptions_per_gpu_day > 100) {
    return InvalidArgumentError(
        fmt::format("field 'interruptions_per_gpu_day': {} is out of range (0..100)",
                    interruptions_per_gpu_day));
  }
  if (causes.empty()) return InvalidArgumentError("field 'causes': at least one cause is needed");
  double total = 0;
  for (const FailureCause& c : causes) {
    if (c.name.empty()) return InvalidArgumentError("field 'causes.name': empty");
    if (!(c.share >= 0)) {
      return InvalidArgumentError(fmt::format("cause {}: field 'share': must be >= 0", c.name));
    }
    if (!(c.repair_median.value() > 0)) {
      return InvalidArgumentError(
          fmt::format("cause {}: field 'repair_median': must be > 0", c.name));
    }
    if (!(c.repair_sigma >= 0) || c.repair_sigma > 5) {
      return InvalidArgumentError(
          fmt::format("cause {}: field 'repair_sigma': out of range (0..5)", c.name));
    }
    total += c.share;
  }
  if (std::fabs(total - 1.0) > 1e-6) {
    return InvalidArgumentError(fmt::format("field 'causes': shares sum to {}, not 1", total));
  }
  return Status::Ok();
}

FailureGenerator::FailureGenerator(const topo::Cluster& cluster, FailureModel model,
                                   std::uint64_t seed)
    : model_(std::move(model)), rng_(seed) {
  CHECK(model_.Validate().ok()) << model_.Validate().ToString();
  std::uint32_t sum = 0;
  gpu_prefix_.reserve(cluster.nodes().size());
  for (const topo::Node& n : cluster.nodes()) {
    sum += n.gpus;
    gpu_prefix_.push_back(sum);
  }
  total_rate_per_s_ = model_.interruptions_per_gpu_day / 86400.0 * sum;
}

FailureEvent FailureGenerator::Next() {
  FailureEvent e;
  if (total_rate_per_s_ <= 0) {
    e.time = Seconds(INFINITY);
    return e;
  }
  now_ += Seconds(rng_.Exponential(1.0 / total_rate_per_s_));
  e.time = now_;
  auto gpu = static_cast<std::uint32_t>(rng_.UniformInt(0, gpu_prefix_.back() - 1));
  auto it = std::upper_bound(gpu_prefix_.begin(), gpu_prefix_.end(), gpu);
  e.node = topo::NodeId(static_cast<std::uint32_t>(it - gpu_prefix_.begin()));
  double u = rng_.Uniform(), acc = 0;
  e.cause = static_cast<int>(model_.causes.size()) - 1;
  for (std::size_t i = 0; i < model_.causes.size(); ++i) {
    acc += model_.causes[i].share;
    if (u < acc) {
      e.cause = static_cast<int>(i);
      break;
    }
  }
  const FailureCause& c = model_.causes[e.cause];
  e.repair = Seconds(rng_.LogNormal(std::log(c.repair_median.value()), c.repair_sigma));
  return e;
}

FailureTraceReader::FailureTraceReader(std::istream& in, std::string name,
                                       const topo::Cluster& cluster)
    : in_(in), name_(std::move(name)), cluster_(cluster) {}

Result<std::optional<FailureEvent>> FailureTraceReader::Next() {
  std::string line;
  bool too_long = false;
  while (ReadBoundedLine(in_, kMaxFailureLineBytes, line, too_long)) {
    ++line_;
    auto bad = [&](std::string_view why) {
      return InvalidArgumentError(fmt::format("{}:{}: {}", name_, line_, why));
    };
    if (too_long) return bad(fmt::format("line longer than {} bytes", kMaxFailureLineBytes));
    std::string_view v = Trim(line);
    if (v.empty() || v.front() == '#') continue;
    if (line_ == 1 && v.starts_with("time_s")) continue;
    auto f = Split(v, ',');
    if (f.size() != 4)
      return bad(fmt::format("expected 4 fields (time_s,node,cause,repair_s), found {}", f.size()));
    auto t = ParseDouble(f[0]);
    if (!t) return bad("field 'time_s': must be a number >= 0");
    if (Status h = TimeInHorizon("time_s", *t); !h.ok()) return bad(h.message());
    if (Seconds(*t) < last_) return bad("field 'time_s': failures must be in time order");
    auto node = cluster_.FindNode(Trim(f[1]));
    if (!node.ok()) return bad(fmt::format("field 'node': {}", node.status().message()));
    std::string cause(Trim(f[2]));
    if (cause.empty()) return bad("field 'cause': empty");
    auto repair = ParseDouble(f[3]);
    if (!repair || *repair <= 0) return bad("field 'repair_s': must be a number > 0");
    if (Status h = TimeInHorizon("repair_s", *repair); !h.ok()) return bad(h.message());
    auto it = std::find(causes_.begin(), causes_.end(), cause);
    if (it == causes_.end() && causes_.size() >= kMaxFailureCauses) {
      return bad(fmt::format("field 'cause': more than {} distinct causes", kMaxFailureCauses));
    }
    if (it == causes_.end()) it = causes_.insert(causes_.end(), cause);
    last_ = Seconds(*t);
    return std::optional<FailureEvent>(
        FailureEvent{Seconds(*t), *node, static_cast<int>(it - causes_.begin()), Seconds(*repair)});
  }
  return std::optional<FailureEvent>();
}

}  // namespace baton::sim
