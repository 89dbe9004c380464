// Parses the Prometheus text exposition of NVIDIA's DCGM exporter into one health sample per node:
// the fields health/health.h knows (XID, double-bit ECC, PCIe replays, NVLink errors, GPU
// temperature), keyed by the `Hostname` label, each the worst value over the node's GPUs (the
// maximum; for XID the highest code seen). Other metrics, comments and malformed lines are
// skipped (and counted). Pure; never throws.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "core/status.h"
#include "server/controller.h"

namespace baton::server {

struct DcgmScrape {
  std::map<std::string, TelemetrySample> nodes;  // Hostname -> sample
  int samples = 0;                               // lines used
  int skipped = 0;                               // malformed lines or ones without Hostname
};

// kInvalidArgument when nothing in `text` is a DCGM health field with a Hostname label.
Result<DcgmScrape> ParseDcgmScrape(std::string_view text);

}  // namespace baton::server
