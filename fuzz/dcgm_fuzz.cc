// libFuzzer target for the DCGM exporter's Prometheus text parser (server/http/dcgm.h), which
// reads telemetry scraped from the nodes: any input gives a scrape or an error, never a crash;
// a scrape counts what it used, and every node in it has a name.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/http/dcgm.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto scrape = baton::server::ParseDcgmScrape(text);
  if (!scrape.ok()) return 0;
  if (scrape->nodes.empty() || scrape->samples < 1 || scrape->skipped < 0) __builtin_trap();
  for (const auto& [node, sample] : scrape->nodes) {
    if (node.empty()) __builtin_trap();
  }
  return 0;
}
