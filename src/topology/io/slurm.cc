#include "topology/io/slurm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <optional>
#include <span>
#include <tuple>
#include <unordered_map>

#include "core/strings.h"
#include "topology/io/common.h"
#include "topology/io/hostlist.h"

namespace baton::topo {
namespace {

struct ConfField {
  std::string key;  // lower-case
  std::string_view original_key;
  std::string value;
};

struct ConfLine {
  int line = 0;
  std::string text;
  std::vector<ConfField> fields;
  std::vector<std::string_view> stray;  // tokens without '='
};

// Logical lines of a Slurm config file: comments stripped, continuations joined, blank lines
// dropped, "Key=Value" tokens split on whitespace.
std::vector<ConfLine> SplitConf(std::string_view text) {
  std::vector<ConfLine> out;
  ConfLine current;
  int line = 0;
  const std::vector<std::string_view> raws = Split(text, '\n');
  for (std::string_view raw : raws) {
    ++line;
    if (current.text.empty()) current.line = line;
    std::string_view body = raw.substr(0, raw.find('#'));
    while (!body.empty() && (body.back() == '\r' || body.back() == ' ' || body.back() == '\t')) {
      body.remove_suffix(1);
    }
    const bool continued = !body.empty() && body.back() == '\\';
    if (continued) body.remove_suffix(1);
    current.text += body;
    current.text += ' ';
    if (continued && line < static_cast<int>(raws.size())) continue;  // the last line ends it
    std::string_view rest = current.text;
    while (true) {
      rest = Trim(rest);
      if (rest.empty()) break;
      std::size_t end = rest.find_first_of(" \t\r");
      std::string_view token = rest.substr(0, end);
      rest = end == std::string_view::npos ? std::string_view() : rest.substr(end);
      std::size_t eq = token.find('=');
      if (eq == std::string_view::npos) {
        current.stray.push_back(token);
      } else {
        current.fields.push_back(
            {ToLower(token.substr(0, eq)), token.substr(0, eq), std::string(token.substr(eq + 1))});
      }
    }
    if (!current.fields.empty() || !current.stray.empty()) out.push_back(std::move(current));
    current = ConfLine();
  }
  return out;
}

Status LineError(std::string_view file, int line, std::string_view field, std::string_view why) {
  return InvalidArgumentError(fmt::format("{}:{}: field '{}': {}", file, line, field, why));
}

// A node or switch name must survive being written back: a backslash ending a line is Slurm's
// continuation, so "Nodes=n1\\" would read back as part of the next line. Hostnames never hold
// one.
Status CheckName(std::string_view file, int line, std::string_view field, std::string_view name) {
  if (name.find('\\') == std::string_view::npos) return Status::Ok();
  return LineError(file, line, field,
                   fmt::format("'{}': a name cannot contain a backslash", Printable(name)));
}

// Expands a hostlist field, charging the names to `budget` (what is left for the whole file).
Result<std::vector<std::string>> ExpandField(std::string_view file, int line,
                                             std::string_view field, std::string_view value,
                                             std::size_t& budget) {
  auto names = ExpandHostlist(value, budget);
  if (!names.ok()) {
    return Status(names.status().code(), fmt::format("{}:{}: field '{}': {}", file, line, field,
                                                     names.status().message()));
  }
  if (names->empty()) return LineError(file, line, field, "empty hostlist");
  for (const std::string& name : *names) RETURN_IF_ERROR(CheckName(file, line, field, name));
  budget -= names->size();
  return names;
}

// What slurm.conf says about one group of nodes.
struct SlurmNodeDef {
  const GpuSpec* gpu = nullptr;
  int gpus = 0;
  std::int64_t cpus = 0;
  std::int64_t memory_mib = 0;
  std::vector<ExtendedResource> extended;  // Gres= entries other than gpu, sorted by name
  int line = 0;
  auto Key() const { return std::tuple(gpu, gpus, cpus, memory_mib, extended_key()); }
  std::vector<std::pair<std::string, std::int64_t>> extended_key() const {
    std::vector<std::pair<std::string, std::int64_t>> k;
    for (const auto& r : extended) k.emplace_back(r.name, r.amount);
    return k;
  }
};
using ShapeKey = decltype(SlurmNodeDef().Key());

struct SlurmNodes {
  std::string cluster_name = "slurm";
  std::vector<std::pair<std::string, std::size_t>> nodes;  // name, index into defs, in file order
  std::vector<SlurmNodeDef> defs;
};

// A GRES count other than a GPU's: digits with an optional K/M/G/T suffix (powers of 1024, as
// Slurm reads them).
std::optional<std::int64_t> GresCount(std::string_view s) {
  std::int64_t scale = 1;
  if (!s.empty()) {
    const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
    const std::string_view suffixes = "KMGT";
    if (auto at = suffixes.find(last); at != std::string_view::npos) {
      scale = std::int64_t{1} << (10 * (at + 1));
      s.remove_suffix(1);
    }
  }
  auto n = ParseInt64(s);
  if (!n || *n < 0 || *n > kMaxExtendedAmount / scale) return std::nullopt;
  return *n * scale;
}

// A Gres= entry other than gpu (NAME[:TYPE]:COUNT, as in "rdma_nic:4" or "nvme:local:3000G")
// becomes the extended resource NAME or NAME/TYPE; a name is given once per node.
Status ParseOtherGres(std::string_view file, int line, std::span<const std::string_view> parts,
                      SlurmNodeDef& def) {
  if (parts.size() > 3) return LineError(file, line, "Gres", "expected NAME[:TYPE][:COUNT]");
  std::string name(parts[0]);
  if (parts.size() == 3) name += "/" + std::string(parts[1]);
  std::string_view count = parts.size() >= 2 ? parts.back() : "1";
  if (Status s = CheckExtendedResourceName(name); !s.ok()) {
    return LineError(file, line, "Gres", s.message());
  }
  auto n = GresCount(count);
  if (!n) {
    return LineError(file, line, "Gres",
                     fmt::format("{}: count must be a whole number 0..{} (K/M/G/T suffixes), got "
                                 "'{}'",
                                 name, kMaxExtendedAmount, Printable(count)));
  }
  for (const auto& r : def.extended) {
    if (r.name == name) {
      return LineError(file, line, "Gres", fmt::format("{} is given twice", name));
    }
  }
  if (def.extended.size() >= kMaxExtendedPerNode) {
    return LineError(file, line, "Gres",
                     fmt::format("more than {} resources other than gpu", kMaxExtendedPerNode));
  }
  def.extended.push_back({std::move(name), *n});
  return Status::Ok();
}

Status ParseGres(std::string_view file, int line, std::string_view value, SlurmNodeDef& def) {
  def.gpu = nullptr;
  def.gpus = 0;
  def.extended.clear();
  for (std::string_view entry : Split(value, ',')) {
    entry = Trim(entry.substr(0, entry.find('(')));
    auto parts = Split(entry, ':');
    if (!EqualsIgnoreCase(parts[0], "gpu")) {
      RETURN_IF_ERROR(ParseOtherGres(file, line, parts, def));
      continue;
    }
    if (parts.size() > 3) return LineError(file, line, "Gres", "expected gpu[:TYPE][:COUNT]");
    std::string_view type = parts.size() == 3 ? parts[1] : "";
    std::string_view count = parts.size() == 3 ? parts[2] : parts.size() == 2 ? parts[1] : "1";
    if (parts.size() == 2 && !ParseInt64(count)) {
      type = parts[1];
      count = "1";
    }
    auto n = ParseInt64(count);
    if (!n || *n < 1 || *n > kMaxGpusPerNode) {
      return LineError(
          file, line, "Gres",
          fmt::format("GPU count must be 1..{}, got '{}'", kMaxGpusPerNode, Printable(count)));
    }
    auto gpu = FindGpu(type.empty() ? "H100-SXM" : type);
    if (!gpu.ok()) return LineError(file, line, "Gres", gpu.status().message());
    def.gpu = *gpu;
    def.gpus = static_cast<int>(*n);
  }
  std::sort(def.extended.begin(), def.extended.end(),
            [](const ExtendedResource& a, const ExtendedResource& b) { return a.name < b.name; });
  return Status::Ok();
}

Result<SlurmNodes> ParseSlurmNodes(const SlurmConf& conf, std::size_t budget) {
  RETURN_IF_ERROR(CheckTextInput(conf.text, conf.filename));
  SlurmNodes out;
  SlurmNodeDef defaults;
  std::unordered_map<std::string, int> seen;  // node -> line
  for (const ConfLine& l : SplitConf(conf.text)) {
    const std::string& first = l.fields.empty() ? std::string() : l.fields[0].key;
    if (first == "clustername") out.cluster_name = l.fields[0].value;
    if (first != "nodename") continue;
    SlurmNodeDef def = defaults;
    def.line = l.line;
    for (const ConfField& f : l.fields) {
      if (f.key == "cpus" || f.key == "realmemory") {
        auto v = ParseInt64(f.value);
        if (!v || *v < 0 || *v > (std::int64_t{1} << (f.key == "cpus" ? 20 : 40))) {
          return LineError(
              conf.filename, l.line, f.original_key,
              fmt::format("must be a non-negative integer in range, got '{}'", Printable(f.value)));
        }
        (f.key == "cpus" ? def.cpus : def.memory_mib) = *v;
      } else if (f.key == "gres") {
        RETURN_IF_ERROR(ParseGres(conf.filename, l.line, f.value, def));
      }
    }
    if (EqualsIgnoreCase(l.fields[0].value, "DEFAULT")) {
      defaults = def;
      continue;
    }
    ASSIGN_OR_RETURN(auto names,
                     ExpandField(conf.filename, l.line, "NodeName", l.fields[0].value, budget));
    for (std::string& name : names) {
      auto [it, inserted] = seen.emplace(name, l.line);
      if (!inserted) {
        return LineError(conf.filename, l.line, "NodeName",
                         fmt::format("node {} is defined twice (first at line {})", Printable(name),
                                     it->second));
      }
      out.nodes.emplace_back(std::move(name), out.defs.size());
    }
    out.defs.push_back(def);
  }
  return out;
}

Result<NodeShapeId> ShapeFor(ClusterBuilder& b, const SlurmNodeDef& def,
                             std::map<ShapeKey, NodeShapeId>& shapes) {
  auto it = shapes.find(def.Key());
  if (it != shapes.end()) return it->second;
  NodeShape s;
  s.name = fmt::format("{}x{}-{}", def.gpus, def.gpu->name, shapes.size() + 1);
  s.gpu = def.gpu;
  s.gpus = def.gpus;
  s.cpus = static_cast<int>(def.cpus);
  s.memory = MiB(static_cast<double>(def.memory_mib));
  s.gpus_per_pcie_switch = def.gpus % 2 == 0 ? 2 : 1;
  s.nics = def.gpus;
  s.nic_bandwidth = Gbps(400);
  s.extended = def.extended;
  ASSIGN_OR_RETURN(NodeShapeId id, b.AddShape(std::move(s)));
  shapes.emplace(def.Key(), id);
  return id;
}

std::int64_t MemoryMiB(const NodeShape& s) {
  return std::llround(s.memory.value() / MiB(1).value());
}

// Nodes grouped by `key`, groups in order of their first node.
template <typename KeyFn>
auto GroupNodes(const Cluster& c, KeyFn key) {
  using Key = decltype(key(c.shape_of(NodeId(0))));
  std::vector<std::pair<Key, std::vector<std::string>>> groups;
  for (std::uint32_t i = 0; i < c.nodes().size(); ++i) {
    Key k = key(c.shape_of(NodeId(i)));
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == k; });
    if (it == groups.end()) it = groups.insert(groups.end(), {k, {}});
    it->second.push_back(c.nodes()[i].name);
  }
  return groups;
}

}  // namespace

Result<std::vector<SlurmSwitchLine>> ParseSlurmTopology(std::string_view text,
                                                        std::string_view filename,
                                                        std::size_t max_nodes) {
  RETURN_IF_ERROR(CheckTextInput(text, filename));
  std::vector<SlurmSwitchLine> out;
  std::size_t node_budget = max_nodes;    // a node sits under one leaf: Nodes= names in all
  std::size_t switch_budget = max_nodes;  // Switches= names in all (each names one switch)
  for (const ConfLine& l : SplitConf(text)) {
    if (!l.stray.empty()) {
      return InvalidArgumentError(
          fmt::format("{}:{}: '{}' is not Key=Value", filename, l.line, Printable(l.stray[0])));
    }
    SlurmSwitchLine sw;
    sw.line = l.line;
    bool has_name = false, has_nodes = false, has_switches = false, has_speed = false;
    for (const ConfField& f : l.fields) {
      bool* seen = f.key == "switchname"  ? &has_name
                   : f.key == "nodes"     ? &has_nodes
                   : f.key == "switches"  ? &has_switches
                   : f.key == "linkspeed" ? &has_speed
                                          : nullptr;
      if (seen == nullptr) {
        return InvalidArgumentError(fmt::format(
            "{}:{}: unknown key '{}' (topology/tree knows SwitchName, Switches, Nodes, LinkSpeed)",
            filename, l.line, Printable(f.original_key)));
      }
      if (*seen) return LineError(filename, l.line, f.original_key, "given twice on one line");
      *seen = true;
      if (f.key == "switchname") {
        if (f.value.empty()) return LineError(filename, l.line, f.original_key, "empty name");
        RETURN_IF_ERROR(CheckName(filename, l.line, f.original_key, f.value));
        sw.name = f.value;
      } else if (f.key == "nodes") {
        ASSIGN_OR_RETURN(sw.nodes,
                         ExpandField(filename, l.line, f.original_key, f.value, node_budget));
      } else if (f.key == "switches") {
        ASSIGN_OR_RETURN(sw.switches,
                         ExpandField(filename, l.line, f.original_key, f.value, switch_budget));
      } else if (auto speed = ParseInt64(f.value); !speed || *speed < 0) {
        return LineError(
            filename, l.line, f.original_key,
            fmt::format("must be a non-negative integer, got '{}'", Printable(f.value)));
      }
    }
    if (!has_name) return LineError(filename, l.line, "SwitchName", "missing");
    if (!has_nodes && !has_switches) {
      return InvalidArgumentError(
          fmt::format("{}:{}: switch '{}' has no children (no Nodes= or "
                      "Switches=)",
                      filename, l.line, Printable(sw.name)));
    }
    if (has_nodes && has_switches) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: switch '{}' has both Nodes= and Switches=; baton needs a switch to be either a "
          "leaf or an upper switch",
          filename, l.line, Printable(sw.name)));
    }
    out.push_back(std::move(sw));
  }
  return out;
}

NodeShape DefaultSlurmNodeShape() {
  NodeShape s;
  s.name = "8xH100-SXM";
  s.gpu = *FindGpu("H100-SXM");
  s.gpus = 8;
  s.cpus = 224;
  s.memory = GiB(2048);
  s.nics = 8;
  s.nic_bandwidth = Gbps(400);
  return s;
}

Result<Cluster> ImportSlurmTopology(std::string_view topology_conf, std::string_view filename,
                                    std::optional<SlurmConf> slurm_conf, std::size_t max_nodes) {
  ASSIGN_OR_RETURN(auto lines, ParseSlurmTopology(topology_conf, filename, max_nodes));
  SlurmNodes conf;
  if (slurm_conf) {
    // A node is defined once: NodeName= hostlists may name at most max_nodes in all.
    ASSIGN_OR_RETURN(conf, ParseSlurmNodes(*slurm_conf, max_nodes));
  }

  // Cross-line checks, by name, so that every error can point at its line.
  std::unordered_map<std::string_view, std::size_t> switch_index;
  std::unordered_map<std::string_view, std::size_t> leaf_of;  // node -> line index
  std::vector<std::string_view> topo_nodes;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const SlurmSwitchLine& l = lines[i];
    auto [it, inserted] = switch_index.emplace(l.name, i);
    if (!inserted) {
      return LineError(filename, l.line, "SwitchName",
                       fmt::format("switch '{}' is defined twice (first at line {})",
                                   Printable(l.name), lines[it->second].line));
    }
    for (const std::string& n : l.nodes) {
      auto [nt, fresh] = leaf_of.emplace(n, i);
      if (!fresh) {
        return LineError(filename, l.line, "Nodes",
                         fmt::format("node {} is already under switch '{}' (line {})", Printable(n),
                                     Printable(lines[nt->second].name), lines[nt->second].line));
      }
      topo_nodes.push_back(n);
    }
  }
  if (topo_nodes.size() > max_nodes) {
    return ResourceExhaustedError(fmt::format("{}: more than {} nodes", filename, max_nodes));
  }
  std::vector<std::size_t> parent(lines.size(), lines.size());
  for (std::size_t i = 0; i < lines.size(); ++i) {
    for (const std::string& child : lines[i].switches) {
      auto it = switch_index.find(child);
      if (it == switch_index.end()) {
        return LineError(filename, lines[i].line, "Switches",
                         fmt::format("unknown switch '{}'", Printable(child)));
      }
      std::size_t& p = parent[it->second];
      if (p != lines.size() || it->second == i) {
        return LineError(
            filename, lines[i].line, "Switches",
            it->second == i
                ? fmt::format("switch '{}' lists itself", Printable(child))
                : fmt::format("switch '{}' is already under '{}' (line {})", Printable(child),
                              Printable(lines[p].name), lines[p].line));
      }
      p = i;
    }
  }
  // With one parent each, a cycle is a parent chain that comes back to where it started.
  // A walk that meets an earlier walk's switches joins a chain already known to end at a root.
  const std::size_t none = lines.size();
  std::vector<std::size_t> walk(lines.size(), none);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    std::size_t s = i;
    for (; s != none && walk[s] == none; s = parent[s]) walk[s] = i;
    if (s != none && walk[s] == i) {
      return LineError(filename, lines[parent[s]].line, "Switches",
                       fmt::format("switch '{}' is on a cycle", Printable(lines[s].name)));
    }
  }

  ClusterBuilder b(conf.cluster_name, FabricKind::kCustom);
  if (slurm_conf) {
    std::map<ShapeKey, NodeShapeId> shapes;
    for (const auto& [name, def_index] : conf.nodes) {
      if (!leaf_of.contains(name)) continue;  // e.g. login or CPU nodes outside the tree
      const SlurmNodeDef& def = conf.defs[def_index];
      if (def.gpu == nullptr) {
        return LineError(slurm_conf->filename, def.line, "Gres",
                         fmt::format("node {} has no GPUs (expected Gres=gpu:TYPE:N)", name));
      }
      auto shape = ShapeFor(b, def, shapes);
      if (!shape.ok())
        return shape.status().WithPrefix(fmt::format("{}:{}", slurm_conf->filename, def.line));
      RETURN_IF_ERROR(
          b.AddNode(name, *shape)
              .status()
              .WithPrefix(fmt::format("{}:{}: field 'NodeName'", slurm_conf->filename, def.line)));
    }
  } else {
    ASSIGN_OR_RETURN(NodeShapeId shape, b.AddShape(DefaultSlurmNodeShape()));
    for (std::string_view n : topo_nodes) {
      RETURN_IF_ERROR(
          b.AddNode(std::string(n), shape)
              .status()
              .WithPrefix(fmt::format("{}:{}: field 'Nodes'", filename, lines[leaf_of[n]].line)));
    }
  }
  for (const SlurmSwitchLine& l : lines) {
    auto id = b.AddSwitch(l.name);
    if (!id.ok())
      return id.status().WithPrefix(fmt::format("{}:{}: field 'SwitchName'", filename, l.line));
    for (const std::string& n : l.nodes) {
      auto node = b.FindNode(n);
      if (!node.ok()) {
        return LineError(
            filename, l.line, "Nodes",
            fmt::format("node {} has no NodeName line in {}", Printable(n), slurm_conf->filename));
      }
      RETURN_IF_ERROR(b.AttachNode(*id, *node).WithPrefix(fmt::format("{}:{}", filename, l.line)));
    }
  }
  for (const SlurmSwitchLine& l : lines) {
    for (const std::string& child : l.switches) {
      RETURN_IF_ERROR(b.AttachSwitch(SwitchId(static_cast<std::uint32_t>(switch_index[l.name])),
                                     SwitchId(static_cast<std::uint32_t>(switch_index[child])))
                          .WithPrefix(fmt::format("{}:{}", filename, l.line)));
    }
  }
  auto cluster = b.Build();
  if (!cluster.ok()) return cluster.status().WithPrefix(filename);
  return cluster;
}

std::string ExportSlurmTopology(const Cluster& c) {
  std::string out =
      fmt::format("# Slurm topology/tree for cluster {} (written by baton)\n", c.name());
  std::vector<std::string> names;
  for (SwitchId id : SwitchesByTier(c)) {
    const Switch& s = c.sw(id);
    names.clear();
    for (NodeId n : s.child_nodes) names.push_back(c.node(n).name);
    for (SwitchId ch : s.child_switches) names.push_back(c.sw(ch).name);
    fmt::format_to(std::back_inserter(out), "SwitchName={} {}={}\n", s.name,
                   s.child_nodes.empty() ? "Switches" : "Nodes", CompressHostlist(names));
  }
  return out;
}

std::string ExportSlurmNodes(const Cluster& c) {
  // Extended resources go out as further GRES: NAME:COUNT, or NAME:TYPE:COUNT for "NAME/TYPE".
  auto gres_name = [](std::string_view name) {
    std::string out(name);
    if (auto slash = out.find('/'); slash != std::string::npos) out[slash] = ':';
    return out;
  };
  std::string types = "gpu";
  std::vector<std::string> seen;
  for (const std::string& name : c.extended_resources()) {
    std::string first = name.substr(0, name.find('/'));
    if (std::find(seen.begin(), seen.end(), first) != seen.end()) continue;
    types += "," + first;
    seen.push_back(std::move(first));
  }
  std::string out = fmt::format(
      "# slurm.conf node lines for cluster {} (written by baton)\nClusterName={}\nGresTypes={}\n",
      c.name(), c.name(), types);
  auto groups = GroupNodes(c, [&](const NodeShape& s) {
    std::string extra;
    for (const auto& r : s.extended) extra += fmt::format(",{}:{}", gres_name(r.name), r.amount);
    return std::tuple(s.gpu->slurm_type, s.gpus, s.cpus, MemoryMiB(s), extra);
  });
  for (const auto& [key, names] : groups) {
    const auto& [type, gpus, cpus, mib, extra] = key;
    fmt::format_to(std::back_inserter(out),
                   "NodeName={} CPUs={} RealMemory={} Gres=gpu:{}:{}{} State=UNKNOWN\n",
                   CompressHostlist(names), cpus, mib, type, gpus, extra);
  }
  return out;
}

std::string ExportGresConf(const Cluster& c) {
  std::string out =
      fmt::format("# gres.conf for cluster {} (written by baton)\nAutoDetect=off\n", c.name());
  auto groups =
      GroupNodes(c, [](const NodeShape& s) { return std::pair(s.gpu->slurm_type, s.gpus); });
  for (const auto& [key, names] : groups) {
    const auto& [type, gpus] = key;
    fmt::format_to(std::back_inserter(out), "NodeName={} Name=gpu Type={} File=/dev/nvidia{}\n",
                   CompressHostlist(names), type,
                   gpus == 1 ? "0" : fmt::format("[0-{}]", gpus - 1));
  }
  return out;
}

}  // namespace baton::topo
