// The packing protocol of FGD ("Beware of Fragmentation", USENIX ATC'23) on the Alibaba openb
// trace, run through baton's scheduler (sim::RunPacking): for each policy, the GPU allocation and
// fragmentation curves against arrived demand averaged over seeds, the allocation at 100 %
// arrived demand, and the wall time of one full replay on one thread (median over the seeds).
//
//   packing_bench [pods=PATH] [nodes=PATH] [seeds=42-51] [policies=fragmentation,best-fit,
//                 random-fit] [csv=PATH]
//
// FGD's published allocation at 100 % arrived demand (seeds 42-51): Random 86.30 %, BestFit
// 92.86 %, FGD 95.23 %.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/strings.h"
#include "sim/packing/packing.h"
#include "sim/workload/openb.h"

namespace {

// CPU time of this thread: the replay's cost on one core, whatever else the machine runs.
double ThreadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = std::string(BATON_TRACES_DIR) + "/alibaba-openb/";
  std::map<std::string, std::string> args = {{"pods", dir + "openb_pod_list_default.csv"},
                                             {"nodes", dir + "openb_node_list_gpu_node.csv"},
                                             {"seeds", "42-51"},
                                             {"policies", "fragmentation,best-fit,random-fit"},
                                             {"csv", ""}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const auto eq = a.find('=');
    if (eq == std::string::npos || !args.contains(a.substr(0, eq))) {
      std::fprintf(stderr, "unknown argument '%s'\n", a.c_str());
      return 2;
    }
    args[a.substr(0, eq)] = a.substr(eq + 1);
  }
  auto nodes = baton::sim::ReadOpenbNodesFile(args["nodes"]);
  auto pods = baton::sim::ReadOpenbPodsFile(args["pods"]);
  if (!nodes.ok() || !pods.ok()) {
    std::fprintf(stderr, "%s\n", (!nodes.ok() ? nodes.status() : pods.status()).ToString().c_str());
    return 1;
  }
  const auto range = baton::Split(args["seeds"], '-');
  const auto lo = baton::ParseInt64(range[0]);
  const auto hi = range.size() > 1 ? baton::ParseInt64(range[1]) : lo;
  if (!lo || !hi || *hi < *lo) {
    std::fprintf(stderr, "bad seeds '%s'\n", args["seeds"].c_str());
    return 2;
  }
  std::printf("openb packing: %zu nodes, %zu pods in the list, seeds %lld-%lld\n", nodes->size(),
              pods->size(), static_cast<long long>(*lo), static_cast<long long>(*hi));
  std::ofstream csv;
  if (!args["csv"].empty()) {
    csv.open(args["csv"]);
    csv << "policy,arrived_pct,allocated_pct,fragmentation_pct\n";
  }
  struct Summary {
    std::string policy;
    double at100;
    double frag100;
    double median_s;
  };
  std::vector<Summary> summaries;
  for (std::string_view policy : baton::Split(args["policies"], ',')) {
    std::vector<baton::sim::PackingResult> runs;
    std::vector<double> seconds;
    for (std::int64_t seed = *lo; seed <= *hi; ++seed) {
      baton::sim::PackingOptions o;
      o.policy = std::string(policy);
      o.seed = static_cast<std::uint64_t>(seed);
      const double t0 = ThreadSeconds();
      auto r = baton::sim::RunPacking(*nodes, *pods, o);
      seconds.push_back(ThreadSeconds() - t0);
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
        return 1;
      }
      runs.push_back(std::move(r).value());
    }
    std::printf("\n%s (mean of %zu seeds; replay median %.2f s CPU on one thread)\n",
                std::string(policy).c_str(), runs.size(), Median(seconds));
    std::printf("  arrived %%  allocated %%  fragmentation %%\n");
    double at100 = 0;
    double frag100 = 0;
    for (int step = 1; step <= 26; ++step) {
      const double at = 0.05 * step;
      double alloc = 0;
      double frag = 0;
      for (const auto& r : runs) {
        alloc += r.AllocationAt(at);
        frag += r.FragmentationAt(at);
      }
      alloc /= static_cast<double>(runs.size());
      frag /= static_cast<double>(runs.size());
      if (step == 20) {
        at100 = alloc;
        frag100 = frag;
      }
      std::printf("  %8.0f  %11.2f  %15.2f\n", at * 100, alloc * 100, frag * 100);
      if (csv.is_open()) {
        csv << policy << ',' << at * 100 << ',' << alloc * 100 << ',' << frag * 100 << '\n';
      }
    }
    summaries.push_back({std::string(policy), at100, frag100, Median(seconds)});
  }
  std::printf(
      "\nallocation at 100 %% arrived demand (FGD paper: Random 86.30, BestFit 92.86, "
      "FGD 95.23)\n");
  for (const auto& s : summaries) {
    std::printf("  %-14s %6.2f %%  (fragmentation %5.2f %%, replay %.2f s)\n", s.policy.c_str(),
                s.at100 * 100, s.frag100 * 100, s.median_s);
  }
  return 0;
}
