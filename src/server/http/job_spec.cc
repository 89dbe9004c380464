#include "server/http/job_spec.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

#include "core/bounded_input.h"
#include "core/strings.h"
#include "topology/cluster.h"
#include "topology/gpu.h"

namespace baton::server {
namespace {

using nlohmann::json;

constexpr int kMaxDepth = 32;
constexpr int kMaxYamlNodes = 100'000;
// The parser's own bound; the daemon's body limit (1 MiB by default) is the tighter one.
constexpr std::size_t kMaxBodyBytes = std::size_t{16} << 20;
constexpr std::size_t kMaxCommandArgs = 256;
constexpr std::size_t kMaxArgBytes = 4096;

// An error naming a field; carried out of the validators.
struct FieldError {
  std::string field;
  std::string message;
};

Status Fail(const FieldError& e) {
  return e.field.empty() ? InvalidArgumentError(e.message) : InvalidFieldError(e.field, e.message);
}

// --- YAML → JSON, so that one validator serves both formats. ---------------------------------

std::optional<FieldError> YamlToJson(const YAML::Node& node, int depth, int& budget,
                                     const std::string& path, json& out) {
  if (depth > kMaxDepth) return FieldError{path, "nested deeper than 32 levels"};
  // Aliases share nodes, so a small document can expand enormously ("billion laughs").
  if (--budget < 0) return FieldError{"", "document has too many nodes"};
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out = nullptr;
      return std::nullopt;
    case YAML::NodeType::Sequence: {
      out = json::array();
      std::size_t i = 0;
      for (const auto& item : node) {
        json v;
        if (auto e = YamlToJson(item, depth + 1, budget, path + "[" + std::to_string(i) + "]", v)) {
          return e;
        }
        out.push_back(std::move(v));
        ++i;
      }
      return std::nullopt;
    }
    case YAML::NodeType::Map: {
      out = json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) return FieldError{path, "mapping keys must be strings"};
        std::string key = kv.first.Scalar();
        if (!IsValidUtf8(key)) return FieldError{path, "a mapping key is not valid UTF-8"};
        std::string child = path.empty() ? key : fmt::format("{}.{}", path, key);
        json v;
        if (auto e = YamlToJson(kv.second, depth + 1, budget, child, v)) return e;
        out[key] = std::move(v);
      }
      return std::nullopt;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      // yaml-cpp passes bytes through; JSON (and the canonical form) needs UTF-8.
      if (!IsValidUtf8(s)) return FieldError{path, "is not valid UTF-8"};
      // A quoted scalar ("8") is a string; only plain scalars take YAML's implicit types. The first
      // and last branches both make a string, for different reasons: kept apart.
      if (node.Tag() == "!") {  // NOLINT(bugprone-branch-clone)
        out = s;
      } else if (s == "true" || s == "True" || s == "TRUE") {
        out = true;
      } else if (s == "false" || s == "False" || s == "FALSE") {
        out = false;
      } else if (s == "null" || s == "Null" || s == "NULL" || s == "~") {
        out = nullptr;
      } else if (auto i = ParseInt64(s)) {
        out = *i;
      } else if (auto d = ParseDouble(s); d && std::isfinite(*d)) {
        out = *d;
      } else {
        out = s;
      }
      return std::nullopt;
    }
  }
  return FieldError{path, "unsupported YAML node"};
}

// --- Field validators. -------------------------------------------------------------------------

bool ValidName(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

std::string TypeName(const json& v) { return v.type_name(); }

std::optional<FieldError> GetInt(const json& v, const std::string& field, std::int64_t lo,
                                 std::int64_t hi, std::int64_t& out) {
  std::string range =
      "must be an integer between " + std::to_string(lo) + " and " + std::to_string(hi);
  if (v.is_number_unsigned()) {
    auto u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi)) {
      return FieldError{field, range + ", got " + std::to_string(u)};
    }
    out = static_cast<std::int64_t>(u);
  } else if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!std::isfinite(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
      return FieldError{field, range + ", got " + v.dump()};
    }
    if (d != std::floor(d)) return FieldError{field, range + ", got " + v.dump()};
    out = static_cast<std::int64_t>(d);
  } else {
    return FieldError{field, range + ", got " + TypeName(v)};
  }
  if (out < lo || out > hi) return FieldError{field, range + ", got " + std::to_string(out)};
  return std::nullopt;
}

std::optional<FieldError> GetSeconds(const json& v, const std::string& field, double hi,
                                     double& out) {
  std::string range = "must be a number of seconds between 0 and " + json(hi).dump();
  if (!v.is_number()) return FieldError{field, range + ", got " + TypeName(v)};
  out = v.get<double>();
  if (!std::isfinite(out) || out < 0 || out > hi) {
    return FieldError{field, range + ", got " + v.dump()};
  }
  return std::nullopt;
}

std::optional<FieldError> GetString(const json& v, const std::string& field, std::string& out) {
  if (!v.is_string()) return FieldError{field, "must be a string, got " + TypeName(v)};
  out = v.get<std::string>();
  return std::nullopt;
}

std::optional<FieldError> GetLevel(const json& v, const std::string& field, std::string& out,
                                   topo::Level& level) {
  if (auto e = GetString(v, field, out)) return e;
  Result<topo::Level> parsed = topo::ParseLevel(out);
  if (!parsed.ok() || *parsed == topo::Level::kGpu || *parsed == topo::Level::kNone) {
    return FieldError{field, "unknown topology level '" + Printable(out) +
                                 "' (expected node, nvlink-domain, leaf, spine, group or core)"};
  }
  level = *parsed;
  out = std::string(topo::LevelName(level));
  return std::nullopt;
}

// A list of at most kMaxListItems names of [A-Za-z0-9][A-Za-z0-9._-]{0,max-1}, no repeats.
std::optional<FieldError> GetNames(const json& v, const std::string& field, std::size_t max,
                                   std::vector<std::string>& out) {
  if (!v.is_array()) return FieldError{field, "must be a list of names, got " + TypeName(v)};
  if (v.size() > kMaxListItems) return FieldError{field, "has more than 64 entries"};
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string item_field = field + "[" + std::to_string(i) + "]";
    std::string name;
    if (auto e = GetString(v[i], item_field, name)) return e;
    if (!ValidName(name, max)) {
      return FieldError{item_field, "must be 1-" + std::to_string(max) +
                                        " characters of [A-Za-z0-9._-], got '" + Printable(name) +
                                        "'"};
    }
    if (std::find(out.begin(), out.end(), name) != out.end()) {
      return FieldError{item_field, "'" + name + "' is listed twice"};
    }
    out.push_back(std::move(name));
  }
  return std::nullopt;
}

std::optional<FieldError> GetGib(const json& v, const std::string& field, double& out) {
  // 1 PiB: more than any dataset a job stages; bounds the arithmetic on it.
  if (!v.is_number()) return FieldError{field, "must be a number of GiB, got " + TypeName(v)};
  out = v.get<double>();
  if (!std::isfinite(out) || out < 0 || out > 1024.0 * 1024.0) {
    return FieldError{field, "must be a number of GiB between 0 and 1048576, got " + v.dump()};
  }
  return std::nullopt;
}

// "YYYY-MM-DDTHH:MM:SSZ" (UTC only, no fraction) -> seconds since the epoch.
std::optional<double> ParseRfc3339Utc(std::string_view s) {
  if (s.size() != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' ||
      s[16] != ':' || s[19] != 'Z') {
    return std::nullopt;
  }
  auto num = [&](std::size_t at, std::size_t n) -> std::optional<int> {
    std::optional<std::int64_t> v = ParseInt64(s.substr(at, n));
    if (!v || *v < 0) return std::nullopt;
    return static_cast<int>(*v);
  };
  auto y = num(0, 4), mo = num(5, 2), d = num(8, 2), h = num(11, 2), mi = num(14, 2),
       se = num(17, 2);
  if (!y || !mo || !d || !h || !mi || !se || *y < 1970 || *mo < 1 || *mo > 12 || *d < 1 ||
      *d > 31 || *h > 23 || *mi > 59 || *se > 59) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = *y - 1900;
  tm.tm_mon = *mo - 1;
  tm.tm_mday = *d;
  tm.tm_hour = *h;
  tm.tm_min = *mi;
  tm.tm_sec = *se;
  std::time_t t = timegm(&tm);
  if (tm.tm_mday != *d) return std::nullopt;  // 31 February
  return static_cast<double>(t);
}

std::optional<FieldError> GetStage(const json& v, std::vector<StageItem>& out) {
  if (!v.is_array()) return FieldError{"stage", "must be a list of objects, got " + TypeName(v)};
  if (v.size() > kMaxListItems) return FieldError{"stage", "has more than 64 entries"};
  for (std::size_t i = 0; i < v.size(); ++i) {
    std::string base = "stage[" + std::to_string(i) + "]";
    if (!v[i].is_object()) return FieldError{base, "must be an object, got " + TypeName(v[i])};
    StageItem item;
    for (const auto& [key, fv] : v[i].items()) {
      std::string field = fmt::format("{}.{}", base, key);
      if (key == "kind") {
        if (auto e = GetString(fv, field, item.kind)) return e;
        if (item.kind != "dataset" && item.kind != "checkpoint") {
          return FieldError{field,
                            "must be dataset or checkpoint, got '" + Printable(item.kind) + "'"};
        }
      } else if (key == "name" || key == "from") {
        std::string& dst = key == "name" ? item.name : item.from;
        if (auto e = GetString(fv, field, dst)) return e;
        std::size_t max = key == "name" ? 128 : 64;
        if (!ValidName(dst, max)) {
          return FieldError{field, "must be 1-" + std::to_string(max) +
                                       " characters of [A-Za-z0-9._-], got '" + Printable(dst) +
                                       "'"};
        }
      } else if (key == "size_gib") {
        if (auto e = GetGib(fv, field, item.size_gib)) return e;
      } else {
        return FieldError{base + "." + Printable(key, 64),
                          "unknown field (expected kind, name, from or size_gib)"};
      }
    }
    if (item.kind.empty()) return FieldError{base + ".kind", "is required"};
    if (item.name.empty()) return FieldError{base + ".name", "is required"};
    if (item.from.empty()) return FieldError{base + ".from", "is required"};
    out.push_back(std::move(item));
  }
  return std::nullopt;
}

std::optional<FieldError> GetFederation(const json& v, FederationFields& out) {
  if (!v.is_object()) return FieldError{"federation", "must be an object, got " + TypeName(v)};
  for (const auto& [key, fv] : v.items()) {
    std::string field = "federation." + key;
    if (key == "datasets") {
      if (auto e = GetNames(fv, field, 128, out.datasets)) return e;
    } else if (key == "require_regions") {
      if (auto e = GetNames(fv, field, 64, out.require_regions)) return e;
    } else if (key == "exclude_regions") {
      if (auto e = GetNames(fv, field, 64, out.exclude_regions)) return e;
    } else if (key == "home_site") {
      if (auto e = GetString(fv, field, out.home_site)) return e;
      if (!ValidName(out.home_site, 64)) {
        return FieldError{field, "must be 1-64 characters of [A-Za-z0-9._-], got '" +
                                     Printable(out.home_site) + "'"};
      }
    } else if (key == "deadline") {
      if (auto e = GetString(fv, field, out.deadline)) return e;
      out.deadline_unix_s = ParseRfc3339Utc(out.deadline);
      if (!out.deadline_unix_s) {
        return FieldError{field, "must be a UTC time like 2026-12-01T18:00:00Z, got '" +
                                     Printable(out.deadline) + "'"};
      }
    } else if (key == "checkpoint_gib") {
      if (auto e = GetGib(fv, field, out.checkpoint_gib)) return e;
    } else if (key == "lease_s") {
      if (auto e = GetInt(fv, field, 1, kMaxLeaseSeconds, out.lease_s)) return e;
    } else {
      return FieldError{"federation." + Printable(key, 64),
                        "unknown field (expected datasets, home_site, require_regions, "
                        "exclude_regions, deadline, checkpoint_gib or lease_s)"};
    }
  }
  for (const std::string& r : out.require_regions) {
    if (std::find(out.exclude_regions.begin(), out.exclude_regions.end(), r) !=
        out.exclude_regions.end()) {
      return FieldError{"federation.exclude_regions",
                        "region '" + r + "' is both required and excluded"};
    }
  }
  return std::nullopt;
}

std::optional<FieldError> GetElastic(const json& v, ElasticRange& out) {
  if (!v.is_object()) {
    return FieldError{"elastic",
                      "must be an object {min_gpus, max_gpus, step_gpus}, got " + TypeName(v)};
  }
  bool has_min = false, has_max = false;
  for (const auto& [key, fv] : v.items()) {
    const std::string field = "elastic." + key;
    if (key == "min_gpus") {
      if (auto e = GetInt(fv, field, 1, kMaxJobGpus, out.min_gpus)) return e;
      has_min = true;
    } else if (key == "max_gpus") {
      if (auto e = GetInt(fv, field, 1, kMaxJobGpus, out.max_gpus)) return e;
      has_max = true;
    } else if (key == "step_gpus") {
      if (auto e = GetInt(fv, field, 1, kMaxJobGpus, out.step_gpus)) return e;
    } else {
      return FieldError{"elastic." + Printable(key, 64),
                        "unknown field (expected min_gpus, max_gpus or step_gpus)"};
    }
  }
  if (!has_min) return FieldError{"elastic.min_gpus", "is required"};
  if (!has_max) return FieldError{"elastic.max_gpus", "is required"};
  if (out.max_gpus < out.min_gpus) {
    return FieldError{"elastic.max_gpus", "(" + std::to_string(out.max_gpus) +
                                              ") must be >= min_gpus (" +
                                              std::to_string(out.min_gpus) + ")"};
  }
  if (out.step_gpus > 0) {
    if (out.min_gpus % out.step_gpus != 0) {
      return FieldError{"elastic.min_gpus", "(" + std::to_string(out.min_gpus) +
                                                ") must be a multiple of step_gpus (" +
                                                std::to_string(out.step_gpus) + ")"};
    }
    if (out.max_gpus % out.step_gpus != 0) {
      return FieldError{"elastic.max_gpus", "(" + std::to_string(out.max_gpus) +
                                                ") must be a multiple of step_gpus (" +
                                                std::to_string(out.step_gpus) + ")"};
    }
  }
  return std::nullopt;
}

std::optional<FieldError> Validate(const json& doc, JobSpec& spec) {
  if (!doc.is_object())
    return FieldError{"", "the job spec must be an object, got " + TypeName(doc)};
  bool has_name = false, has_gpus = false;
  const json* plan = nullptr;
  for (const auto& [key, v] : doc.items()) {
    if (key == "name") {
      if (auto e = GetString(v, key, spec.name)) return e;
      if (!ValidName(spec.name, 128)) {
        return FieldError{key,
                          "must be 1-128 characters of [A-Za-z0-9._-] starting with a "
                          "letter or digit, got '" +
                              Printable(spec.name) + "'"};
      }
      has_name = true;
    } else if (key == "tenant") {
      std::string t;
      if (auto e = GetString(v, key, t)) return e;
      if (!ValidName(t, 64)) {
        return FieldError{key,
                          "must be 1-64 characters of [A-Za-z0-9._-], got '" + Printable(t) + "'"};
      }
      spec.tenant = std::move(t);
    } else if (key == "gpus") {
      if (auto e = GetInt(v, key, 0, kMaxJobGpus, spec.gpus)) return e;
      has_gpus = true;
    } else if (key == "gpu_milli") {
      std::int64_t m = 0;
      if (auto e = GetInt(v, key, 1, 1000, m)) return e;
      spec.gpu_milli = m == 1000 ? 0 : static_cast<int>(m);
    } else if (key == "cpu_milli") {
      if (auto e = GetInt(v, key, 0, kMaxHostResource, spec.cpu_milli)) return e;
    } else if (key == "memory_mib") {
      if (auto e = GetInt(v, key, 0, kMaxHostResource, spec.memory_mib)) return e;
    } else if (key == "extended") {
      if (!v.is_object())
        return FieldError{key, "must be an object {name: amount}, got " + TypeName(v)};
      if (v.size() > kMaxJobExtended) {
        return FieldError{key, "names " + std::to_string(v.size()) + " resources, at most " +
                                   std::to_string(kMaxJobExtended)};
      }
      for (const auto& [rkey, rv] : v.items()) {
        const std::string field = "extended." + Printable(rkey, 64);
        if (Status s = topo::CheckExtendedResourceName(rkey); !s.ok()) {
          return FieldError{field, std::string(s.message())};
        }
        std::int64_t amount = 0;
        if (auto e = GetInt(rv, field, 0, topo::kMaxExtendedAmount, amount)) return e;
        spec.extended.emplace_back(rkey, amount);
      }
      std::sort(spec.extended.begin(), spec.extended.end());
    } else if (key == "resources") {
      return FieldError{key,
                        "named extended resources are the field 'extended' ({name: amount}); "
                        "CPU, memory and GPU shares are cpu_milli, memory_mib and gpu_milli"};
    } else if (key == "gpus_per_node") {
      std::int64_t g = 0;
      if (auto e = GetInt(v, key, 1, topo::kMaxGpusPerNode, g)) return e;
      spec.gpus_per_node = static_cast<int>(g);
    } else if (key == "gpu_type") {
      std::string t;
      if (auto e = GetString(v, key, t)) return e;
      // A catalogue type by its canonical name; any other well-formed name may be one the
      // cluster declares (checked against the cluster before the job is stored).
      Result<const topo::GpuSpec*> gpu = topo::FindGpu(t);
      if (gpu.ok()) {
        spec.gpu_type = (*gpu)->name;
      } else if (ValidName(t, 64)) {
        spec.gpu_type = t;
      } else {
        return FieldError{key, gpu.status().message()};
      }
    } else if (key == "priority") {
      std::int64_t p = 0;
      if (auto e = GetInt(v, key, -1000, 1000, p)) return e;
      spec.priority = static_cast<int>(p);
    } else if (key == "preemptible") {
      if (!v.is_boolean()) return FieldError{key, "must be true or false, got " + TypeName(v)};
      spec.preemptible = v.get<bool>();
    } else if (key == "grace_period_s") {
      if (auto e = GetSeconds(v, key, 86'400, spec.grace_period_s)) return e;
    } else if (key == "estimated_runtime_s") {
      if (auto e = GetSeconds(v, key, 365 * 86'400, spec.estimated_runtime_s)) return e;
    } else if (key == "command") {
      if (!v.is_array()) return FieldError{key, "must be a list of strings, got " + TypeName(v)};
      if (v.size() > kMaxCommandArgs) return FieldError{key, "has more than 256 arguments"};
      for (std::size_t i = 0; i < v.size(); ++i) {
        std::string field = "command[" + std::to_string(i) + "]";
        std::string arg;
        if (auto e = GetString(v[i], field, arg)) return e;
        if (arg.size() > kMaxArgBytes) return FieldError{field, "is longer than 4096 bytes"};
        if (arg.find('\0') != std::string::npos) return FieldError{field, "contains a NUL byte"};
        spec.command.push_back(std::move(arg));
      }
    } else if (key == "topology") {
      if (!v.is_object()) return FieldError{key, "must be an object, got " + TypeName(v)};
      topo::Level required = topo::Level::kNone, preferred = topo::Level::kNone;
      for (const auto& [tkey, tv] : v.items()) {
        std::string field = "topology." + tkey;
        if (tkey == "required") {
          if (auto e = GetLevel(tv, field, spec.topology_required, required)) return e;
        } else if (tkey == "preferred") {
          if (auto e = GetLevel(tv, field, spec.topology_preferred, preferred)) return e;
        } else {
          return FieldError{field, "unknown field (expected required or preferred)"};
        }
      }
      bool both = !spec.topology_required.empty() && !spec.topology_preferred.empty();
      if (both && preferred > required) {
        return FieldError{"topology.preferred", "'" + spec.topology_preferred +
                                                    "' is looser than the required '" +
                                                    spec.topology_required + "'"};
      }
    } else if (key == "plan") {
      if (!v.is_object()) return FieldError{key, "must be an object, got " + TypeName(v)};
      plan = &v;  // checked against gpus below
    } else if (key == "stage") {
      if (auto e = GetStage(v, spec.stage)) return e;
    } else if (key == "federation") {
      FederationFields f;
      if (auto e = GetFederation(v, f)) return e;
      spec.federation = std::move(f);
    } else if (key == "elastic") {
      ElasticRange r;
      if (auto e = GetElastic(v, r)) return e;
      spec.elastic = r;
    } else {
      return FieldError{Printable(key, 64),
                        "unknown field (expected name, tenant, gpus, gpus_per_node, gpu_type, "
                        "gpu_milli, cpu_milli, memory_mib, extended, priority, preemptible, "
                        "grace_period_s, estimated_runtime_s, command, topology, plan, stage, "
                        "federation or elastic)"};
    }
  }
  if (!has_name) return FieldError{"name", "is required"};
  if (spec.elastic) {
    const ElasticRange& e = *spec.elastic;
    // An elastic job starts at its smallest size unless it says otherwise.
    if (!has_gpus) spec.gpus = e.min_gpus;
    has_gpus = true;
    if (spec.gpus < e.min_gpus || spec.gpus > e.max_gpus) {
      return FieldError{"gpus", "(" + std::to_string(spec.gpus) + ") must lie within elastic's [" +
                                    std::to_string(e.min_gpus) + ", " + std::to_string(e.max_gpus) +
                                    "]"};
    }
    if (e.step_gpus > 0 && spec.gpus % e.step_gpus != 0) {
      return FieldError{"gpus", "(" + std::to_string(spec.gpus) +
                                    ") must be a multiple of elastic.step_gpus (" +
                                    std::to_string(e.step_gpus) + ")"};
    }
    if (spec.gpu_milli > 0) return FieldError{"elastic", "a share of a GPU is not elastic"};
    if (spec.gpus_per_node > 0) {
      return FieldError{"elastic",
                        "not with gpus_per_node (an elastic job's step_gpus is its unit)"};
    }
    if (spec.cpu_milli > 0 || spec.memory_mib > 0 || !spec.extended.empty()) {
      return FieldError{"elastic",
                        "a job with cpu_milli, memory_mib or extended resources is not elastic"};
    }
    if (doc.contains("plan")) {
      return FieldError{"elastic", "a job with a plan is not elastic (the plan fixes its GPUs)"};
    }
  }
  if (!has_gpus) return FieldError{"gpus", "is required"};
  if (spec.gpu_milli > 0 && spec.gpus != 1) {
    return FieldError{"gpu_milli", "a share of a GPU (" + std::to_string(spec.gpu_milli) +
                                       ") needs gpus: 1, got " + std::to_string(spec.gpus)};
  }
  const bool any_extended = std::any_of(spec.extended.begin(), spec.extended.end(),
                                        [](const auto& r) { return r.second > 0; });
  if (spec.gpus == 0 && spec.cpu_milli == 0 && spec.memory_mib == 0 && !any_extended) {
    return FieldError{"gpus",
                      "must be >= 1 (or 0 with cpu_milli, memory_mib or extended for a CPU-only "
                      "job)"};
  }
  if (spec.gpus == 0 && spec.gpus_per_node > 0) {
    return FieldError{"gpus_per_node", "a CPU-only job (gpus: 0) has no GPUs per node"};
  }
  if (spec.gpus_per_node > 0) {
    if (spec.gpus_per_node > spec.gpus) {
      return FieldError{"gpus_per_node", "(" + std::to_string(spec.gpus_per_node) +
                                             ") cannot exceed gpus (" + std::to_string(spec.gpus) +
                                             ")"};
    }
    if (spec.gpus % spec.gpus_per_node != 0) {
      return FieldError{"gpus_per_node", "(" + std::to_string(spec.gpus_per_node) +
                                             ") must divide gpus (" + std::to_string(spec.gpus) +
                                             ")"};
    }
  }
  if (plan != nullptr) {
    std::string field;
    Result<perf::JobPlanRequest> r =
        perf::ParseJobPlan(plan->dump(), static_cast<int>(spec.gpus), &field);
    if (!r.ok()) {
      // perf's message starts with the field, which FieldError puts in front again.
      std::string_view message = r.status().message();
      if (message.starts_with(field + ":")) message.remove_prefix(field.size() + 1);
      return FieldError{field, std::string(Trim(message))};
    }
    json canonical = *plan;
    if (canonical["model"].is_string()) canonical["model"] = r->model.name;
    spec.plan =
        JobPlan{*std::move(r), canonical.dump(-1, ' ', false, json::error_handler_t::replace)};
  }
  return std::nullopt;
}

}  // namespace

Result<BodyFormat> BodyFormatFromContentType(std::string_view content_type) {
  std::string_view media = Trim(content_type.substr(0, content_type.find(';')));
  if (media.empty() || EqualsIgnoreCase(media, "application/json")) return BodyFormat::kJson;
  if (EqualsIgnoreCase(media, "application/yaml") ||
      EqualsIgnoreCase(media, "application/x-yaml") || EqualsIgnoreCase(media, "text/yaml")) {
    return BodyFormat::kYaml;
  }
  return InvalidArgumentError("unsupported Content-Type '" + Printable(media) +
                              "' (expected application/json or application/yaml)");
}

Result<JobSpec> ParseJobSpec(std::string_view body, BodyFormat format) {
  json doc;
  if (format == BodyFormat::kJson) {
    // Depth, size and duplicate keys are checked before the document is parsed, so that nothing
    // recursive (dump() building an error, the plan's model) ever sees deep nesting.
    JsonLimits limits;
    limits.max_depth = kMaxDepth;
    limits.max_bytes = kMaxBodyBytes;
    Result<json> parsed = ParseJsonBounded(body, limits);
    if (!parsed.ok()) return Fail({"", std::string(parsed.status().message())});
    doc = std::move(parsed).value();
  } else {
    YamlLimits limits;
    limits.max_depth = kMaxDepth;
    limits.max_bytes = kMaxBodyBytes;
    limits.max_nodes = kMaxYamlNodes;
    Result<YAML::Node> root = LoadYamlBounded(body, "body", limits);
    if (!root.ok()) return Fail({"", std::string(root.status().message())});
    int budget = kMaxYamlNodes;
    try {
      RETURN_IF_ERROR(ReadYaml("body", [&] {
        std::optional<FieldError> e = YamlToJson(*root, 0, budget, "", doc);
        return e ? Fail(*e) : Status::Ok();
      }));
    } catch (const std::exception& e) {  // not expected: a YAML scalar nlohmann cannot hold
      return Fail({"", std::string("malformed YAML: ") + e.what()});
    }
  }
  JobSpec spec;
  try {
    if (auto e = Validate(doc, spec)) return Fail(*e);
  } catch (const json::exception& e) {  // not expected: every access is type-checked first
    return Fail({"", std::string("invalid job spec: ") + e.what()});
  }
  return spec;
}

std::string CanonicalJson(const JobSpec& spec) {
  json j = {
      {"name", spec.name},
      {"gpus", spec.gpus},
      {"gpus_per_node", spec.gpus_per_node},
      {"gpu_type", spec.gpu_type},
      {"priority", spec.priority},
      {"preemptible", spec.preemptible},
      {"grace_period_s", spec.grace_period_s},
      {"estimated_runtime_s", spec.estimated_runtime_s},
      {"command", spec.command},
  };
  // Optional fields are omitted when unset, so that the canonical form parses back.
  if (spec.tenant) j["tenant"] = *spec.tenant;
  json topology = json::object();
  if (!spec.topology_required.empty()) topology["required"] = spec.topology_required;
  if (!spec.topology_preferred.empty()) topology["preferred"] = spec.topology_preferred;
  j["topology"] = std::move(topology);
  if (spec.gpus_per_node == 0) j.erase("gpus_per_node");
  if (spec.gpu_milli > 0) j["gpu_milli"] = spec.gpu_milli;
  if (spec.cpu_milli > 0) j["cpu_milli"] = spec.cpu_milli;
  if (spec.memory_mib > 0) j["memory_mib"] = spec.memory_mib;
  if (!spec.extended.empty()) {
    json ext = json::object();
    for (const auto& [name, amount] : spec.extended) ext[name] = amount;
    j["extended"] = std::move(ext);
  }
  if (spec.gpu_type.empty()) j.erase("gpu_type");
  if (spec.plan) j["plan"] = json::parse(spec.plan->json, nullptr, /*allow_exceptions=*/false);
  if (!spec.stage.empty()) {
    json stage = json::array();
    for (const StageItem& item : spec.stage) {
      stage.push_back({{"kind", item.kind},
                       {"name", item.name},
                       {"from", item.from},
                       {"size_gib", item.size_gib}});
    }
    j["stage"] = std::move(stage);
  }
  if (spec.elastic) {
    json e = {{"min_gpus", spec.elastic->min_gpus}, {"max_gpus", spec.elastic->max_gpus}};
    if (spec.elastic->step_gpus > 0) e["step_gpus"] = spec.elastic->step_gpus;
    j["elastic"] = std::move(e);
  }
  if (spec.federation) {
    const FederationFields& f = *spec.federation;
    json fed = {{"datasets", f.datasets},
                {"require_regions", f.require_regions},
                {"exclude_regions", f.exclude_regions},
                {"checkpoint_gib", f.checkpoint_gib}};
    if (!f.home_site.empty()) fed["home_site"] = f.home_site;
    if (!f.deadline.empty()) fed["deadline"] = f.deadline;
    if (f.lease_s > 0) fed["lease_s"] = f.lease_s;
    j["federation"] = std::move(fed);
  }
  // Invalid UTF-8 cannot reach here (the parsers reject it), but never throw from dump().
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace baton::server
