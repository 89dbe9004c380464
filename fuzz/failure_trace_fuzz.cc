// libFuzzer target for the failure-trace reader (time_s,node,cause,repair_s against a small
// cluster): any input gives events or an error naming its line, never a crash; events are in time
// order, within kTraceHorizon, on nodes of the cluster.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <utility>

#include "sim/workload/failures.h"
#include "sim/workload/trace.h"
#include "topology/builders/fabrics.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace baton;
  static const topo::Cluster cluster = [] {
    topo::FatTreeParams p;
    p.layout.nodes = 4;
    p.tiers = 2;
    p.nodes_per_leaf = 2;
    p.leaves_per_spine = 2;
    auto built = topo::BuildFatTree(p);
    if (!built.ok()) __builtin_trap();
    return std::move(built).value();
  }();
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  sim::FailureTraceReader reader(in, "failures.csv", cluster);
  Seconds last(0);
  while (true) {
    auto next = reader.Next();
    if (!next.ok() || !next->has_value()) break;
    const sim::FailureEvent& e = **next;
    if (e.time < last || e.time > sim::kTraceHorizon || e.repair > sim::kTraceHorizon) {
      __builtin_trap();
    }
    if (e.node.value() >= cluster.nodes().size()) __builtin_trap();
    last = e.time;
  }
  return 0;
}
