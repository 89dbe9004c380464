#include "topology/summary.h"

#include <fmt/format.h>

#include <map>

namespace baton::topo {

std::string Summarize(const Cluster& c) {
  std::string out;
  auto line = [&]<typename... Args>(fmt::format_string<Args...> f, Args&&... args) {
    out += fmt::format(f, std::forward<Args>(args)...);
    out += '\n';
  };
  const GpuCounts& k = c.counts();
  line("cluster {}  ({} fabric)", c.name(), FabricKindName(c.fabric()));
  line("  nodes            {}", c.nodes().size());
  line("  GPUs             {}  (allocated {}, free {}, unavailable {})", k.total, k.allocated,
       k.free, k.unavailable);
  std::map<std::string, std::pair<long long, long long>> by_type;  // gpu -> nodes, gpus
  for (const Node& n : c.nodes()) {
    auto& e = by_type[c.shape(n.shape).gpu->name];
    e.first += 1;
    e.second += n.gpus;
  }
  for (const auto& [type, e] : by_type) {
    line("    {:<14} {} GPUs on {} nodes", type, e.second, e.first);
  }
  for (const NodeShape& s : c.shapes()) {
    line("  node shape {}: {} x {}, {} CPUs, {} RAM, {} NUMA, {} GPUs/PCIe switch, {} x {} NICs",
         s.name, s.gpus, s.gpu->name, s.cpus, FormatBytes(s.memory), s.numa_nodes,
         s.gpus_per_pcie_switch, s.nics, FormatBandwidth(s.nic_bandwidth));
  }
  std::size_t multi = 0, largest = 0;
  for (const NvlinkDomain& d : c.nvlink_domains()) {
    if (d.nodes.size() > 1) ++multi;
    largest = std::max<std::size_t>(largest, d.counts.total);
  }
  line("  NVLink domains   {}  ({} multi-node, largest {} GPUs)", c.nvlink_domains().size(), multi,
       largest);
  std::vector<std::size_t> per_tier(kMaxSwitchTiers, 0);
  for (const Switch& s : c.switches()) per_tier[s.tier]++;
  for (int t = 0; t < c.tier_count(); ++t) {
    line("  switches tier {}  {:>6} x {}", t, per_tier[t], LevelName(c.tier_level(t)));
  }
  std::size_t fd[3] = {0, 0, 0};
  for (const FailureDomain& d : c.failure_domains()) fd[static_cast<int>(d.kind)]++;
  line("  failure domains  {} racks, {} PDUs, {} rows", fd[0], fd[1], fd[2]);
  line("  bandwidth per GPU and latency where two GPUs meet:");
  std::vector<Level> levels = {Level::kNode};
  bool multi_node_domain = multi > 0;
  if (multi_node_domain) levels.push_back(Level::kNvlinkDomain);
  for (int t = 0; t < c.tier_count(); ++t) {
    if (levels.back() != c.tier_level(t)) levels.push_back(c.tier_level(t));
  }
  for (Level l : levels) {
    const LinkSpec& s = c.Link(l);
    line("    {:<14} {:>12}  {:>8}", LevelName(l), FormatBandwidth(s.bandwidth),
         FormatDuration(s.latency));
  }
  return out;
}

}  // namespace baton::topo
