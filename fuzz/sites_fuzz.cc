// libFuzzer target for the federation sites file (federation/sites.h): any input gives a set of
// sites or an error, never a crash; a parsed set has a link for every pair of distinct sites.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "federation/sites.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto sites = baton::federation::ParseSites(text, "fuzz.yaml");
  if (!sites.ok()) return 0;
  const int n = static_cast<int>(sites->sites().size());
  if (n == 0) __builtin_trap();
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      auto link = sites->Link(a, b);
      if (a != b && !(link.bandwidth.value() > 0 && std::isfinite(link.bandwidth.value()))) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
