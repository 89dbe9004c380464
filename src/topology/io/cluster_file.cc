#include "topology/io/cluster_file.h"

#include <filesystem>
#include <system_error>

#include "core/strings.h"
#include "topology/io/cluster_yaml.h"
#include "topology/io/common.h"
#include "topology/io/slurm.h"

namespace baton::topo {
namespace {

bool LooksLikeSlurmTopology(std::string_view text) {
  for (std::string_view line : Split(text, '\n')) {
    line = Trim(line);
    if (line.empty() || line.front() == '#') continue;
    return line.size() >= 11 && EqualsIgnoreCase(line.substr(0, 11), "switchname=");
  }
  return false;
}

}  // namespace

Result<Cluster> LoadClusterFile(const std::string& path) {
  namespace fs = std::filesystem;
  ASSIGN_OR_RETURN(std::string text, ReadFileCapped(path));
  const fs::path p(path);
  const std::string ext = ToLower(p.extension().string());
  const bool slurm =
      ext == ".conf" || (ext != ".yaml" && ext != ".yml" && LooksLikeSlurmTopology(text));
  if (!slurm) return LoadClusterYaml(text, path);

  const fs::path conf_path = p.parent_path() / "slurm.conf";
  std::error_code ec;
  if (p.filename() == "slurm.conf" || !fs::is_regular_file(conf_path, ec)) {
    return ImportSlurmTopology(text, path);
  }
  ASSIGN_OR_RETURN(std::string conf, ReadFileCapped(conf_path.string()));
  const std::string conf_name = conf_path.string();
  return ImportSlurmTopology(text, path, SlurmConf{conf, conf_name});
}

}  // namespace baton::topo
