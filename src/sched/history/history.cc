#include "sched/history/history.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/bounded_input.h"
#include "topology/io/cluster_yaml.h"

namespace baton::sched::history {
namespace {

using json = nlohmann::json;

std::string Hex(std::uint64_t mask) { return fmt::format("{:#x}", mask); }

json NodesJson(const topo::Cluster& c, const Placement& p) {
  json out = json::array();
  for (const NodeAlloc& a : p.nodes) out.push_back(json::array({c.node(a.node).name, Hex(a.mask)}));
  return out;
}

json NamesJson(const topo::Cluster& c, const std::vector<topo::NodeId>& nodes) {
  json out = json::array();
  for (topo::NodeId n : nodes) out.push_back(c.node(n).name);
  return out;
}

std::string_view OpName(NodeRequirement::Op op) {
  switch (op) {
    case NodeRequirement::Op::kIn:
      return "in";
    case NodeRequirement::Op::kNotIn:
      return "not-in";
    case NodeRequirement::Op::kExists:
      return "exists";
    case NodeRequirement::Op::kGreaterEqual:
      return ">=";
    case NodeRequirement::Op::kLessEqual:
      return "<=";
  }
  return "?";
}

// Only the fields that differ from a default GangJob: a record stays small.
json JobJson(const GangJob& j) {
  const GangJob d;
  json o = json::object();
  o["id"] = j.id.value();
  if (j.name != d.name) o["name"] = j.name;
  if (j.tenant != d.tenant) o["tenant"] = j.tenant;
  o["gpus"] = j.gpus;
  if (j.gpus_per_task != d.gpus_per_task) o["gpus_per_task"] = j.gpus_per_task;
  if (j.one_task_per_node) o["one_task_per_node"] = true;
  if (!j.gpu_types.empty()) o["gpu_types"] = j.gpu_types;
  if (j.topology.required) o["topology_required"] = topo::LevelName(*j.topology.required);
  if (j.topology.preferred) o["topology_preferred"] = topo::LevelName(*j.topology.preferred);
  if (!j.sub_groups.empty()) {
    json groups = json::array();
    for (const SubGroupConstraint& g : j.sub_groups) {
      groups.push_back({{"gpus", g.gpus}, {"level", topo::LevelName(g.level)}});
    }
    o["sub_groups"] = std::move(groups);
  }
  if (j.priority != d.priority) o["priority"] = j.priority;
  if (j.preemptible != d.preemptible) o["preemptible"] = j.preemptible;
  if (j.grace_period != d.grace_period) o["grace_period_s"] = j.grace_period.value();
  if (j.elastic.min_gpus != 0 || j.elastic.max_gpus != 0 || j.elastic.step_gpus != 0) {
    o["elastic"] = {{"min_gpus", j.elastic.min_gpus},
                    {"max_gpus", j.elastic.max_gpus},
                    {"step_gpus", j.elastic.step_gpus}};
  }
  if (j.estimated_runtime != d.estimated_runtime) {
    o["estimated_runtime_s"] = j.estimated_runtime.value();
  }
  if (j.checkpoint_interval != d.checkpoint_interval) {
    o["checkpoint_interval_s"] = j.checkpoint_interval.value();
  }
  if (j.restart_cost != d.restart_cost) o["restart_cost_s"] = j.restart_cost.value();
  if (j.max_retries != d.max_retries) o["max_retries"] = j.max_retries;
  if (j.spread) o["spread"] = topo::FailureDomainKindName(*j.spread);
  if (!j.node_requirements.empty()) {
    json reqs = json::array();
    for (const NodeRequirement& r : j.node_requirements) {
      json x = {{"key", r.key}, {"op", OpName(r.op)}};
      if (!r.values.empty()) x["values"] = r.values;
      if (r.op == NodeRequirement::Op::kGreaterEqual || r.op == NodeRequirement::Op::kLessEqual) {
        x["bound"] = r.bound;
      }
      reqs.push_back(std::move(x));
    }
    o["node_requirements"] = std::move(reqs);
  }
  if (j.gpu_milli != d.gpu_milli) o["gpu_milli"] = j.gpu_milli;
  if (!j.mig_profile.empty()) o["mig_profile"] = j.mig_profile;
  if (j.cpu_milli != d.cpu_milli) o["cpu_milli"] = j.cpu_milli;
  if (j.memory_mib != d.memory_mib) o["memory_mib"] = j.memory_mib;
  if (!j.extended.empty()) {
    json ext = json::object();
    for (const topo::ExtendedResource& r : j.extended) ext[r.name] = r.amount;
    o["extended"] = std::move(ext);
  }
  if (j.has_plan) o["plan_key"] = j.plan_key;
  o["submit_time"] = j.submit_time.since_epoch.value();
  return o;
}

json EventJson(const topo::Cluster& c, const Event& e) {
  json o = json::object();
  switch (e.kind) {
    case Event::Kind::kSubmit:
      o["kind"] = "submit";
      o["job"] = JobJson(e.job);
      if (!e.bad_nodes.empty()) o["bad_nodes"] = NamesJson(c, e.bad_nodes);
      break;
    case Event::Kind::kAdopt:
      o["kind"] = "adopt";
      o["job"] = JobJson(e.job);
      o["nodes"] = NodesJson(c, e.placement);
      o["start"] = e.adopted_start.since_epoch.value();
      if (!e.bad_nodes.empty()) o["bad_nodes"] = NamesJson(c, e.bad_nodes);
      break;
    case Event::Kind::kCancel:
      o["kind"] = "cancel";
      o["job_id"] = e.job_id.value();
      break;
    case Event::Kind::kFinish:
      o["kind"] = "finish";
      o["job_id"] = e.job_id.value();
      break;
    case Event::Kind::kCheckpoint:
      o["kind"] = "checkpoint";
      o["job_id"] = e.job_id.value();
      break;
    case Event::Kind::kNodeHealth:
      o["kind"] = "node";
      o["node"] = c.node(e.node).name;
      o["health"] = topo::NodeHealthName(e.health);
      break;
  }
  return o;
}

json PlacedJson(const topo::Cluster& c, const std::vector<Placed>& placed) {
  json out = json::array();
  for (const Placed& p : placed) {
    out.push_back({{"job", p.job.value()}, {"nodes", NodesJson(c, p.placement)}});
  }
  return out;
}

json IdsJson(const std::vector<JobId>& ids) {
  json out = json::array();
  for (JobId id : ids) out.push_back(id.value());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Decoding: every field through Fields, which names the path in errors and refuses unknown keys.

class Fields {
 public:
  Fields(const json& object, std::string path) : o_(object), path_(std::move(path)) {}

  static Result<Fields> Of(const json& v, std::string path) {
    if (!v.is_object()) return Err(path, "must be an object");
    return Fields(v, std::move(path));
  }

  const json* Find(std::string_view key) {
    auto it = o_.find(key);
    if (it == o_.end()) return nullptr;
    seen_.push_back(std::string(key));
    return &*it;
  }
  std::string At(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }
  Result<const json*> Required(std::string_view key) {
    const json* v = Find(key);
    if (v == nullptr) return Err(At(key), "is required");
    return v;
  }

  Result<std::int64_t> Int(std::string_view key, std::optional<std::int64_t> fallback,
                           std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                           std::int64_t hi = std::numeric_limits<std::int64_t>::max()) {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Err(At(key), "is required");
    }
    if (!v->is_number_integer()) return Err(At(key), "must be an integer");
    std::int64_t x = 0;
    if (v->is_number_unsigned()) {
      std::uint64_t u = v->get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return Err(At(key), "is out of range");
      }
      x = static_cast<std::int64_t>(u);
    } else {
      x = v->get<std::int64_t>();
    }
    if (x < lo || x > hi) return Err(At(key), fmt::format("must be in {}..{}, got {}", lo, hi, x));
    return x;
  }
  Result<int> Int32(std::string_view key, std::optional<int> fallback, int lo, int hi) {
    std::optional<std::int64_t> wide;
    if (fallback) wide = *fallback;
    ASSIGN_OR_RETURN(std::int64_t x, Int(key, wide, lo, hi));
    return static_cast<int>(x);
  }
  Result<double> Number(std::string_view key, std::optional<double> fallback) {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Err(At(key), "is required");
    }
    if (!v->is_number()) return Err(At(key), "must be a number");
    double x = v->get<double>();
    if (!std::isfinite(x) || x < 0) return Err(At(key), "must be a finite number >= 0");
    return x;
  }
  Result<std::string> String(std::string_view key, std::optional<std::string> fallback) {
    const json* v = Find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      return Err(At(key), "is required");
    }
    if (!v->is_string()) return Err(At(key), "must be a string");
    return v->get<std::string>();
  }
  Result<bool> Bool(std::string_view key, bool fallback) {
    const json* v = Find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Err(At(key), "must be true or false");
    return v->get<bool>();
  }
  Result<std::vector<std::string>> Strings(std::string_view key) {
    std::vector<std::string> out;
    const json* v = Find(key);
    if (v == nullptr) return out;
    if (!v->is_array()) return Err(At(key), "must be an array of strings");
    for (const json& s : *v) {
      if (!s.is_string()) return Err(At(key), "must be an array of strings");
      out.push_back(s.get<std::string>());
    }
    return out;
  }
  // Every key was read: an unknown one is refused (a typo must not be silently ignored).
  Status Done() const {
    for (auto it = o_.begin(); it != o_.end(); ++it) {
      if (std::find(seen_.begin(), seen_.end(), it.key()) == seen_.end()) {
        return Err(At(it.key()), "is not a field of this record");
      }
    }
    return Status::Ok();
  }

  static Status Err(std::string_view field, std::string_view why) {
    return InvalidArgumentError(fmt::format("field '{}': {}", field, why));
  }

 private:
  const json& o_;
  std::string path_;
  std::vector<std::string> seen_;
};

Result<topo::Level> LevelField(Fields& f, std::string_view key) {
  ASSIGN_OR_RETURN(std::string name, f.String(key, std::nullopt));
  Result<topo::Level> level = topo::ParseLevel(name);
  if (!level.ok()) return Fields::Err(f.At(key), "unknown level '" + name + "'");
  return *level;
}

Result<TimePoint> TimeField(Fields& f, std::string_view key) {
  ASSIGN_OR_RETURN(double t, f.Number(key, std::nullopt));
  return TimePoint{Seconds(t)};
}

Result<GangJob> JobFrom(const json& v, const std::string& path) {
  ASSIGN_OR_RETURN(Fields f, Fields::Of(v, path));
  GangJob j;
  constexpr int kMaxInt = std::numeric_limits<int>::max();
  ASSIGN_OR_RETURN(std::int64_t id, f.Int("id", std::nullopt, 1));
  j.id = JobId(static_cast<std::uint64_t>(id));
  ASSIGN_OR_RETURN(j.name, f.String("name", ""));
  ASSIGN_OR_RETURN(j.tenant, f.String("tenant", GangJob{}.tenant));
  ASSIGN_OR_RETURN(j.gpus, f.Int32("gpus", 0, 0, kMaxInt));
  ASSIGN_OR_RETURN(j.gpus_per_task, f.Int32("gpus_per_task", 0, 0, kMaxInt));
  ASSIGN_OR_RETURN(j.one_task_per_node, f.Bool("one_task_per_node", false));
  ASSIGN_OR_RETURN(j.gpu_types, f.Strings("gpu_types"));
  if (f.Find("topology_required") != nullptr) {
    ASSIGN_OR_RETURN(j.topology.required, LevelField(f, "topology_required"));
  }
  if (f.Find("topology_preferred") != nullptr) {
    ASSIGN_OR_RETURN(j.topology.preferred, LevelField(f, "topology_preferred"));
  }
  if (const json* groups = f.Find("sub_groups")) {
    if (!groups->is_array()) return Fields::Err(f.At("sub_groups"), "must be an array");
    for (std::size_t i = 0; i < groups->size(); ++i) {
      ASSIGN_OR_RETURN(Fields g,
                       Fields::Of((*groups)[i], fmt::format("{}[{}]", f.At("sub_groups"), i)));
      SubGroupConstraint s;
      ASSIGN_OR_RETURN(s.gpus, g.Int32("gpus", std::nullopt, 1, kMaxInt));
      ASSIGN_OR_RETURN(s.level, LevelField(g, "level"));
      RETURN_IF_ERROR(g.Done());
      j.sub_groups.push_back(s);
    }
  }
  ASSIGN_OR_RETURN(j.priority, f.Int32("priority", 0, std::numeric_limits<int>::min(), kMaxInt));
  ASSIGN_OR_RETURN(j.preemptible, f.Bool("preemptible", GangJob{}.preemptible));
  ASSIGN_OR_RETURN(double grace, f.Number("grace_period_s", GangJob{}.grace_period.value()));
  j.grace_period = Seconds(grace);
  if (const json* e = f.Find("elastic")) {
    ASSIGN_OR_RETURN(Fields g, Fields::Of(*e, f.At("elastic")));
    ASSIGN_OR_RETURN(j.elastic.min_gpus, g.Int32("min_gpus", 0, 0, kMaxInt));
    ASSIGN_OR_RETURN(j.elastic.max_gpus, g.Int32("max_gpus", 0, 0, kMaxInt));
    ASSIGN_OR_RETURN(j.elastic.step_gpus, g.Int32("step_gpus", 0, 0, kMaxInt));
    RETURN_IF_ERROR(g.Done());
  }
  ASSIGN_OR_RETURN(double runtime, f.Number("estimated_runtime_s", 0.0));
  j.estimated_runtime = Seconds(runtime);
  ASSIGN_OR_RETURN(double checkpoint, f.Number("checkpoint_interval_s", 0.0));
  j.checkpoint_interval = Seconds(checkpoint);
  ASSIGN_OR_RETURN(double restart, f.Number("restart_cost_s", 0.0));
  j.restart_cost = Seconds(restart);
  ASSIGN_OR_RETURN(j.max_retries, f.Int32("max_retries", GangJob{}.max_retries, 0, kMaxInt));
  if (f.Find("spread") != nullptr) {
    ASSIGN_OR_RETURN(std::string kind, f.String("spread", std::nullopt));
    for (topo::FailureDomainKind k : {topo::FailureDomainKind::kRack, topo::FailureDomainKind::kPdu,
                                      topo::FailureDomainKind::kRow}) {
      if (topo::FailureDomainKindName(k) == kind) j.spread = k;
    }
    if (!j.spread) return Fields::Err(f.At("spread"), "unknown failure domain '" + kind + "'");
  }
  if (const json* reqs = f.Find("node_requirements")) {
    if (!reqs->is_array()) return Fields::Err(f.At("node_requirements"), "must be an array");
    for (std::size_t i = 0; i < reqs->size(); ++i) {
      ASSIGN_OR_RETURN(Fields g,
                       Fields::Of((*reqs)[i], fmt::format("{}[{}]", f.At("node_requirements"), i)));
      NodeRequirement r;
      ASSIGN_OR_RETURN(r.key, g.String("key", std::nullopt));
      ASSIGN_OR_RETURN(std::string op, g.String("op", std::nullopt));
      bool known = false;
      for (auto o :
           {NodeRequirement::Op::kIn, NodeRequirement::Op::kNotIn, NodeRequirement::Op::kExists,
            NodeRequirement::Op::kGreaterEqual, NodeRequirement::Op::kLessEqual}) {
        if (OpName(o) == op) {
          r.op = o;
          known = true;
        }
      }
      if (!known) return Fields::Err(g.At("op"), "unknown operator '" + op + "'");
      ASSIGN_OR_RETURN(r.values, g.Strings("values"));
      if (g.Find("bound") != nullptr) {
        const json* b = g.Find("bound");
        if (!b->is_number() || !std::isfinite(b->get<double>())) {
          return Fields::Err(g.At("bound"), "must be a finite number");
        }
        r.bound = b->get<double>();
      }
      RETURN_IF_ERROR(g.Done());
      j.node_requirements.push_back(std::move(r));
    }
  }
  ASSIGN_OR_RETURN(j.gpu_milli, f.Int32("gpu_milli", 0, 0, kMaxInt));
  ASSIGN_OR_RETURN(j.mig_profile, f.String("mig_profile", ""));
  ASSIGN_OR_RETURN(j.cpu_milli, f.Int("cpu_milli", 0, 0));
  ASSIGN_OR_RETURN(j.memory_mib, f.Int("memory_mib", 0, 0));
  // Extended resources by name (older records have none): at most kMaxExtendedPerTask, valid
  // names, whole amounts >= 0; in name order.
  if (const json* ext = f.Find("extended")) {
    const std::string at = f.At("extended");
    if (!ext->is_object()) return Fields::Err(at, "must be an object {name: amount}");
    if (ext->size() > kMaxExtendedPerTask) {
      return Fields::Err(at, fmt::format("at most {} resources", kMaxExtendedPerTask));
    }
    for (auto it = ext->begin(); it != ext->end(); ++it) {
      const std::string field = at + "." + it.key();
      if (Status s = topo::CheckExtendedResourceName(it.key()); !s.ok()) {
        return Fields::Err(field, s.message());
      }
      if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
          it->get<std::int64_t>() > topo::kMaxExtendedAmount) {
        return Fields::Err(field, "must be a whole amount >= 0");
      }
      j.extended.push_back({it.key(), it->get<std::int64_t>()});
    }
  }
  if (f.Find("plan_key") != nullptr) {
    ASSIGN_OR_RETURN(std::int64_t key,
                     f.Int("plan_key", std::nullopt, 0, std::numeric_limits<std::uint32_t>::max()));
    j.has_plan = true;
    j.plan_key = static_cast<std::uint32_t>(key);
  }
  ASSIGN_OR_RETURN(j.submit_time, TimeField(f, "submit_time"));
  RETURN_IF_ERROR(f.Done());
  return j;
}

Result<Placement> PlacementFrom(const topo::Cluster& c, const json& v, const std::string& path) {
  if (!v.is_array() || v.empty())
    return Fields::Err(path, "must be a non-empty array of [node, mask]");
  Placement p;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& a = v[i];
    std::string at = fmt::format("{}[{}]", path, i);
    if (!a.is_array() || a.size() != 2 || !a[0].is_string() || !a[1].is_string()) {
      return Fields::Err(at, "must be [\"node\", \"0xMASK\"]");
    }
    Result<topo::NodeId> node = c.FindNode(a[0].get<std::string>());
    if (!node.ok())
      return Fields::Err(at, "node '" + a[0].get<std::string>() + "' is not in the run's cluster");
    const std::string mask_text = a[1].get<std::string>();
    if (mask_text.size() < 3 || mask_text.size() > 18 || mask_text[0] != '0' ||
        (mask_text[1] != 'x' && mask_text[1] != 'X')) {
      return Fields::Err(at, "bad GPU mask '" + mask_text + "'");
    }
    std::uint64_t mask = 0;
    for (std::size_t k = 2; k < mask_text.size(); ++k) {
      char ch = mask_text[k];
      int d = ch >= '0' && ch <= '9'   ? ch - '0'
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
              : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                       : -1;
      if (d < 0) return Fields::Err(at, "bad GPU mask '" + mask_text + "'");
      mask = (mask << 4) | static_cast<std::uint64_t>(d);
    }
    const int gpus = c.node(*node).gpus;
    if (mask == 0 || (gpus < 64 && (mask >> gpus) != 0)) {
      return Fields::Err(at, fmt::format("GPU mask {} does not fit node {} ({} GPUs)", mask_text,
                                         a[0].get<std::string>(), gpus));
    }
    p.nodes.push_back({*node, mask});
  }
  p.span = SpanOf(c, p.nodes);
  return p;
}

Result<std::vector<topo::NodeId>> NodeNamesFrom(const topo::Cluster& c, Fields& f,
                                                std::string_view key) {
  ASSIGN_OR_RETURN(std::vector<std::string> names, f.Strings(key));
  std::vector<topo::NodeId> out;
  for (const std::string& n : names) {
    Result<topo::NodeId> id = c.FindNode(n);
    if (!id.ok()) return Fields::Err(f.At(key), "node '" + n + "' is not in the run's cluster");
    out.push_back(*id);
  }
  return out;
}

Result<JobId> JobIdField(Fields& f, std::string_view key) {
  ASSIGN_OR_RETURN(std::int64_t id, f.Int(key, std::nullopt, 1));
  return JobId(static_cast<std::uint64_t>(id));
}

Result<Event> EventFrom(const topo::Cluster& c, const json& v, const std::string& path) {
  ASSIGN_OR_RETURN(Fields f, Fields::Of(v, path));
  ASSIGN_OR_RETURN(std::string kind, f.String("kind", std::nullopt));
  Event e;
  if (kind == "submit" || kind == "adopt") {
    ASSIGN_OR_RETURN(const json* job, f.Required("job"));
    ASSIGN_OR_RETURN(GangJob j, JobFrom(*job, f.At("job")));
    if (kind == "submit") {
      e = Event::Submit(std::move(j));
    } else {
      ASSIGN_OR_RETURN(const json* nodes, f.Required("nodes"));
      ASSIGN_OR_RETURN(Placement p, PlacementFrom(c, *nodes, f.At("nodes")));
      ASSIGN_OR_RETURN(TimePoint start, TimeField(f, "start"));
      e = Event::Adopt(std::move(j), std::move(p), start);
    }
    ASSIGN_OR_RETURN(e.bad_nodes, NodeNamesFrom(c, f, "bad_nodes"));
  } else if (kind == "cancel" || kind == "finish" || kind == "checkpoint") {
    ASSIGN_OR_RETURN(JobId id, JobIdField(f, "job_id"));
    e = kind == "cancel"   ? Event::Cancel(id)
        : kind == "finish" ? Event::Finish(id)
                           : Event::Checkpoint(id);
  } else if (kind == "node") {
    ASSIGN_OR_RETURN(std::string name, f.String("node", std::nullopt));
    Result<topo::NodeId> node = c.FindNode(name);
    if (!node.ok())
      return Fields::Err(f.At("node"), "node '" + name + "' is not in the run's cluster");
    ASSIGN_OR_RETURN(std::string health, f.String("health", std::nullopt));
    std::optional<topo::NodeHealth> h;
    for (topo::NodeHealth x : {topo::NodeHealth::kHealthy, topo::NodeHealth::kSuspect,
                               topo::NodeHealth::kDraining, topo::NodeHealth::kDown}) {
      if (topo::NodeHealthName(x) == health) h = x;
    }
    if (!h) return Fields::Err(f.At("health"), "unknown condition '" + health + "'");
    e = Event::NodeHealth(*node, *h);
  } else {
    return Fields::Err(f.At("kind"), "unknown event kind '" + kind + "'");
  }
  RETURN_IF_ERROR(f.Done());
  return e;
}

Result<std::vector<Placed>> PlacedFrom(const topo::Cluster& c, Fields& f, std::string_view key) {
  std::vector<Placed> out;
  const json* v = f.Find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) return Fields::Err(f.At(key), "must be an array");
  for (std::size_t i = 0; i < v->size(); ++i) {
    ASSIGN_OR_RETURN(Fields g, Fields::Of((*v)[i], fmt::format("{}[{}]", f.At(key), i)));
    Placed p;
    ASSIGN_OR_RETURN(p.job, JobIdField(g, "job"));
    ASSIGN_OR_RETURN(const json* nodes, g.Required("nodes"));
    ASSIGN_OR_RETURN(p.placement, PlacementFrom(c, *nodes, g.At("nodes")));
    RETURN_IF_ERROR(g.Done());
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<JobId>> IdsFrom(Fields& f, std::string_view key) {
  std::vector<JobId> out;
  const json* v = f.Find(key);
  if (v == nullptr) return out;
  if (!v->is_array()) return Fields::Err(f.At(key), "must be an array of job ids");
  for (const json& x : *v) {
    if (!x.is_number_unsigned() || x.get<std::uint64_t>() == 0) {
      return Fields::Err(f.At(key), "must be an array of job ids");
    }
    out.push_back(JobId(x.get<std::uint64_t>()));
  }
  return out;
}

}  // namespace

std::string HeaderLine() { return json{{"format", kFormat}, {"version", kVersion}}.dump(); }

std::string EncodeRun(const Run& run) {
  json o = {{"type", "run"},
            {"run", run.run},
            {"started", run.started.since_epoch.value()},
            {"cluster", run.cluster_yaml},
            {"scheduler", run.scheduler_yaml}};
  return o.dump();
}

void KeepDecisions(const Decisions& d, Cycle& out) {
  for (const Bind& b : d.binds) out.binds.push_back({b.job, b.placement});
  for (const Replacement& r : d.replacements) out.replacements.push_back({r.job, r.placement});
  for (const Resize& r : d.resizes) out.resizes.push_back({r.job, r.placement});
  for (const Preemption& p : d.preemptions)
    out.preemptions.push_back({p.victim, p.for_job, p.release_at});
  for (const Rejection& r : d.rejections) out.rejections.push_back(r.job);
  for (const Requeue& r : d.requeues) out.requeues.push_back(r.job);
}

std::string EncodeCycle(const topo::Cluster& cluster, std::int64_t run, std::int64_t cycle,
                        TimePoint now, std::span<const Event> events, const Decisions& decisions) {
  Cycle kept;
  KeepDecisions(decisions, kept);
  json o = {{"type", "cycle"}, {"run", run}, {"cycle", cycle}, {"now", now.since_epoch.value()}};
  json ev = json::array();
  for (const Event& e : events) ev.push_back(EventJson(cluster, e));
  o["events"] = std::move(ev);
  if (!kept.binds.empty()) o["placed"] = PlacedJson(cluster, kept.binds);
  if (!kept.replacements.empty()) o["replaced"] = PlacedJson(cluster, kept.replacements);
  if (!kept.resizes.empty()) o["resized"] = PlacedJson(cluster, kept.resizes);
  if (!kept.preemptions.empty()) {
    json p = json::array();
    for (const Preempted& x : kept.preemptions) {
      p.push_back(
          json::array({x.victim.value(), x.for_job.value(), x.release_at.since_epoch.value()}));
    }
    o["preempted"] = std::move(p);
  }
  if (!kept.rejections.empty()) o["rejected"] = IdsJson(kept.rejections);
  if (!kept.requeues.empty()) o["requeued"] = IdsJson(kept.requeues);
  return o.dump();
}

std::string PlacementText(const topo::Cluster& cluster, const Placement& p) {
  std::string out;
  for (const NodeAlloc& a : p.nodes) {
    if (!out.empty()) out += ",";
    out += fmt::format("{}:{:#x}", cluster.node(a.node).name, a.mask);
  }
  return out.empty() ? "(none)" : out;
}

Status Reader::Error(std::string_view field, std::string_view why) const {
  return InvalidArgumentError(fmt::format("{}:{}: field '{}': {}", name_, line_, field, why));
}

Result<std::optional<Reader::Item>> Reader::Next() {
  std::string line;
  while (true) {
    line.clear();
    // Bounded getline: a longer line is an error before it is held in memory whole.
    bool any = false;
    for (int ch = in_.get(); ch != std::char_traits<char>::eof(); ch = in_.get()) {
      any = true;
      if (ch == '\n') break;
      if (line.size() >= kMaxLineBytes) {
        ++line_;
        return InvalidArgumentError(
            fmt::format("{}:{}: line longer than {} bytes", name_, line_, kMaxLineBytes));
      }
      line.push_back(static_cast<char>(ch));
    }
    if (!any) {
      if (!header_seen_) return InvalidArgumentError(name_ + ": empty file, not a daemon history");
      return std::optional<Item>();
    }
    ++line_;
    if (line.empty()) continue;
    Result<json> parsed =
        ParseJsonBounded(line, {.max_depth = kMaxDepth, .max_bytes = kMaxLineBytes});
    if (!parsed.ok()) {
      return InvalidArgumentError(
          fmt::format("{}:{}: {}", name_, line_, parsed.status().message()));
    }
    auto fail = [&](const Status& s) {
      return InvalidArgumentError(fmt::format("{}:{}: {}", name_, line_, s.message()));
    };
    Result<Fields> top = Fields::Of(*parsed, "");
    if (!top.ok()) return fail(top.status());
    Fields& f = *top;
    if (!header_seen_) {
      Result<std::string> format = f.String("format", std::nullopt);
      if (!format.ok() || *format != kFormat) {
        return Error("format", fmt::format("the first line must name the format \"{}\"", kFormat));
      }
      Result<std::int64_t> version = f.Int("version", std::nullopt);
      if (!version.ok()) return fail(version.status());
      if (*version != kVersion) {
        return Error("version", fmt::format("version {} is not one this build reads ({})", *version,
                                            kVersion));
      }
      if (Status s = f.Done(); !s.ok()) return fail(s);
      header_seen_ = true;
      continue;
    }
    Result<std::string> type = f.String("type", std::nullopt);
    if (!type.ok()) return fail(type.status());
    if (*type == "run") {
      Run r;
      Result<std::int64_t> run = f.Int("run", std::nullopt, 1);
      if (!run.ok()) return fail(run.status());
      if (*run <= run_) return Error("run", fmt::format("run {} follows run {}", *run, run_));
      r.run = *run;
      Result<TimePoint> started = TimeField(f, "started");
      Result<std::string> cluster = f.String("cluster", std::nullopt);
      Result<std::string> scheduler = f.String("scheduler", "");
      for (const Status& s : {started.status(), cluster.status(), scheduler.status()}) {
        if (!s.ok()) return fail(s);
      }
      if (Status s = f.Done(); !s.ok()) return fail(s);
      r.started = *started;
      r.cluster_yaml = *std::move(cluster);
      r.scheduler_yaml = *std::move(scheduler);
      Result<topo::Cluster> c =
          topo::LoadClusterYaml(r.cluster_yaml, fmt::format("{}:{}: cluster", name_, line_));
      if (!c.ok()) return Error("cluster", c.status().message());
      cluster_ = std::make_shared<const topo::Cluster>(std::move(*c));
      run_ = r.run;
      cycle_ = 0;
      last_now_ = TimePoint{};
      return std::optional<Item>(RunStart{std::move(r), cluster_, line_});
    }
    if (*type != "cycle")
      return Error("type", "must be \"run\" or \"cycle\", got \"" + *type + "\"");
    if (cluster_ == nullptr) {  // its run line was cut by retention
      ++skipped_;
      continue;
    }
    Cycle c;
    Result<std::int64_t> run = f.Int("run", std::nullopt, 1);
    if (!run.ok()) return fail(run.status());
    if (*run != run_) return Error("run", fmt::format("cycle of run {} inside run {}", *run, run_));
    c.run = *run;
    Result<std::int64_t> cycle = f.Int("cycle", std::nullopt, 1);
    if (!cycle.ok()) return fail(cycle.status());
    if (*cycle != cycle_ + 1) {
      return Error("cycle", fmt::format("cycle {} follows cycle {}: the history is missing cycles",
                                        *cycle, cycle_));
    }
    c.cycle = *cycle;
    Result<TimePoint> now = TimeField(f, "now");
    if (!now.ok()) return fail(now.status());
    if (*now < last_now_) return Error("now", "goes backwards");
    c.now = *now;
    Result<const json*> events = f.Required("events");
    if (!events.ok()) return fail(events.status());
    if (!(*events)->is_array()) return Error("events", "must be an array");
    for (std::size_t i = 0; i < (*events)->size(); ++i) {
      Result<Event> e = EventFrom(*cluster_, (**events)[i], fmt::format("events[{}]", i));
      if (!e.ok()) return fail(e.status());
      c.events.push_back(*std::move(e));
    }
    Result<std::vector<Placed>> binds = PlacedFrom(*cluster_, f, "placed");
    if (!binds.ok()) return fail(binds.status());
    c.binds = *std::move(binds);
    Result<std::vector<Placed>> replaced = PlacedFrom(*cluster_, f, "replaced");
    if (!replaced.ok()) return fail(replaced.status());
    c.replacements = *std::move(replaced);
    Result<std::vector<Placed>> resized = PlacedFrom(*cluster_, f, "resized");
    if (!resized.ok()) return fail(resized.status());
    c.resizes = *std::move(resized);
    if (const json* p = f.Find("preempted")) {
      if (!p->is_array())
        return Error("preempted", "must be an array of [victim, for_job, release_at]");
      for (const json& x : *p) {
        if (!x.is_array() || x.size() != 3 || !x[0].is_number_unsigned() ||
            !x[1].is_number_unsigned() || !x[2].is_number() || !std::isfinite(x[2].get<double>()) ||
            x[2].get<double>() < 0) {
          return Error("preempted", "must be an array of [victim, for_job, release_at]");
        }
        c.preemptions.push_back({JobId(x[0].get<std::uint64_t>()), JobId(x[1].get<std::uint64_t>()),
                                 TimePoint{Seconds(x[2].get<double>())}});
      }
    }
    Result<std::vector<JobId>> rejected = IdsFrom(f, "rejected");
    if (!rejected.ok()) return fail(rejected.status());
    c.rejections = *std::move(rejected);
    Result<std::vector<JobId>> requeued = IdsFrom(f, "requeued");
    if (!requeued.ok()) return fail(requeued.status());
    c.requeues = *std::move(requeued);
    if (Status s = f.Done(); !s.ok()) return fail(s);
    cycle_ = c.cycle;
    last_now_ = c.now;
    return std::optional<Item>(CycleRead{std::move(c), line_});
  }
}

}  // namespace baton::sched::history
