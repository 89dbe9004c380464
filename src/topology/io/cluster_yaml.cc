#include "topology/io/cluster_yaml.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <variant>

#include "core/bounded_input.h"
#include "core/strings.h"
#include "topology/builders/fabrics.h"
#include "topology/io/common.h"

namespace baton::topo {
namespace {

using Yaml = YAML::Node;

constexpr std::string_view kTopFields[] = {
    "name",  "fabric",           "shapes", "nodes",           "nvlink_domains", "switches",
    "tiers", "oversubscription", "links",  "failure_domains", "builder",        "gpu_types"};
constexpr std::string_view kShapeFields[] = {"gpu",        "gpus",       "cpus",
                                             "memory_gib", "numa_nodes", "gpus_per_pcie_switch",
                                             "nics",       "nic_gbps",   "extended"};

// A builder parameter: where it lives in the Params struct being filled.
using ParamRef = std::variant<int*, double*, std::string*>;
struct Param {
  std::string_view name;
  ParamRef ref;
};

std::vector<Param> LayoutParams(NodeLayout& l) {
  return {{"nodes", &l.nodes},
          {"node_prefix", &l.node_prefix},
          {"gpu", &l.gpu},
          {"gpus_per_node", &l.gpus_per_node},
          {"cpus", &l.cpus},
          {"memory_gib", &l.memory_gib},
          {"numa_nodes", &l.numa_nodes},
          {"gpus_per_pcie_switch", &l.gpus_per_pcie_switch},
          {"nics", &l.nics},
          {"nic_gbps", &l.nic_gbps},
          {"nodes_per_nvlink_domain", &l.nodes_per_nvlink_domain},
          {"nodes_per_rack", &l.nodes_per_rack},
          {"pdus_per_rack", &l.pdus_per_rack},
          {"racks_per_row", &l.racks_per_row}};
}

class Loader {
 public:
  Loader(std::string_view file, std::size_t max_nodes)
      : file_(file), max_nodes_(max_nodes), budget_(8 * max_nodes) {}

  Result<Cluster> Load(const Yaml& root) {
    if (!root.IsMap()) return Error(root.Mark(), "", "expected a map of cluster fields");
    RETURN_IF_ERROR(Fields(root, kTopFields));
    ASSIGN_OR_RETURN(std::string name, String(root, "name"));
    if (root["builder"].IsDefined()) return LoadBuilder(root, name);

    ASSIGN_OR_RETURN(std::string fabric_name, String(root, "fabric", "custom"));
    std::optional<FabricKind> fabric;
    for (auto k : {FabricKind::kFatTree, FabricKind::kRailOptimized, FabricKind::kDragonflyPlus,
                   FabricKind::kCustom}) {
      if (EqualsIgnoreCase(fabric_name, FabricKindName(k))) fabric = k;
    }
    if (!fabric) {
      return Error(root["fabric"].Mark(), "fabric",
                   fmt::format("unknown fabric '{}' (expected fat-tree, rail-optimized, "
                               "dragonfly+ or custom)",
                               Printable(fabric_name)));
    }
    ClusterBuilder b(name, *fabric);
    RETURN_IF_ERROR(LoadGpuTypes(b, root));
    RETURN_IF_ERROR(LoadShapes(b, root));
    RETURN_IF_ERROR(LoadNodes(b, root));
    RETURN_IF_ERROR(LoadDomains(b, root));
    RETURN_IF_ERROR(LoadSwitches(b, root));
    RETURN_IF_ERROR(LoadTiers(b, root));
    RETURN_IF_ERROR(LoadFailureDomains(b, root));
    auto cluster = b.Build();
    if (!cluster.ok()) return cluster.status().WithPrefix(file_);
    return cluster;
  }

 private:
  Status Error(const YAML::Mark& m, std::string_view field, std::string_view why) const {
    std::string where =
        m.is_null() ? std::string(file_) : fmt::format("{}:{}:{}", file_, m.line + 1, m.column + 1);
    if (field.empty()) return InvalidArgumentError(fmt::format("{}: {}", where, why));
    return InvalidArgumentError(fmt::format("{}: field '{}': {}", where, field, why));
  }
  Status At(const YAML::Mark& m, std::string_view field, const Status& s) const {
    if (s.ok()) return s;
    Status e = Error(m, field, s.message());
    return Status(s.code(), e.message());
  }
  // The mark of map[key], or of the map when the key is missing.
  static YAML::Mark MarkOf(const Yaml& map, std::string_view key) {
    Yaml v = map[std::string(key)];
    return v.IsDefined() ? v.Mark() : map.Mark();
  }

  // `map` is a map whose keys are all in `allowed`, each once.
  Status Fields(const Yaml& map, std::span<const std::string_view> allowed) const {
    if (!map.IsMap()) return Error(map.Mark(), "", "expected a map {field: value, ...}");
    std::vector<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) return Error(kv.first.Mark(), "", "a field name must be a string");
      const std::string& key = kv.first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string known;
        for (auto a : allowed) known += fmt::format("{}{}", known.empty() ? "" : ", ", a);
        return Error(
            kv.first.Mark(), "",
            fmt::format("unknown field '{}' (expected one of: {})", Printable(key), known));
      }
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
        return Error(kv.first.Mark(), key, "given twice");
      }
      seen.push_back(key);
    }
    return Status::Ok();
  }

  Result<std::string> String(const Yaml& map, std::string_view key,
                             std::optional<std::string_view> fallback = std::nullopt) const {
    Yaml v = map[std::string(key)];
    if (!v.IsDefined()) {
      if (fallback) return std::string(*fallback);
      return Error(map.Mark(), key, "missing");
    }
    if (!v.IsScalar() || v.Scalar().empty())
      return Error(v.Mark(), key, "expected a non-empty string");
    return v.Scalar();
  }

  Result<std::int64_t> Int(const Yaml& map, std::string_view key, std::int64_t min,
                           std::int64_t max, std::optional<std::int64_t> fallback) const {
    Yaml v = map[std::string(key)];
    if (!v.IsDefined()) {
      if (fallback) return *fallback;
      return Error(map.Mark(), key, "missing");
    }
    auto n = v.IsScalar() ? ParseInt64(v.Scalar()) : std::nullopt;
    if (!n) {
      return Error(
          v.Mark(), key,
          fmt::format("expected an integer, got '{}'", Printable(v.IsScalar() ? v.Scalar() : "")));
    }
    if (*n < min) {
      return Error(v.Mark(), key,
                   min == 1 ? fmt::format("must be > 0, got {}", *n)
                            : fmt::format("must be >= {}, got {}", min, *n));
    }
    if (*n > max) return Error(v.Mark(), key, fmt::format("must be at most {}, got {}", max, *n));
    return *n;
  }

  // A number in [min, max]; `positive` excludes zero.
  Result<double> Double(const Yaml& map, std::string_view key, double fallback, double max,
                        bool positive) const {
    Yaml v = map[std::string(key)];
    if (!v.IsDefined()) return fallback;
    auto x = v.IsScalar() ? ParseDouble(v.Scalar()) : std::nullopt;
    if (!x) return Error(v.Mark(), key, "expected a number");
    if (positive ? !(*x > 0) : *x < 0) {
      return Error(v.Mark(), key, fmt::format("must be {}, got {}", positive ? "> 0" : ">= 0", *x));
    }
    if (*x > max) return Error(v.Mark(), key, fmt::format("must be at most {}, got {}", max, *x));
    return *x;
  }

  Result<std::vector<std::string>> Hostlist(const Yaml& map, std::string_view key) {
    ASSIGN_OR_RETURN(std::string text, String(map, key));
    auto names = ExpandHostlist(text, std::min(budget_, max_nodes_));
    if (!names.ok()) return At(MarkOf(map, key), key, names.status());
    budget_ -= names->size();
    return names;
  }

  Result<std::vector<NodeId>> NodeIds(const ClusterBuilder& b, const Yaml& at,
                                      std::string_view field,
                                      std::span<const std::string> names) const {
    std::vector<NodeId> ids;
    for (const std::string& n : names) {
      auto id = b.FindNode(n);
      if (!id.ok()) return Error(at.Mark(), field, fmt::format("unknown node '{}'", Printable(n)));
      ids.push_back(*id);
    }
    return ids;
  }

  Result<Yaml> Sequence(const Yaml& root, std::string_view key) const {
    Yaml v = root[std::string(key)];
    if (v.IsDefined() && !v.IsSequence()) return Error(v.Mark(), key, "expected a list");
    return v;
  }

  // A group entry: the names in `name`, each with its slice of the members. Members come from
  // `members_key`, split `each_key` per name, or (when `next` is given and the members are
  // omitted) from `next(count)`.
  template <typename Next>
  Result<std::vector<std::pair<std::string, std::vector<std::string>>>> Group(
      const Yaml& entry, std::string_view members_key, std::string_view each_key, Next next) {
    ASSIGN_OR_RETURN(auto names, Hostlist(entry, "name"));
    const bool has_members = entry[std::string(members_key)].IsDefined();
    const bool has_each = entry[std::string(each_key)].IsDefined();
    ASSIGN_OR_RETURN(std::int64_t each, Int(entry, each_key, 1, 1 << 22, 0));
    std::vector<std::string> members;
    if (has_members) {
      ASSIGN_OR_RETURN(members, Hostlist(entry, members_key));
    } else if (has_each) {
      ASSIGN_OR_RETURN(members, next(names.size() * static_cast<std::size_t>(each)));
    } else {
      return Error(entry.Mark(), members_key, "missing");
    }
    if (!has_each && names.size() > 1) {
      return Error(MarkOf(entry, "name"), "name",
                   fmt::format("names {} entries; give '{}' to split '{}' among them", names.size(),
                               each_key, members_key));
    }
    if (has_each && members.size() != names.size() * static_cast<std::size_t>(each)) {
      return Error(MarkOf(entry, each_key), each_key,
                   fmt::format("{} names x {} = {} members, but '{}' has {}", names.size(), each,
                               names.size() * each, members_key, members.size()));
    }
    const std::size_t per = has_each ? static_cast<std::size_t>(each) : members.size();
    std::vector<std::pair<std::string, std::vector<std::string>>> out;
    for (std::size_t i = 0; i < names.size(); ++i) {
      out.emplace_back(
          std::move(names[i]),
          std::vector<std::string>(members.begin() + i * per, members.begin() + (i + 1) * per));
    }
    return out;
  }

  // For groups whose members must be listed: an error when they are not.
  auto NoImplicitMembers(const Yaml& e, std::string_view key) const {
    return [this, &e, key](std::size_t) -> Result<std::vector<std::string>> {
      return Error(e.Mark(), key, "missing");
    };
  }

  // The open catalogue: `gpu_types: {NAME: {memory_gib, fp32_tflops, tf32_tflops, bf16_tflops,
  // fp8_tflops, hbm_gbps, nvlink_gbps, sm_count, family}}`, every figure optional (0: unknown);
  // `family` (ampere, hopper, blackwell) is what the planner needs to estimate on the type.
  Status LoadGpuTypes(ClusterBuilder& b, const Yaml& root) {
    static constexpr std::string_view kFields[] = {"memory_gib",  "fp32_tflops", "tf32_tflops",
                                                   "bf16_tflops", "fp8_tflops",  "hbm_gbps",
                                                   "nvlink_gbps", "sm_count",    "family"};
    Yaml types = root["gpu_types"];
    if (!types.IsDefined()) return Status::Ok();
    if (!types.IsMap()) return Error(types.Mark(), "gpu_types", "expected a map name -> GPU type");
    for (const auto& kv : types) {
      const Yaml& t = kv.second;
      if (!t.IsMap()) return Error(t.Mark(), "gpu_types", "expected a map of figures");
      RETURN_IF_ERROR(Fields(t, kFields));
      GpuSpec spec;
      spec.name = kv.first.Scalar();
      ASSIGN_OR_RETURN(double mem, Double(t, "memory_gib", 0, 1 << 20, false));
      ASSIGN_OR_RETURN(double fp32, Double(t, "fp32_tflops", 0, 1e6, false));
      ASSIGN_OR_RETURN(double tf32, Double(t, "tf32_tflops", 0, 1e6, false));
      ASSIGN_OR_RETURN(double bf16, Double(t, "bf16_tflops", 0, 1e6, false));
      ASSIGN_OR_RETURN(double fp8, Double(t, "fp8_tflops", 0, 1e6, false));
      ASSIGN_OR_RETURN(double hbm, Double(t, "hbm_gbps", 0, 1e6, false));
      ASSIGN_OR_RETURN(double nvlink, Double(t, "nvlink_gbps", 0, 1e6, false));
      spec.hbm = GiB(mem);
      spec.fp32 = TFlops(fp32);
      spec.tf32 = TFlops(tf32);
      spec.bf16 = TFlops(bf16);
      spec.fp8 = TFlops(fp8);
      spec.hbm_bandwidth = GBps(hbm);
      spec.nvlink_per_direction = GBps(nvlink);
      ASSIGN_OR_RETURN(std::int64_t sms, Int(t, "sm_count", 0, 1 << 16, 0));
      spec.sm_count = static_cast<int>(sms);
      if (Yaml f = t["family"]; f.IsDefined()) {
        auto family = f.IsScalar() ? ParseGpuFamily(f.Scalar())
                                   : Result<GpuFamily>(InvalidArgumentError("expected a name"));
        if (!family.ok()) return Error(f.Mark(), "family", family.status().message());
        spec.family = *family;
      }
      auto added = b.AddGpuType(std::move(spec));
      if (!added.ok()) return At(kv.first.Mark(), "gpu_types", added.status());
    }
    return Status::Ok();
  }

  // A shape's `extended: {NAME: AMOUNT, ...}`: at most kMaxExtendedPerNode names, each valid
  // (CheckExtendedResourceName) and given once, amounts whole and 0..kMaxExtendedAmount.
  Result<std::vector<ExtendedResource>> Extended(const Yaml& shape) const {
    std::vector<ExtendedResource> out;
    Yaml ext = shape["extended"];
    if (!ext.IsDefined()) return out;
    if (!ext.IsMap()) return Error(ext.Mark(), "extended", "expected a map name -> amount");
    if (ext.size() > kMaxExtendedPerNode) {
      return Error(
          ext.Mark(), "extended",
          fmt::format("{} resources, at most {} per node", ext.size(), kMaxExtendedPerNode));
    }
    for (const auto& kv : ext) {
      if (!kv.first.IsScalar()) return Error(kv.first.Mark(), "extended", "expected a name");
      const std::string& name = kv.first.Scalar();
      const std::string field = fmt::format("extended.{}", Printable(name));
      if (Status s = CheckExtendedResourceName(name); !s.ok()) {
        return Error(kv.first.Mark(), field, s.message());
      }
      for (const auto& r : out) {
        if (r.name == name) return Error(kv.first.Mark(), field, "given twice");
      }
      auto n = kv.second.IsScalar() ? ParseInt64(kv.second.Scalar()) : std::nullopt;
      if (!n || *n < 0 || *n > kMaxExtendedAmount) {
        return Error(kv.second.Mark(), field,
                     fmt::format("expected a whole amount 0..{}, got '{}'", kMaxExtendedAmount,
                                 Printable(kv.second.IsScalar() ? kv.second.Scalar() : "")));
      }
      out.push_back({name, *n});
    }
    return out;
  }

  Status LoadShapes(ClusterBuilder& b, const Yaml& root) {
    Yaml shapes = root["shapes"];
    if (!shapes.IsDefined()) return Error(root.Mark(), "shapes", "missing");
    if (!shapes.IsMap()) return Error(shapes.Mark(), "shapes", "expected a map name -> shape");
    for (const auto& kv : shapes) {
      const Yaml& s = kv.second;
      RETURN_IF_ERROR(Fields(s, kShapeFields));
      NodeShape shape;
      shape.name = kv.first.Scalar();
      ASSIGN_OR_RETURN(std::string gpu, String(s, "gpu"));
      auto spec = b.FindGpuType(gpu);
      if (!spec.ok()) return At(MarkOf(s, "gpu"), "gpu", spec.status());
      shape.gpu = *spec;
      ASSIGN_OR_RETURN(shape.gpus, Int(s, "gpus", 1, kMaxGpusPerNode, std::nullopt));
      ASSIGN_OR_RETURN(shape.cpus, Int(s, "cpus", 0, 1 << 20, 0));
      ASSIGN_OR_RETURN(double mem, Double(s, "memory_gib", 0, 1 << 30, false));
      shape.memory = GiB(mem);
      ASSIGN_OR_RETURN(shape.numa_nodes, Int(s, "numa_nodes", 1, 64, 2));
      ASSIGN_OR_RETURN(shape.gpus_per_pcie_switch,
                       Int(s, "gpus_per_pcie_switch", 1, kMaxGpusPerNode, shape.gpus % 2 ? 1 : 2));
      ASSIGN_OR_RETURN(shape.nics, Int(s, "nics", 0, 64, shape.gpus));
      ASSIGN_OR_RETURN(double gbps, Double(s, "nic_gbps", 400, 1e6, true));
      shape.nic_bandwidth = Gbps(gbps);
      ASSIGN_OR_RETURN(shape.extended, Extended(s));
      auto id = b.AddShape(std::move(shape));
      if (!id.ok()) return At(kv.first.Mark(), "shapes", id.status());
      shapes_.emplace(kv.first.Scalar(), *id);
    }
    return Status::Ok();
  }

  Status LoadNodes(ClusterBuilder& b, const Yaml& root) {
    if (!root["nodes"].IsDefined()) return Error(root.Mark(), "nodes", "missing");
    ASSIGN_OR_RETURN(const Yaml nodes, Sequence(root, "nodes"));
    static constexpr std::string_view kFields[] = {"names", "shape", "labels"};
    for (const Yaml& e : nodes) {
      RETURN_IF_ERROR(Fields(e, kFields));
      ASSIGN_OR_RETURN(std::string shape_name, String(e, "shape"));
      auto shape = shapes_.find(shape_name);
      if (shape == shapes_.end()) {
        return Error(MarkOf(e, "shape"), "shape",
                     fmt::format("unknown shape '{}'", Printable(shape_name)));
      }
      Yaml labels = e["labels"];
      if (labels.IsDefined() && !labels.IsMap())
        return Error(labels.Mark(), "labels", "expected a map");
      ASSIGN_OR_RETURN(auto names, Hostlist(e, "names"));
      if (b.node_count() + names.size() > max_nodes_) {
        return At(
            MarkOf(e, "names"), "names",
            ResourceExhaustedError(fmt::format("more than {} nodes in the cluster", max_nodes_)));
      }
      for (std::string& n : names) {
        auto id = b.AddNode(n, shape->second);
        if (!id.ok()) return At(MarkOf(e, "names"), "names", id.status());
        node_names_.push_back(std::move(n));
        attached_.push_back(false);
        if (!labels.IsDefined()) continue;
        for (const auto& kv : labels) {
          if (!kv.first.IsScalar() || !kv.second.IsScalar()) {
            return Error(kv.first.Mark(), "labels", "expected string keys and values");
          }
          RETURN_IF_ERROR(At(kv.first.Mark(), "labels",
                             b.AddLabel(*id, kv.first.Scalar(), kv.second.Scalar())));
        }
      }
    }
    return Status::Ok();
  }

  Status LoadDomains(ClusterBuilder& b, const Yaml& root) {
    ASSIGN_OR_RETURN(const Yaml domains, Sequence(root, "nvlink_domains"));
    static constexpr std::string_view kFields[] = {"name", "nodes", "nodes_each"};
    for (const Yaml& e : domains) {
      RETURN_IF_ERROR(Fields(e, kFields));
      ASSIGN_OR_RETURN(auto group, Group(e, "nodes", "nodes_each", NoImplicitMembers(e, "nodes")));
      for (auto& [name, members] : group) {
        ASSIGN_OR_RETURN(auto ids, NodeIds(b, e["nodes"], "nodes", members));
        RETURN_IF_ERROR(At(e.Mark(), "nodes", b.AddNvlinkDomain(name, ids).status()));
      }
    }
    return Status::Ok();
  }

  Status LoadSwitches(ClusterBuilder& b, const Yaml& root) {
    ASSIGN_OR_RETURN(const Yaml switches, Sequence(root, "switches"));
    static constexpr std::string_view kFields[] = {"name", "nodes", "nodes_each", "switches",
                                                   "switches_each"};
    // Switches first, so that an upper switch may name switches defined below it.
    struct Pending {
      Yaml entry;
      SwitchId id;
      std::vector<std::string> children;
    };
    std::vector<Pending> pending;
    std::size_t cursor = 0;  // implicit nodes_each members: the next nodes under no leaf yet
    auto next_free = [&](std::size_t count) -> Result<std::vector<std::string>> {
      std::vector<std::string> out;
      for (; cursor < attached_.size() && out.size() < count; ++cursor) {
        if (!attached_[cursor]) out.push_back(node_names_[cursor]);
      }
      return out;
    };
    for (const Yaml& e : switches) {
      RETURN_IF_ERROR(Fields(e, kFields));
      const bool leaf = e["nodes"].IsDefined() || e["nodes_each"].IsDefined();
      if (leaf == (e["switches"].IsDefined() || e["switches_each"].IsDefined())) {
        return Error(e.Mark(), "", "a switch lists either 'nodes' (a leaf) or 'switches'");
      }
      std::vector<std::pair<std::string, std::vector<std::string>>> group;
      if (leaf) {
        ASSIGN_OR_RETURN(group, Group(e, "nodes", "nodes_each", next_free));
      } else {
        ASSIGN_OR_RETURN(group,
                         Group(e, "switches", "switches_each", NoImplicitMembers(e, "switches")));
      }
      for (auto& [name, children] : group) {
        auto id = b.AddSwitch(name);
        if (!id.ok()) return At(MarkOf(e, "name"), "name", id.status());
        switch_ids_.emplace(name, *id);
        if (leaf) {
          ASSIGN_OR_RETURN(auto ids, NodeIds(b, e, "nodes", children));
          for (NodeId n : ids) {
            RETURN_IF_ERROR(At(MarkOf(e, "nodes"), "nodes", b.AttachNode(*id, n)));
            attached_[n.value()] = true;
          }
        } else {
          pending.push_back({e, *id, std::move(children)});
        }
      }
    }
    for (const Pending& p : pending) {
      for (const std::string& child : p.children) {
        auto it = switch_ids_.find(child);
        if (it == switch_ids_.end()) {
          return Error(MarkOf(p.entry, "switches"), "switches",
                       fmt::format("unknown switch '{}'", Printable(child)));
        }
        RETURN_IF_ERROR(
            At(MarkOf(p.entry, "switches"), "switches", b.AttachSwitch(p.id, it->second)));
      }
    }
    return Status::Ok();
  }

  Status LoadTiers(ClusterBuilder& b, const Yaml& root) {
    ASSIGN_OR_RETURN(const Yaml tiers, Sequence(root, "tiers"));
    if (tiers.IsDefined()) {
      std::vector<Level> levels;
      for (const Yaml& t : tiers) {
        auto level = t.IsScalar() ? ParseLevel(t.Scalar())
                                  : Result<Level>(InvalidArgumentError("expected a level name"));
        if (!level.ok()) return At(t.Mark(), "tiers", level.status());
        levels.push_back(*level);
      }
      RETURN_IF_ERROR(At(tiers.Mark(), "tiers", b.SetTierLevels(std::move(levels))));
    }
    ASSIGN_OR_RETURN(const Yaml ratios, Sequence(root, "oversubscription"));
    if (ratios.IsDefined()) {
      int tier = 0;
      for (const Yaml& r : ratios) {
        auto x = r.IsScalar() ? ParseDouble(r.Scalar()) : std::nullopt;
        if (!x) return Error(r.Mark(), "oversubscription", "expected a number");
        RETURN_IF_ERROR(At(r.Mark(), "oversubscription", b.SetOversubscription(tier++, *x)));
      }
    }
    Yaml links = root["links"];
    if (!links.IsDefined()) return Status::Ok();
    if (!links.IsMap()) return Error(links.Mark(), "links", "expected a map level -> link");
    static constexpr std::string_view kFields[] = {"gbps_per_gpu", "latency_us"};
    for (const auto& kv : links) {
      auto level = kv.first.IsScalar()
                       ? ParseLevel(kv.first.Scalar())
                       : Result<Level>(InvalidArgumentError("expected a level name"));
      if (!level.ok() || *level == Level::kNone) {
        return At(kv.first.Mark(), "links",
                  level.ok() ? InvalidArgumentError("level 'none' has no link") : level.status());
      }
      RETURN_IF_ERROR(Fields(kv.second, kFields));
      if (!kv.second["gbps_per_gpu"].IsDefined())
        return Error(kv.second.Mark(), "gbps_per_gpu", "missing");
      ASSIGN_OR_RETURN(double gbps, Double(kv.second, "gbps_per_gpu", 0, 1e9, false));
      ASSIGN_OR_RETURN(double us, Double(kv.second, "latency_us",
                                         ToMicroseconds(DefaultLatency(*level)), 1e9, false));
      b.SetLink(*level, LinkSpec{Gbps(gbps), Microseconds(us)});
    }
    return Status::Ok();
  }

  Status LoadFailureDomains(ClusterBuilder& b, const Yaml& root) {
    ASSIGN_OR_RETURN(const Yaml domains, Sequence(root, "failure_domains"));
    static constexpr std::string_view kFields[] = {"kind", "name", "nodes", "nodes_each"};
    for (const Yaml& e : domains) {
      RETURN_IF_ERROR(Fields(e, kFields));
      ASSIGN_OR_RETURN(std::string kind_name, String(e, "kind"));
      std::optional<FailureDomainKind> kind;
      for (auto k : {FailureDomainKind::kRack, FailureDomainKind::kPdu, FailureDomainKind::kRow}) {
        if (EqualsIgnoreCase(kind_name, FailureDomainKindName(k))) kind = k;
      }
      if (!kind) {
        return Error(
            MarkOf(e, "kind"), "kind",
            fmt::format("unknown kind '{}' (expected rack, pdu or row)", Printable(kind_name)));
      }
      ASSIGN_OR_RETURN(auto group, Group(e, "nodes", "nodes_each", NoImplicitMembers(e, "nodes")));
      for (auto& [name, members] : group) {
        ASSIGN_OR_RETURN(auto ids, NodeIds(b, e, "nodes", members));
        RETURN_IF_ERROR(At(MarkOf(e, "name"), "name", b.AddFailureDomain(*kind, name, ids)));
      }
    }
    return Status::Ok();
  }

  Result<Cluster> LoadBuilder(const Yaml& root, const std::string& name) {
    static constexpr std::string_view kBesideBuilder[] = {"name", "builder"};
    RETURN_IF_ERROR(Fields(root, kBesideBuilder));
    const Yaml spec = root["builder"];
    if (!spec.IsMap()) return Error(spec.Mark(), "builder", "expected a map of builder parameters");
    ASSIGN_OR_RETURN(std::string kind, String(spec, "kind"));
    FatTreeParams fat;
    RailOptimizedParams rail;
    DragonflyPlusParams fly;
    std::vector<Param> params;
    NodeLayout* layout = nullptr;
    if (kind == "fat-tree") {
      layout = &fat.layout;
      params = {{"tiers", &fat.tiers},
                {"nodes_per_leaf", &fat.nodes_per_leaf},
                {"leaf_radix", &fat.leaf_radix},
                {"leaves_per_spine", &fat.leaves_per_spine},
                {"leaf_oversubscription", &fat.leaf_oversubscription},
                {"spine_oversubscription", &fat.spine_oversubscription}};
    } else if (kind == "rail-optimized") {
      layout = &rail.layout;
      params = {{"nodes_per_su", &rail.nodes_per_su},
                {"rail_switch_radix", &rail.rail_switch_radix},
                {"sus_per_spine", &rail.sus_per_spine},
                {"spine_oversubscription", &rail.spine_oversubscription}};
    } else if (kind == "dragonfly+") {
      layout = &fly.layout;
      layout->nodes = 0;
      params = {{"groups", &fly.groups},
                {"leaves_per_group", &fly.leaves_per_group},
                {"nodes_per_leaf", &fly.nodes_per_leaf},
                {"leaf_radix", &fly.leaf_radix},
                {"leaf_oversubscription", &fly.leaf_oversubscription},
                {"global_oversubscription", &fly.global_oversubscription}};
    } else {
      return Error(
          MarkOf(spec, "kind"), "kind",
          fmt::format("unknown builder '{}' (expected fat-tree, rail-optimized or dragonfly+)",
                      Printable(kind)));
    }
    for (const Param& p : LayoutParams(*layout)) params.push_back(p);
    std::vector<std::string_view> allowed = {"kind"};
    for (const Param& p : params) allowed.push_back(p.name);
    RETURN_IF_ERROR(Fields(spec, allowed));
    for (const Param& p : params) {
      const std::string key(p.name);
      if (!spec[key].IsDefined()) continue;
      if (auto* i = std::get_if<int*>(&p.ref)) {
        ASSIGN_OR_RETURN(std::int64_t v, Int(spec, key, std::numeric_limits<int>::min(),
                                             std::numeric_limits<int>::max(), std::nullopt));
        **i = static_cast<int>(v);
      } else if (auto* d = std::get_if<double*>(&p.ref)) {
        auto x = spec[key].IsScalar() ? ParseDouble(spec[key].Scalar()) : std::nullopt;
        if (!x) return Error(spec[key].Mark(), key, "expected a number");
        **d = *x;
      } else {
        ASSIGN_OR_RETURN(*std::get<std::string*>(p.ref), String(spec, key));
      }
    }
    const double nodes =
        kind != "dragonfly+" || fly.layout.nodes != 0
            ? layout->nodes
            : static_cast<double>(fly.groups) * fly.leaves_per_group * fly.nodes_per_leaf;
    if (nodes > static_cast<double>(max_nodes_)) {
      return At(MarkOf(spec, "nodes"), "nodes",
                ResourceExhaustedError(
                    fmt::format("{} nodes is more than the limit of {}", nodes, max_nodes_)));
    }
    fat.name = rail.name = fly.name = name;
    auto cluster = kind == "fat-tree"         ? BuildFatTree(fat)
                   : kind == "rail-optimized" ? BuildRailOptimized(rail)
                                              : BuildDragonflyPlus(fly);
    if (cluster.ok()) return cluster;
    // Builder errors read "field 'x': ..."; point at that field when the file sets it.
    const std::string& msg = cluster.status().message();
    std::size_t start = msg.find("field '");
    std::string field;
    if (start != std::string::npos) {
      start += 7;
      field = msg.substr(start, msg.find('\'', start) - start);
    }
    YAML::Mark mark = spec[field].IsDefined() ? spec[field].Mark() : spec.Mark();
    return At(mark, "builder", cluster.status());
  }

  std::string_view file_;
  std::size_t max_nodes_;
  std::size_t budget_;  // hostlist names the rest of the file may expand to
  std::map<std::string, NodeShapeId, std::less<>> shapes_;
  std::map<std::string, SwitchId, std::less<>> switch_ids_;
  std::vector<std::string> node_names_;
  std::vector<bool> attached_;  // per node: under a leaf already
};

// One entry of a list section, before consecutive entries are merged into groups.
struct Entry {
  std::string head;  // fields written before the name, e.g. "kind: rack, "
  std::string_view members_key;
  int tier = 0;
  std::string name;
  std::vector<std::string> members;
};

// Writes `entries`, merging runs of equal head, members key, tier and member count into one
// "{name: <hostlist>, <members>: <hostlist>, <members>_each: n}".
void WriteGroups(std::string& out, std::string_view section, const std::vector<Entry>& entries) {
  if (entries.empty()) return;
  fmt::format_to(std::back_inserter(out), "{}:\n", section);
  std::vector<std::string> names, members;
  for (std::size_t i = 0; i < entries.size();) {
    const Entry& first = entries[i];
    names.clear();
    members.clear();
    std::size_t j = i;
    for (; j < entries.size() && entries[j].head == first.head &&
           entries[j].members_key == first.members_key && entries[j].tier == first.tier &&
           entries[j].members.size() == first.members.size();
         ++j) {
      names.push_back(entries[j].name);
      members.insert(members.end(), entries[j].members.begin(), entries[j].members.end());
    }
    fmt::format_to(std::back_inserter(out), "  - {{{}name: {}, {}: {}", first.head,
                   YamlQuote(CompressHostlist(names)), first.members_key,
                   YamlQuote(CompressHostlist(members)));
    if (j - i > 1)
      fmt::format_to(std::back_inserter(out), ", {}_each: {}", first.members_key,
                     first.members.size());
    out += "}\n";
    i = j;
  }
}

std::vector<std::string> NodeNames(const Cluster& c, std::span<const NodeId> ids) {
  std::vector<std::string> names;
  for (NodeId id : ids) names.push_back(c.node(id).name);
  return names;
}

}  // namespace

Result<Cluster> LoadClusterYaml(std::string_view text, std::string_view filename,
                                std::size_t max_nodes) {
  RETURN_IF_ERROR(CheckTextInput(text, filename));
  YamlLimits limits;
  limits.max_bytes = kMaxTopologyFileBytes;
  // A cluster file's tree holds a few nodes per line of text; aliases may not multiply that.
  limits.max_nodes = std::max<std::size_t>(1'000'000, text.size());
  ASSIGN_OR_RETURN(const Yaml root, LoadYamlBounded(text, filename, limits));
  try {
    return ReadYaml(filename, [&] { return Loader(filename, max_nodes).Load(root); });
  } catch (const std::exception& e) {
    return InternalError(fmt::format("{}: {}", filename, e.what()));
  }
}

std::string ExportClusterYaml(const Cluster& c) {
  std::string out = fmt::format(
      "# Cluster {}: {} nodes, {} GPUs (written by baton)\nname: {}\nfabric: {}\nshapes:\n",
      c.name(), c.nodes().size(), c.counts().total, YamlQuote(c.name()),
      FabricKindName(c.fabric()));
  std::string types;
  for (const auto& g : c.declared_gpus()) {
    fmt::format_to(std::back_inserter(types),
                   "  {}: {{memory_gib: {}, fp32_tflops: {}, tf32_tflops: {}, bf16_tflops: {}, "
                   "fp8_tflops: {}, hbm_gbps: {}, nvlink_gbps: {}",
                   YamlQuote(g->name), ToGiB(g->hbm), ToTFlops(g->fp32), ToTFlops(g->tf32),
                   ToTFlops(g->bf16), ToTFlops(g->fp8), ToGBps(g->hbm_bandwidth),
                   ToGBps(g->nvlink_per_direction));
    // Written only when known, so a file that never said them reads back to the same bytes.
    if (g->sm_count > 0) fmt::format_to(std::back_inserter(types), ", sm_count: {}", g->sm_count);
    if (g->family != GpuFamily::kUnknown) {
      fmt::format_to(std::back_inserter(types), ", family: {}", GpuFamilyName(g->family));
    }
    types += "}\n";
  }
  if (!types.empty()) {
    // Declared types come before the shapes that name them.
    out.insert(out.rfind("shapes:\n"), "gpu_types:\n" + types);
  }
  for (const NodeShape& s : c.shapes()) {
    fmt::format_to(std::back_inserter(out),
                   "  {}: {{gpu: {}, gpus: {}, cpus: {}, memory_gib: {}, numa_nodes: {}, "
                   "gpus_per_pcie_switch: {}, nics: {}, nic_gbps: {}",
                   YamlQuote(s.name), YamlQuote(s.gpu->name), s.gpus, s.cpus, ToGiB(s.memory),
                   s.numa_nodes, s.gpus_per_pcie_switch, s.nics, ToGbps(s.nic_bandwidth));
    if (!s.extended.empty()) {
      out += ", extended: {";
      for (std::size_t k = 0; k < s.extended.size(); ++k) {
        fmt::format_to(std::back_inserter(out), "{}{}: {}", k ? ", " : "",
                       YamlQuote(s.extended[k].name), s.extended[k].amount);
      }
      out += "}";
    }
    out += "}\n";
  }
  out += "nodes:\n";
  std::vector<std::string> names;
  const auto nodes = c.nodes();
  for (std::size_t i = 0; i < nodes.size();) {
    std::size_t j = i;
    names.clear();
    for (;
         j < nodes.size() && nodes[j].shape == nodes[i].shape && nodes[j].labels == nodes[i].labels;
         ++j) {
      names.push_back(nodes[j].name);
    }
    fmt::format_to(std::back_inserter(out), "  - {{names: {}, shape: {}",
                   YamlQuote(CompressHostlist(names)), YamlQuote(c.shape(nodes[i].shape).name));
    if (!nodes[i].labels.empty()) {
      out += ", labels: {";
      for (std::size_t k = 0; k < nodes[i].labels.size(); ++k) {
        fmt::format_to(std::back_inserter(out), "{}{}: {}", k ? ", " : "",
                       YamlQuote(nodes[i].labels[k].first), YamlQuote(nodes[i].labels[k].second));
      }
      out += "}";
    }
    out += "}\n";
    i = j;
  }
  std::vector<Entry> entries;
  for (const NvlinkDomain& d : c.nvlink_domains()) {
    // A node's own board is implied; only declared domains are written.
    if (d.nodes.size() == 1 && c.node(d.nodes[0]).name == d.name) continue;
    entries.push_back({"", "nodes", 0, d.name, NodeNames(c, d.nodes)});
  }
  WriteGroups(out, "nvlink_domains", entries);
  entries.clear();
  for (SwitchId id : SwitchesByTier(c)) {
    const Switch& s = c.sw(id);
    Entry e{"", s.child_nodes.empty() ? "switches" : "nodes", s.tier, s.name,
            NodeNames(c, s.child_nodes)};
    for (SwitchId ch : s.child_switches) e.members.push_back(c.sw(ch).name);
    entries.push_back(std::move(e));
  }
  WriteGroups(out, "switches", entries);
  if (c.tier_count() > 0) {
    out += "tiers: [";
    for (int t = 0; t < c.tier_count(); ++t) {
      fmt::format_to(std::back_inserter(out), "{}{}", t ? ", " : "", LevelName(c.tier_level(t)));
    }
    out += "]\n";
  }
  out += "links:\n";
  for (int l = static_cast<int>(Level::kGpu); l < static_cast<int>(Level::kNone); ++l) {
    const LinkSpec& link = c.Link(static_cast<Level>(l));
    fmt::format_to(std::back_inserter(out), "  {}: {{gbps_per_gpu: {}, latency_us: {}}}\n",
                   LevelName(static_cast<Level>(l)), ToGbps(link.bandwidth),
                   ToMicroseconds(link.latency));
  }
  entries.clear();
  // By kind, so that the racks (and the PDUs in them) of a big cluster form long runs.
  for (const FailureDomain& d : c.failure_domains()) {
    entries.push_back({fmt::format("kind: {}, ", FailureDomainKindName(d.kind)), "nodes", 0, d.name,
                       NodeNames(c, d.nodes)});
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.head < b.head; });
  WriteGroups(out, "failure_domains", entries);
  return out;
}

}  // namespace baton::topo
