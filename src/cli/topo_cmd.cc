// `baton topo`: build a cluster from a preset, parameters, a file or a Kubernetes cluster's nodes;
// print its summary, answer where two nodes meet, and export it in the formats Slurm, Kubernetes,
// Kueue and Volcano read.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "cli/commands.h"
#include "core/strings.h"
#include "server/executors/kubernetes/kubernetes_executor.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_file.h"
#include "topology/io/cluster_yaml.h"
#include "topology/io/kubernetes.h"
#include "topology/io/slurm.h"
#include "topology/summary.h"

namespace baton::cli {
namespace {

struct TopoOptions {
  std::string preset;
  std::string file;
  std::string slurm_conf;
  std::string kubeconfig;
  std::string kube_context;
  std::string fabric;
  topo::NodeLayout layout;
  int nodes_per_leaf = 32;
  int leaves_per_spine = 16;
  int groups = 8;
  double oversubscription = 1.0;
  std::string export_format;
  std::string output;
  std::vector<std::string> meet;
  bool list_presets = false;
};

Result<std::string> ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("{}: cannot open", path));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text;
}

Result<topo::Cluster> LoadCluster(const TopoOptions& o) {
  int sources = !o.preset.empty() + !o.file.empty() + !o.fabric.empty() + !o.kubeconfig.empty();
  if (sources > 1) {
    return InvalidArgumentError(
        "give one of --preset, --file, --fabric or --kubeconfig, not several");
  }
  if (!o.kubeconfig.empty()) {
    // The cluster `baton serve --executor kubernetes` would see with this kubeconfig.
    ASSIGN_OR_RETURN(server::kube::KubeConfig config,
                     server::kube::ResolveKubeConfig(o.kubeconfig, o.kube_context));
    return server::KubernetesCluster(config);
  }
  if (!o.file.empty()) {
    if (o.slurm_conf.empty()) return topo::LoadClusterFile(o.file);
    ASSIGN_OR_RETURN(std::string topology, ReadText(o.file));
    ASSIGN_OR_RETURN(std::string slurm_conf, ReadText(o.slurm_conf));
    return topo::ImportSlurmTopology(topology, o.file, topo::SlurmConf{slurm_conf, o.slurm_conf});
  }
  if (!o.fabric.empty()) {
    if (o.fabric == "fat-tree") {
      topo::FatTreeParams p;
      p.layout = o.layout;
      p.nodes_per_leaf = o.nodes_per_leaf;
      p.leaf_radix = std::max(p.leaf_radix, o.nodes_per_leaf);
      p.leaves_per_spine = o.leaves_per_spine;
      p.spine_oversubscription = o.oversubscription;
      return topo::BuildFatTree(p);
    }
    if (o.fabric == "rail-optimized") {
      topo::RailOptimizedParams p;
      p.layout = o.layout;
      p.spine_oversubscription = o.oversubscription;
      return topo::BuildRailOptimized(p);
    }
    if (o.fabric == "dragonfly+") {
      topo::DragonflyPlusParams p;
      p.layout = o.layout;
      p.groups = o.groups;
      p.nodes_per_leaf = o.nodes_per_leaf;
      p.leaf_radix = std::max(p.leaf_radix, o.nodes_per_leaf);
      p.leaves_per_group = o.leaves_per_spine;
      p.global_oversubscription = o.oversubscription;
      return topo::BuildDragonflyPlus(p);
    }
    return InvalidArgumentError(fmt::format(
        "--fabric '{}': expected fat-tree, rail-optimized or dragonfly+", Printable(o.fabric)));
  }
  return topo::BuildPreset(o.preset.empty() ? "superpod-h100" : o.preset);
}

Result<std::string> Export(const topo::Cluster& c, const std::string& format) {
  if (format == "yaml") return topo::ExportClusterYaml(c);
  if (format == "slurm-topology") return topo::ExportSlurmTopology(c);
  if (format == "slurm-nodes") return topo::ExportSlurmNodes(c);
  if (format == "gres-conf") return topo::ExportGresConf(c);
  if (format == "k8s-labels") return topo::ExportK8sNodeLabels(c);
  if (format == "kueue") return topo::ExportKueueTopology(c);
  if (format == "volcano") return topo::ExportVolcanoHyperNodes(c);
  return InvalidArgumentError(fmt::format(
      "--export '{}': expected yaml, slurm-topology, slurm-nodes, gres-conf, k8s-labels, kueue or "
      "volcano",
      Printable(format)));
}

Status Run(const TopoOptions& o) {
  if (o.list_presets) {
    for (const auto& p : topo::Presets()) fmt::print("{:<16} {}\n", p.name, p.description);
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(topo::Cluster cluster, LoadCluster(o));
  if (!o.meet.empty()) {
    if (o.meet.size() != 2) return InvalidArgumentError("--meet takes two node names");
    ASSIGN_OR_RETURN(topo::NodeId a, cluster.FindNode(o.meet[0]));
    ASSIGN_OR_RETURN(topo::NodeId b, cluster.FindNode(o.meet[1]));
    topo::Level level = cluster.Meet(a, b);
    const topo::LinkSpec& link = cluster.Link(level);
    fmt::print("{} and {} meet at {}: {} per GPU, {} latency\n", o.meet[0], o.meet[1],
               topo::LevelName(level), FormatBandwidth(link.bandwidth),
               FormatDuration(link.latency));
    return Status::Ok();
  }
  if (o.export_format.empty()) {
    fmt::print("{}", topo::Summarize(cluster));
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(std::string text, Export(cluster, o.export_format));
  if (o.output.empty() || o.output == "-") {
    std::cout << text;
    return Status::Ok();
  }
  std::ofstream out(o.output, std::ios::binary);
  out << text;
  if (!out) return InternalError(fmt::format("{}: cannot write", o.output));
  return Status::Ok();
}

}  // namespace

void RegisterTopoCommand(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<TopoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "topo", "Describe a GPU cluster: summary, where nodes meet, and exports for Slurm/K8s");
  cmd->add_option("--preset", opts->preset,
                  "Built-in cluster (default superpod-h100; see --list-presets)");
  cmd->add_option("--file", opts->file, "Cluster file: baton YAML, or a Slurm topology.conf");
  cmd->add_option(
      "--slurm-conf", opts->slurm_conf,
      "slurm.conf whose NodeName= lines give node shapes (with a topology.conf --file)");
  cmd->add_option("--kubeconfig", opts->kubeconfig,
                  "Read the cluster from a Kubernetes apiserver's nodes and labels, as "
                  "`baton serve --executor kubernetes` does");
  cmd->add_option("--context", opts->kube_context, "The kubeconfig context (with --kubeconfig)");
  cmd->add_option("--fabric", opts->fabric,
                  "Build from parameters: fat-tree, rail-optimized or dragonfly+");
  cmd->add_option("--nodes", opts->layout.nodes, "Nodes (with --fabric)");
  cmd->add_option("--gpu", opts->layout.gpu, "GPU type (with --fabric)")->capture_default_str();
  cmd->add_option("--gpus-per-node", opts->layout.gpus_per_node, "GPUs per node")
      ->capture_default_str();
  cmd->add_option("--nic-gbps", opts->layout.nic_gbps, "Gb/s per NIC")->capture_default_str();
  cmd->add_option("--nodes-per-leaf", opts->nodes_per_leaf, "Nodes under one leaf")
      ->capture_default_str();
  cmd->add_option("--leaves-per-spine", opts->leaves_per_spine,
                  "Leaves per spine group (per Dragonfly+ group)")
      ->capture_default_str();
  cmd->add_option("--groups", opts->groups, "Dragonfly+ groups")->capture_default_str();
  cmd->add_option("--oversubscription", opts->oversubscription,
                  "Oversubscription above the spine (global links for Dragonfly+)")
      ->capture_default_str();
  cmd->add_option("--export", opts->export_format,
                  "Print the cluster as yaml, slurm-topology, slurm-nodes, gres-conf, k8s-labels, "
                  "kueue or volcano");
  cmd->add_option("-o,--output", opts->output, "Write the export to this file");
  cmd->add_option("--meet", opts->meet, "Two node names: print where they meet")->expected(2);
  cmd->add_flag("--list-presets", opts->list_presets, "List the built-in clusters");
  cmd->callback([opts, &exit_code] {
    Status st = Run(*opts);
    if (!st.ok()) {
      fmt::print(stderr, "baton topo: {}\n", st.message());
      exit_code = 1;
    }
  });
}

}  // namespace baton::cli
