// The packing protocol of FGD ("Beware of Fragmentation", USENIX ATC'23) on the Alibaba openb
// trace, run through baton's scheduler (sim::RunPacking): for each policy, the GPU allocation and
// fragmentation curves against arrived demand averaged over seeds, the allocation at 100 %
// arrived demand, and the wall time of one full replay on one thread (median over the seeds).
//
//   packing_bench [pods=PATH] [nodes=PATH] [seeds=42-51] [policies=fragmentation,best-fit,
//                 random-fit] [csv=PATH] [html=PATH]
//
// variant=multi-gpu|shared replaces the pod list by a variant resampled from it
// (sim::VariantPods: 10 % of pods with 2+ GPUs, or 70 % GPU shares; see bench/sim/README.md).
// csv= writes every curve (policy, seeds, arrived %, allocated %, fragmentation %); html= the
// same as a self-contained page with the charts (sim/packing/packing_report.h).
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
#include "sim/packing/packing_report.h"
#include "sim/workload/openb.h"

namespace {

// CPU time of this thread: the replay's cost on one core, whatever else the machine runs.
double ThreadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

constexpr double kStep = 0.05;      // curve resolution, as FGD's plots
constexpr double kTune = 1.3;       // FGD's tune-up: pods to 1.3x the GPU capacity
constexpr std::size_t kAt100 = 19;  // the point at 100 % arrived demand (20 x kStep)

bool Write(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) {
    std::fprintf(stderr, "cannot write '%s'\n", path.c_str());
    return false;
  }
  return true;
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
                                             {"csv", ""},
                                             {"html", ""},
                                             {"variant", ""}};
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
  if (!args["variant"].empty()) {
    auto v = baton::sim::VariantPods(*pods, args["variant"]);
    if (!v.ok()) {
      std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
      return 2;
    }
    *pods = std::move(v).value();
    args["pods"] += " (variant " + args["variant"] + ")";
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
  std::vector<baton::sim::PackingCurve> curves;
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
    baton::sim::PackingCurve curve = baton::sim::MeanCurve(std::string(policy), runs, kStep, kTune);
    curve.replay_seconds = Median(seconds);
    std::printf("\n%s (mean of %zu seeds; replay median %.2f s CPU on one thread)\n",
                curve.policy.c_str(), runs.size(), curve.replay_seconds);
    std::printf("  skipped by 100 %% arrived, %% of capacity: shares");
    for (std::size_t k = 0; k < 9; ++k) {
      double sum = 0;
      for (const auto& r : runs) {
        sum += static_cast<double>(r.skipped_milli_by_gpus[k]) /
               static_cast<double>(r.gpu_capacity_milli);
      }
      if (k > 0) std::printf(", %zu-GPU", k);
      std::printf(" %.2f", 100 * sum / static_cast<double>(runs.size()));
    }
    std::printf("\n  arrived %%  allocated %%  fragmentation %%\n");
    for (const auto& p : curve.points) {
      std::printf("  %8.0f  %11.2f  %15.2f\n", p.arrived * 100, p.allocated * 100,
                  p.fragmentation * 100);
    }
    curves.push_back(std::move(curve));
  }
  if (!args["csv"].empty() && !Write(args["csv"], baton::sim::PackingCsv(curves))) return 1;
  if (!args["html"].empty() &&
      !Write(args["html"],
             baton::sim::PackingHtml({args["nodes"], args["pods"], args["seeds"]}, curves))) {
    return 1;
  }
  std::printf(
      "\nallocation at 100 %% arrived demand (FGD paper: Random 86.30, BestFit 92.86, "
      "FGD 95.23)\n");
  for (const auto& c : curves) {
    const baton::sim::PackingPoint& p = c.points[kAt100];
    std::printf("  %-14s %6.2f %%  (fragmentation %5.2f %%, replay %.2f s)\n", c.policy.c_str(),
                p.allocated * 100, p.fragmentation * 100, c.replay_seconds);
  }
  return 0;
}
