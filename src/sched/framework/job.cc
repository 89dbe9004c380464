#include "sched/framework/job.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/strings.h"

namespace baton::sched {
namespace {

int MaxNodeGpus(const topo::Cluster& cluster) {
  int max = 0;
  for (const auto& s : cluster.shapes()) max = std::max(max, s.gpus);
  return max;
}

bool LevelExists(const topo::Cluster& cluster, topo::Level level) {
  if (level == topo::Level::kNode || level == topo::Level::kNvlinkDomain) return true;
  for (int t = 0; t < cluster.tier_count(); ++t) {
    if (cluster.tier_level(t) == level) return true;
  }
  return false;
}

std::string KnownLevels(const topo::Cluster& cluster) {
  std::string out = "node, nvlink-domain";
  for (int t = 0; t < cluster.tier_count(); ++t) {
    out += ", " + std::string(topo::LevelName(cluster.tier_level(t)));
  }
  return out;
}

}  // namespace

int EffectiveTaskGpus(const GangJob& job, const topo::Cluster& cluster) {
  if (job.gpus_per_task > 0) return job.gpus_per_task;
  const int node = MaxNodeGpus(cluster);
  return job.gpus <= node ? job.gpus : node;
}

Status ValidateJob(const GangJob& job, const topo::Cluster& cluster) {
  auto bad = [&](std::string_view field, const std::string& why) {
    return InvalidArgumentError(
        fmt::format("job '{}': field '{}': {}", Printable(job.name), field, why));
  };
  if (!job.id.valid()) return bad("id", "missing job id");
  if (job.gpus <= 0) return bad("gpus", fmt::format("must be > 0, got {}", job.gpus));
  const int total = cluster.counts().total;
  if (job.gpus > total) {
    return bad("gpus", fmt::format("{} GPUs requested but cluster '{}' has {}", job.gpus,
                                   cluster.name(), total));
  }
  const int node_gpus = MaxNodeGpus(cluster);
  if (job.gpus_per_task < 0) return bad("gpus_per_task", "must not be negative");
  const int g = EffectiveTaskGpus(job, cluster);
  if (g > node_gpus) {
    return bad("gpus_per_task",
               fmt::format("{} GPUs per task but the largest node has {}", g, node_gpus));
  }
  if (job.gpus % g != 0) {
    return bad("gpus_per_task",
               fmt::format("{} GPUs per task do not divide the gang of {}", g, job.gpus));
  }
  // Acceptable types must exist in the catalogue and in this cluster, with enough GPUs.
  if (!job.gpu_types.empty()) {
    int available = 0;
    for (std::size_t i = 0; i < job.gpu_types.size(); ++i) {
      auto spec = topo::FindGpu(job.gpu_types[i]);
      std::string field = fmt::format("gpu_types[{}]", i);
      if (!spec.ok()) {
        return bad(field, fmt::format("unknown GPU type '{}'", Printable(job.gpu_types[i])));
      }
      for (const auto& n : cluster.nodes()) {
        if (cluster.shape(n.shape).gpu == *spec) available += n.gpus;
      }
    }
    if (available < job.gpus) {
      return bad("gpu_types", fmt::format("cluster has {} GPUs of the accepted types, job needs {}",
                                          available, job.gpus));
    }
  }
  auto check_level = [&](std::string_view field, topo::Level level) -> Status {
    if (!LevelExists(cluster, level)) {
      return bad(field, fmt::format("level '{}' does not exist in cluster '{}' (has {})",
                                    topo::LevelName(level), cluster.name(), KnownLevels(cluster)));
    }
    return Status::Ok();
  };
  if (job.topology.required)
    RETURN_IF_ERROR(check_level("topology.required", *job.topology.required));
  if (job.topology.preferred) {
    RETURN_IF_ERROR(check_level("topology.preferred", *job.topology.preferred));
    if (job.topology.required && *job.topology.preferred > *job.topology.required) {
      return bad("topology.preferred", "is above the required level");
    }
  }
  for (std::size_t i = 0; i < job.sub_groups.size(); ++i) {
    const auto& sg = job.sub_groups[i];
    std::string field = fmt::format("sub_groups[{}].gpus", i);
    if (sg.gpus <= 0) return bad(field, fmt::format("must be > 0, got {}", sg.gpus));
    if (job.gpus % sg.gpus != 0) {
      return bad(field, fmt::format("sub-group of {} GPUs does not divide the gang of {}", sg.gpus,
                                    job.gpus));
    }
    if (sg.gpus > g && sg.gpus % g != 0) {
      return bad(field, fmt::format("sub-group of {} GPUs is not a whole number of {}-GPU tasks",
                                    sg.gpus, g));
    }
    if (sg.gpus < g && g % sg.gpus != 0) {
      return bad(field,
                 fmt::format("sub-group of {} GPUs does not divide a {}-GPU task", sg.gpus, g));
    }
    RETURN_IF_ERROR(check_level(fmt::format("sub_groups[{}].level", i), sg.level));
  }
  for (std::size_t i = 0; i < job.node_requirements.size(); ++i) {
    const auto& r = job.node_requirements[i];
    if (r.key.empty()) return bad(fmt::format("node_requirements[{}].key", i), "must not be empty");
    const bool set_op = r.op == NodeRequirement::Op::kIn || r.op == NodeRequirement::Op::kNotIn;
    if (set_op && r.values.empty()) {
      return bad(fmt::format("node_requirements[{}].values", i), "In / NotIn need values");
    }
    if (!set_op && !r.values.empty()) {
      return bad(fmt::format("node_requirements[{}].values", i), "only In / NotIn take values");
    }
  }
  if (job.estimated_runtime.value() < 0) return bad("estimated_runtime", "must not be negative");
  if (job.grace_period.value() < 0) return bad("grace_period", "must not be negative");
  if (job.checkpoint_interval.value() < 0)
    return bad("checkpoint_interval", "must not be negative");
  if (job.restart_cost.value() < 0) return bad("restart_cost", "must not be negative");
  if (job.max_retries < 0) return bad("max_retries", "must not be negative");
  const auto& e = job.elastic;
  if (e.min_gpus != 0 || e.max_gpus != 0 || e.step_gpus != 0) {
    if (e.step_gpus <= 0) return bad("elastic.step_gpus", "must be > 0");
    if (e.min_gpus <= 0 || e.min_gpus % e.step_gpus != 0) {
      return bad("elastic.min_gpus", "must be a positive multiple of step_gpus");
    }
    if (e.max_gpus < e.min_gpus || e.max_gpus % e.step_gpus != 0) {
      return bad("elastic.max_gpus", "must be a multiple of step_gpus and >= min_gpus");
    }
    if (job.gpus < e.min_gpus || job.gpus > e.max_gpus) {
      return bad("gpus", "must lie within [elastic.min_gpus, elastic.max_gpus]");
    }
  }
  return Status::Ok();
}

}  // namespace baton::sched
