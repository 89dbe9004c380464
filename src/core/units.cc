#include "core/units.h"

#include <fmt/format.h>

#include <cmath>

namespace baton {

std::string FormatBytes(Bytes b) {
  double v = b.value();
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int i = 0;
  while (std::fabs(v) >= 1024.0 && i < 5) {
    v /= 1024.0;
    ++i;
  }
  return i == 0 ? fmt::format("{:.0f} B", v) : fmt::format("{:.1f} {}", v, units[i]);
}

std::string FormatBandwidth(BytesPerSecond bw) {
  double gbps = ToGBps(bw);
  if (gbps >= 1.0) return fmt::format("{:.4g} GB/s", gbps);
  return fmt::format("{:.4g} MB/s", gbps * 1e3);
}

std::string FormatDuration(Seconds s) {
  double v = s.value();
  double a = std::fabs(v);
  if (a >= 3600.0) return fmt::format("{:.2f} h", v / 3600.0);
  if (a >= 1.0) return fmt::format("{:.3g} s", v);
  if (a >= 1e-3) return fmt::format("{:.3g} ms", v * 1e3);
  if (a >= 1e-6) return fmt::format("{:.3g} us", v * 1e6);
  return fmt::format("{:.3g} ns", v * 1e9);
}

}  // namespace baton
