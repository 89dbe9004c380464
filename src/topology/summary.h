// A readable, multi-line summary of a cluster: nodes, GPUs by type, NVLink domains, switches per
// tier, bandwidth and latency per level, failure domains, and GPU accounting.
#pragma once

#include <string>

#include "topology/cluster.h"

namespace baton::topo {

std::string Summarize(const Cluster& cluster);

}  // namespace baton::topo
