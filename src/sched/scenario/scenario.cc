#include "sched/scenario/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <map>
#include <sstream>

#include "core/bounded_input.h"
#include "core/strings.h"
#include "sched/framework/scheduler.h"
#include "topology/builders/fabrics.h"

namespace baton::sched {
namespace {

using topo::Level;

std::string Str(const YAML::Node& n) { return n.as<std::string>(); }

Result<double> Num(const YAML::Node& n, std::string_view field) {
  auto v = ParseDouble(Str(n));
  if (!v) return InvalidArgumentError(fmt::format("field '{}': not a number", field));
  return *v;
}

Result<topo::Cluster> BuildTopology(const YAML::Node& t) {
  if (!t) return InvalidArgumentError("missing field 'topology'");
  if (t["preset"]) return topo::BuildPreset(Str(t["preset"]));
  const YAML::Node f = t["fat_tree"];
  if (!f) return InvalidArgumentError("field 'topology': expected 'preset' or 'fat_tree'");
  topo::FatTreeParams p;
  p.name = "scenario";
  auto get = [&](const char* key, int def) {
    return f[key] ? static_cast<int>(ParseInt64(Str(f[key])).value_or(-1)) : def;
  };
  p.layout.nodes = get("nodes", 8);
  p.layout.gpus_per_node = get("gpus_per_node", 8);
  p.layout.nodes_per_nvlink_domain = get("nodes_per_nvlink_domain", 1);
  p.layout.nodes_per_rack = get("nodes_per_rack", 2);
  p.nodes_per_leaf = get("nodes_per_leaf", 2);
  p.leaf_radix = std::max(p.nodes_per_leaf, 1);
  p.leaves_per_spine = get("leaves_per_spine", 2);
  p.tiers = get("tiers", 3);
  if (f["gpu"]) p.layout.gpu = Str(f["gpu"]);
  if (f["extended"]) {  // {name: amount} on the first `extended_nodes` nodes (default: all)
    for (const auto& kv : f["extended"]) {
      auto amount = ParseInt64(Str(kv.second));
      if (!amount) return InvalidArgumentError("field 'topology.fat_tree.extended': not a number");
      p.layout.extended.push_back({Str(kv.first), *amount});
    }
    p.layout.extended_nodes = get("extended_nodes", -1);
  }
  return topo::BuildFatTree(p);
}

class Runner {
 public:
  explicit Runner(std::string source) : source_(std::move(source)) {}

  Status Run(const YAML::Node& root) {
    ASSIGN_OR_RETURN(topo::Cluster cluster, BuildTopology(root["topology"]));
    SchedulerConfig config;
    if (root["config"]) {
      YAML::Emitter e;
      e << root["config"];
      ASSIGN_OR_RETURN(config, ParseSchedulerConfig(e.c_str()));
    }
    ASSIGN_OR_RETURN(sched_, Scheduler::Create(std::move(cluster), std::move(config)));
    const YAML::Node steps = root["steps"];
    if (!steps || !steps.IsSequence()) return InvalidArgumentError("missing list 'steps'");
    for (std::size_t i = 0; i < steps.size(); ++i) {
      Status s = Step(steps[i]);
      if (!s.ok()) return s.WithPrefix(fmt::format("steps[{}]", i));
    }
    if (!failures_.empty()) return FailedPreconditionError(failures_);
    return Status::Ok();
  }

 private:
  JobId IdOf(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, JobId(ids_.size() + 1));
    if (inserted) names_[it->second] = name;
    return it->second;
  }
  std::string NameOf(JobId id) {
    auto it = names_.find(id);
    return it == names_.end() ? fmt::format("#{}", id.value()) : it->second;
  }
  topo::NodeId Node(const std::string& name) {
    auto n = sched_->state().cluster().FindNode(name);
    return n.ok() ? *n : topo::NodeId();
  }

  Result<GangJob> ParseJob(const YAML::Node& j) {
    GangJob job;
    if (!j["name"]) return InvalidArgumentError("job without 'name'");
    job.name = Str(j["name"]);
    job.id = IdOf(job.name);
    for (const auto& kv : j) {
      const std::string key = Str(kv.first);
      const YAML::Node& v = kv.second;
      const std::string field = "job " + job.name + "." + key;
      if (key == "name" || key == "nodes" || key == "start") continue;
      if (key == "gpus") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.gpus = static_cast<int>(x);
      } else if (key == "gpus_per_task") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.gpus_per_task = static_cast<int>(x);
      } else if (key == "gpu_types") {
        if (v.IsSequence()) {
          for (const auto& t : v) job.gpu_types.push_back(Str(t));
        } else {
          job.gpu_types.push_back(Str(v));
        }
      } else if (key == "required" || key == "preferred") {
        ASSIGN_OR_RETURN(Level l, topo::ParseLevel(Str(v)));
        (key == "required" ? job.topology.required : job.topology.preferred) = l;
      } else if (key == "sub_groups") {
        for (const auto& sg : v) {
          ASSIGN_OR_RETURN(double g, Num(sg["gpus"], field));
          ASSIGN_OR_RETURN(Level l, topo::ParseLevel(Str(sg["level"])));
          job.sub_groups.push_back({static_cast<int>(g), l});
        }
      } else if (key == "priority") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.priority = static_cast<int>(x);
      } else if (key == "tenant") {
        job.tenant = Str(v);
      } else if (key == "preemptible") {
        job.preemptible = v.as<bool>();
      } else if (key == "grace") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.grace_period = Seconds(x);
      } else if (key == "runtime") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.estimated_runtime = Seconds(x);
      } else if (key == "restart_cost") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.restart_cost = Seconds(x);
      } else if (key == "max_retries") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.max_retries = static_cast<int>(x);
      } else if (key == "submit") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.submit_time = TimePoint{Seconds(x)};
      } else if (key == "spread") {
        const std::string k = Str(v);
        if (k == "rack")
          job.spread = topo::FailureDomainKind::kRack;
        else if (k == "pdu")
          job.spread = topo::FailureDomainKind::kPdu;
        else if (k == "row")
          job.spread = topo::FailureDomainKind::kRow;
        else
          return InvalidArgumentError(fmt::format("field '{}': unknown failure domain", field));
      } else if (key == "gpu_milli") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        job.gpu_milli = static_cast<int>(x);
      } else if (key == "cpu_milli" || key == "memory_mib") {
        ASSIGN_OR_RETURN(double x, Num(v, field));
        (key == "cpu_milli" ? job.cpu_milli : job.memory_mib) = static_cast<std::int64_t>(x);
      } else if (key == "extended") {
        for (const auto& r : v) {
          ASSIGN_OR_RETURN(double x, Num(r.second, field));
          job.extended.push_back({Str(r.first), static_cast<std::int64_t>(x)});
        }
      } else if (key == "mig") {
        job.mig_profile = Str(v);
      } else if (key == "elastic") {
        job.elastic.min_gpus = static_cast<int>(ParseInt64(Str(v["min"])).value_or(-1));
        job.elastic.max_gpus = static_cast<int>(ParseInt64(Str(v["max"])).value_or(-1));
        job.elastic.step_gpus = static_cast<int>(ParseInt64(Str(v["step"])).value_or(-1));
      } else {
        return InvalidArgumentError(fmt::format("unknown field '{}'", field));
      }
    }
    return job;
  }

  // Running jobs: `nodes` lists node names; each gets gpus / len(nodes) of its lowest free GPUs.
  Result<Event> ParseRunning(const YAML::Node& j, TimePoint now) {
    ASSIGN_OR_RETURN(GangJob job, ParseJob(j));
    Placement p;
    const YAML::Node nodes = j["nodes"];
    if (!nodes || !nodes.IsSequence() || nodes.size() == 0) {
      return InvalidArgumentError("running job " + job.name + ": missing 'nodes'");
    }
    const int per = job.gpus / static_cast<int>(nodes.size());
    for (const auto& n : nodes) {
      topo::NodeId id = Node(Str(n));
      if (!id.valid()) return InvalidArgumentError("running job " + job.name + ": unknown node");
      const auto& node = sched_->state().cluster().node(id);
      std::uint64_t used = node.allocated_mask;
      for (const auto& a : p.nodes) used |= a.node == id ? a.mask : 0;
      std::uint64_t mask = 0;
      for (int i = 0, k = 0; i < node.gpus && k < per; ++i) {
        if (!((used >> i) & 1)) {
          mask |= 1ULL << i;
          ++k;
        }
      }
      p.nodes.push_back({id, mask});
    }
    TimePoint start = now;
    if (j["start"]) {
      ASSIGN_OR_RETURN(double s, Num(j["start"], "start"));
      start = TimePoint{Seconds(s)};
    }
    return Event::Adopt(std::move(job), std::move(p), start);
  }

  Status Step(const YAML::Node& step) {
    TimePoint now;
    if (step["at"]) {
      ASSIGN_OR_RETURN(double t, Num(step["at"], "at"));
      now = TimePoint{Seconds(t)};
    }
    std::vector<Event> events;
    for (const auto& j : step["running"]) {
      ASSIGN_OR_RETURN(Event e, ParseRunning(j, now));
      events.push_back(std::move(e));
    }
    for (const auto& j : step["submit"]) {
      ASSIGN_OR_RETURN(GangJob job, ParseJob(j));
      events.push_back(Event::Submit(std::move(job)));
    }
    for (const auto& n : step["finish"]) events.push_back(Event::Finish(IdOf(Str(n))));
    for (const auto& n : step["checkpoint"]) events.push_back(Event::Checkpoint(IdOf(Str(n))));
    for (const auto& n : step["cancel"]) events.push_back(Event::Cancel(IdOf(Str(n))));
    if (const YAML::Node h = step["health"]) {
      for (const auto& kv : h) {
        topo::NodeId id = Node(Str(kv.first));
        if (!id.valid()) return InvalidArgumentError("health: unknown node " + Str(kv.first));
        const std::string v = Str(kv.second);
        topo::NodeHealth nh = topo::NodeHealth::kHealthy;
        if (v == "suspect")
          nh = topo::NodeHealth::kSuspect;
        else if (v == "draining")
          nh = topo::NodeHealth::kDraining;
        else if (v == "down")
          nh = topo::NodeHealth::kDown;
        else if (v != "healthy")
          return InvalidArgumentError("health: unknown condition " + v);
        events.push_back(Event::NodeHealth(id, nh));
      }
    }
    Decisions d = sched_->RunCycle({now, events});
    Check(step["expect"], d);
    return Status::Ok();
  }

  void Fail(const std::string& msg) { failures_ += (failures_.empty() ? "" : "\n") + msg; }

  void Check(const YAML::Node& expect, const Decisions& d) {
    if (!expect) return;
    const auto& c = sched_->state().cluster();
    std::map<std::string, std::vector<std::string>> binds;
    for (const auto& b : d.binds) {
      auto& v = binds[NameOf(b.job)];
      for (const auto& a : b.placement.nodes) v.push_back(c.node(a.node).name);
    }
    std::map<std::string, std::string> rejected, waiting, requeued;
    for (const auto& r : d.rejections) rejected[NameOf(r.job)] = r.plugin + ": " + r.reason;
    for (const auto& w : d.waiting) waiting[NameOf(w.job)] = w.status.ToString();
    for (const auto& r : d.requeues) requeued[NameOf(r.job)] = r.reason;
    std::map<std::string, std::string> preempted;
    for (const auto& p : d.preemptions) preempted[NameOf(p.victim)] = NameOf(p.for_job);
    std::map<std::string, std::string> replaced;
    for (const auto& r : d.replacements) replaced[NameOf(r.job)] = c.node(r.new_node).name;
    auto show = [](const std::map<std::string, std::vector<std::string>>& m) {
      std::string s;
      for (const auto& [k, v] : m) s += fmt::format("{}=[{}] ", k, fmt::join(v, ","));
      return s;
    };
    if (const YAML::Node b = expect["binds"]) {
      for (const auto& kv : b) {
        const std::string job = Str(kv.first);
        std::vector<std::string> want;
        for (const auto& n : kv.second) want.push_back(Str(n));
        auto it = binds.find(job);
        if (it == binds.end()) {
          Fail(fmt::format("{}: expected {} bound to [{}], not bound (binds: {}; waiting: {})",
                           source_, job, fmt::join(want, ","), show(binds),
                           waiting.count(job) ? waiting[job] : "-"));
        } else if (it->second != want) {
          Fail(fmt::format("{}: expected {} on [{}], got [{}]", source_, job, fmt::join(want, ","),
                           fmt::join(it->second, ",")));
        }
      }
    }
    if (expect["bound"]) {
      for (const auto& n : expect["bound"]) {
        if (!binds.count(Str(n))) {
          Fail(fmt::format("{}: expected {} bound (waiting: {})", source_, Str(n),
                           waiting.count(Str(n)) ? waiting[Str(n)] : "-"));
        }
      }
    }
    if (expect["not_bound"]) {
      for (const auto& n : expect["not_bound"]) {
        if (binds.count(Str(n))) {
          Fail(fmt::format("{}: expected {} not bound, got [{}]", source_, Str(n),
                           fmt::join(binds[Str(n)], ",")));
        }
      }
    }
    if (expect["no_binds"] && expect["no_binds"].as<bool>() && !binds.empty()) {
      Fail(fmt::format("{}: expected no binds, got {}", source_, show(binds)));
    }
    auto check_map = [&](const char* key, std::map<std::string, std::string>& got) {
      const YAML::Node m = expect[key];
      if (!m) return;
      if (m.IsSequence()) {
        for (const auto& n : m) {
          if (!got.count(Str(n))) Fail(fmt::format("{}: expected {} in {}", source_, Str(n), key));
        }
        return;
      }
      for (const auto& kv : m) {
        const std::string job = Str(kv.first);
        const std::string want = Str(kv.second);
        auto it = got.find(job);
        if (it == got.end()) {
          Fail(fmt::format("{}: expected {} in {} ('{}')", source_, job, key, want));
        } else if (it->second.find(want) == std::string::npos) {
          Fail(
              fmt::format("{}: {} {}: expected '{}' in '{}'", source_, job, key, want, it->second));
        }
      }
    };
    check_map("rejected", rejected);
    check_map("waiting", waiting);
    check_map("requeued", requeued);
    check_map("preempted", preempted);
    check_map("replaced", replaced);
    if (const YAML::Node r = expect["resized"]) {  // job: GPUs it holds after the resize
      std::map<std::string, int> resized;
      for (const auto& z : d.resizes) resized[NameOf(z.job)] = z.placement.gpus();
      for (const auto& kv : r) {
        const std::string job = Str(kv.first);
        auto it = resized.find(job);
        if (it == resized.end()) {
          Fail(fmt::format("{}: expected {} resized to {} GPUs, not resized", source_, job,
                           Str(kv.second)));
        } else if (std::to_string(it->second) != Str(kv.second)) {
          Fail(fmt::format("{}: {} resized to {} GPUs, expected {}", source_, job, it->second,
                           Str(kv.second)));
        }
      }
    }
    if (expect["no_resizes"] && expect["no_resizes"].as<bool>() && !d.resizes.empty()) {
      Fail(fmt::format("{}: expected no resizes, got {}", source_, NameOf(d.resizes[0].job)));
    }
    if (expect["not_preempted"]) {
      for (const auto& n : expect["not_preempted"]) {
        if (preempted.count(Str(n))) Fail(fmt::format("{}: {} was preempted", source_, Str(n)));
      }
    }
    if (expect["no_preemptions"] && expect["no_preemptions"].as<bool>() && !preempted.empty()) {
      Fail(fmt::format("{}: expected no preemptions, got {}", source_, preempted.begin()->first));
    }
  }

  std::string source_;
  std::unique_ptr<Scheduler> sched_;
  std::map<std::string, JobId> ids_;
  std::map<JobId, std::string> names_;
  std::string failures_;
};

}  // namespace

Status RunScenario(std::string_view yaml, std::string_view source) {
  ASSIGN_OR_RETURN(YAML::Node root, LoadYamlBounded(yaml, source));
  return ReadYaml(source, [&] {
    Runner r{std::string(source)};
    return r.Run(root);
  });
}

Status RunScenarioFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, MiB(1), "scenario file"));
  return RunScenario(text, path);
}

}  // namespace baton::sched
