#include "sched/framework/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

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

struct MigProfile {
  std::string_view name;
  int compute_slices;
  int memory_slices;
};
constexpr MigProfile kMig80[] = {
    {"1g.10gb", 1, 1}, {"2g.20gb", 2, 2}, {"3g.40gb", 3, 4}, {"4g.40gb", 4, 4}, {"7g.80gb", 7, 8}};
constexpr MigProfile kMig40[] = {
    {"1g.5gb", 1, 1}, {"2g.10gb", 2, 2}, {"3g.20gb", 3, 4}, {"4g.20gb", 4, 4}, {"7g.40gb", 7, 8}};

// "job 'NAME': field 'FIELD': why", with the field and the reason in the Status.
Status JobFieldError(const GangJob& job, std::string field, std::string why) {
  return InvalidFieldError(std::move(field), std::move(why))
      .WithPrefix(fmt::format("job '{}'", Printable(job.name)));
}

// The extended resources of `job` are well formed and known to `cluster`.
Status CheckExtended(const GangJob& job, const topo::Cluster& cluster) {
  if (job.extended.size() > kMaxExtendedPerTask) {
    return JobFieldError(
        job, "extended",
        fmt::format("{} resources, at most {}", job.extended.size(), kMaxExtendedPerTask));
  }
  for (std::size_t i = 0; i < job.extended.size(); ++i) {
    const auto& r = job.extended[i];
    auto bad = [&](const std::string& why) {
      return JobFieldError(job, fmt::format("extended.{}", Printable(r.name)), why);
    };
    if (Status s = topo::CheckExtendedResourceName(r.name); !s.ok()) return bad(s.message());
    for (std::size_t k = 0; k < i; ++k) {
      if (job.extended[k].name == r.name) return bad("given twice");
    }
    if (r.amount < 0) return bad(fmt::format("must be >= 0, got {}", r.amount));
    if (cluster.FindExtendedResource(r.name) < 0) {
      std::string known;
      for (const auto& n : cluster.extended_resources()) {
        known += fmt::format("{}{}", known.empty() ? "" : ", ", n);
      }
      return bad(fmt::format("no node of cluster '{}' has this resource (known: {})",
                             cluster.name(), known.empty() ? "none" : known));
    }
  }
  return Status::Ok();
}

// Whether some node (of the accepted GPU types) can hold one task of `task_gpus` GPUs with the
// job's CPU, memory and extended resources; names the first resource no node has enough of.
Status CheckHostFit(const GangJob& job, const topo::Cluster& cluster, int task_gpus) {
  std::string short_of;
  for (std::size_t si = 0; si < cluster.shapes().size(); ++si) {
    const topo::NodeShape& shape = cluster.shapes()[si];
    if (!job.gpu_types.empty()) {
      bool accepted = false;
      for (const auto& t : job.gpu_types) {
        auto type = cluster.FindGpuType(t);
        accepted |= type.ok() && *type == shape.gpu;
      }
      if (!accepted) continue;
    }
    const std::int64_t cpu = std::int64_t{shape.cpus} * 1000;
    const std::int64_t mem = shape.memory.value() / (1024.0 * 1024.0);
    if (shape.gpus < task_gpus) {
      if (short_of.empty()) short_of = "gpus";
    } else if (cpu > 0 && cpu < job.cpu_milli) {
      if (short_of.empty() || short_of == "gpus") short_of = "cpu_milli";
    } else if (mem > 0 && mem < job.memory_mib) {
      if (short_of != "cpu_milli") short_of = "memory_mib";
    } else {
      const topo::ExtendedResource* lacking = nullptr;
      for (const auto& r : job.extended) {
        const int id = cluster.FindExtendedResource(r.name);
        if (cluster.ExtendedCapacity(topo::NodeShapeId(static_cast<std::uint16_t>(si)), id) <
            r.amount)
          lacking = &r;
      }
      if (lacking == nullptr) return Status::Ok();
      if (short_of.empty() || short_of == "gpus") {
        short_of = fmt::format("extended.{}", Printable(lacking->name));
      }
    }
  }
  if (short_of.empty()) short_of = "gpus";
  std::string extended;
  for (const auto& r : job.extended) extended += fmt::format(", {} {}", r.amount, r.name);
  return JobFieldError(
      job, short_of,
      fmt::format("no node of cluster '{}' has {} GPUs, {} milli-CPU and {} MiB{} for one task",
                  cluster.name(), task_gpus, job.cpu_milli, job.memory_mib, extended));
}

Status ValidateCpuOnly(const GangJob& job, const topo::Cluster& cluster) {
  auto bad = [&](std::string_view field, const std::string& why) {
    return JobFieldError(job, std::string(field), why);
  };
  if (SharesGpu(job)) {
    return bad(job.gpu_milli > 0 ? "gpu_milli" : "mig_profile",
               "a GPU share needs gpus: 1 (this job asks for no GPU)");
  }
  if (job.gpus_per_task != 0) return bad("gpus_per_task", "a CPU-only job has no GPUs");
  if (!job.sub_groups.empty()) return bad("sub_groups", "a CPU-only job is one task");
  if (job.elastic.min_gpus != 0 || job.elastic.max_gpus != 0 || job.elastic.step_gpus != 0) {
    return bad("elastic", "a CPU-only job is not elastic");
  }
  if (job.spread) return bad("spread", "a CPU-only job is one task");
  for (std::size_t i = 0; i < job.gpu_types.size(); ++i) {
    if (!cluster.FindGpuType(job.gpu_types[i]).ok()) {
      return bad(fmt::format("gpu_types[{}]", i),
                 fmt::format("unknown GPU type '{}'", Printable(job.gpu_types[i])));
    }
  }
  if (job.estimated_runtime.value() < 0) return bad("estimated_runtime", "must not be negative");
  if (job.grace_period.value() < 0) return bad("grace_period", "must not be negative");
  if (job.max_retries < 0) return bad("max_retries", "must not be negative");
  return CheckHostFit(job, cluster, 0);
}

}  // namespace

bool AsksHostResources(const GangJob& job) {
  if (job.cpu_milli > 0 || job.memory_mib > 0) return true;
  for (const auto& r : job.extended) {
    if (r.amount > 0) return true;
  }
  return false;
}

ExtendedRequest CompileExtended(const GangJob& job, const topo::Cluster& cluster) {
  ExtendedRequest out;
  for (const auto& r : job.extended) {
    const int id = cluster.FindExtendedResource(r.name);
    if (id < 0 || r.amount <= 0 || out.count >= kMaxExtendedPerTask) continue;
    out.id[out.count] = static_cast<std::uint8_t>(id);
    out.amount[out.count] = r.amount;
    ++out.count;
  }
  return out;
}

HostResources HostResources::Times(std::int64_t tasks) const {
  HostResources r = *this;
  r.cpu_milli *= tasks;
  r.memory_mib *= tasks;
  for (int i = 0; i < r.extended.count; ++i) r.extended.amount[i] *= tasks;
  return r;
}

std::optional<GpuShareAmount> ShareOn(const GangJob& job, const topo::GpuSpec& gpu) {
  if (job.gpu_milli > 0) return GpuShareAmount{job.gpu_milli, 0, 0};
  if (job.mig_profile.empty()) return std::nullopt;
  std::span<const MigProfile> table;
  if (gpu.name == "A100-80GB" || gpu.name == "H100-SXM") {
    table = kMig80;
  } else if (gpu.name == "A100-40GB") {
    table = kMig40;
  }
  for (const auto& m : table) {
    if (m.name == job.mig_profile) return GpuShareAmount{0, m.compute_slices, m.memory_slices};
  }
  return std::nullopt;
}

int EffectiveTaskGpus(const GangJob& job, const topo::Cluster& cluster) {
  if (CpuOnly(job)) return 0;
  if (job.gpus_per_task > 0) return job.gpus_per_task;
  const int node = MaxNodeGpus(cluster);
  return job.gpus <= node ? job.gpus : node;
}

int DefaultElasticStep(const GangJob& job, const topo::Cluster& cluster) {
  if (job.elastic.max_gpus <= MaxNodeGpus(cluster)) return 1;
  return std::max(1, EffectiveTaskGpus(job, cluster));
}

Status ValidateJob(const GangJob& job, const topo::Cluster& cluster) {
  auto bad = [&](std::string_view field, const std::string& why) {
    return JobFieldError(job, std::string(field), why);
  };
  if (!job.id.valid()) return bad("id", "missing job id");
  if (job.cpu_milli < 0)
    return bad("cpu_milli", fmt::format("must be >= 0, got {}", job.cpu_milli));
  if (job.memory_mib < 0) {
    return bad("memory_mib", fmt::format("must be >= 0, got {}", job.memory_mib));
  }
  RETURN_IF_ERROR(CheckExtended(job, cluster));
  if (job.gpus == 0 && AsksHostResources(job)) return ValidateCpuOnly(job, cluster);
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
      auto spec = cluster.FindGpuType(job.gpu_types[i]);
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
  if (job.one_task_per_node) {
    if (job.gpus_per_task <= 0) return bad("gpus_per_task", "one task per node needs a task size");
    if (job.elastic.min_gpus != 0) return bad("elastic", "one task per node is not elastic");
    std::int64_t nodes = 0;
    for (const auto& n : cluster.nodes()) nodes += n.gpus >= job.gpus_per_task ? 1 : 0;
    if (job.gpus / job.gpus_per_task > nodes) {
      return bad("gpus_per_task",
                 fmt::format("{} nodes of {} GPUs needed, cluster has {}",
                             job.gpus / job.gpus_per_task, job.gpus_per_task, nodes));
    }
  }
  if (job.estimated_runtime.value() < 0) return bad("estimated_runtime", "must not be negative");
  if (job.grace_period.value() < 0) return bad("grace_period", "must not be negative");
  if (job.checkpoint_interval.value() < 0)
    return bad("checkpoint_interval", "must not be negative");
  if (job.restart_cost.value() < 0) return bad("restart_cost", "must not be negative");
  if (job.max_retries < 0) return bad("max_retries", "must not be negative");
  if (job.gpu_milli < 0 || job.gpu_milli >= kMilliPerGpu) {
    return bad("gpu_milli", fmt::format("must be within 0..999, got {}", job.gpu_milli));
  }
  if (SharesGpu(job)) {
    if (job.gpu_milli > 0 && !job.mig_profile.empty()) {
      return bad("mig_profile", "a job asks for gpu_milli or a MIG profile, not both");
    }
    if (job.gpus != 1) return bad("gpus", "must be 1 for a share of a GPU");
    if (job.elastic.min_gpus != 0) return bad("elastic", "a share of a GPU is not elastic");
    if (job.spread) return bad("spread", "a share of a GPU is one task");
    if (!job.mig_profile.empty()) {
      bool any = false;
      for (const auto& shape : cluster.shapes()) {
        if (shape.gpu == nullptr || !ShareOn(job, *shape.gpu)) continue;
        bool accepted = job.gpu_types.empty();
        for (const auto& t : job.gpu_types) {
          auto type = cluster.FindGpuType(t);
          accepted |= type.ok() && *type == shape.gpu;
        }
        any |= accepted;
      }
      if (!any) {
        return bad("mig_profile", fmt::format("no GPU of cluster '{}' (of the accepted types) has "
                                              "MIG profile '{}'",
                                              cluster.name(), Printable(job.mig_profile)));
      }
    }
  }
  RETURN_IF_ERROR(CheckHostFit(job, cluster, SharesGpu(job) ? 1 : g));
  const auto& e = job.elastic;
  if (AsksHostResources(job) && e.min_gpus != 0) {
    return bad("elastic", "a job with cpu_milli, memory_mib or extended resources is not elastic");
  }
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
    const int task = EffectiveTaskGpus(job, cluster);
    if (task < job.gpus && e.step_gpus % task != 0) {
      return bad("elastic.step_gpus",
                 fmt::format("{} is not a whole number of the job's {}-GPU tasks: it could never "
                             "resize",
                             e.step_gpus, task));
    }
  }
  return Status::Ok();
}

}  // namespace baton::sched
