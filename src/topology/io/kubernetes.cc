#include "topology/io/kubernetes.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <tuple>

#include "topology/io/common.h"

namespace baton::topo {
namespace {

bool IsAlnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }

// A label value: at most 63 of [A-Za-z0-9._-], other characters become '-'.
std::string LabelValue(std::string_view s) {
  std::string out(s.substr(0, 63));
  for (char& c : out) {
    if (!IsAlnum(c) && c != '.' && c != '_' && c != '-') c = '-';
  }
  return out;
}

// An object name (DNS-1123 subdomain): lower case, [a-z0-9.-], starting and ending alphanumeric.
std::string ObjectName(std::string_view s) {
  std::string out;
  for (char c : s) out += IsAlnum(c) || c == '.' ? static_cast<char>(std::tolower(c)) : '-';
  while (!out.empty() && !IsAlnum(out.back())) out.pop_back();
  std::size_t start = 0;
  while (start < out.size() && !IsAlnum(out[start])) ++start;
  out.erase(0, start);
  return out.empty() ? "baton" : out.substr(0, 253);
}

std::string ShellWord(std::string_view s) {
  const bool safe = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return IsAlnum(c) || std::string_view("._-/=:+,@%").find(c) != std::string_view::npos;
  });
  if (safe) return std::string(s);
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Index among multi-node NVLink domains, or -1 for a node's own board.
std::vector<int> MultiNodeDomainIndex(const Cluster& c) {
  std::vector<int> index;
  int next = 0;
  for (const NvlinkDomain& d : c.nvlink_domains())
    index.push_back(d.nodes.size() > 1 ? next++ : -1);
  return index;
}

void AppendMember(std::string& out, std::string_view type, std::string_view name) {
  fmt::format_to(std::back_inserter(out),
                 "  - type: {}\n    selector: {{exactMatch: {{name: {}}}}}\n", type,
                 YamlQuote(name));
}

}  // namespace

std::vector<std::string> TierLabelKeys(const Cluster& c) {
  std::vector<std::string> keys;
  for (int t = 0; t < c.tier_count(); ++t) {
    std::string key = fmt::format("baton.io/{}", LevelName(c.tier_level(t)));
    if (t > 0 && c.tier_level(t) == c.tier_level(t - 1)) key += fmt::format("-{}", t);
    keys.push_back(std::move(key));
  }
  return keys;
}

std::string ExportK8sNodeLabels(const Cluster& c) {
  const auto keys = TierLabelKeys(c);
  const auto domain_index = MultiNodeDomainIndex(c);
  const std::string cluster = LabelValue(c.name());
  std::string out;
  for (const Node& n : c.nodes()) {
    fmt::format_to(std::back_inserter(out), "kubectl label node {} --overwrite", ShellWord(n.name));
    for (int t = 0; t < c.tier_count(); ++t) {
      if (n.ancestors[t].valid()) {
        fmt::format_to(std::back_inserter(out), " {}={}", keys[t],
                       ShellWord(LabelValue(c.sw(n.ancestors[t]).name)));
      }
    }
    const NodeShape& shape = c.shape(n.shape);
    fmt::format_to(std::back_inserter(out), " nvidia.com/gpu.product={} nvidia.com/gpu.count={}",
                   LabelValue(shape.gpu->product_label), shape.gpus);
    if (int d = domain_index[n.nvlink_domain.value()]; d >= 0) {
      fmt::format_to(std::back_inserter(out), " nvidia.com/gpu.clique={}.{}", cluster, d);
    }
    if (auto rack = n.failure_domains[static_cast<int>(FailureDomainKind::kRack)]; rack.valid()) {
      fmt::format_to(std::back_inserter(out), " baton.io/rack={}",
                     LabelValue(c.failure_domains()[rack.value()].name));
    }
    for (const auto& [k, v] : n.labels) {
      fmt::format_to(std::back_inserter(out), " {}", ShellWord(k + "=" + LabelValue(v)));
    }
    out += '\n';
  }
  return out;
}

std::string ExportKueueTopology(const Cluster& c) {
  std::string out = fmt::format(
      "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\nmetadata:\n  name: {}\nspec:\n  "
      "levels:\n",
      ObjectName(c.name()));
  const auto keys = TierLabelKeys(c);
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
    fmt::format_to(std::back_inserter(out), "  - nodeLabel: {}\n", *it);
  }
  const auto domain_index = MultiNodeDomainIndex(c);
  if (std::all_of(c.nodes().begin(), c.nodes().end(),
                  [&](const Node& n) { return domain_index[n.nvlink_domain.value()] >= 0; })) {
    out += "  - nodeLabel: nvidia.com/gpu.clique\n";
  }
  out += "  - nodeLabel: kubernetes.io/hostname\n";
  return out;
}

std::string ExportVolcanoHyperNodes(const Cluster& c) {
  const auto domain_index = MultiNodeDomainIndex(c);
  const bool has_domains =
      std::any_of(domain_index.begin(), domain_index.end(), [](int d) { return d >= 0; });
  std::string out;
  auto header = [&](std::string_view name, int tier, std::string_view tier_name) {
    fmt::format_to(std::back_inserter(out),
                   "---\napiVersion: topology.volcano.sh/v1alpha1\nkind: HyperNode\nmetadata:\n"
                   "  name: {}\nspec:\n  tier: {}\n  tierName: {}\n  members:\n",
                   YamlQuote(ObjectName(name)), tier, tier_name);
  };
  for (std::size_t d = 0; d < domain_index.size(); ++d) {
    if (domain_index[d] < 0) continue;
    const NvlinkDomain& dom = c.nvlink_domains()[d];
    header(dom.name, 1, LevelName(Level::kNvlinkDomain));
    for (NodeId n : dom.nodes) AppendMember(out, "Node", c.node(n).name);
  }
  for (SwitchId id : SwitchesByTier(c)) {
    const Switch& s = c.sw(id);
    header(s.name, s.tier + (has_domains ? 2 : 1), LevelName(c.tier_level(s.tier)));
    for (SwitchId ch : s.child_switches) AppendMember(out, "HyperNode", ObjectName(c.sw(ch).name));
    for (NodeId n : s.child_nodes) {
      const Node& node = c.node(n);
      const int d = domain_index[node.nvlink_domain.value()];
      if (d < 0) {
        AppendMember(out, "Node", node.name);
        continue;
      }
      const NvlinkDomain& dom = c.nvlink_domain(node.nvlink_domain);
      if (dom.nodes.front() == n) AppendMember(out, "HyperNode", ObjectName(dom.name));
    }
  }
  return out;
}

}  // namespace baton::topo

namespace baton::topo {

Result<Cluster> ImportK8sNodes(std::string name, std::span<const K8sNode> nodes) {
  constexpr Level kTierLevels[] = {Level::kLeaf, Level::kSpine, Level::kGroup, Level::kCore};
  auto label = [](const K8sNode& n, std::string_view key) -> const std::string* {
    auto it = n.labels.find(std::string(key));
    return it == n.labels.end() || it->second.empty() ? nullptr : &it->second;
  };
  std::vector<const K8sNode*> gpu_nodes;
  for (const K8sNode& n : nodes) {
    if (n.gpus > kMaxGpusPerNode) {
      return InvalidArgumentError(fmt::format("node {}: nvidia.com/gpu {}: more than {} per node",
                                              n.name, n.gpus, kMaxGpusPerNode));
    }
    if (n.gpus > 0) gpu_nodes.push_back(&n);
  }
  if (gpu_nodes.empty()) {
    return InvalidArgumentError(fmt::format(
        "cluster {}: no node has allocatable nvidia.com/gpu ({} nodes seen)", name, nodes.size()));
  }
  // The tiers any node names, leaf first.
  std::vector<Level> levels;
  std::vector<std::string> keys;
  for (Level level : kTierLevels) {
    std::string key = fmt::format("baton.io/{}", LevelName(level));
    if (std::any_of(gpu_nodes.begin(), gpu_nodes.end(),
                    [&](const K8sNode* n) { return label(*n, key) != nullptr; })) {
      levels.push_back(level);
      keys.push_back(std::move(key));
    }
  }

  ClusterBuilder b(name);
  if (!levels.empty()) RETURN_IF_ERROR(b.SetTierLevels(levels));
  std::map<std::tuple<std::string, int, int, double>, NodeShapeId> shapes;
  std::map<std::string, const GpuSpec*> declared;  // unknown products, by label
  // Switches by (tier, label value), and each switch's parent as first seen.
  std::vector<std::map<std::string, SwitchId>> switches(std::max<std::size_t>(1, levels.size()));
  std::map<SwitchId, SwitchId> parent_of;
  std::set<std::string> switch_names;
  std::map<std::string, std::vector<NodeId>> racks, cliques;
  auto switch_for = [&](std::size_t tier, const std::string& value) -> Result<SwitchId> {
    auto it = switches[tier].find(value);
    if (it != switches[tier].end()) return it->second;
    std::string sw_name = value;
    if (!switch_names.insert(sw_name).second) {
      sw_name =
          fmt::format("{}-{}", LevelName(levels.empty() ? Level::kLeaf : levels[tier]), value);
      switch_names.insert(sw_name);
    }
    ASSIGN_OR_RETURN(SwitchId id, b.AddSwitch(sw_name));
    switches[tier].emplace(value, id);
    return id;
  };

  for (const K8sNode* n : gpu_nodes) {
    const GpuSpec* gpu = nullptr;
    const std::string* product = label(*n, "nvidia.com/gpu.product");
    const std::string product_name = product != nullptr ? *product : "unknown";
    if (Result<const GpuSpec*> known = FindGpu(product_name); known.ok()) {
      gpu = *known;
    } else if (auto it = declared.find(product_name); it != declared.end()) {
      gpu = it->second;
    } else {
      GpuSpec spec;
      spec.name = product_name;
      spec.product_label = product_name;
      ASSIGN_OR_RETURN(gpu, b.AddGpuType(std::move(spec)));
      declared.emplace(product_name, gpu);
    }
    auto key = std::make_tuple(gpu->name, n->gpus, n->cpus, n->memory.value());
    auto shape = shapes.find(key);
    if (shape == shapes.end()) {
      NodeShape s;
      s.name = fmt::format("{}x{}-{}", n->gpus, gpu->name, shapes.size() + 1);
      s.gpu = gpu;
      s.gpus = n->gpus;
      s.cpus = n->cpus;
      s.memory = n->memory;
      s.gpus_per_pcie_switch = n->gpus % 2 == 0 ? 2 : 1;
      s.nics = n->gpus;
      s.nic_bandwidth = Gbps(400);
      ASSIGN_OR_RETURN(NodeShapeId id, b.AddShape(std::move(s)));
      shape = shapes.emplace(key, id).first;
    }
    ASSIGN_OR_RETURN(NodeId id, b.AddNode(n->name, shape->second));
    if (levels.empty()) {
      ASSIGN_OR_RETURN(SwitchId leaf, switch_for(0, name));
      RETURN_IF_ERROR(b.AttachNode(leaf, id));
    }
    std::optional<SwitchId> below;
    for (std::size_t t = 0; t < levels.size(); ++t) {
      const std::string* value = label(*n, keys[t]);
      if (value == nullptr) {
        return InvalidArgumentError(
            fmt::format("node {}: label {} missing (other nodes carry it)", n->name, keys[t]));
      }
      ASSIGN_OR_RETURN(SwitchId sw, switch_for(t, *value));
      if (!below) {
        RETURN_IF_ERROR(b.AttachNode(sw, id));
      } else if (auto p = parent_of.find(*below); p == parent_of.end()) {
        parent_of.emplace(*below, sw);
        RETURN_IF_ERROR(b.AttachSwitch(sw, *below));
      } else if (p->second != sw) {
        return InvalidArgumentError(
            fmt::format("node {}: label {}={}: its {} is under another {} on other nodes", n->name,
                        keys[t], *value, *label(*n, keys[t - 1]), LevelName(levels[t])));
      }
      below = sw;
    }
    if (const std::string* rack = label(*n, "baton.io/rack")) racks[*rack].push_back(id);
    if (const std::string* clique = label(*n, "nvidia.com/gpu.clique")) {
      cliques[*clique].push_back(id);
    }
  }
  for (const auto& [rack, ids] : racks) {
    RETURN_IF_ERROR(b.AddFailureDomain(FailureDomainKind::kRack, rack, ids));
  }
  for (const auto& [clique, ids] : cliques) {
    if (ids.size() > 1) RETURN_IF_ERROR(b.AddNvlinkDomain(clique, ids).status());
  }
  return b.Build();
}

}  // namespace baton::topo
