// The client commands: `baton submit | jobs | queue | job | cancel | nodes | drain | resume | top
// | completion`, a squeue/sbatch-like view of a running `baton serve` over its HTTP API. Each
// prints a table by default and the API's JSON with --json, and exits with the codes of
// cli/client/api_client.h.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/client/api_client.h"
#include "cli/commands.h"
#include "core/bounded_input.h"
#include "core/strings.h"
#include "topology/io/hostlist.h"

namespace baton::cli {
namespace {

using json = nlohmann::json;

// A job spec file is at most the daemon's body limit.
constexpr Bytes kMaxSpecFile = MiB(1);

struct Common {
  EndpointFlags endpoint;
  bool json_output = false;
};

void AddCommon(CLI::App* cmd, Common& c) {
  cmd->add_option("--url", c.endpoint.url,
                  "Daemon URL (default $BATON_URL, the config file, "
                  "then http://127.0.0.1:8080)");
  cmd->add_option("--token", c.endpoint.token, "Bearer token (default $BATON_TOKEN or the config)");
  cmd->add_option("--config", c.endpoint.config,
                  "Client config YAML (default $XDG_CONFIG_HOME/baton/config.yaml)");
  cmd->add_flag("--json", c.json_output, "Print the API's JSON instead of a table");
}

// One line on stderr, and the exit code for it.
int Fail(const Status& s) {
  std::cerr << "baton: " << s.message() << "\n";
  return ExitCodeFor(s);
}

int FailBadInput(const Status& s) {
  std::cerr << "baton: " << s.message() << "\n";
  return kExitBadInput;
}

// Runs `body` with a client for the resolved endpoint; a bad config is bad input.
template <typename Body>
int WithClient(const Common& c, Body body) {
  Result<Endpoint> e = ResolveEndpoint(c.endpoint);
  if (!e.ok()) return FailBadInput(e.status());
  ApiClient client(*e);
  return body(client);
}

std::string Str(const json& j, const char* key, std::string fallback = "-") {
  if (!j.is_object() || !j.contains(key)) return fallback;
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>().empty() ? fallback : v.get<std::string>();
  if (v.is_null()) return fallback;
  return v.dump();
}

// A left-aligned text table whose columns fit their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void Add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void Print(std::ostream& out) const {
    std::vector<std::size_t> width(rows_[0].size(), 0);
    for (const auto& r : rows_) {
      for (std::size_t i = 0; i < r.size() && i < width.size(); ++i) {
        width[i] = std::max(width[i], r[i].size());
      }
    }
    for (const auto& r : rows_) {
      std::string line;
      for (std::size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

std::string NodesOf(const json& job) {
  if (!job.contains("placement")) return "-";
  std::vector<std::string> names;
  for (const json& n : job["placement"]["nodes"]) names.push_back(Str(n, "node"));
  if (names.empty()) return "-";
  std::string out = names[0];
  if (names.size() > 1) out += fmt::format(" +{}", names.size() - 1);
  return out;
}

std::string LevelOf(const json& job) {
  if (job.contains("placement")) return Str(job["placement"], "level");
  const json spec = job.value("spec", json::object());
  if (spec.is_object() && spec.contains("topology") && spec["topology"].is_object()) {
    std::string req = Str(spec["topology"], "required", "");
    if (!req.empty()) return "<=" + req;
  }
  return "-";
}

// A pending job's estimated start: the daemon's RFC 3339 time, "unknown" when the scheduler
// forecast the job but cannot date it (a job holding the GPUs it needs has no runtime estimate).
std::string StartOf(const json& job) {
  if (job.contains("estimated_start")) return Str(job, "estimated_start");
  return job.contains("queue_position") ? "unknown" : "-";
}

std::string GpusOf(const json& job) {
  const json spec = job.value("spec", json::object());
  return spec.is_object() && spec.contains("gpus") ? spec["gpus"].dump() : "-";
}

// Pages through GET /api/v1/jobs for one state (or all), up to `max` jobs.
Result<std::vector<json>> ListJobs(const ApiClient& client, const std::string& state,
                                   const std::string& tenant, std::size_t max) {
  std::vector<json> out;
  std::string cursor;
  while (out.size() < max) {
    std::string path = "/api/v1/jobs?limit=" + std::to_string(std::min<std::size_t>(1000, max));
    if (!state.empty()) path += "&state=" + state;
    if (!tenant.empty()) path += "&tenant=" + tenant;
    if (!cursor.empty()) path += "&cursor=" + cursor;
    ASSIGN_OR_RETURN(json page, client.Get(path));
    if (!page.contains("jobs") || !page["jobs"].is_array()) {
      return InternalError("the daemon's job list has no 'jobs' array");
    }
    for (json& j : page["jobs"]) {
      if (out.size() < max) out.push_back(std::move(j));
    }
    if (!page.contains("next_cursor") || !page["next_cursor"].is_string()) break;
    cursor = page["next_cursor"].get<std::string>();
  }
  return out;
}

// --gpus N -> {gpus: N}; --gpus MIN:MAX -> {elastic: {min_gpus, max_gpus[, step_gpus]}} (the job
// starts at MIN). The daemon checks the range itself; this only refuses what is not two counts.
Result<json> GpusFlag(std::string_view text, std::int64_t step) {
  const auto colon = text.find(':');
  auto count = [&](std::string_view part) -> Result<std::int64_t> {
    std::optional<std::int64_t> n = ParseInt64(Trim(part));
    if (!n || *n <= 0) {
      return InvalidArgumentError(
          fmt::format("--gpus '{}': expected a GPU count N or a range MIN:MAX of counts >= 1",
                      Printable(text)));
    }
    return *n;
  };
  if (colon == std::string_view::npos) {
    if (step != 0) return InvalidArgumentError("--gpu-step: only with --gpus MIN:MAX");
    ASSIGN_OR_RETURN(std::int64_t n, count(text));
    return json{{"gpus", n}};
  }
  ASSIGN_OR_RETURN(std::int64_t min, count(text.substr(0, colon)));
  ASSIGN_OR_RETURN(std::int64_t max, count(text.substr(colon + 1)));
  json elastic = {{"min_gpus", min}, {"max_gpus", max}};
  if (step < 0) return InvalidArgumentError("--gpu-step: expected a GPU count >= 1");
  if (step > 0) elastic["step_gpus"] = step;
  return json{{"elastic", std::move(elastic)}};
}

void RegisterSubmit(CLI::App& app, int& exit_code) {
  struct Options {
    Common common;
    std::vector<std::string> args;
    std::string name, gpu_type, tenant, level, prefer_level, plan_model, idempotency_key;
    std::string gpus;  // N, or MIN:MAX for an elastic job
    std::int64_t gpu_step = 0;
    int gpus_per_node = 0;
    std::optional<int> priority;
    double runtime_s = 0;
    bool no_preempt = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "submit",
      "Submit a job: `baton submit job.yaml` (a job spec file, or - for stdin), or sbatch-like "
      "flags with the command after --: `baton submit --name x --gpus 16 -- python train.py`");
  AddCommon(cmd, o->common);
  cmd->add_option("args", o->args, "A job spec file (YAML or JSON), or the command to run");
  cmd->add_option("--name,-J", o->name, "Job name");
  cmd->add_option("--gpus,-G", o->gpus,
                  "GPUs for the whole job: N, or MIN:MAX for an elastic job (starts at MIN, grows "
                  "toward MAX into idle GPUs, shrinks instead of being preempted)");
  cmd->add_option("--gpu-step", o->gpu_step,
                  "With --gpus MIN:MAX: the data-parallel unit every size is a multiple of "
                  "(default: 1 on one node, else the GPUs per node)");
  cmd->add_option("--gpus-per-node", o->gpus_per_node, "GPUs on each node (divides --gpus)");
  cmd->add_option("--gpu-type", o->gpu_type, "GPU model, e.g. H100-SXM");
  cmd->add_option("--tenant", o->tenant, "Tenant (admins only; default: the token's tenant)");
  cmd->add_option("--priority", o->priority, "Priority within the tenant's allowed range");
  cmd->add_option("--level", o->level, "Topology level the gang must fit in (node, leaf, ...)");
  cmd->add_option("--prefer-level", o->prefer_level, "Topology level the gang should fit in");
  cmd->add_option("--plan", o->plan_model, "Model to plan for (the planner's best plan)");
  cmd->add_option("--time", o->runtime_s, "Estimated run time in seconds (for backfill)");
  cmd->add_flag("--no-preempt", o->no_preempt, "The job may not be preempted");
  cmd->add_option("--idempotency-key", o->idempotency_key,
                  "Key that makes a retried submission return the same job (default: a "
                  "random one, so the client's own retries are safe)");
  cmd->callback([o, &exit_code] {
    std::string body, content_type = "application/json";
    const bool from_file = o->gpus.empty() && o->args.size() == 1;
    if (from_file) {
      std::string text;
      if (o->args[0] == "-") {
        std::string line;
        while (std::getline(std::cin, line)) {
          text += line + "\n";
          if (text.size() > kMaxSpecFile.value()) {
            exit_code = FailBadInput(ResourceExhaustedError("stdin: job spec over 1 MiB"));
            return;
          }
        }
      } else {
        Result<std::string> read = ReadFileBounded(o->args[0], kMaxSpecFile, "job spec file");
        if (!read.ok()) {
          exit_code = FailBadInput(read.status());
          return;
        }
        text = std::move(read).value();
      }
      // Checked here so that a malformed file is the user's one-line error, not a round trip.
      std::string_view trimmed = Trim(text);
      const std::string source = o->args[0] == "-" ? "stdin" : o->args[0];
      if (trimmed.starts_with("{")) {
        Result<json> doc = ParseJsonBounded(text);
        if (!doc.ok()) {
          exit_code = FailBadInput(doc.status().WithPrefix(source));
          return;
        }
      } else {
        Result<YAML::Node> doc = LoadYamlBounded(text, source);
        if (!doc.ok()) {
          exit_code = FailBadInput(doc.status());
          return;
        }
        if (!doc->IsMap()) {
          exit_code = FailBadInput(InvalidArgumentError(source + ": a job spec is a YAML map"));
          return;
        }
        content_type = "application/yaml";
      }
      body = std::move(text);
    } else {
      if (o->gpus.empty()) {
        exit_code = FailBadInput(
            InvalidArgumentError("give a job spec file, or --gpus N or MIN:MAX (and --name)"));
        return;
      }
      Result<json> gpus = GpusFlag(o->gpus, o->gpu_step);
      if (!gpus.ok()) {
        exit_code = FailBadInput(gpus.status());
        return;
      }
      json spec = *std::move(gpus);
      spec["name"] = o->name.empty() ? (o->args.empty() ? "job" : o->args[0]) : o->name;
      if (o->gpus_per_node > 0) spec["gpus_per_node"] = o->gpus_per_node;
      if (!o->gpu_type.empty()) spec["gpu_type"] = o->gpu_type;
      if (!o->tenant.empty()) spec["tenant"] = o->tenant;
      if (o->priority) spec["priority"] = *o->priority;
      if (o->runtime_s > 0) spec["estimated_runtime_s"] = o->runtime_s;
      if (o->no_preempt) spec["preemptible"] = false;
      if (!o->level.empty() || !o->prefer_level.empty()) {
        json topo = json::object();
        if (!o->level.empty()) topo["required"] = o->level;
        if (!o->prefer_level.empty()) topo["preferred"] = o->prefer_level;
        spec["topology"] = topo;
      }
      if (!o->plan_model.empty()) spec["plan"] = {{"model", o->plan_model}};
      if (!o->args.empty()) spec["command"] = o->args;
      body = spec.dump();
    }
    exit_code = WithClient(o->common, [&](const ApiClient& client) {
      std::map<std::string, std::string> headers;
      // A key of its own when none is given, so that the client may resend the submission to
      // another replica after a failover without running the job twice.
      headers["Idempotency-Key"] =
          o->idempotency_key.empty() ? GeneratedIdempotencyKey() : o->idempotency_key;
      Result<json> job = client.Post("/api/v1/jobs", body, content_type, headers);
      if (!job.ok()) return Fail(job.status());
      if (o->common.json_output) {
        std::cout << job->dump(2) << "\n";
      } else {
        std::cout << fmt::format("submitted job {} ({}, {} GPUs, tenant {}): {}\n", Str(*job, "id"),
                                 Str(*job, "name"), GpusOf(*job), Str(*job, "tenant"),
                                 Str(*job, "state"));
      }
      return static_cast<int>(kExitOk);
    });
  });
}

void RegisterJobs(CLI::App& app, int& exit_code) {
  struct Options {
    Common common;
    std::string state, tenant;
    bool all = false;
    std::size_t limit = 1000;
  };
  auto o = std::make_shared<Options>();
  for (const char* name : {"jobs", "queue"}) {
    CLI::App* cmd = app.add_subcommand(
        name, "List jobs like squeue: queued and running by default, --all for finished too");
    AddCommon(cmd, o->common);
    cmd->add_option("--state", o->state,
                    "Only this state (queued, running, cancelling, succeeded, failed, cancelled)");
    cmd->add_option("--tenant", o->tenant, "Only this tenant (admins)");
    cmd->add_flag("--all", o->all, "Include finished jobs");
    cmd->add_option("--limit", o->limit, "At most this many jobs")->capture_default_str();
    cmd->callback([o, &exit_code] {
      exit_code = WithClient(o->common, [&](const ApiClient& client) {
        std::vector<std::string> states;
        if (!o->state.empty()) {
          states = {o->state};
        } else if (o->all) {
          states = {""};
        } else {
          states = {"running", "cancelling", "queued"};
        }
        std::vector<json> jobs;
        for (const std::string& s : states) {
          Result<std::vector<json>> got = ListJobs(client, s, o->tenant, o->limit - jobs.size());
          if (!got.ok()) return Fail(got.status());
          for (json& j : *got) jobs.push_back(std::move(j));
          if (jobs.size() >= o->limit) break;
        }
        if (o->common.json_output) {
          std::cout << json{{"jobs", jobs}}.dump(2) << "\n";
          return static_cast<int>(kExitOk);
        }
        Table t({"ID", "NAME", "TENANT", "STATE", "GPUS", "LEVEL", "NODES", "POS", "START", "WAIT",
                 "REASON"});
        for (const json& j : jobs) {
          t.Add({Str(j, "id"), Str(j, "name"), Str(j, "tenant"), Str(j, "state"), GpusOf(j),
                 LevelOf(j), NodesOf(j), Str(j, "queue_position"), StartOf(j),
                 Str(j, "waiting_kind"), Str(j, "waiting_reason")});
        }
        t.Print(std::cout);
        return static_cast<int>(kExitOk);
      });
    });
  }
}

void RegisterJob(CLI::App& app, int& exit_code) {
  struct Options {
    Common common;
    std::int64_t id = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("job", "Show one job: spec, placement and events");
  AddCommon(cmd, o->common);
  cmd->add_option("id", o->id, "Job id")->required();
  cmd->callback([o, &exit_code] {
    exit_code = WithClient(o->common, [&](const ApiClient& client) {
      const std::string path = "/api/v1/jobs/" + std::to_string(o->id);
      Result<json> job = client.Get(path);
      if (!job.ok()) return Fail(job.status());
      Result<json> events = client.Get(path + "/events");
      if (!events.ok()) return Fail(events.status());
      if (o->common.json_output) {
        json out = *job;
        out["events"] = (*events)["events"];
        std::cout << out.dump(2) << "\n";
        return static_cast<int>(kExitOk);
      }
      const json& j = *job;
      std::cout << fmt::format("job {}  {}  tenant {}  state {}  attempts {}\n", Str(j, "id"),
                               Str(j, "name"), Str(j, "tenant"), Str(j, "state"),
                               Str(j, "attempts"));
      std::cout << fmt::format("created {}  updated {}\n", Str(j, "created_at"),
                               Str(j, "updated_at"));
      if (j.contains("waiting_reason"))
        std::cout << "waiting: " << Str(j, "waiting_reason") << "\n";
      if (j.contains("queue_position") || j.contains("waiting_kind")) {
        std::cout << fmt::format("queue position {}  estimated start {}  waiting for {}\n",
                                 Str(j, "queue_position"), StartOf(j), Str(j, "waiting_kind"));
      }
      std::cout << "spec: " << (j.contains("spec") ? j["spec"].dump() : "-") << "\n";
      if (j.contains("placement")) {
        const json& p = j["placement"];
        std::cout << fmt::format("placement: {} GPUs within one {}\n", Str(p, "gpus"),
                                 Str(p, "level"));
        for (const json& n : p["nodes"]) {
          std::cout << fmt::format("  {}  gpus {}\n", Str(n, "node"), n["gpus"].dump());
        }
      }
      std::cout << "events:\n";
      Table t({"  TIME", "KIND", "MESSAGE"});
      for (const json& e : (*events)["events"]) {
        t.Add({"  " + Str(e, "time"), Str(e, "kind"), Str(e, "message")});
      }
      t.Print(std::cout);
      return static_cast<int>(kExitOk);
    });
  });
}

void RegisterCancel(CLI::App& app, int& exit_code) {
  struct Options {
    Common common;
    std::vector<std::int64_t> ids;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("cancel", "Cancel jobs (like scancel)");
  AddCommon(cmd, o->common);
  cmd->add_option("ids", o->ids, "Job ids")->required();
  cmd->callback([o, &exit_code] {
    exit_code = WithClient(o->common, [&](const ApiClient& client) {
      int worst = kExitOk;
      json answers = json::array();
      for (std::int64_t id : o->ids) {
        Result<json> r = client.Delete("/api/v1/jobs/" + std::to_string(id));
        if (!r.ok()) {
          // The daemon's message may name the job already ("job 99 not found").
          const std::string job = "job " + std::to_string(id);
          const std::string message(r.status().message());
          std::cerr << "baton: " << (message.starts_with(job + " ") ? "" : job + ": ") << message
                    << "\n";
          worst = std::max(worst, ExitCodeFor(r.status()));
          continue;
        }
        answers.push_back(*r);
        if (!o->common.json_output) {
          std::cout << fmt::format("job {}: {}\n", id, Str(*r, "state"));
        }
      }
      if (o->common.json_output) std::cout << json{{"jobs", answers}}.dump(2) << "\n";
      return worst;
    });
  });
}

// A node's state as sinfo would say it: its health, or its admin state ("drain", "cordon") when
// an admin took it out of service, with the health when the rules have a worse verdict of their
// own ("down+drain"). An admin drain shows as health "draining" too: that is not repeated.
std::string NodeState(const json& n) {
  std::string health = Str(n, "health");
  std::string admin = Str(n, "admin", "active");
  if (admin == "active") return health;
  if (admin == "draining") admin = "drain";
  if (admin == "cordoned") admin = "cordon";
  return health == "healthy" || health == "draining" ? admin : health + "+" + admin;
}

void RegisterNodes(CLI::App& app, int& exit_code) {
  struct Options {
    Common common;
    std::string by = "leaf";
    bool long_format = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "nodes",
      "List nodes like sinfo, grouped by leaf switch or rack: health, admin state, GPUs free and "
      "allocated, drain reasons (admins)");
  AddCommon(cmd, o->common);
  cmd->add_option("--by", o->by, "Group by the node's leaf switch or its rack")
      ->check(CLI::IsMember({"leaf", "rack"}));
  cmd->add_flag("-N,--long", o->long_format,
                "One line per node (with the health rules behind its verdict) instead of one per "
                "group and state");
  cmd->callback([o, &exit_code] {
    exit_code = WithClient(o->common, [&](const ApiClient& client) {
      Result<json> nodes = client.Get("/api/v1/nodes");
      if (!nodes.ok()) return Fail(nodes.status());
      if (!nodes->contains("nodes") || !(*nodes)["nodes"].is_array()) {
        return Fail(InternalError("the daemon's node list has no 'nodes' array"));
      }
      // Where each node hangs (leaf, rack) and why it has its verdict: /api/v1/health, from the
      // same daemon. An older daemon without it gets the list ungrouped.
      std::map<std::string, json> health;
      if (Result<json> h = client.Get("/api/v1/health"); h.ok() && h->contains("nodes")) {
        for (const json& n : (*h)["nodes"]) {
          if (n.is_object() && n.contains("node")) health[Str(n, "node")] = n;
        }
      }
      if (o->common.json_output) {
        json out = *nodes;
        for (json& n : out["nodes"]) {
          auto it = health.find(Str(n, "node"));
          if (it == health.end()) continue;
          for (const char* key : {"leaf", "rack", "domain", "signals", "verdicts"}) {
            if (it->second.contains(key)) n[key] = it->second[key];
          }
        }
        std::cout << out.dump(2) << "\n";
        return static_cast<int>(kExitOk);
      }
      auto group_of = [&](const json& n) {
        auto it = health.find(Str(n, "node"));
        if (it == health.end()) return std::string("-");
        std::string g = Str(it->second, o->by == "rack" ? "rack" : "leaf");
        if (g == "-" && o->by == "rack") g = Str(it->second, "domain");  // an NVL72 rack
        return g;
      };
      const std::string group_header = o->by == "rack" ? "RACK" : "LEAF";
      if (o->long_format) {
        Table t({group_header, "NODE", "STATE", "GPUS", "ALLOC", "FREE", "JOBS", "WHY", "REASON"});
        std::vector<std::pair<std::string, const json*>> rows;
        for (const json& n : (*nodes)["nodes"]) rows.emplace_back(group_of(n), &n);
        std::stable_sort(rows.begin(), rows.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
        for (const auto& [group, n] : rows) {
          const int gpus = n->value("gpus", 0), alloc = n->value("gpus_allocated", 0);
          std::string why = fmt::format(
              "{}", fmt::join(n->value("active_rules", std::vector<std::string>{}), ","));
          t.Add({group, Str(*n, "node"), NodeState(*n), std::to_string(gpus), std::to_string(alloc),
                 std::to_string(gpus - alloc),
                 n->contains("jobs") ? std::to_string((*n)["jobs"].size()) : "0",
                 why.empty() ? "-" : why, Str(*n, "reason")});
        }
        t.Print(std::cout);
        return static_cast<int>(kExitOk);
      }
      // sinfo's default view: one line per group and state, with the nodes as a hostlist.
      struct Line {
        std::vector<std::string> names;
        int gpus = 0, alloc = 0;
        std::vector<std::string> reasons;
      };
      std::map<std::pair<std::string, std::string>, Line> lines;
      for (const json& n : (*nodes)["nodes"]) {
        Line& l = lines[{group_of(n), NodeState(n)}];
        l.names.push_back(Str(n, "node"));
        l.gpus += n.value("gpus", 0);
        l.alloc += n.value("gpus_allocated", 0);
        std::string reason = Str(n, "reason", "");
        if (!reason.empty() &&
            std::find(l.reasons.begin(), l.reasons.end(), reason) == l.reasons.end()) {
          l.reasons.push_back(reason);
        }
      }
      Table t({group_header, "STATE", "NODES", "GPUS", "ALLOC", "FREE", "REASON", "NODELIST"});
      for (const auto& [key, l] : lines) {
        t.Add({key.first, key.second, std::to_string(l.names.size()), std::to_string(l.gpus),
               std::to_string(l.alloc), std::to_string(l.gpus - l.alloc),
               l.reasons.empty() ? "-" : fmt::format("{}", fmt::join(l.reasons, "; ")),
               topo::CompressHostlist(l.names)});
      }
      t.Print(std::cout);
      return static_cast<int>(kExitOk);
    });
  });
}

void RegisterNodeAction(CLI::App& app, int& exit_code, const char* name, const char* action,
                        const char* help) {
  struct Options {
    Common common;
    std::vector<std::string> nodes;
    std::string reason;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(name, help);
  AddCommon(cmd, o->common);
  cmd->add_option("nodes", o->nodes, "Node names")->required();
  cmd->add_option("--reason", o->reason, "Why (shown in `baton nodes`)");
  cmd->callback([o, &exit_code, action] {
    exit_code = WithClient(o->common, [&](const ApiClient& client) {
      int worst = kExitOk;
      for (const std::string& node : o->nodes) {
        json body = json::object();
        if (!o->reason.empty()) body["reason"] = o->reason;
        Result<json> r =
            client.Post("/api/v1/nodes/" + node + ":" + action, body.dump(), "application/json");
        if (!r.ok()) {
          std::cerr << "baton: node " << Printable(node, 64) << ": " << r.status().message()
                    << "\n";
          worst = std::max(worst, ExitCodeFor(r.status()));
          continue;
        }
        if (o->common.json_output) {
          std::cout << r->dump() << "\n";
        } else {
          std::cout << fmt::format("node {}: {}\n", node, Str(*r, "admin"));
        }
      }
      return worst;
    });
  });
}

void RegisterTop(CLI::App& app, int& exit_code) {
  struct Options {
    Common common;
    double interval_s = 2;
    int iterations = 0;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("top", "A live cluster summary, refreshed in the terminal");
  AddCommon(cmd, o->common);
  cmd->add_option("--interval", o->interval_s, "Seconds between refreshes")->capture_default_str();
  cmd->add_option("--iterations,-n", o->iterations, "Stop after this many refreshes (0: never)");
  cmd->callback([o, &exit_code] {
    exit_code = WithClient(o->common, [&](const ApiClient& client) {
      const bool tty = isatty(STDOUT_FILENO) != 0 && !o->common.json_output;
      for (int i = 0; o->iterations == 0 || i < o->iterations; ++i) {
        if (i > 0) {
          std::this_thread::sleep_for(std::chrono::duration<double>(std::max(0.2, o->interval_s)));
        }
        Result<json> topo = client.Get("/api/v1/topology");
        if (!topo.ok()) return Fail(topo.status());
        std::map<std::string, std::vector<json>> by_state;
        for (const char* s : {"running", "queued"}) {
          Result<std::vector<json>> jobs = ListJobs(client, s, "", 1000);
          if (!jobs.ok()) return Fail(jobs.status());
          by_state[s] = std::move(jobs).value();
        }
        if (o->common.json_output) {
          std::cout << json{{"topology", *topo},
                            {"running", by_state["running"].size()},
                            {"queued", by_state["queued"].size()}}
                           .dump()
                    << std::endl;
          continue;
        }
        if (tty) std::cout << "\x1b[H\x1b[2J";
        const int gpus = topo->value("gpus", 0), alloc = topo->value("gpus_allocated", 0);
        std::cout << fmt::format(
            "baton at {}   GPUs {}/{} allocated ({:.1f} %)   jobs: {} running, "
            "{} queued\n\n",
            client.endpoint().url, alloc, gpus, gpus > 0 ? 100.0 * alloc / gpus : 0.0,
            by_state["running"].size(), by_state["queued"].size());
        Table t({"ID", "NAME", "TENANT", "STATE", "GPUS", "LEVEL", "REASON"});
        int shown = 0;
        for (const char* s : {"running", "queued"}) {
          for (const json& j : by_state[s]) {
            if (++shown > 20) break;
            t.Add({Str(j, "id"), Str(j, "name"), Str(j, "tenant"), Str(j, "state"), GpusOf(j),
                   LevelOf(j), Str(j, "waiting_reason")});
          }
        }
        t.Print(std::cout);
        std::cout.flush();
      }
      return static_cast<int>(kExitOk);
    });
  });
}

// Prints a bash completion script built from the app's own subcommands and options, so it can
// never list a flag that does not exist.
void RegisterCompletion(CLI::App& app, int& exit_code) {
  auto shell = std::make_shared<std::string>("bash");
  CLI::App* cmd = app.add_subcommand(
      "completion", "Print a shell completion script: source <(baton completion bash)");
  cmd->add_option("shell", *shell, "Shell (bash)")->capture_default_str();
  CLI::App* root = &app;
  cmd->callback([shell, root, &exit_code] {
    if (*shell != "bash") {
      exit_code = FailBadInput(
          InvalidArgumentError("shell '" + Printable(*shell, 32) + "': only bash is supported"));
      return;
    }
    std::string subcommands;
    std::string cases;
    for (const CLI::App* sub : root->get_subcommands({})) {
      subcommands += sub->get_name() + " ";
      std::string flags;
      for (const CLI::Option* opt : sub->get_options()) {
        for (const std::string& l : opt->get_lnames()) flags += "--" + l + " ";
      }
      cases += fmt::format("    {}) opts=\"{}\" ;;\n", sub->get_name(), flags);
    }
    std::cout << "# bash completion for baton (generated by `baton completion bash`)\n"
              << "_baton() {\n"
              << "  local cur=${COMP_WORDS[COMP_CWORD]} opts\n"
              << "  if [[ $COMP_CWORD -eq 1 ]]; then\n"
              << "    COMPREPLY=($(compgen -W \"" << subcommands << "\" -- \"$cur\"))\n"
              << "    return\n"
              << "  fi\n"
              << "  case ${COMP_WORDS[1]} in\n"
              << cases << "    *) opts=\"\" ;;\n"
              << "  esac\n"
              << "  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
              << "}\n"
              << "complete -o default -F _baton baton\n";
  });
}

}  // namespace

void RegisterClientCommands(CLI::App& app, int& exit_code) {
  RegisterSubmit(app, exit_code);
  RegisterJobs(app, exit_code);
  RegisterJob(app, exit_code);
  RegisterCancel(app, exit_code);
  RegisterNodes(app, exit_code);
  RegisterNodeAction(app, exit_code, "drain", "drain",
                     "Drain nodes: running jobs finish, nothing new is placed (admins)");
  RegisterNodeAction(app, exit_code, "resume", "uncordon",
                     "Return drained or cordoned nodes to service (admins)");
  RegisterTop(app, exit_code);
  RegisterCompletion(app, exit_code);
}

}  // namespace baton::cli
