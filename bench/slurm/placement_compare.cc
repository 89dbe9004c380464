// placement_compare: the same sequence of whole-node jobs (arrivals and departures) placed by
// baton's scheduler and by a real Slurm's topology/tree plugin (jobs submitted with sbatch and
// held with `sleep` so that later placements see the occupancy), reporting per job the leaf
// switches it spans and, after every step, the fragmentation left: free nodes that sit in leaves
// that are partly used, and the largest job that still fits in one leaf.
//
//   SLURM_CONF=/path/slurm.conf placement_compare [--seed N] [--steps N]
//
// Needs a running Slurm whose topology.conf sits beside slurm.conf (scripts/slurm-fake-cluster.sh
// start DIR gives 16 nodes under 4 leaves) and no other jobs on it.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "sched/framework/scheduler.h"
#include "server/executors/command.h"
#include "server/executors/slurm_executor.h"

namespace {

using namespace baton;

struct Step {
  bool arrive = true;
  int job = 0;
  int nodes = 0;
};

// Arrivals of 1-4 node jobs, with departures of random running ones, never asking for more nodes
// than are free (so that both systems can always place the arrival).
std::vector<Step> MakeSequence(int steps, std::uint64_t seed, int total_nodes) {
  Rng rng(seed);
  std::vector<Step> out;
  std::map<int, int> running;  // job -> nodes
  int used = 0, next = 0;
  for (int i = 0; i < steps; ++i) {
    int want = static_cast<int>(rng.UniformInt(1, 4));
    bool depart = !running.empty() && (used + want > total_nodes || rng.Bernoulli(0.35));
    if (depart) {
      auto it = running.begin();
      std::advance(it, rng.UniformInt(0, static_cast<std::int64_t>(running.size()) - 1));
      out.push_back({false, it->first, it->second});
      used -= it->second;
      running.erase(it);
      continue;
    }
    out.push_back({true, next, want});
    running[next++] = want;
    used += want;
  }
  return out;
}

struct Leaves {
  std::map<std::string, int> leaf_of;  // node -> leaf index
  std::vector<int> size;               // nodes per leaf
};

Leaves LeavesOf(const topo::Cluster& c) {
  Leaves l;
  std::map<std::uint32_t, int> index;
  for (const topo::Node& n : c.nodes()) {
    std::uint32_t leaf = n.ancestors[0].value();
    auto [it, fresh] = index.emplace(leaf, static_cast<int>(index.size()));
    if (fresh) l.size.push_back(0);
    l.leaf_of[n.name] = it->second;
    ++l.size[it->second];
  }
  return l;
}

struct Fragmentation {
  int stranded = 0;   // free nodes in partly used leaves
  int best_leaf = 0;  // most free nodes in one leaf (largest single-leaf job that fits)
};

Fragmentation Measure(const Leaves& l, const std::set<std::string>& busy) {
  std::vector<int> used(l.size.size(), 0);
  for (const auto& n : busy) ++used[l.leaf_of.at(n)];
  Fragmentation f;
  for (std::size_t i = 0; i < used.size(); ++i) {
    int free = l.size[i] - used[i];
    if (used[i] > 0) f.stranded += free;
    f.best_leaf = std::max(f.best_leaf, free);
  }
  return f;
}

int Spanned(const Leaves& l, const std::vector<std::string>& nodes) {
  std::set<int> leaves;
  for (const auto& n : nodes) leaves.insert(l.leaf_of.at(n));
  return static_cast<int>(leaves.size());
}

std::map<std::string, std::string> Env() {
  const char* conf = std::getenv("SLURM_CONF");
  return {{"SLURM_CONF", conf != nullptr ? conf : ""}};
}

// The nodes Slurm gave batch job `name` once it runs; empty if it did not start within 10 s.
std::vector<std::string> SlurmNodes(const std::string& name) {
  for (int i = 0; i < 100; ++i) {
    // (squeue 22.05 ignores --name with --json: filter here.)
    auto r = server::RunCommand({"squeue", "--json"}, Env(), Seconds(10));
    if (r.ok() && r->ok()) {
      auto jobs = server::ParseSqueueJson(r->out);
      if (jobs.ok()) {
        for (const auto& j : *jobs) {
          if (j.name == name && j.state == "RUNNING") return j.nodes;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return {};
}

void WaitForNodesIdle(const std::vector<std::string>& nodes) {
  for (int i = 0; i < 100; ++i) {
    auto r = server::RunCommand({"sinfo", "--json"}, Env(), Seconds(10));
    bool idle = true;
    if (r.ok() && r->ok()) {
      auto all = server::ParseSinfoJson(r->out);
      if (!all.ok()) continue;
      for (const auto& n : *all) {
        for (const auto& want : nodes) {
          if (n.name == want && n.state != "idle") idle = false;
        }
      }
      if (idle) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 24;
  std::uint64_t seed = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--steps") steps = std::atoi(argv[i + 1]);
    if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  const char* conf = std::getenv("SLURM_CONF");
  if (conf == nullptr) {
    std::fprintf(stderr, "placement_compare: set SLURM_CONF to a running Slurm's slurm.conf\n");
    return 2;
  }
  auto cluster = server::ClusterFromSlurmConf(conf);
  if (!cluster.ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().ToString().c_str());
    return 2;
  }
  Leaves leaves = LeavesOf(*cluster);
  const int gpus_per_node = cluster->nodes().front().gpus;
  const int node_count = static_cast<int>(cluster->nodes().size());
  std::vector<Step> seq = MakeSequence(steps, seed, node_count);
  auto scheduler = sched::Scheduler::Create(std::move(cluster).value(), sched::SchedulerConfig{});
  if (!scheduler.ok()) {
    std::fprintf(stderr, "%s\n", scheduler.status().ToString().c_str());
    return 2;
  }
  const topo::Cluster& c = (*scheduler)->state().cluster();
  std::string run = fmt::format("cmp{}", ::getpid());
  std::map<int, std::vector<std::string>> baton_nodes, slurm_nodes;
  std::set<std::string> baton_busy, slurm_busy;
  int baton_spans = 0, slurm_spans = 0, baton_split = 0, slurm_split = 0, arrivals = 0;
  int baton_stranded = 0, slurm_stranded = 0;
  TimePoint now;
  fmt::print("{:>4} {:<10} {:<20} {:<20} {:>14} {:>14}\n", "step", "event", "baton leaves nodes",
             "slurm leaves nodes", "baton str/best", "slurm str/best");
  for (std::size_t i = 0; i < seq.size(); ++i) {
    const Step& s = seq[i];
    now = now + Seconds(1);
    std::string name = fmt::format("{}-{}", run, s.job);
    sched::JobId id(static_cast<std::uint64_t>(s.job + 1));
    std::string b_cell = "-", s_cell = "-";
    if (s.arrive) {
      ++arrivals;
      sched::GangJob g;
      g.id = id;
      g.name = name;
      g.gpus = s.nodes * gpus_per_node;
      g.gpus_per_task = gpus_per_node;
      std::vector<sched::Event> events = {sched::Event::Submit(g)};
      sched::Decisions d = (*scheduler)->RunCycle({now, events});
      for (const auto& b : d.binds) {
        for (const auto& a : b.placement.nodes) {
          baton_nodes[s.job].push_back(c.node(a.node).name);
        }
      }
      auto r = server::RunCommand(
          {"sbatch", "--parsable", "--job-name=" + name, fmt::format("--nodes={}", s.nodes),
           fmt::format("--ntasks={}", s.nodes), fmt::format("--gres=gpu:{}", gpus_per_node),
           "--output=/dev/null", "--wrap=sleep 3600"},
          Env(), Seconds(20));
      if (!r.ok() || !r->ok()) {
        std::fprintf(stderr, "sbatch failed: %s\n", r.ok() ? r->err.c_str() : "cannot run");
        return 1;
      }
      slurm_nodes[s.job] = SlurmNodes(name);
      int bs = baton_nodes[s.job].empty() ? 0 : Spanned(leaves, baton_nodes[s.job]);
      int ss = slurm_nodes[s.job].empty() ? 0 : Spanned(leaves, slurm_nodes[s.job]);
      baton_spans += bs;
      slurm_spans += ss;
      baton_split += bs > 1 ? 1 : 0;
      slurm_split += ss > 1 ? 1 : 0;
      b_cell = bs == 0 ? "waits" : fmt::format("{} {}", bs, fmt::join(baton_nodes[s.job], ","));
      s_cell = ss == 0 ? "waits" : fmt::format("{} {}", ss, fmt::join(slurm_nodes[s.job], ","));
      for (const auto& n : baton_nodes[s.job]) baton_busy.insert(n);
      for (const auto& n : slurm_nodes[s.job]) slurm_busy.insert(n);
    } else {
      std::vector<sched::Event> events = {sched::Event::Finish(id)};
      (void)(*scheduler)->RunCycle({now, events});
      (void)server::RunCommand({"scancel", "--name=" + name}, Env(), Seconds(20));
      WaitForNodesIdle(slurm_nodes[s.job]);
      for (const auto& n : baton_nodes[s.job]) baton_busy.erase(n);
      for (const auto& n : slurm_nodes[s.job]) slurm_busy.erase(n);
    }
    Fragmentation bf = Measure(leaves, baton_busy), sf = Measure(leaves, slurm_busy);
    baton_stranded += bf.stranded;
    slurm_stranded += sf.stranded;
    fmt::print("{:>4} {:<10} {:<20} {:<20} {:>14} {:>14}\n", i + 1,
               fmt::format("{}{} ({}n)", s.arrive ? "+" : "-", s.job, s.nodes), b_cell, s_cell,
               fmt::format("{}/{}", bf.stranded, bf.best_leaf),
               fmt::format("{}/{}", sf.stranded, sf.best_leaf));
  }
  (void)server::RunCommand({"scancel", "--name=" + run}, Env(), Seconds(20));
  for (const Step& s : seq) {
    (void)server::RunCommand({"scancel", fmt::format("--name={}-{}", run, s.job)}, Env(),
                             Seconds(20));
  }
  fmt::print(
      "\n{} arrivals: leaves spanned in total baton {} / slurm {}; jobs split over leaves baton {} "
      "/ slurm {}; stranded free nodes summed over the {} steps baton {} / slurm {}\n",
      arrivals, baton_spans, slurm_spans, baton_split, slurm_split, seq.size(), baton_stranded,
      slurm_stranded);
  return 0;
}
