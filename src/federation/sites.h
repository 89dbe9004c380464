// The sites file of `baton federate` and `baton sim --sites`: the computing centres a broker
// routes jobs across, the WAN between them, and where datasets are stored. Pure data and its
// parser; no I/O beyond reading the file.
//
//   sites:
//     shenzhen:
//       url: https://sz.example.org:8443   # a `baton serve` (http or https); its replicas:
//                                          # their URLs separated by commas
//       token_env: BATON_SITE_SZ_TOKEN     # the broker's token for it, from the environment
//                                          # (the broker requires one per site)
//       regions: [cn, cn-south]            # labels a job may require or exclude
//       price_per_gpu_hour: 2.10           # any currency, the same for every site
//       datasets:
//         corpus-zh: {size_gib: 3072}
//       cluster: clusters/shenzhen.yaml    # simulator only: the site's cluster file, relative
//                                          # to the sites file (`baton sim --sites`)
//       scheduler: backfill                # simulator only: a named scheduler config
//       outages:                           # simulator only: windows the site is down
//         - {start_h: 12, hours: 6}
//     hefei: {...}
//   wan:                                   # one entry per pair of sites, both directions
//     - {between: [shenzhen, hefei], gbps: 10, latency_ms: 28}
//
// Contract: ParseSites refuses, with "FILE:LINE: field 'F': reason" and without a partial
// result, an unknown or duplicate key, a missing field, a value out of range, a WAN entry
// from a site to itself, one naming an unknown site, two entries for one pair, a pair of sites
// with no entry (every site must reach every other directly: staging is priced over one link),
// a dataset name a job could not give (a letter or digit, then letters, digits, '.', '_' or '-'),
// and a dataset name stored at two sites with different sizes, an outage with a negative start or
// no length, and outages of one site that overlap. `cluster` and `scheduler` are kept as written
// (with their lines, for the simulator's FILE:LINE errors); the broker ignores them and the
// outages.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace baton::federation {

inline constexpr std::size_t kMaxSites = 256;
inline constexpr std::size_t kMaxSitesFileBytes = std::size_t{1} << 20;

struct Dataset {
  std::string name;
  Bytes size;
};

// A window in which a simulated site is down (its compute: its storage stays readable over the
// WAN), from `start` after the simulation's first submission, for `duration`.
struct Outage {
  Seconds start;
  Seconds duration;
};

struct Site {
  std::string name;
  std::string url;
  int line = 0;           // where its entry starts in the sites file
  std::string token_env;  // empty: none (the broker refuses such a site; the simulator needs none)
  std::vector<std::string> regions;
  double price_per_gpu_hour = 0;
  std::vector<Dataset> datasets;  // sorted by name
  // Simulator-only fields (`baton sim --sites`); the broker ignores them.
  std::string cluster;          // a cluster file, as written (relative to the sites file)
  int cluster_line = 0;         // its line in the sites file (0: absent)
  std::string scheduler;        // a named scheduler config (sched::PolicyPreset), as written
  int scheduler_line = 0;       // its line in the sites file (0: absent)
  std::vector<Outage> outages;  // sorted by start, not overlapping

  bool InRegion(std::string_view region) const;
  const Dataset* FindDataset(std::string_view dataset) const;
};

struct WanLink {
  BytesPerSecond bandwidth;
  Seconds latency;
};

// Time to move `size` over `link`: its latency plus size / bandwidth, one transfer at the link's
// full rate (sharing between concurrent transfers is the caller's to model).
Seconds TransferTime(Bytes size, const WanLink& link);

class Sites {
 public:
  const std::vector<Site>& sites() const { return sites_; }
  // The file (or text) it was parsed from, as ParseSites was told, for FILE:LINE errors.
  const std::string& source() const { return source_; }
  // Index of the site called `name`, or -1.
  int Find(std::string_view name) const;
  // The link between two different sites (both directions alike). Same site: infinite
  // bandwidth, zero latency (nothing crosses the WAN).
  WanLink Link(int a, int b) const;

 private:
  friend Result<Sites> ParseSites(std::string_view text, std::string_view source);
  std::string source_;
  std::vector<Site> sites_;
  std::vector<WanLink> links_;  // n x n, row-major
};

// `source` names the file in errors.
Result<Sites> ParseSites(std::string_view text, std::string_view source);
// Size-checked read (kMaxSitesFileBytes) then ParseSites.
Result<Sites> LoadSitesFile(const std::string& path);

}  // namespace baton::federation
