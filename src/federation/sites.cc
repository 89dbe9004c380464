#include "federation/sites.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::federation {
namespace {

// Errors name the file, the line (1-based) and the field.
class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Status Error(const YAML::Node& at, std::string_view field, std::string_view reason) const {
    int line = at.IsDefined() ? at.Mark().line + 1 : 0;
    if (line > 0) {
      return InvalidArgumentError(
          fmt::format("{}:{}: field '{}': {}", source_, line, field, reason));
    }
    return InvalidArgumentError(fmt::format("{}: field '{}': {}", source_, field, reason));
  }

  // Only the keys in `known` may appear in the map `n`.
  Status Keys(const YAML::Node& n, std::string_view where,
              std::initializer_list<std::string_view> known) const {
    if (!n.IsMap()) return Error(n, where, "expected a mapping");
    for (const auto& kv : n) {
      std::string key = kv.first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        return Error(kv.first, fmt::format("{}.{}", where, key),
                     fmt::format("unknown field (known: {})", list));
      }
    }
    return Status::Ok();
  }

  Result<std::string> String(const YAML::Node& parent, std::string_view key, std::string_view where,
                             bool required) const {
    YAML::Node n = parent[std::string(key)];
    if (!n.IsDefined()) {
      if (required) return Error(parent, fmt::format("{}.{}", where, key), "missing");
      return std::string();
    }
    if (!n.IsScalar() || n.Scalar().empty()) {
      return Error(n, fmt::format("{}.{}", where, key), "expected a non-empty string");
    }
    return n.Scalar();
  }

  Result<double> Number(const YAML::Node& parent, std::string_view key, std::string_view where,
                        double lo, double hi, bool required, double fallback = 0) const {
    YAML::Node n = parent[std::string(key)];
    std::string field = fmt::format("{}.{}", where, key);
    if (!n.IsDefined()) {
      if (required) return Error(parent, field, "missing");
      return fallback;
    }
    double v = 0;
    if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v)) {
      return Error(n, field, "expected a number");
    }
    if (v < lo || v > hi)
      return Error(n, field, fmt::format("must be in [{}, {}], got {}", lo, hi, v));
    return v;
  }

 private:
  std::string source_;
};

bool Urlish(std::string_view url) {
  return url.starts_with("http://") || url.starts_with("https://");
}

// A dataset name a job spec can give (federation.datasets, server/http/job_spec.cc): a letter
// or digit, then letters, digits, '.', '_' or '-', at most 128. A name no job can ask for would
// leave its dataset unroutable.
bool JobNameable(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

// Largest figures accepted: a dataset of 1 EiB, a link of 100 Tb/s, a latency of 10 s.
constexpr double kMaxDatasetGiB = 1024.0 * 1024 * 1024;
constexpr double kMaxGbps = 100'000;
constexpr double kMaxLatencyMs = 10'000;
// An outage starts and lasts within 10 years (sim/workload/trace.h's horizon).
constexpr double kMaxOutageHours = 10 * 365.25 * 24;

}  // namespace

bool Site::InRegion(std::string_view region) const {
  return std::find(regions.begin(), regions.end(), region) != regions.end();
}

const Dataset* Site::FindDataset(std::string_view dataset) const {
  auto it = std::lower_bound(datasets.begin(), datasets.end(), dataset,
                             [](const Dataset& d, std::string_view n) { return d.name < n; });
  return it != datasets.end() && it->name == dataset ? &*it : nullptr;
}

Seconds TransferTime(Bytes size, const WanLink& link) {
  if (size.value() <= 0) return Seconds(0);
  if (std::isinf(link.bandwidth.value())) return link.latency;
  return link.latency + size / link.bandwidth;
}

int Sites::Find(std::string_view name) const {
  for (std::size_t i = 0; i < sites_.size(); ++i) {
    if (sites_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

WanLink Sites::Link(int a, int b) const {
  if (a == b) return {BytesPerSecond(std::numeric_limits<double>::infinity()), Seconds(0)};
  return links_[static_cast<std::size_t>(a) * sites_.size() + static_cast<std::size_t>(b)];
}

Result<Sites> ParseSites(std::string_view text, std::string_view source) {
  YamlLimits limits;
  limits.max_bytes = kMaxSitesFileBytes;
  limits.max_depth = 16;
  ASSIGN_OR_RETURN(YAML::Node root, LoadYamlBounded(text, source, limits));
  Reader r(source);
  if (!root.IsMap())
    return r.Error(root, "(top level)", "expected a mapping with 'sites' and 'wan'");
  RETURN_IF_ERROR(r.Keys(root, "(top level)", {"sites", "wan"}));

  Sites out;
  out.source_ = std::string(source);
  YAML::Node sites = root["sites"];
  if (!sites.IsDefined()) return r.Error(root, "sites", "missing");
  if (!sites.IsMap() || sites.size() == 0) {
    return r.Error(sites, "sites", "expected a mapping of site name -> site");
  }
  if (sites.size() > kMaxSites) {
    return r.Error(sites, "sites", fmt::format("at most {} sites", kMaxSites));
  }
  std::map<std::string, std::pair<double, int>> dataset_sizes;  // name -> GiB, line
  for (const auto& kv : sites) {
    Site site;
    site.name = kv.first.Scalar();
    site.line = kv.first.Mark().line + 1;
    std::string where = "sites." + site.name;
    if (site.name.empty()) return r.Error(kv.first, "sites", "a site needs a name");
    const YAML::Node& s = kv.second;
    RETURN_IF_ERROR(r.Keys(s, where,
                           {"url", "token_env", "regions", "price_per_gpu_hour", "datasets",
                            "cluster", "scheduler", "outages"}));
    ASSIGN_OR_RETURN(site.url, r.String(s, "url", where, true));
    // One URL, or a site's replicas separated by commas (docs/operations.md).
    for (std::string_view u : Split(site.url, ',')) {
      if (!Urlish(Trim(u))) {
        return r.Error(s["url"], where + ".url",
                       "expected an http:// or https:// URL (or several, separated by commas)");
      }
    }
    ASSIGN_OR_RETURN(site.token_env, r.String(s, "token_env", where, false));
    ASSIGN_OR_RETURN(site.cluster, r.String(s, "cluster", where, false));
    if (!site.cluster.empty()) site.cluster_line = s["cluster"].Mark().line + 1;
    ASSIGN_OR_RETURN(site.scheduler, r.String(s, "scheduler", where, false));
    if (!site.scheduler.empty()) site.scheduler_line = s["scheduler"].Mark().line + 1;
    if (YAML::Node outages = s["outages"]; outages.IsDefined()) {
      if (!outages.IsSequence()) {
        return r.Error(outages, where + ".outages", "expected a list of {start_h, hours}");
      }
      int k = 0;
      for (const auto& o : outages) {
        std::string owhere = fmt::format("{}.outages[{}]", where, k++);
        RETURN_IF_ERROR(r.Keys(o, owhere, {"start_h", "hours"}));
        ASSIGN_OR_RETURN(double start, r.Number(o, "start_h", owhere, 0, kMaxOutageHours, true));
        ASSIGN_OR_RETURN(double hours, r.Number(o, "hours", owhere, 0, kMaxOutageHours, true));
        if (hours <= 0) return r.Error(o["hours"], owhere + ".hours", "must be > 0");
        Outage window{Hours(start), Hours(hours)};
        if (!site.outages.empty()) {
          const Outage& prev = site.outages.back();
          if (window.start < prev.start + prev.duration) {
            return r.Error(o["start_h"], owhere + ".start_h",
                           "overlaps or precedes the outage before it (list them in order, "
                           "apart)");
          }
        }
        site.outages.push_back(window);
      }
    }
    ASSIGN_OR_RETURN(site.price_per_gpu_hour,
                     r.Number(s, "price_per_gpu_hour", where, 0, 1e6, false, 0));
    if (YAML::Node regions = s["regions"]; regions.IsDefined()) {
      if (!regions.IsSequence()) return r.Error(regions, where + ".regions", "expected a list");
      for (const auto& reg : regions) {
        if (!reg.IsScalar() || reg.Scalar().empty()) {
          return r.Error(reg, where + ".regions", "expected a region name");
        }
        site.regions.push_back(reg.Scalar());
      }
    }
    if (YAML::Node ds = s["datasets"]; ds.IsDefined()) {
      if (!ds.IsMap()) return r.Error(ds, where + ".datasets", "expected name -> {size_gib: N}");
      for (const auto& d : ds) {
        std::string dwhere = where + ".datasets." + d.first.Scalar();
        if (!JobNameable(d.first.Scalar())) {
          return r.Error(d.first, where + ".datasets",
                         fmt::format("'{}': a dataset name is a letter or digit, then letters, "
                                     "digits, '.', '_' or '-' (at most 128), as jobs name it",
                                     d.first.Scalar()));
        }
        RETURN_IF_ERROR(r.Keys(d.second, dwhere, {"size_gib"}));
        ASSIGN_OR_RETURN(double gib,
                         r.Number(d.second, "size_gib", dwhere, 0, kMaxDatasetGiB, true));
        auto [it, fresh] =
            dataset_sizes.emplace(d.first.Scalar(), std::pair{gib, d.first.Mark().line + 1});
        if (!fresh && it->second.first != gib) {
          return r.Error(d.second, dwhere + ".size_gib",
                         fmt::format("{} GiB here but {} GiB at line {}: one dataset, one size",
                                     gib, it->second.first, it->second.second));
        }
        site.datasets.push_back({d.first.Scalar(), Bytes(gib * 1024.0 * 1024 * 1024)});
      }
      std::sort(site.datasets.begin(), site.datasets.end(),
                [](const Dataset& a, const Dataset& b) { return a.name < b.name; });
    }
    out.sites_.push_back(std::move(site));
  }

  const std::size_t n = out.sites_.size();
  out.links_.assign(n * n, WanLink{});
  std::vector<int> seen(n * n, 0);  // the line of the pair's entry; 0: none yet
  YAML::Node wan = root["wan"];
  if (n > 1 && !wan.IsDefined()) return r.Error(root, "wan", "missing (more than one site)");
  if (wan.IsDefined() && !wan.IsSequence()) return r.Error(wan, "wan", "expected a list");
  int index = 0;
  for (const auto& link : wan) {
    std::string where = fmt::format("wan[{}]", index++);
    RETURN_IF_ERROR(r.Keys(link, where, {"between", "gbps", "latency_ms"}));
    YAML::Node between = link["between"];
    if (!between.IsDefined()) return r.Error(link, where + ".between", "missing");
    if (!between.IsSequence() || between.size() != 2 || !between[0].IsScalar() ||
        !between[1].IsScalar()) {
      return r.Error(between, where + ".between", "expected two site names");
    }
    int a = out.Find(between[0].Scalar());
    int b = out.Find(between[1].Scalar());
    for (int k = 0; k < 2; ++k) {
      if ((k == 0 ? a : b) < 0) {
        return r.Error(between[k], where + ".between",
                       fmt::format("unknown site '{}'", between[k].Scalar()));
      }
    }
    if (a == b) {
      return r.Error(between, where + ".between",
                     fmt::format("a link from site '{}' to itself", between[0].Scalar()));
    }
    std::size_t ab = static_cast<std::size_t>(a) * n + static_cast<std::size_t>(b);
    if (seen[ab] != 0) {
      return r.Error(between, where + ".between",
                     fmt::format("second entry for {} <-> {} (first at line {})",
                                 between[0].Scalar(), between[1].Scalar(), seen[ab]));
    }
    ASSIGN_OR_RETURN(double gbps, r.Number(link, "gbps", where, 1e-3, kMaxGbps, true));
    ASSIGN_OR_RETURN(double ms, r.Number(link, "latency_ms", where, 0, kMaxLatencyMs, true));
    WanLink l{BytesPerSecond(gbps * 1e9 / 8), Seconds(ms / 1e3)};
    std::size_t ba = static_cast<std::size_t>(b) * n + static_cast<std::size_t>(a);
    out.links_[ab] = out.links_[ba] = l;
    seen[ab] = seen[ba] = between.Mark().line + 1;
  }
  for (std::size_t a = 0; a < n; ++a) {
    for (std::size_t b = a + 1; b < n; ++b) {
      if (seen[a * n + b] == 0) {
        return r.Error(wan.IsDefined() ? wan : root, "wan",
                       fmt::format("no entry between '{}' and '{}' (every pair of sites needs one)",
                                   out.sites_[a].name, out.sites_[b].name));
      }
    }
  }
  return out;
}

Result<Sites> LoadSitesFile(const std::string& path) {
  ASSIGN_OR_RETURN(
      std::string text,
      ReadFileBounded(path, Bytes(static_cast<double>(kMaxSitesFileBytes)), "sites file"));
  return ParseSites(text, path);
}

}  // namespace baton::federation
