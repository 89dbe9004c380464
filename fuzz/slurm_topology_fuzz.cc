// Fuzzes ImportSlurmTopology: the input is topology.conf, optionally followed by a line "%%" and
// slurm.conf. Any input must give a Cluster or a Status; an imported cluster must round-trip.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/check.h"
#include "topology/io/slurm.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using baton::topo::SlurmConf;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<SlurmConf> conf;
  if (std::size_t split = text.find("\n%%\n"); split != std::string_view::npos) {
    conf = SlurmConf{text.substr(split + 4), "slurm.conf"};
    text = text.substr(0, split);
  }
  auto cluster = baton::topo::ImportSlurmTopology(text, "topology.conf", conf, 1 << 12);
  if (cluster.ok()) {
    const std::string topo = baton::topo::ExportSlurmTopology(*cluster);
    const std::string nodes = baton::topo::ExportSlurmNodes(*cluster);
    auto again = baton::topo::ImportSlurmTopology(topo, "t.conf", SlurmConf{nodes}, 1 << 12);
    CHECK(again.ok()) << again.status().ToString() << "\n" << topo << nodes;
    CHECK(baton::topo::ExportSlurmTopology(*again) == topo) << topo;
  }
  return 0;
}
