// `baton plan launch`: hostfile, torchrun lines, Megatron flags and the rank map for a placement.
#include <fmt/format.h>

#include <fstream>

#include "cli/plan/options.h"
#include "core/strings.h"
#include "perf/placement.h"
#include "perf/report.h"
#include "topology/io/cluster_file.h"

namespace baton::cli::plan {

Status RunLaunch(const PlanOptions& o) {
  if (o.preset.empty() && o.topology.empty()) {
    return InvalidArgumentError("topology: launch needs --preset or --topology");
  }
  ASSIGN_OR_RETURN(perf::ModelSpec model, MakeModel(o));
  ASSIGN_OR_RETURN(std::vector<int> gpu_list, ParseGpuList(o.gpus_arg));
  if (gpu_list.size() != 1) return InvalidArgumentError("gpus: launch takes one GPU count");
  ASSIGN_OR_RETURN(perf::TrainingSpec training, MakeTraining(o, model));
  ASSIGN_OR_RETURN(topo::Cluster cluster, LoadTopology(o));
  ASSIGN_OR_RETURN(perf::SystemSpec system, perf::SystemFromCluster(cluster, gpu_list[0]));
  ASSIGN_OR_RETURN(ParallelPlan plan, MakePlan(o, model, gpu_list[0]));
  int stride = 1;
  if (o.placement.rfind("scattered", 0) == 0) {
    stride = 2;
    if (o.placement.size() > 10 && o.placement[9] == ':') {
      auto v = ParseInt64(o.placement.substr(10));
      if (!v || *v <= 0 || *v > 1 << 20) {
        return InvalidArgumentError("placement: scattered:N needs a positive node stride");
      }
      stride = static_cast<int>(*v);
    }
  } else if (o.placement != "compact") {
    return InvalidArgumentError(
        fmt::format("placement: '{}' is not compact or scattered[:N]", Printable(o.placement)));
  }
  ASSIGN_OR_RETURN(std::vector<topo::GpuRef> gpus, perf::CompactGpus(cluster, gpu_list[0], stride));
  ASSIGN_OR_RETURN(perf::LaunchSpec spec,
                   perf::MakeLaunchSpec(model, plan, training, cluster, gpus, o.master_port));
  ASSIGN_OR_RETURN(perf::StepEstimate placed,
                   perf::EstimateOnPlacement(model, plan, training, system, cluster, gpus));
  ASSIGN_OR_RETURN(double slowdown,
                   perf::PlacementSlowdown(model, plan, training, system, cluster, gpus));
  if (!o.hostfile_out.empty()) {
    std::ofstream out(o.hostfile_out);
    out << spec.hostfile;
    if (!out)
      return InvalidArgumentError(fmt::format("hostfile: cannot write '{}'", o.hostfile_out));
  }
  if (o.json) {
    nlohmann::json j;
    j["plan"] = perf::PlanToJson(plan);
    j["hostfile"] = spec.hostfile;
    j["torchrun"] = spec.torchrun;
    j["megatron_flags"] = spec.megatron_flags;
    for (const auto& r : spec.ranks) {
      j["ranks"].push_back({{"rank", r.rank},
                            {"node", r.node},
                            {"node_rank", r.node_rank},
                            {"local_rank", r.local_rank},
                            {"gpu", r.gpu}});
    }
    j["estimate"] = perf::EstimateToJson(placed);
    j["placement_slowdown"] = slowdown;
    fmt::print("{}\n", j.dump(2));
    return Status::Ok();
  }
  fmt::print("# plan: {} on {} ({} placement)\n", perf::PlanToString(plan), cluster.name(),
             o.placement);
  fmt::print("# estimated step {} on this placement, {:.3f}x the compact rank-order estimate\n",
             FormatDuration(placed.step), slowdown);
  fmt::print("\n## hostfile\n{}", spec.hostfile);
  fmt::print("\n## torchrun (one per node)\n");
  for (const auto& line : spec.torchrun) fmt::print("{}\n", line);
  if (!spec.cuda_visible_devices_note.empty()) fmt::print("# {}\n", spec.cuda_visible_devices_note);
  fmt::print("\n## Megatron-LM flags\n{}\n", fmt::join(spec.megatron_flags, " \\\n  "));
  fmt::print("\n## rank -> node/GPU\n");
  for (const auto& r : spec.ranks) {
    fmt::print("{:>6} {} gpu{} (node_rank {}, local_rank {})\n", r.rank, r.node, r.gpu, r.node_rank,
               r.local_rank);
  }
  return Status::Ok();
}

}  // namespace baton::cli::plan
