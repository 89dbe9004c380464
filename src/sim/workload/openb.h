// The Alibaba openb GPU cluster trace (cluster-trace-gpu-v2023, used by FGD, ATC'23) as the
// packing protocol reads it: the node list (`sn,cpu_milli,memory_mib,gpu,model`) and the pod list
// in its full form (`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
// creation_time,deletion_time,scheduled_time`) or any variant with fewer columns: the header
// names the columns, `name,cpu_milli,memory_mib,num_gpu,gpu_milli` are required, the others
// optional, unknown ones ignored. Every pod is kept, never-scheduled and CPU-only ones included
// (they are demand). Input is bounded (line length, line count) and every error names
// file:line and the field. This is the one parser of openb pod rows: the packing protocol reads
// lists through ReadOpenbPods, the event simulator's `openb` trace format through
// OpenbPodColumns.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "topology/cluster.h"

namespace baton::sim {

struct OpenbNode {
  std::string name;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int gpus = 0;
  std::string model;
};

struct OpenbPod {
  std::string name;
  std::int64_t cpu_milli = 0;
  std::int64_t memory_mib = 0;
  int num_gpu = 0;    // 0: CPU-only
  int gpu_milli = 0;  // per GPU: 1000 whole GPUs, 1..999 a share of one GPU (num_gpu 1)
  std::vector<std::string> gpu_spec;  // accepted GPU models (`A|B`); empty: any
  std::string qos;
  std::string phase;
  // Seconds since the trace's start, when the list has the column and the row a value.
  std::optional<double> creation_time;
  std::optional<double> deletion_time;
  std::optional<double> scheduled_time;
  // GPU thousandths the pod asks for in all: num_gpu x gpu_milli.
  std::int64_t TotalGpuMilli() const { return std::int64_t{num_gpu} * gpu_milli; }
};

// The columns of a pod list, from its header, and the parser of one row.
class OpenbPodColumns {
 public:
  // Errors: a column named twice, a required column missing.
  static Result<OpenbPodColumns> FromHeader(std::span<const std::string_view> names);
  std::size_t width() const { return width_; }
  // One data row (as many fields as the header). Errors name the field.
  Result<OpenbPod> Parse(std::span<const std::string_view> fields) const;

 private:
  std::size_t width_ = 0;
  int name_ = -1, cpu_ = -1, memory_ = -1, gpus_ = -1, milli_ = -1;  // required
  int spec_ = -1, qos_ = -1, phase_ = -1, created_ = -1, deleted_ = -1, scheduled_ = -1;
};

// Splits a CSV line at commas, trimming each field (openb has no quoting).
std::vector<std::string_view> SplitOpenbCsv(std::string_view line);

struct OpenbLimits {
  std::size_t max_line_bytes = 4096;
  std::size_t max_lines = 10'000'000;
};

Result<std::vector<OpenbNode>> ReadOpenbNodes(std::istream& in, std::string_view file,
                                              OpenbLimits limits = {});
Result<std::vector<OpenbPod>> ReadOpenbPods(std::istream& in, std::string_view file,
                                            OpenbLimits limits = {});
Result<std::vector<OpenbNode>> ReadOpenbNodesFile(const std::string& path);
Result<std::vector<OpenbPod>> ReadOpenbPodsFile(const std::string& path);

// The cluster of `nodes`: one node shape per distinct (model, GPUs, CPU, memory), every model not
// in the built-in catalogue declared as an open-catalogue GPU type with no performance figures,
// all nodes under one leaf switch (the trace has no network topology). Errors: a CPU amount that
// is not whole cores (node shapes count cores), a node with no GPU.
Result<topo::Cluster> OpenbCluster(std::span<const OpenbNode> nodes, std::string name = "openb");

}  // namespace baton::sim
