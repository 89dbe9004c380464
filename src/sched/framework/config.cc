#include "sched/framework/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <utility>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::sched {
namespace {

constexpr std::array<std::pair<PreemptBy, std::string_view>, 2> kPreemptBys = {{
    {PreemptBy::kPriority, "priority"},
    {PreemptBy::kLasBand, "las-band"},
}};

template <typename E, std::size_t N>
Result<E> ParseEnum(const std::array<std::pair<E, std::string_view>, N>& table,
                    std::string_view field, std::string_view name) {
  std::string known;
  for (const auto& [value, text] : table) {
    if (text == name) return value;
    known += known.empty() ? "" : ", ";
    known += text;
  }
  return InvalidArgumentError(
      fmt::format("field '{}': '{}' is not one of {}", field, Printable(name), known));
}

// Limits for a scheduler config: far above any real one (a few hundred bytes, a few dozen
// nodes), far below what a hostile document could make the walk below cost.
constexpr YamlLimits kConfigYamlLimits{.max_depth = 32, .max_bytes = 1 << 20, .max_nodes = 100000};

void Flatten(const YAML::Node& node, const std::string& prefix, PluginArgs* out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      std::string key = kv.first.as<std::string>();
      Flatten(kv.second, prefix.empty() ? key : fmt::format("{}.{}", prefix, key), out);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      Flatten(node[i], fmt::format("{}[{}]", prefix, i), out);
    }
  } else if (node.IsScalar()) {
    (*out)[prefix] = node.as<std::string>();
  }
}

Result<std::string> Scalar(const YAML::Node& n, std::string_view field) {
  if (!n.IsScalar()) {
    return InvalidArgumentError(fmt::format("field '{}': expected a single value", field));
  }
  return n.as<std::string>();
}

Result<int> IntField(const YAML::Node& n, std::string_view field) {
  ASSIGN_OR_RETURN(std::string s, Scalar(n, field));
  auto v = ParseInt64(s);
  if (!v || *v < 0 || *v > 1000000) {
    return InvalidArgumentError(fmt::format("field '{}': expected a non-negative integer", field));
  }
  return static_cast<int>(*v);
}

Result<bool> BoolField(const YAML::Node& n, std::string_view field) {
  ASSIGN_OR_RETURN(std::string s, Scalar(n, field));
  if (s == "true") return true;
  if (s == "false") return false;
  return InvalidArgumentError(
      fmt::format("field '{}': expected true or false, got '{}'", field, Printable(s)));
}

Result<SchedulerConfig> Parse(const YAML::Node& root) {
  SchedulerConfig c;
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) return InvalidArgumentError("expected a mapping");
  for (const auto& kv : root) {
    ASSIGN_OR_RETURN(const std::string key, Scalar(kv.first, "(key)"));
    const YAML::Node& v = kv.second;
    if (key == "actions") {
      if (!v.IsSequence()) return InvalidArgumentError("field 'actions': expected a list");
      c.actions.clear();
      for (std::size_t i = 0; i < v.size(); ++i) {
        ASSIGN_OR_RETURN(std::string a, Scalar(v[i], fmt::format("actions[{}]", i)));
        c.actions.push_back(std::move(a));
      }
    } else if (key == "queue_sort") {
      ASSIGN_OR_RETURN(c.queue_sort, Scalar(v, key));
      if (c.queue_sort.empty()) return InvalidArgumentError("field 'queue_sort': empty");
    } else if (key == "head_of_line_blocking") {
      ASSIGN_OR_RETURN(c.head_of_line_blocking, BoolField(v, key));
    } else if (key == "plugins") {
      if (!v.IsSequence()) return InvalidArgumentError("field 'plugins': expected a list");
      c.plugins.clear();
      for (std::size_t i = 0; i < v.size(); ++i) {
        PluginConfig p;
        const YAML::Node& e = v[i];
        const std::string field = fmt::format("plugins[{}]", i);
        if (e.IsScalar()) {
          p.name = e.as<std::string>();
        } else if (e.IsMap() && e["name"]) {
          for (const auto& ekv : e) {
            ASSIGN_OR_RETURN(std::string k, Scalar(ekv.first, field));
            if (k != "name" && k != "weight" && k != "args") {
              return InvalidArgumentError(fmt::format(
                  "field '{}.{}': unknown (expected name, weight, args)", field, Printable(k)));
            }
          }
          ASSIGN_OR_RETURN(p.name, Scalar(e["name"], field + ".name"));
          if (e["weight"]) {
            ASSIGN_OR_RETURN(std::string ws, Scalar(e["weight"], field + ".weight"));
            auto w = ParseDouble(ws);
            if (!w || !(*w >= 0) || *w > 1e6) {
              return InvalidArgumentError(
                  fmt::format("field '{}.weight': expected a number in [0, 1e6]", field));
            }
            p.weight = *w;
          }
          if (e["args"]) Flatten(e["args"], "", &p.args);
        } else {
          return InvalidArgumentError(fmt::format("field '{}': expected a name", field));
        }
        c.plugins.push_back(std::move(p));
      }
    } else if (key == "max_candidates") {
      ASSIGN_OR_RETURN(c.max_candidates, IntField(v, key));
      if (c.max_candidates < 1) return InvalidArgumentError("field 'max_candidates': must be >= 1");
    } else if (key == "max_preemptors_per_cycle") {
      ASSIGN_OR_RETURN(c.max_preemptors_per_cycle, IntField(v, key));
    } else if (key == "preempt_by") {
      ASSIGN_OR_RETURN(std::string s, Scalar(v, key));
      ASSIGN_OR_RETURN(c.preempt_by, ParsePreemptBy(s));
    } else if (key == "backfill_reservations") {
      ASSIGN_OR_RETURN(c.backfill_reservations, IntField(v, key));
    } else if (IsPolicyField(key)) {
      RETURN_IF_ERROR(ParsePolicyField(key, v, &c));
    } else {
      return InvalidArgumentError(fmt::format("unknown field '{}'", Printable(key)));
    }
  }
  return c;
}

}  // namespace

std::string_view PreemptByName(PreemptBy p) {
  for (const auto& [value, text] : kPreemptBys) {
    if (value == p) return text;
  }
  return "?";
}

Result<PreemptBy> ParsePreemptBy(std::string_view name) {
  return ParseEnum(kPreemptBys, "preempt_by", name);
}

Result<SchedulerConfig> ParseSchedulerConfig(std::string_view yaml, std::string_view source) {
  ASSIGN_OR_RETURN(YAML::Node root, LoadYamlBounded(yaml, source, kConfigYamlLimits));
  return ReadYaml(source, [&]() -> Result<SchedulerConfig> {
    Result<SchedulerConfig> c = Parse(root);
    if (!c.ok()) return c.status().WithPrefix(source);
    return c;
  });
}

Result<SchedulerConfig> LoadSchedulerConfigFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text,
                   ReadFileBounded(path, kMaxSchedulerConfigSize, "scheduler config"));
  return ParseSchedulerConfig(text, path);
}

}  // namespace baton::sched
