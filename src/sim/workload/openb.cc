#include "sim/workload/openb.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <tuple>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::sim {
namespace {}  // namespace

std::vector<std::string_view> SplitOpenbCsv(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    out.push_back(
        Trim(line.substr(start, comma == std::string_view::npos ? line.npos : comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

namespace {

// Reads `in` line by line; calls `row(line_number, fields)` for each data line after the header,
// whose column names are mapped to their index in `columns`.
template <typename Row>
Status ReadCsv(std::istream& in, std::string_view file, const OpenbLimits& limits,
               std::span<const std::string_view> required, std::map<std::string, int>* columns,
               Row row) {
  bool header = true;
  std::size_t width = 0;
  // Line by line with each line bounded before it is held (ForEachStreamLine): a trace that is
  // one endless line (/dev/zero) is refused at its first line, not read into memory.
  Status read = ForEachStreamLine(
      in, file, {.max_line_bytes = limits.max_line_bytes, .max_lines = limits.max_lines},
      [&](int number, std::string_view line) -> Status {
        if (Trim(line).empty()) return Status::Ok();
        auto fields = SplitOpenbCsv(line);
        if (header) {
          header = false;
          width = fields.size();
          for (std::size_t i = 0; i < fields.size(); ++i) {
            if (!columns->emplace(std::string(fields[i]), static_cast<int>(i)).second) {
              return InvalidArgumentError(fmt::format("{}:{}: column '{}' appears twice", file,
                                                      number, Printable(fields[i])));
            }
          }
          for (std::string_view r : required) {
            if (!columns->contains(std::string(r))) {
              return InvalidArgumentError(
                  fmt::format("{}:{}: header lacks column '{}'", file, number, r));
            }
          }
          return Status::Ok();
        }
        if (fields.size() != width) {
          return InvalidArgumentError(
              fmt::format("{}:{}: expected {} fields (as the header), found {}", file, number,
                          width, fields.size()));
        }
        Status s = row(fields);
        if (!s.ok()) return s.WithPrefix(fmt::format("{}:{}", file, number));
        return Status::Ok();
      });
  RETURN_IF_ERROR(read);
  if (header) return InvalidArgumentError(fmt::format("{}: empty (no header)", file));
  return Status::Ok();
}

Result<std::int64_t> Int(std::string_view field, std::string_view v, std::int64_t lo,
                         std::int64_t hi) {
  auto x = ParseInt64(v);
  if (!x) {
    return InvalidArgumentError(
        fmt::format("field '{}': '{}' is not an integer", field, Printable(v)));
  }
  if (*x < lo || *x > hi) {
    return InvalidArgumentError(
        fmt::format("field '{}': {} is out of range ({}..{})", field, *x, lo, hi));
  }
  return *x;
}

constexpr std::int64_t kMaxCpuMilli = std::int64_t{1} << 32;
constexpr std::int64_t kMaxMemoryMib = std::int64_t{1} << 32;

}  // namespace

Result<std::vector<OpenbNode>> ReadOpenbNodes(std::istream& in, std::string_view file,
                                              OpenbLimits limits) {
  static constexpr std::string_view kRequired[] = {"sn", "cpu_milli", "memory_mib", "gpu", "model"};
  std::map<std::string, int> col;
  std::vector<OpenbNode> out;
  std::map<std::string, bool, std::less<>> names;
  RETURN_IF_ERROR(ReadCsv(
      in, file, limits, kRequired, &col, [&](const std::vector<std::string_view>& f) -> Status {
        OpenbNode n;
        n.name = std::string(f[col["sn"]]);
        if (n.name.empty()) return InvalidArgumentError("field 'sn': empty");
        if (!names.emplace(n.name, true).second) {
          return InvalidArgumentError(
              fmt::format("field 'sn': node '{}' listed twice", Printable(n.name)));
        }
        ASSIGN_OR_RETURN(n.cpu_milli, Int("cpu_milli", f[col["cpu_milli"]], 0, kMaxCpuMilli));
        ASSIGN_OR_RETURN(n.memory_mib, Int("memory_mib", f[col["memory_mib"]], 0, kMaxMemoryMib));
        ASSIGN_OR_RETURN(std::int64_t gpus, Int("gpu", f[col["gpu"]], 0, topo::kMaxGpusPerNode));
        n.gpus = static_cast<int>(gpus);
        n.model = std::string(f[col["model"]]);
        if (n.gpus > 0 && n.model.empty()) {
          return InvalidArgumentError("field 'model': empty for a GPU node");
        }
        out.push_back(std::move(n));
        return Status::Ok();
      }));
  return out;
}

Result<OpenbPodColumns> OpenbPodColumns::FromHeader(std::span<const std::string_view> names) {
  OpenbPodColumns c;
  c.width_ = names.size();
  std::map<std::string_view, int> at;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!at.emplace(names[i], static_cast<int>(i)).second) {
      return InvalidArgumentError(
          fmt::format("header: column '{}' appears twice", Printable(names[i])));
    }
  }
  auto find = [&](std::string_view name) {
    auto it = at.find(name);
    return it == at.end() ? -1 : it->second;
  };
  struct Need {
    std::string_view name;
    int* index;
  };
  for (Need n : {Need{"name", &c.name_}, Need{"cpu_milli", &c.cpu_}, Need{"memory_mib", &c.memory_},
                 Need{"num_gpu", &c.gpus_}, Need{"gpu_milli", &c.milli_}}) {
    *n.index = find(n.name);
    if (*n.index < 0) return InvalidArgumentError(fmt::format("header lacks column '{}'", n.name));
  }
  c.spec_ = find("gpu_spec");
  c.qos_ = find("qos");
  c.phase_ = find("pod_phase");
  c.created_ = find("creation_time");
  c.deleted_ = find("deletion_time");
  c.scheduled_ = find("scheduled_time");
  return c;
}

Result<OpenbPod> OpenbPodColumns::Parse(std::span<const std::string_view> f) const {
  if (f.size() != width_) {
    return InvalidArgumentError(
        fmt::format("expected {} fields (as the header), found {}", width_, f.size()));
  }
  OpenbPod p;
  p.name = std::string(f[name_]);
  if (p.name.empty()) return InvalidArgumentError("field 'name': empty");
  ASSIGN_OR_RETURN(p.cpu_milli, Int("cpu_milli", f[cpu_], 0, kMaxCpuMilli));
  ASSIGN_OR_RETURN(p.memory_mib, Int("memory_mib", f[memory_], 0, kMaxMemoryMib));
  ASSIGN_OR_RETURN(std::int64_t gpus, Int("num_gpu", f[gpus_], 0, topo::kMaxGpusPerNode));
  ASSIGN_OR_RETURN(std::int64_t milli, Int("gpu_milli", f[milli_], 0, 1000));
  p.num_gpu = static_cast<int>(gpus);
  p.gpu_milli = static_cast<int>(milli);
  if ((p.num_gpu == 0) != (p.gpu_milli == 0)) {
    return InvalidArgumentError(fmt::format(
        "field 'gpu_milli': {} with num_gpu {} (both or neither must be 0)", milli, gpus));
  }
  if (p.num_gpu > 1 && p.gpu_milli != 1000) {
    return InvalidArgumentError(fmt::format(
        "field 'gpu_milli': a share ({}) of a GPU needs num_gpu 1, got {}", milli, gpus));
  }
  if (spec_ >= 0 && !f[spec_].empty()) {
    for (std::string_view m : Split(f[spec_], '|')) {
      m = Trim(m);
      if (m.empty()) return InvalidArgumentError("field 'gpu_spec': empty model in the list");
      if (std::find(p.gpu_spec.begin(), p.gpu_spec.end(), m) == p.gpu_spec.end()) {
        p.gpu_spec.emplace_back(m);
      }
    }
  }
  if (qos_ >= 0) p.qos = std::string(f[qos_]);
  if (phase_ >= 0) p.phase = std::string(f[phase_]);
  // Times: seconds within ten years (the simulator's horizon), empty when unknown.
  constexpr double kMaxSeconds = 10.0 * 365 * 86400;
  auto time = [&](int col, std::string_view field, std::optional<double>* out) -> Status {
    if (col < 0 || f[col].empty()) return Status::Ok();
    auto v = ParseDouble(f[col]);
    if (!v || !std::isfinite(*v)) {
      return InvalidArgumentError(
          fmt::format("field '{}': '{}' is not a number", field, Printable(f[col])));
    }
    if (*v < 0 || *v > kMaxSeconds) {
      return InvalidArgumentError(
          fmt::format("field '{}': {} is out of range (0 up to the 10-year horizon, {} s)", field,
                      *v, kMaxSeconds));
    }
    *out = *v;
    return Status::Ok();
  };
  RETURN_IF_ERROR(time(created_, "creation_time", &p.creation_time));
  RETURN_IF_ERROR(time(deleted_, "deletion_time", &p.deletion_time));
  RETURN_IF_ERROR(time(scheduled_, "scheduled_time", &p.scheduled_time));
  return p;
}

Result<std::vector<OpenbPod>> ReadOpenbPods(std::istream& in, std::string_view file,
                                            OpenbLimits limits) {
  static constexpr std::string_view kRequired[] = {"name", "cpu_milli", "memory_mib", "num_gpu",
                                                   "gpu_milli"};
  std::map<std::string, int> col;
  std::vector<OpenbPod> out;
  std::optional<OpenbPodColumns> columns;
  RETURN_IF_ERROR(ReadCsv(in, file, limits, kRequired, &col,
                          [&](const std::vector<std::string_view>& f) -> Status {
                            if (!columns) {
                              std::vector<std::string_view> names(col.size());
                              for (const auto& [name, i] : col)
                                names[static_cast<std::size_t>(i)] = name;
                              ASSIGN_OR_RETURN(columns, OpenbPodColumns::FromHeader(names));
                            }
                            ASSIGN_OR_RETURN(OpenbPod p, columns->Parse(f));
                            out.push_back(std::move(p));
                            return Status::Ok();
                          }));
  return out;
}

Result<std::vector<OpenbNode>> ReadOpenbNodesFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(fmt::format("cannot open '{}'", path));
  return ReadOpenbNodes(in, path);
}

Result<std::vector<OpenbPod>> ReadOpenbPodsFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFoundError(fmt::format("cannot open '{}'", path));
  return ReadOpenbPods(in, path);
}

Result<topo::Cluster> OpenbCluster(std::span<const OpenbNode> nodes, std::string name) {
  topo::ClusterBuilder b(std::move(name));
  std::map<std::string, const topo::GpuSpec*> models;
  std::map<std::tuple<std::string, int, std::int64_t, std::int64_t>, topo::NodeShapeId> shapes;
  ASSIGN_OR_RETURN(topo::SwitchId leaf, b.AddSwitch("openb-leaf"));
  for (const OpenbNode& n : nodes) {
    auto bad = [&](std::string_view field, const std::string& why) {
      return InvalidArgumentError(
          fmt::format("node '{}': field '{}': {}", Printable(n.name), field, why));
    };
    if (n.gpus <= 0) return bad("gpu", "a node without GPUs (packing places GPU work)");
    if (n.cpu_milli % 1000 != 0) return bad("cpu_milli", "not whole cores");
    auto [it, fresh] = models.try_emplace(n.model, nullptr);
    if (fresh) {
      auto builtin = topo::FindGpu(n.model);
      if (builtin.ok()) {
        it->second = *builtin;
      } else {
        topo::GpuSpec spec;
        spec.name = n.model;
        ASSIGN_OR_RETURN(it->second, b.AddGpuType(std::move(spec)));
      }
    }
    auto key = std::make_tuple(n.model, n.gpus, n.cpu_milli, n.memory_mib);
    auto s = shapes.find(key);
    if (s == shapes.end()) {
      topo::NodeShape shape;
      shape.name = fmt::format("{}x{}-{}c-{}m", n.gpus, n.model, n.cpu_milli / 1000, n.memory_mib);
      shape.gpu = it->second;
      shape.gpus = n.gpus;
      shape.cpus = static_cast<int>(n.cpu_milli / 1000);
      shape.memory = MiB(static_cast<double>(n.memory_mib));
      shape.gpus_per_pcie_switch = 1;
      shape.nics = 0;
      ASSIGN_OR_RETURN(topo::NodeShapeId id, b.AddShape(std::move(shape)));
      s = shapes.emplace(key, id).first;
    }
    ASSIGN_OR_RETURN(topo::NodeId id, b.AddNode(n.name, s->second));
    RETURN_IF_ERROR(b.AttachNode(leaf, id));
  }
  return b.Build();
}

}  // namespace baton::sim
