// Slurm topology/tree files: reads topology.conf (with the node lines of slurm.conf for node
// shapes) into a Cluster, and writes topology.conf, the node lines of slurm.conf, and gres.conf
// for a Cluster. Exporting, importing and exporting again gives byte-identical text.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topology/cluster.h"
#include "topology/io/hostlist.h"

namespace baton::topo {

// One "SwitchName=... Nodes=... | Switches=... [LinkSpeed=...]" line, hostlists expanded.
struct SlurmSwitchLine {
  std::string name;
  std::vector<std::string> nodes;
  std::vector<std::string> switches;
  int line = 0;  // 1-based line where the (possibly continued) line starts
};

// Parses topology/tree syntax: keys are case-insensitive, '#' starts a comment, a trailing '\'
// continues a line. Checks each line on its own (an unknown or repeated key, a missing SwitchName,
// a bad hostlist, neither Nodes= nor Switches=, both); cross-line checks happen on import. The
// Nodes= hostlists of the whole file may expand to at most `max_nodes` names, and its Switches=
// hostlists to at most `max_nodes` more (each is expanded only within what is left; else
// ResourceExhausted, before the names are made). Errors read "topology.conf:3: field 'Nodes': ...".
Result<std::vector<SlurmSwitchLine>> ParseSlurmTopology(
    std::string_view text, std::string_view filename, std::size_t max_nodes = kMaxClusterFileNodes);

// The slurm.conf that gives imported nodes their shape: only ClusterName= and the NodeName=
// lines (CPUs=, RealMemory= in MiB, Gres=gpu:TYPE:N with TYPE resolved by FindGpu, other Gres=
// entries NAME[:TYPE]:COUNT as the extended resource NAME or NAME/TYPE with COUNT's K/M/G/T
// suffixes in powers of 1024, and NodeName=DEFAULT) are read; every other line and key is ignored.
// slurm.conf says nothing about NICs: each node gets one 400 Gb/s NIC per GPU.
struct SlurmConf {
  std::string_view text;
  std::string_view filename = "slurm.conf";
};

// The default node when no slurm.conf is given: 8 x H100-SXM, 224 CPUs, 2 TiB, 8 x 400 Gb/s NICs.
NodeShape DefaultSlurmNodeShape();

// Builds the cluster (fabric kCustom, named by ClusterName= or "slurm") from topology.conf text.
// Nodes are those topology.conf lists; with `slurm_conf` each must have a NodeName= line, with
// nodes created in slurm.conf order, else in topology.conf order with DefaultSlurmNodeShape().
// Errors name the file, line and field: a switch defined twice, a node under two leaves, an
// unknown switch in Switches=, a switch with two parents, a cycle, an unknown GPU type. Input over
// 64 MiB or not UTF-8 text is rejected before parsing. More than `max_nodes` nodes in either file
// is ResourceExhausted, found before any hostlist past the cap is expanded.
Result<Cluster> ImportSlurmTopology(std::string_view topology_conf, std::string_view filename,
                                    std::optional<SlurmConf> slurm_conf = std::nullopt,
                                    std::size_t max_nodes = kMaxClusterFileNodes);

// topology.conf: one SwitchName line per switch, by tier then id; leaves list Nodes=, upper
// switches Switches=, both as compressed hostlists.
std::string ExportSlurmTopology(const Cluster& cluster);

// The slurm.conf lines for the nodes: ClusterName=, GresTypes=gpu, then one
// "NodeName=<hostlist> CPUs= RealMemory=<MiB> Gres=gpu:<type>:<n> State=UNKNOWN" line per
// distinct (GPU type, GPU count, CPUs, memory), in order of first node.
std::string ExportSlurmNodes(const Cluster& cluster);

// gres.conf: AutoDetect=off and "NodeName=<hostlist> Name=gpu Type=<type> File=/dev/nvidia[0-N]".
std::string ExportGresConf(const Cluster& cluster);

}  // namespace baton::topo
