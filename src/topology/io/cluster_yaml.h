// Cluster description files in YAML: how a real cluster (or a generated one) is written down and
// read back. The reader checks every field and names file:line:column and the field in errors;
// the writer uses hostlist ranges so that a 131,072-GPU cluster takes a few KB.
//
// Format (all sections but name, shapes and nodes are optional):
//
//   name: my-cluster
//   fabric: fat-tree            # fat-tree | rail-optimized | dragonfly+ | custom (default)
//   gpu_types:                  # GPUs outside the catalogue; every figure optional (0: unknown)
//     H20: {memory_gib: 96, fp32_tflops: 44, tf32_tflops: 74, bf16_tflops: 148, fp8_tflops: 296,
//           hbm_gbps: 4000, nvlink_gbps: 450, sm_count: 78,
//           family: hopper}     # ampere | hopper | blackwell: the planner refuses a type without
//   shapes:                     # name -> node shape
//     hgx-h100: {gpu: H100-SXM, gpus: 8, cpus: 224, memory_gib: 2048, numa_nodes: 2,
//                gpus_per_pcie_switch: 2, nics: 8, nic_gbps: 400,
//                extended: {rdma_nic: 4, nvme_gb: 3000}}   # named extended resources
//   nodes:                      # in order; names is a hostlist
//     - {names: "gpu[001-128]", shape: hgx-h100, labels: {zone: a}}
//   nvlink_domains:             # multi-node NVLink domains (NVL72 racks)
//     - {name: nvl01, nodes: "gb[001-018]"}
//   switches:                   # a leaf lists nodes, an upper switch lists switches
//     - {name: leaf01, nodes: "gpu[001-032]"}
//     - {name: "leaf[02-04]", nodes: "gpu[033-128]", nodes_each: 32}
//     - {name: "leaf[05-06]", nodes_each: 32}   # the next nodes not yet under a leaf
//     - {name: spine01, switches: "leaf[01-04]"}
//   tiers: [leaf, spine, core]  # the Level of each switch tier, leaf first
//   oversubscription: [1, 2]    # downlink:uplink ratio of each tier's uplinks
//   links:                      # overrides of the derived link table, by level
//     spine: {gbps_per_gpu: 200, latency_us: 3.5}
//   failure_domains:            # kind: rack | pdu | row
//     - {kind: rack, name: "r[01-32]", nodes: "gpu[001-128]", nodes_each: 4}
//
// A group entry whose name is a hostlist of k names takes `nodes_each` (or `switches_each`)
// consecutive members per name, in order. Shape defaults: cpus 0, memory_gib 0, numa_nodes 2,
// gpus_per_pcie_switch 2 (1 for an odd GPU count), nics = gpus, nic_gbps 400; latency_us defaults
// to DefaultLatency(level). `extended` (named extended resources, as Kubernetes has them) maps
// at most 16 names of [a-z][a-z0-9_./-]{0,62} (e.g. rdma_nic, nvme_gb, example.com/fpga), each
// once, to whole amounts 0..2^50; a node has none of a resource its shape does not list, jobs
// request them per task (GangJob::extended), and a cluster holds at most 64 distinct names.
//
// Instead of the lists, `builder:` describes a standard fabric by the parameters of
// builders/fabrics.h: {kind: fat-tree | rail-optimized | dragonfly+, then the NodeLayout fields
// (nodes, node_prefix, gpu, gpus_per_node, cpus, memory_gib, numa_nodes, gpus_per_pcie_switch,
// nics, nic_gbps, nodes_per_nvlink_domain, nodes_per_rack, pdus_per_rack, racks_per_row) and the
// fields of that kind's Params struct}; only `name` may sit beside it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"
#include "topology/cluster.h"
#include "topology/io/hostlist.h"

namespace baton::topo {

// Parses and validates a cluster file. Input over 64 MiB is ResourceExhausted and binary or
// non-UTF-8 input InvalidArgument, both before parsing; every other error is InvalidArgument (or
// AlreadyExists / NotFound / ResourceExhausted from the builder) reading
// "cluster.yaml:12:7: field 'gpus': must be > 0, got -1". Never throws. The YAML goes through
// LoadYamlBounded (depth, alias expansion and duplicate keys bounded before the walk). A cluster
// of more than `max_nodes` nodes, or a file whose hostlists expand to more than 8 x max_nodes
// names in all, is ResourceExhausted, found before a hostlist past the cap is expanded.
Result<Cluster> LoadClusterYaml(std::string_view text, std::string_view filename,
                                std::size_t max_nodes = kMaxClusterFileNodes);

// Writes `cluster` in the format above (explicit lists, the full link table, consecutive equal
// entries merged into hostlist groups). LoadClusterYaml reads it back into an equivalent cluster,
// and exporting that again gives the same bytes.
std::string ExportClusterYaml(const Cluster& cluster);

}  // namespace baton::topo
