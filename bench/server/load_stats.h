// Latency bookkeeping shared by the server benchmarks: per-thread samples merged into
// throughput and percentiles.
#pragma once

#include <algorithm>
#include <cstdio>
#include <vector>

namespace baton::bench {

struct LoadStats {
  std::vector<double> latencies_s;  // one per successful operation
  long errors = 0;
  double elapsed_s = 0;  // the measurement's wall time, where one runner measured it

  void Merge(const LoadStats& o) {
    latencies_s.insert(latencies_s.end(), o.latencies_s.begin(), o.latencies_s.end());
    errors += o.errors;
  }
  double Percentile(double p) {
    if (latencies_s.empty()) return 0;
    std::sort(latencies_s.begin(), latencies_s.end());
    auto i = static_cast<std::size_t>(p * static_cast<double>(latencies_s.size() - 1));
    return latencies_s[i];
  }
  // Prints "label: N ops in T s = R/s, p50 X ms, p99 Y ms, max Z ms, E errors"; returns R.
  double Print(const char* label, double seconds) {
    double rate = static_cast<double>(latencies_s.size()) / seconds;
    double p50 = Percentile(0.50), p99 = Percentile(0.99);
    double max = latencies_s.empty() ? 0 : latencies_s.back();
    std::printf(
        "%s: %zu ops in %.2f s = %.0f/s, p50 %.2f ms, p99 %.2f ms, max %.2f ms, %ld errors\n",
        label, latencies_s.size(), seconds, rate, p50 * 1e3, p99 * 1e3, max * 1e3, errors);
    return rate;
  }
};

}  // namespace baton::bench
