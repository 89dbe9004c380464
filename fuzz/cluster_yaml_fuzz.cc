// Fuzzes LoadClusterYaml: any input must give a Cluster or a Status, never a crash, a sanitizer
// report or an exception. A loaded cluster must survive export and reload.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/check.h"
#include "topology/io/cluster_yaml.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A small node cap keeps each run fast; the parser is the same at any cap.
  auto cluster = baton::topo::LoadClusterYaml(text, "fuzz.yaml", 1 << 12);
  if (cluster.ok()) {
    const std::string yaml = baton::topo::ExportClusterYaml(*cluster);
    auto again = baton::topo::LoadClusterYaml(yaml, "export.yaml", 1 << 12);
    CHECK(again.ok()) << again.status().ToString() << "\n" << yaml;
    CHECK(baton::topo::ExportClusterYaml(*again) == yaml) << yaml;
  }
  return 0;
}
