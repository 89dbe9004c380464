// libFuzzer target for the daemon-history reader (sched/history/history.h), what
// `baton sim --replay-daemon` reads. The input follows a fixed header and run line (a 4-node
// cluster), so the fuzzer spends its time on cycle lines (and may start runs of its own).
// Besides "no crash, no sanitizer report": every error names the file and a line, and every
// placement read back is non-empty with masks that fit their node.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "sched/history/history.h"
#include "topology/builders/fabrics.h"
#include "topology/io/cluster_yaml.h"

namespace {

const std::string& Prefix() {
  static const std::string prefix = [] {
    baton::topo::FatTreeParams p;
    p.layout.nodes = 4;
    p.layout.node_prefix = "n";
    p.tiers = 2;
    p.nodes_per_leaf = 2;
    auto cluster = baton::topo::BuildFatTree(p);
    if (!cluster.ok()) __builtin_trap();
    namespace h = baton::sched::history;
    return h::HeaderLine() + "\n" +
           h::EncodeRun({1, baton::TimePoint{baton::Seconds(1)},
                         baton::topo::ExportClusterYaml(*cluster), ""}) +
           "\n";
  }();
  return prefix;
}

void CheckPlacement(const baton::topo::Cluster& c, const baton::sched::Placement& p) {
  if (p.nodes.empty()) __builtin_trap();
  for (const auto& a : p.nodes) {
    if (a.mask == 0 || a.node.value() >= c.nodes().size()) __builtin_trap();
    const int gpus = c.node(a.node).gpus;
    if (gpus < 64 && (a.mask >> gpus) != 0) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace h = baton::sched::history;
  std::istringstream in(Prefix() + std::string(reinterpret_cast<const char*>(data), size));
  h::Reader reader(in, "fuzz/history.jsonl");
  std::shared_ptr<const baton::topo::Cluster> cluster;
  while (true) {
    auto next = reader.Next();
    if (!next.ok()) {
      if (next.status().message().rfind("fuzz/history.jsonl:", 0) != 0) __builtin_trap();
      break;
    }
    if (!next->has_value()) break;
    if (auto* run = std::get_if<h::Reader::RunStart>(&**next)) {
      cluster = run->cluster;
      continue;
    }
    const h::Cycle& c = std::get<h::Reader::CycleRead>(**next).cycle;
    if (cluster == nullptr) __builtin_trap();
    for (const auto* list : {&c.binds, &c.replacements, &c.resizes}) {
      for (const h::Placed& p : *list) CheckPlacement(*cluster, p.placement);
    }
    for (const auto& e : c.events) {
      if (e.kind == baton::sched::Event::Kind::kAdopt) CheckPlacement(*cluster, e.placement);
    }
  }
  return 0;
}
