// Loads a cluster from a file on disk, whichever format it is in: cluster YAML or a Slurm
// topology.conf.
#pragma once

#include <string>

#include "core/status.h"
#include "topology/cluster.h"

namespace baton::topo {

// Reads `path` (at most 64 MiB: a larger file is ResourceExhausted without being read) and
// parses it by extension (.yaml/.yml: cluster YAML; .conf: topology.conf) or, for other names,
// by content (a first statement "SwitchName=..." means topology.conf). A topology.conf takes its
// node shapes from a slurm.conf in the same directory when there is one. Errors name the path.
Result<Cluster> LoadClusterFile(const std::string& path);

}  // namespace baton::topo
