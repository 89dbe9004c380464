// Admission: what the API refuses at submit because it can never run on this cluster, whatever
// else runs (more GPUs than the cluster or than its GPUs of the asked type, an unknown GPU type, a
// topology level the fabric lacks or whose largest domain is smaller than the gang, a per-node
// count larger than any node). Checked against the cluster's structure only: a job that merely
// has to wait is admitted.
//
// Pure functions over an immutable cluster: safe from any thread while nothing mutates it (the
// controller keeps a private copy for this).
#pragma once

#include <string>

#include "core/status.h"
#include "server/http/job_spec.h"
#include "topology/cluster.h"

namespace baton::server {

// OK, or kInvalidArgument whose field() is the API's name for the field at fault ("gpus",
// "gpu_type", "gpus_per_node", "topology.required", "topology.preferred") and whose message says
// why ("field 'gpus': 4096 GPUs but cluster 'superpod-h100' has 1024").
Status AdmitJob(const JobSpec& spec, const topo::Cluster& cluster);

// The GPUs in the largest domain of `level` (a node, an NVLink domain, a leaf's subtree, ...);
// levels the fabric does not have count as the next level up that it has, and the whole cluster
// above its top tier.
int LargestDomainGpus(const topo::Cluster& cluster, topo::Level level);

}  // namespace baton::server
