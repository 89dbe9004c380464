#include "sched/framework/config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "core/strings.h"

namespace baton::sched {
namespace {

void Flatten(const YAML::Node& node, const std::string& prefix, PluginArgs* out) {
  if (node.IsMap()) {
    for (const auto& kv : node) {
      std::string key = kv.first.as<std::string>();
      Flatten(kv.second, prefix.empty() ? key : prefix + "." + key, out);
    }
  } else if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) {
      Flatten(node[i], fmt::format("{}[{}]", prefix, i), out);
    }
  } else if (node.IsScalar()) {
    (*out)[prefix] = node.as<std::string>();
  }
}

Result<int> IntField(const YAML::Node& n, std::string_view field) {
  auto v = ParseInt64(n.as<std::string>());
  if (!v || *v < 0 || *v > 1000000) {
    return InvalidArgumentError(fmt::format("field '{}': expected a non-negative integer", field));
  }
  return static_cast<int>(*v);
}

Result<SchedulerConfig> Parse(const YAML::Node& root) {
  SchedulerConfig c;
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) return InvalidArgumentError("scheduler config: expected a mapping");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "actions") {
      if (!v.IsSequence()) return InvalidArgumentError("field 'actions': expected a list");
      c.actions.clear();
      for (const auto& a : v) c.actions.push_back(a.as<std::string>());
    } else if (key == "queue_sort") {
      c.queue_sort = v.as<std::string>();
    } else if (key == "plugins") {
      if (!v.IsSequence()) return InvalidArgumentError("field 'plugins': expected a list");
      c.plugins.clear();
      for (std::size_t i = 0; i < v.size(); ++i) {
        PluginConfig p;
        const YAML::Node& e = v[i];
        if (e.IsScalar()) {
          p.name = e.as<std::string>();
        } else if (e.IsMap() && e["name"]) {
          p.name = e["name"].as<std::string>();
          if (e["weight"]) {
            auto w = ParseDouble(e["weight"].as<std::string>());
            if (!w || !(*w >= 0) || *w > 1e6) {
              return InvalidArgumentError(
                  fmt::format("field 'plugins[{}].weight': expected a number in [0, 1e6]", i));
            }
            p.weight = *w;
          }
          if (e["args"]) Flatten(e["args"], "", &p.args);
        } else {
          return InvalidArgumentError(fmt::format("field 'plugins[{}]': expected a name", i));
        }
        c.plugins.push_back(std::move(p));
      }
    } else if (key == "max_candidates") {
      ASSIGN_OR_RETURN(c.max_candidates, IntField(v, key));
      if (c.max_candidates < 1) return InvalidArgumentError("field 'max_candidates': must be >= 1");
    } else if (key == "max_preemptors_per_cycle") {
      ASSIGN_OR_RETURN(c.max_preemptors_per_cycle, IntField(v, key));
    } else if (key == "preempt_by") {
      c.preempt_by = v.as<std::string>();
      if (c.preempt_by != "priority" && c.preempt_by != "las-band") {
        return InvalidArgumentError("field 'preempt_by': expected priority or las-band");
      }
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

Result<SchedulerConfig> ParseSchedulerConfig(std::string_view yaml) {
  try {
    return Parse(YAML::Load(std::string(yaml)));
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(fmt::format("scheduler config: {}", e.what()));
  }
}

}  // namespace baton::sched
