// Fits the collective model (src/perf/collectives.h) to the published nccl-tests table and
// prints its error per system and per scale, in-sample and cross-validated (leave one rank count
// out within a system; leave one system out for the latency shape). Every figure of
// docs/perf/collectives.md comes from this program's output.
//   collectives_fit [CSV]   (default ../shared/data/published/collectives.csv)
//   collectives_fit CSV --samples SYSTEM   (the fitted terms and every sample of one system)
//   collectives_fit CSV --project SYSTEM BYTES R1,R2,...   (all-gather and reduce-scatter of
//   BYTES on R ranks under that system's fit: what a ZeRO-3 / FSDP unit's collectives cost)
#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "core/strings.h"
#include "perf/collectives.h"

using namespace baton;
using namespace baton::perf;

namespace {

const FittedFabric* FindFit(const CollectivesReport& rep, std::string_view system) {
  for (const FittedFabric& f : rep.fits) {
    if (f.system == system) return &f;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = argc > 1 ? argv[1] : "../shared/data/published/collectives.csv";
  auto rows = LoadCollectivesCsv(path);
  if (!rows.ok()) {
    fmt::print(stderr, "{}\n", rows.status().ToString());
    return 2;
  }
  const std::vector<CollectiveSample> samples = SamplesFromCsv(*rows);
  const CollectivesReport rep = FitAndValidate(samples);
  if (argc > 3 && std::strcmp(argv[2], "--samples") == 0) {
    const FittedFabric* fit = FindFit(rep, argv[3]);
    if (!fit) {
      fmt::print(stderr, "no fitted system '{}'\n", argv[3]);
      return 2;
    }
    std::vector<CollectiveSample> mine;
    for (const CollectiveSample& s : samples) {
      if (s.system == argv[3]) mine.push_back(s);
    }
    fmt::print("{}\n{}", FormatFabric(*fit), FormatSampleErrors(*fit, mine));
    return 0;
  }
  if (argc > 5 && std::strcmp(argv[2], "--project") == 0) {
    const FittedFabric* fit = FindFit(rep, argv[3]);
    auto bytes = ParseDouble(argv[4]);
    if (!fit || !bytes || *bytes <= 0) {
      fmt::print(stderr, "usage: --project SYSTEM BYTES R1,R2,...\n");
      return 2;
    }
    fmt::print("{}\n{:>6} {:>16} {:>10} {:>10} {:>12} {:>10} {}\n", FormatFabric(*fit), "ranks",
               "collective", "time ms", "busbw GB/s", "latency ms", "latency %", "algo");
    for (std::string_view r : Split(argv[5], ',')) {
      auto ranks = ParseInt64(r);
      if (!ranks || *ranks < 2 || *ranks > (1 << 20)) continue;
      for (Collective op : {Collective::kAllGather, Collective::kReduceScatter}) {
        const int n = static_cast<int>(*ranks);
        CollectiveFabric f = fit->fabric;
        const std::optional<CollectiveTime> est = EstimateCollective(f, op, Bytes(*bytes), n);
        if (!est) {
          fmt::print("{:>6} {:>16} the fit has no network rate for {} ranks\n", n,
                     CollectiveName(op), n);
          continue;
        }
        const CollectiveTime& t = *est;
        // The latency share: the time less the same algorithm's transfer alone.
        f.base_latency = f.intra_step_latency = f.inter_step_latency = Seconds(0);
        const Seconds lat = t.time - EstimateCollective(f, op, Bytes(*bytes), n)->time;
        const double busbw = *bytes * BusBandwidthFactor(op, n) / t.time.value() / 1e9;
        fmt::print("{:>6} {:>16} {:>10.2f} {:>10.1f} {:>12.2f} {:>9.0f}% {}/{}\n", n,
                   CollectiveName(op), t.time.value() * 1e3, busbw, lat.value() * 1e3,
                   100 * lat.value() / t.time.value(), CollectiveAlgorithmName(t.algorithm),
                   NcclProtocolName(t.protocol));
      }
    }
    return 0;
  }
  fmt::print("{}: {} rows, {} samples of the four collectives\n\n", path, rows->size(),
             samples.size());
  for (const FittedFabric& f : rep.fits) fmt::print("{}", FormatFabric(f));
  fmt::print("\n{}", FormatCollectivesReport(rep));
  return 0;
}
