#include "perf/collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "core/bounded_input.h"
#include "core/check.h"
#include "core/strings.h"

namespace baton::perf {

namespace {

constexpr std::array<std::string_view, 4> kNames = {"all_reduce", "all_gather", "reduce_scatter",
                                                    "alltoall"};

int Log2Floor(int v) {
  int r = 0;
  while (v > 1) {
    v >>= 1;
    ++r;
  }
  return r;
}

// The GPUs of one domain that a group of `ranks` packed onto domains of `domain_gpus` holds.
int GroupPerDomain(int ranks, int domain_gpus) { return std::min(ranks, domain_gpus); }
int Domains(int ranks, int domain_gpus) { return (ranks + domain_gpus - 1) / domain_gpus; }

std::array<double, kFabricTerms> ThetaOf(const CollectiveFabric& f) {
  auto inv = [](BytesPerSecond b) { return b.value() > 0 ? 1.0 / b.value() : 0.0; };
  return {f.base_latency.value(), f.intra_step_latency.value(), f.inter_step_latency.value(),
          inv(f.intra_bus_bandwidth), inv(f.inter_bus_bandwidth)};
}

// Latency terms add; the NVLink and network transfers run at once, so the slower one counts.
double Dot(const CollectiveTerms& t, const std::array<double, kFabricTerms>& theta) {
  double s = 0;
  for (int k = 0; k < 3; ++k) s += t.coefficient[k] * theta[k];
  return s + std::max(t.coefficient[3] * theta[3], t.coefficient[4] * theta[4]);
}

// The terms with the bandwidth that does not bind zeroed: linear in theta near theta, what a
// Gauss-Newton step of the fit works on. Both kept while they tie (both unknown).
CollectiveTerms Active(CollectiveTerms t, const std::array<double, kFabricTerms>& theta) {
  const double nvlink = t.coefficient[3] * theta[3], network = t.coefficient[4] * theta[4];
  if (nvlink > network) t.coefficient[4] = 0;
  if (network > nvlink) t.coefficient[3] = 0;
  return t;
}

// Whether a sample with these terms measures bandwidth column k: the network's whenever it
// crosses it; NVLink's only inside one domain (across domains NVLink may never bind).
bool Informs(const CollectiveTerms& t, int k) {
  return k == 4 ? t.coefficient[4] > 0 : t.coefficient[3] > 0 && t.coefficient[4] == 0;
}

// A collective needs the network's bandwidth when it crosses it, NVLink's when it does not.
bool HasBandwidth(const CollectiveTerms& raw, const std::array<double, kFabricTerms>& theta) {
  if (raw.coefficient[4] > 0) return theta[4] > 0;
  return raw.coefficient[3] == 0 || theta[3] > 0;
}

// The fastest candidate's terms under `theta`.
CollectiveTerms FasterTerms(Collective op, Bytes bytes, int ranks, int domain_gpus,
                            const std::array<double, kFabricTerms>& theta) {
  const CollectiveCandidates c = CandidateTerms(op, bytes, ranks, domain_gpus);
  int best = 0;
  double best_time = Dot(c.terms[0], theta);
  for (int i = 1; i < c.count; ++i) {
    const double t = Dot(c.terms[i], theta);
    if (t < best_time) {
      best = i;
      best_time = t;
    }
  }
  return Active(c.terms[best], theta);
}

// tuning.cc's latencies in us, [algorithm: ring, tree][protocol: LL, LL128, Simple]: baseLat,
// hwLat[NVLINK], hwLat[NET].
constexpr double kBaseLatUs[2][3] = {{6.6, 14.0, 8.4}, {6.8, 14.0, 0}};
constexpr double kNvlinkLatUs[2][3] = {{0.47, 1.9, 3.4}, {0.52, 1.2, 28}};
constexpr double kNetLatUs[2][3] = {{2.7, 4.0, 9.6}, {5.0, 8.5, 50}};

// tuning.cc's share of the ring/Simple bus bandwidth each pair reaches: ring LL 1/4 (1/3 for
// all-gather and reduce-scatter inside one node), ring LL128 0.92 (0.7 with one GPU per node);
// tree 0.9 of the ring, LL 1/3.8 of that, LL128 0.915 (7/9 inside one node).
double BandwidthShare(CollectiveAlgorithm a, NcclProtocol p, Collective op, int domains,
                      int per_domain) {
  if (a == CollectiveAlgorithm::kRing) {
    switch (p) {
      case NcclProtocol::kLL:
        return domains > 1 || op == Collective::kAllReduce ? 1.0 / 4 : 1.0 / 3;
      case NcclProtocol::kLL128:
        return per_domain < 2 ? 0.7 : 0.92;
      case NcclProtocol::kSimple:
        return 1;
    }
  }
  switch (p) {
    case NcclProtocol::kLL:
      return 0.9 / 3.8;
    case NcclProtocol::kLL128:
      return 0.9 * (domains == 1 ? 7.0 / 9 : 0.915);
    case NcclProtocol::kSimple:
      return 0.9;
  }
  return 1;
}

}  // namespace

std::string_view CollectiveName(Collective op) { return kNames[static_cast<int>(op)]; }

std::optional<Collective> ParseCollective(std::string_view name) {
  std::string n = ToLower(Trim(name));
  if (n.size() > 5 && n.ends_with("_perf")) n.resize(n.size() - 5);
  std::erase(n, '_');
  for (Collective op : kCollectives) {
    std::string k(CollectiveName(op));
    std::erase(k, '_');
    if (n == k) return op;
  }
  return std::nullopt;
}

std::string_view CollectiveAlgorithmName(CollectiveAlgorithm a) {
  return a == CollectiveAlgorithm::kRing ? "ring" : "tree";
}

std::string_view NcclProtocolName(NcclProtocol p) {
  constexpr std::array<std::string_view, 3> kProtocols = {"LL", "LL128", "Simple"};
  return kProtocols[static_cast<int>(p)];
}

double BusBandwidthFactor(Collective op, int ranks) {
  CHECK(ranks >= 1);
  const double n = ranks;
  return op == Collective::kAllReduce ? 2 * (n - 1) / n : (n - 1) / n;
}

CollectiveCandidates CandidateTerms(Collective op, Bytes bytes, int ranks, int domain_gpus) {
  CHECK(ranks >= 2 && domain_gpus >= 1) << "ranks " << ranks << " domain " << domain_gpus;
  const int g = GroupPerDomain(ranks, domain_gpus);
  const int m = Domains(ranks, domain_gpus);
  const double s = bytes.value(), n = ranks;
  CollectiveCandidates out;
  if (op == Collective::kAllToAll) {
    CollectiveTerms& t = out.terms[out.count++];
    t.coefficient = {1, double(g - 1), double(ranks - g), s * (g - 1) / n, s * (ranks - g) / n};
    return out;
  }
  const bool all_reduce = op == Collective::kAllReduce;
  auto add = [&](CollectiveAlgorithm a, NcclProtocol p, double intra_steps, double inter_steps,
                 double bus_bytes) {
    const int ai = static_cast<int>(a), pi = static_cast<int>(p);
    CollectiveTerms& t = out.terms[out.count++];
    t.algorithm = a;
    t.protocol = p;
    // tuning.cc: LL's NVLink latency is 1.8x when the collective leaves the node.
    const double ll_multi_node = p == NcclProtocol::kLL && m > 1 ? 1.8 : 1.0;
    t.coefficient[0] = kBaseLatUs[ai][pi] / kBaseLatUs[0][0];
    t.coefficient[1] = intra_steps * ll_multi_node * kNvlinkLatUs[ai][pi] / kNvlinkLatUs[0][0];
    t.coefficient[2] = inter_steps * kNetLatUs[ai][pi] / kNetLatUs[0][0];
    // Across domains the bytes cross NVLink at the bus rate and the network through the
    // domain's NICs, g of them sharing the load (NCCL runs one ring per channel, each leaving
    // the domain through its own NIC): per GPU, 1 / g of the bus bytes.
    const double share = BandwidthShare(a, p, op, m, g);
    t.coefficient[3] = bus_bytes / share;
    if (m > 1) t.coefficient[4] = bus_bytes / share / g;
  };
  const int steps = all_reduce ? 2 * (ranks - 1) : ranks - 1;
  const int inter_steps = all_reduce ? 2 * (m - 1) : m - 1;
  const double ring_bytes = s * BusBandwidthFactor(op, ranks);
  for (NcclProtocol p : {NcclProtocol::kSimple, NcclProtocol::kLL, NcclProtocol::kLL128}) {
    add(CollectiveAlgorithm::kRing, p, steps - inter_steps, inter_steps, ring_bytes);
  }
  if (all_reduce) {
    for (NcclProtocol p : {NcclProtocol::kSimple, NcclProtocol::kLL, NcclProtocol::kLL128}) {
      add(CollectiveAlgorithm::kTree, p, 2.0 * (g - 1), 2.0 * Log2Floor(m), 2 * s);
    }
  }
  return out;
}

std::optional<CollectiveTime> EstimateCollective(const CollectiveFabric& fabric, Collective op,
                                                 Bytes bytes, int ranks) {
  if (ranks < 2) return CollectiveTime{};
  const auto theta = ThetaOf(fabric);
  if (!HasBandwidth(CandidateTerms(op, bytes, ranks, fabric.domain_gpus).terms[0], theta)) {
    return std::nullopt;
  }
  CollectiveTerms t = FasterTerms(op, bytes, ranks, fabric.domain_gpus, theta);
  return CollectiveTime{Seconds(Dot(t, theta)), t.algorithm, t.protocol};
}

// ---------------------------------------------------------------------------------------------
// The published table.

namespace {

// One CSV record on one line (RFC 4180 quoting; the table has no line breaks inside fields).
Result<std::vector<std::string>> SplitCsvLine(std::string_view line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        out.back() += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        out.back() += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  if (quoted) return InvalidArgumentError("unterminated quote");
  return out;
}

constexpr std::array<std::string_view, 17> kCsvColumns = {
    "id",         "system",       "gpu",        "gpus",  "nodes",   "gpus_per_node",
    "intra",      "inter",        "collective", "bytes", "time_us", "algbw_gbps",
    "busbw_gbps", "nccl_version", "algo_proto", "notes", "source"};

class CollectivesCsvParser {
 public:
  explicit CollectivesCsvParser(std::string_view source) : source_(source) {}

  Status Line(int no, std::string_view line) {
    if (Trim(line).empty()) return Status::Ok();
    auto cells = SplitCsvLine(line);
    if (!cells.ok()) return cells.status().WithPrefix(fmt::format("{}:{}", source_, no));
    if (index_.empty()) return Header(no, *cells);
    if (cells->size() != header_size_) {
      return InvalidArgumentError(fmt::format("{}:{}: {} cells, the header has {}", source_, no,
                                              cells->size(), header_size_));
    }
    auto row = Row(*cells);
    if (!row.ok()) return row.status().WithPrefix(fmt::format("{}:{}", source_, no));
    row->line = no;
    rows_.push_back(std::move(row).value());
    return Status::Ok();
  }

  Result<std::vector<CollectivesCsvRow>> Finish() {
    if (rows_.empty()) return InvalidArgumentError(fmt::format("{}: no rows", source_));
    return std::move(rows_);
  }

 private:
  Status Header(int no, const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::string name(Trim(cells[i]));
      if (!index_.emplace(name, i).second) {
        return InvalidArgumentError(
            fmt::format("{}:{}: duplicate column '{}'", source_, no, Printable(name)));
      }
    }
    for (std::string_view c : kCsvColumns) {
      if (c != "source" && !index_.contains(std::string(c))) {
        return InvalidArgumentError(fmt::format("{}:{}: no column '{}'", source_, no, c));
      }
    }
    header_size_ = cells.size();
    return Status::Ok();
  }

  Result<CollectivesCsvRow> Row(const std::vector<std::string>& cells) const {
    auto get = [&](std::string_view name) -> std::string_view {
      return Trim(cells[index_.at(std::string(name))]);
    };
    auto number = [&](std::string_view name, double lo, double hi, bool allow_empty,
                      double* out) -> Status {
      std::string_view v = get(name);
      if (v.empty() && allow_empty) {
        *out = 0;
        return Status::Ok();
      }
      auto d = ParseDouble(v);
      if (!d) {
        return InvalidFieldError(std::string(name),
                                 fmt::format("'{}' is not a number", Printable(v)));
      }
      if (*d < lo || *d > hi) {
        return InvalidFieldError(std::string(name),
                                 fmt::format("{} is outside [{}, {}]", *d, lo, hi));
      }
      *out = *d;
      return Status::Ok();
    };
    CollectivesCsvRow r;
    r.id = get("id");
    r.system = get("system");
    r.gpu = get("gpu");
    r.intra = get("intra");
    r.inter = get("inter");
    r.collective = get("collective");
    r.op = ParseCollective(r.collective);
    r.nccl_version = get("nccl_version");
    r.algo_proto = get("algo_proto");
    r.notes = get("notes");
    double gpus = 0, nodes = 0, gpn = 0, bytes = 0, time_us = 0;
    RETURN_IF_ERROR(number("gpus", 1, 1 << 20, false, &gpus));
    RETURN_IF_ERROR(number("nodes", 1, 1 << 20, false, &nodes));
    RETURN_IF_ERROR(number("gpus_per_node", 1, 1024, false, &gpn));
    RETURN_IF_ERROR(number("bytes", 0, 1e15, true, &bytes));  // empty: size not printed
    RETURN_IF_ERROR(number("time_us", 0, 1e10, true, &time_us));
    RETURN_IF_ERROR(number("algbw_gbps", 0, 1e6, true, &r.algbw_gbps));
    RETURN_IF_ERROR(number("busbw_gbps", 0, 1e6, true, &r.busbw_gbps));
    const std::initializer_list<std::pair<const char*, double>> whole = {
        {"gpus", gpus}, {"nodes", nodes}, {"gpus_per_node", gpn}};
    for (const auto& [name, v] : whole) {
      if (v != std::floor(v)) {
        return InvalidFieldError(name, fmt::format("{} is not a whole number", v));
      }
    }
    r.gpus = static_cast<int>(gpus);
    r.nodes = static_cast<int>(nodes);
    r.gpus_per_node = static_cast<int>(gpn);
    r.bytes = Bytes(bytes);
    r.time = Microseconds(time_us);
    return r;
  }

  std::string source_;
  std::map<std::string, std::size_t> index_;
  std::size_t header_size_ = 0;
  std::vector<CollectivesCsvRow> rows_;
};

constexpr LineLimits kCollectivesLimits{.max_line_bytes = kCollectivesMaxLineBytes,
                                        .max_lines = 100'000};

}  // namespace

Result<std::vector<CollectivesCsvRow>> ReadCollectivesCsv(std::istream& in,
                                                          std::string_view source) {
  CollectivesCsvParser parser(source);
  RETURN_IF_ERROR(
      ForEachStreamLine(in, source, kCollectivesLimits,
                        [&](int no, std::string_view l) { return parser.Line(no, l); }));
  return parser.Finish();
}

Result<std::vector<CollectivesCsvRow>> LoadCollectivesCsv(const std::string& path) {
  CollectivesCsvParser parser(path);
  RETURN_IF_ERROR(ForEachFileLine(path, "collectives table", kCollectivesLimits,
                                  [&](int no, std::string_view l) { return parser.Line(no, l); }));
  return parser.Finish();
}

// ---------------------------------------------------------------------------------------------
// nccl-tests output.

namespace {

std::vector<std::string_view> Words(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    std::size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

// The collective a line of the output names: "# Collective test starting: all_gather_perf", or
// the command echoed before the table ("mpirun ... /build/all_gather_perf -b 8 ...").
std::optional<Collective> NamedCollective(std::string_view line) {
  for (Collective op : kCollectives) {
    std::string binary = fmt::format("{}_perf", CollectiveName(op));
    std::size_t at = line.find(binary);
    if (at == std::string_view::npos) continue;
    // "all_reduce_perf" must not match inside "xall_reduce_perf_mpi"-like words only by suffix;
    // a path separator, space or the start before it is what nccl-tests' binaries have.
    if (at == 0 || line[at - 1] == '/' || line[at - 1] == ' ' || line[at - 1] == ':' ||
        line[at - 1] == '\t') {
      return op;
    }
  }
  return std::nullopt;
}

class NcclTestsParser {
 public:
  NcclTestsParser(std::string_view source, std::optional<Collective> op)
      : source_(source), hint_(op) {}

  Status Line(int no, std::string_view line) {
    std::string_view t = Trim(line);
    if (t.empty()) return Status::Ok();
    if (auto named = NamedCollective(t)) {
      if (named_ && *named_ != *named) {
        return InvalidArgumentError(
            fmt::format("{}:{}: names {} after {}: one nccl-tests run per file", source_, no,
                        CollectiveName(*named), CollectiveName(*named_)));
      }
      named_ = named;
    }
    if (t.front() == '#') return Comment(no, t.substr(1));
    if (columns_.empty()) return Status::Ok();  // mpirun or NCCL log lines before the table
    std::vector<std::string_view> w = Words(t);
    if (!ParseInt64(w[0])) return Status::Ok();  // NCCL INFO/WARN lines between rows
    return Row(no, w);
  }

  Result<NcclTestsRun> Finish() {
    if (columns_.empty()) {
      return InvalidArgumentError(fmt::format(
          "{}: no nccl-tests table (a '#  size  count  type ... time  algbw  busbw' header)",
          source_));
    }
    if (run_.points.empty()) {
      return InvalidArgumentError(fmt::format("{}: the table has no rows", source_));
    }
    if (hint_ && named_ && *hint_ != *named_) {
      return InvalidArgumentError(fmt::format("{}: the output is {}, not {}", source_,
                                              CollectiveName(*named_), CollectiveName(*hint_)));
    }
    if (!hint_ && !named_) {
      return InvalidArgumentError(fmt::format(
          "{}: the output does not name its collective; pass OP={} with OP one of all_reduce, "
          "all_gather, reduce_scatter, alltoall",
          source_, source_));
    }
    run_.op = hint_ ? *hint_ : *named_;
    run_.source = source_;
    if (max_rank_ >= 0) {
      run_.ranks = max_rank_ + 1;
      int per_host = 0;
      for (const auto& [host, n] : hosts_) per_host = std::max(per_host, n);
      run_.gpus_per_node = per_host;
    } else {
      RETURN_IF_ERROR(RanksFromRatio());
    }
    if (run_.ranks < 2) {
      return InvalidArgumentError(
          fmt::format("{}: {} rank(s); a collective needs 2 or more", source_, run_.ranks));
    }
    return std::move(run_);
  }

 private:
  Status Comment(int no, std::string_view body) {
    std::vector<std::string_view> w = Words(body);
    if (w.empty()) return Status::Ok();
    // "#  Rank  0 Group  0 Pid   6899 on host-a device  0 [0000:04:00] NVIDIA H100 80GB HBM3"
    if (w[0] == "Rank" && w.size() >= 2) {
      auto rank = ParseInt64(w[1]);
      if (!rank || *rank < 0 || *rank >= (1 << 20)) {
        return InvalidArgumentError(
            fmt::format("{}:{}: field 'Rank': '{}' is not a rank", source_, no, Printable(w[1])));
      }
      max_rank_ = std::max(max_rank_, static_cast<int>(*rank));
      for (std::size_t i = 2; i + 1 < w.size(); ++i) {
        if (w[i] == "on") {
          ++hosts_[std::string(w[i + 1])];
          break;
        }
      }
      return Status::Ok();
    }
    if (w[0] != "size") return Status::Ok();
    if (!columns_.empty()) {
      return InvalidArgumentError(
          fmt::format("{}:{}: a second table; give one nccl-tests run per file", source_, no));
    }
    // The out-of-place block is the first time/algbw/busbw; the names before it are unique.
    std::set<std::string_view> seen;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (w[i] == "time" || w[i] == "algbw" || w[i] == "busbw") {
        if (w[i] == "time" && time_ < 0) time_ = static_cast<int>(i);
        if (w[i] == "algbw" && algbw_ < 0) algbw_ = static_cast<int>(i);
        if (w[i] == "busbw" && busbw_ < 0) busbw_ = static_cast<int>(i);
      } else if (time_ < 0 && !seen.insert(w[i]).second) {
        return InvalidArgumentError(
            fmt::format("{}:{}: duplicate column '{}'", source_, no, Printable(w[i])));
      }
      columns_.emplace_back(w[i]);
    }
    if (time_ < 0 || algbw_ < 0 || busbw_ < 0 || time_ > algbw_ || algbw_ > busbw_) {
      return InvalidArgumentError(fmt::format(
          "{}:{}: the table header lacks time, algbw and busbw in that order", source_, no));
    }
    return Status::Ok();
  }

  Status Row(int no, const std::vector<std::string_view>& w) {
    if (static_cast<int>(w.size()) <= busbw_) {
      return InvalidArgumentError(fmt::format("{}:{}: {} columns, the out-of-place busbw is #{}",
                                              source_, no, w.size(), busbw_ + 1));
    }
    auto number = [&](int col, double* out) -> Status {
      auto d = ParseDouble(w[col]);
      if (!d || *d < 0) {
        return InvalidArgumentError(fmt::format("{}:{}: column '{}': '{}' is not a number", source_,
                                                no, columns_[col], Printable(w[col])));
      }
      *out = *d;
      return Status::Ok();
    };
    NcclTestsPoint p;
    p.line = no;
    double bytes = 0, time_us = 0;
    RETURN_IF_ERROR(number(0, &bytes));
    RETURN_IF_ERROR(number(time_, &time_us));
    RETURN_IF_ERROR(number(algbw_, &p.algbw_gbps));
    RETURN_IF_ERROR(number(busbw_, &p.busbw_gbps));
    if (bytes > 1e15 || time_us > 1e10) {
      return InvalidArgumentError(fmt::format("{}:{}: size or time out of range", source_, no));
    }
    p.bytes = Bytes(bytes);
    p.time = Microseconds(time_us);
    if (run_.points.size() >= 4096) {
      return ResourceExhaustedError(fmt::format("{}:{}: more than 4096 sizes", source_, no));
    }
    run_.points.push_back(p);
    return Status::Ok();
  }

  // busbw / algbw = 2 (n - 1) / n (all-reduce) or (n - 1) / n, at the largest size printed.
  Status RanksFromRatio() {
    const NcclTestsPoint* best = nullptr;
    for (const NcclTestsPoint& p : run_.points) {
      if (p.algbw_gbps > 0 && (!best || p.algbw_gbps > best->algbw_gbps)) best = &p;
    }
    const double k = run_.op == Collective::kAllReduce ? 2 : 1;
    if (best) {
      const double r = best->busbw_gbps / best->algbw_gbps / k;  // (n - 1) / n
      if (r > 0 && r < 1) {
        run_.ranks = static_cast<int>(std::lround(1 / (1 - r)));
        run_.ranks_from_ratio = true;
        return Status::Ok();
      }
    }
    return InvalidArgumentError(fmt::format(
        "{}: no '#  Rank N Group ...' lines and no busbw/algbw ratio to count the ranks by",
        source_));
  }

  std::string source_;
  std::optional<Collective> hint_, named_;
  std::vector<std::string> columns_;
  int time_ = -1, algbw_ = -1, busbw_ = -1;
  int max_rank_ = -1;
  std::map<std::string, int> hosts_;
  NcclTestsRun run_;
};

// nccl-tests output is small (a 8 B - 16 GB sweep is ~40 rows); NCCL_DEBUG=INFO logs are not.
constexpr LineLimits kNcclTestsLimits{.max_line_bytes = std::size_t{16} << 10,
                                      .max_lines = 1'000'000};

}  // namespace

Result<NcclTestsRun> ParseNcclTestsOutput(std::istream& in, std::string_view source,
                                          std::optional<Collective> op) {
  NcclTestsParser parser(source, op);
  RETURN_IF_ERROR(ForEachStreamLine(in, source, kNcclTestsLimits, [&](int no, std::string_view l) {
    return parser.Line(no, l);
  }));
  return parser.Finish();
}

Result<NcclTestsRun> LoadNcclTestsOutput(std::string_view spec) {
  std::optional<Collective> op;
  std::string path(spec);
  if (std::size_t eq = spec.find('='); eq != std::string_view::npos) {
    op = ParseCollective(spec.substr(0, eq));
    if (!op) {
      return InvalidArgumentError(
          fmt::format("collectives: '{}' is not all_reduce, all_gather, reduce_scatter or alltoall",
                      Printable(spec.substr(0, eq))));
    }
    path = std::string(spec.substr(eq + 1));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("cannot open nccl-tests output '{}'", path));
  auto run = ParseNcclTestsOutput(in, path, op);
  if (!run.ok() && !op) {
    // The file name as the last resort: all_gather_perf.log, ag-all_gather.txt.
    std::string base = path.substr(path.find_last_of('/') + 1);
    for (Collective c : kCollectives) {
      if (base.find(CollectiveName(c)) != std::string::npos) {
        std::ifstream again(path, std::ios::binary);
        auto named = ParseNcclTestsOutput(again, path, c);
        if (named.ok()) return named;
      }
    }
  }
  return run;
}

// ---------------------------------------------------------------------------------------------
// Samples.

namespace {

bool Contains(std::string_view hay, std::string_view needle) {
  return ToLower(hay).find(ToLower(needle)) != std::string::npos;
}

// The README's rules, in its words (data/published/README.md, second set of December 2026).
std::pair<SampleUse, std::string> Classify(const CollectivesCsvRow& r, int domains) {
  if (Contains(r.system, "RCCL") || Contains(r.nccl_version, "RCCL") || Contains(r.notes, "RCCL")) {
    return {SampleUse::kExcluded, "RCCL, not NCCL"};
  }
  if (Contains(r.notes, "approximate")) return {SampleUse::kExcluded, "approximate (prose/title)"};
  if (Contains(r.notes, "torch.distributed")) {
    return {SampleUse::kExcluded, "torch.distributed benchmark"};
  }
  if (Contains(r.notes, "size label")) return {SampleUse::kExcluded, "size label, bytes assumed"};
  if (r.time.value() <= 0 && r.busbw_gbps <= 0) return {SampleUse::kExcluded, "no time printed"};
  if (Contains(r.algo_proto, "SHARP") || Contains(r.algo_proto, "CollNet") ||
      Contains(r.inter, "SHARP")) {
    return {SampleUse::kNotWire, "SHARP/CollNet"};
  }
  if (Contains(r.algo_proto, "NVLS") && !Contains(r.algo_proto, "NVLS off")) {
    return {SampleUse::kNotWire, "NVLS"};
  }
  if (Contains(r.algo_proto, "Tree")) return {SampleUse::kNotWire, "Tree"};
  if (r.op == Collective::kAllReduce && domains == 2) {
    return {SampleUse::kNotWire, "all-reduce on 2 domains (Tree/NVLSTree)"};
  }
  return {SampleUse::kWire, ""};
}

}  // namespace

std::vector<CollectiveSample> SamplesFromCsv(const std::vector<CollectivesCsvRow>& rows) {
  std::vector<CollectiveSample> out;
  // gpus_per_node is not part of a system's key: the single-node GPU-count sweeps record the
  // GPUs used (4..8 of one 8-GPU node) there. Two NVLink fabrics under one system name are two
  // systems.
  std::map<std::string, std::string, std::less<>> first_intra;
  for (const CollectivesCsvRow& r : rows) {
    if (!r.op || r.bytes.value() <= 0 || r.gpus < 2) continue;
    CollectiveSample s;
    s.id = r.id;
    s.op = *r.op;
    s.ranks = r.gpus;
    s.domain_gpus = Contains(r.intra, "NVL72") ? 72 : r.gpus_per_node;
    s.bytes = r.bytes;
    auto it = first_intra.emplace(r.system, r.intra).first;
    s.system = it->second == r.intra ? r.system : fmt::format("{} / {}", r.system, r.intra);
    s.time = r.time;
    if (s.time.value() <= 0 && r.busbw_gbps > 0) {
      // busbw only: time = bytes / algbw, algbw = busbw / factor.
      const double algbw = r.busbw_gbps * 1e9 / BusBandwidthFactor(s.op, s.ranks);
      s.time = Seconds(s.bytes.value() / algbw);
    }
    std::tie(s.use, s.why) = Classify(r, Domains(s.ranks, s.domain_gpus));
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<CollectiveSample> SamplesFromNcclTests(const std::vector<NcclTestsRun>& runs,
                                                   std::string_view system) {
  std::vector<CollectiveSample> out;
  for (const NcclTestsRun& run : runs) {
    const int domain = run.gpus_per_node > 0 ? run.gpus_per_node : std::min(run.ranks, 8);
    for (const NcclTestsPoint& p : run.points) {
      if (p.bytes.value() <= 0 || p.time.value() <= 0) continue;
      CollectiveSample s;
      s.system = std::string(system);
      s.id = fmt::format("{}:{}", run.source, p.line);
      s.op = run.op;
      s.ranks = run.ranks;
      s.domain_gpus = domain;
      s.bytes = p.bytes;
      s.time = p.time;
      if (run.op == Collective::kAllReduce && Domains(run.ranks, domain) == 2) {
        s.use = SampleUse::kNotWire;
        s.why = "all-reduce on 2 domains (Tree/NVLSTree)";
      }
      out.push_back(std::move(s));
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The fit.

namespace {

using Theta = std::array<double, kFabricTerms>;

// Least squares min |A x - b|^2 with x >= 0 over the columns in `cols`: every subset of the
// columns solved unconstrained, the best feasible one kept (NNLS's optimum is the unconstrained
// solution on its own support; at most 2^5 subsets). Columns are scaled to unit norm first.
Theta SolveNonNegative(const std::vector<Theta>& a, const std::vector<double>& b,
                       const std::vector<int>& cols) {
  const int nc = static_cast<int>(cols.size());
  std::array<double, kFabricTerms> scale{};
  for (int c : cols) {
    double s = 0;
    for (const Theta& row : a) s += row[c] * row[c];
    scale[c] = s > 0 ? std::sqrt(s) : 0;
  }
  Theta best{};
  double best_cost = 0;
  for (const double bi : b) best_cost += bi * bi;  // x = 0
  for (int mask = 1; mask < (1 << nc); ++mask) {
    std::vector<int> sub;
    for (int i = 0; i < nc; ++i) {
      if (((mask >> i) & 1) != 0 && scale[cols[i]] > 0) sub.push_back(cols[i]);
    }
    if (sub.empty() || static_cast<int>(sub.size()) != std::popcount(unsigned(mask))) continue;
    const int k = static_cast<int>(sub.size());
    // Normal equations on the scaled columns, solved by Gaussian elimination with pivoting.
    std::vector<std::vector<double>> m(k, std::vector<double>(k + 1, 0));
    for (std::size_t r = 0; r < a.size(); ++r) {
      for (int i = 0; i < k; ++i) {
        const double ai = a[r][sub[i]] / scale[sub[i]];
        for (int j = 0; j < k; ++j) m[i][j] += ai * a[r][sub[j]] / scale[sub[j]];
        m[i][k] += ai * b[r];
      }
    }
    bool singular = false;
    for (int i = 0; i < k && !singular; ++i) {
      int piv = i;
      for (int r = i + 1; r < k; ++r) {
        if (std::abs(m[r][i]) > std::abs(m[piv][i])) piv = r;
      }
      if (std::abs(m[piv][i]) < 1e-12) {
        singular = true;
        break;
      }
      std::swap(m[i], m[piv]);
      for (int r = 0; r < k; ++r) {
        if (r == i) continue;
        const double f = m[r][i] / m[i][i];
        for (int j = i; j <= k; ++j) m[r][j] -= f * m[i][j];
      }
    }
    if (singular) continue;
    Theta x{};
    bool feasible = true;
    for (int i = 0; i < k; ++i) {
      x[sub[i]] = m[i][k] / m[i][i] / scale[sub[i]];
      if (x[sub[i]] < 0) feasible = false;
    }
    if (!feasible) continue;
    double cost = 0;
    for (std::size_t r = 0; r < a.size(); ++r) {
      double res = -b[r];
      for (int c : sub) res += a[r][c] * x[c];
      cost += res * res;
    }
    if (cost < best_cost) {
      best_cost = cost;
      best = x;
    }
  }
  return best;
}

CollectiveFabric FabricOf(const Theta& theta, int domain) {
  CollectiveFabric f;
  f.domain_gpus = domain;
  f.base_latency = Seconds(theta[0]);
  f.intra_step_latency = Seconds(theta[1]);
  f.inter_step_latency = Seconds(theta[2]);
  f.intra_bus_bandwidth = BytesPerSecond(theta[3] > 0 ? 1 / theta[3] : 0);
  f.inter_bus_bandwidth = BytesPerSecond(theta[4] > 0 ? 1 / theta[4] : 0);
  return f;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto nearest = std::lround(q * static_cast<double>(v.size() - 1));
  const std::size_t i = std::min(v.size() - 1, static_cast<std::size_t>(nearest));
  return v[i];
}

}  // namespace

Result<FittedFabric> FitFabric(const std::vector<CollectiveSample>& samples,
                               const CollectiveFabric& prior, double prior_weight,
                               const std::array<bool, kFabricTerms>* fixed) {
  // Wire rates first; a bandwidth no wire-rate sample informs is taken from the samples that
  // are not (an effective figure, flagged).
  std::vector<const CollectiveSample*> rows;
  std::array<bool, kFabricTerms> informed{};
  int domain = prior.domain_gpus;
  for (const CollectiveSample& s : samples) {
    if (s.use != SampleUse::kWire || s.ranks < 2) continue;
    rows.push_back(&s);
    domain = s.domain_gpus;
    CollectiveTerms t = CandidateTerms(s.op, s.bytes, s.ranks, s.domain_gpus).terms[0];
    for (int k = 3; k < kFabricTerms; ++k) informed[k] = informed[k] || Informs(t, k);
  }
  FittedFabric fit;
  for (const CollectiveSample& s : samples) {
    if (s.use != SampleUse::kNotWire || s.ranks < 2) continue;
    CollectiveTerms t = CandidateTerms(s.op, s.bytes, s.ranks, s.domain_gpus).terms[0];
    bool needed = false;
    for (int k = 3; k < kFabricTerms; ++k) needed = needed || (Informs(t, k) && !informed[k]);
    if (!needed) continue;
    rows.push_back(&s);
    domain = s.domain_gpus;
    if (t.coefficient[4] > 0) fit.inter_effective = true;
  }
  if (rows.empty()) return InvalidArgumentError("collectives: no sample to fit");
  for (const CollectiveSample* s : rows) {
    CollectiveTerms t = CandidateTerms(s->op, s->bytes, s->ranks, s->domain_gpus).terms[0];
    for (int k = 3; k < kFabricTerms; ++k) informed[k] = informed[k] || Informs(t, k);
  }
  fit.system = rows.front()->system;
  fit.intra_measured = informed[3];
  fit.inter_measured = informed[4];
  fit.samples = static_cast<int>(rows.size());
  for (const CollectiveSample* s : rows) fit.latency_measured |= s->bytes < MiB(1);

  const Theta prior_theta = ThetaOf(prior);
  std::vector<int> free_terms;
  for (int k = 0; k < kFabricTerms; ++k) {
    const bool held = fixed && (*fixed)[k];
    if (!held && (k < 3 || informed[k])) free_terms.push_back(k);
  }
  Theta theta{};
  for (int k = 0; k < kFabricTerms; ++k) {
    const bool is_free = std::find(free_terms.begin(), free_terms.end(), k) != free_terms.end();
    if (!is_free && (k < 3 || informed[k])) theta[k] = prior_theta[k];
  }
  const double sw = std::sqrt(prior_weight);

  auto cost_of = [&](const Theta& th) {
    double c = 0;
    for (const CollectiveSample* s : rows) {
      const double p = Dot(FasterTerms(s->op, s->bytes, s->ranks, s->domain_gpus, th), th);
      const double r = std::log(std::max(p, 1e-12) / s->time.value());
      c += r * r;
    }
    for (int k : free_terms) {
      if (k < 3 && prior_theta[k] > 0) {
        c += prior_weight * std::pow(std::log(std::max(th[k], 1e-12) / prior_theta[k]), 2);
      }
    }
    return c;
  };

  // One Gauss-Newton step on log time: log(x.theta) ~ log p + (x.theta - p) / p, so
  // x_free.theta_free / p = 1 + log(t / p) - x_fixed.theta_fixed / p. The first pass takes
  // p = t (relative least squares) to start from the data, not from a guess.
  auto step = [&](const Theta& th, bool first) {
    std::vector<Theta> a;
    std::vector<double> b;
    for (const CollectiveSample* s : rows) {
      CollectiveTerms t = first ? CandidateTerms(s->op, s->bytes, s->ranks, s->domain_gpus).terms[0]
                                : FasterTerms(s->op, s->bytes, s->ranks, s->domain_gpus, th);
      const double p = first ? s->time.value() : std::max(Dot(t, th), 1e-12);
      Theta row{};
      double held = 0;
      for (int k = 0; k < kFabricTerms; ++k) {
        if (std::find(free_terms.begin(), free_terms.end(), k) != free_terms.end()) {
          row[k] = t.coefficient[k] / p;
        } else {
          held += t.coefficient[k] * th[k];
        }
      }
      a.push_back(row);
      b.push_back((first ? 1.0 : 1.0 + std::log(s->time.value() / p)) - held / p);
    }
    for (int k : free_terms) {
      if (k >= 3 || prior_theta[k] <= 0) continue;
      // The prior on log theta, like the data: log(theta / prior) linearised at the current
      // value c, theta / c - (1 - log(c / prior)); the first pass at c = prior.
      const double c = first || th[k] <= 0 ? prior_theta[k] : th[k];
      Theta row{};
      row[k] = sw / c;
      a.push_back(row);
      b.push_back(sw * (1 - std::log(c / prior_theta[k])));
    }
    Theta next = SolveNonNegative(a, b, free_terms);
    for (int k = 0; k < kFabricTerms; ++k) {
      if (std::find(free_terms.begin(), free_terms.end(), k) == free_terms.end()) next[k] = th[k];
    }
    return next;
  };

  theta = step(theta, true);
  double cost = cost_of(theta);
  for (int iter = 0; iter < 50; ++iter) {
    Theta proposal = step(theta, false);
    double damp = 1;
    bool improved = false;
    for (int tries = 0; tries < 8; ++tries) {
      Theta trial;
      for (int k = 0; k < kFabricTerms; ++k) {
        trial[k] = theta[k] + damp * (proposal[k] - theta[k]);
      }
      const double c = cost_of(trial);
      if (c < cost - 1e-12) {
        improved = cost - c > 1e-9 * (1 + cost);
        theta = trial;
        cost = c;
        break;
      }
      damp /= 2;
    }
    if (!improved) break;
  }
  // A measured bandwidth the solver drove to infinity (its term 0) is capped at 100 TB/s.
  for (int k = 3; k < kFabricTerms; ++k) {
    if (informed[k] && theta[k] <= 0) theta[k] = 1e-14;
  }
  fit.fabric = FabricOf(theta, domain);
  double sq = 0;
  for (const CollectiveSample* s : rows) {
    const double p = Dot(FasterTerms(s->op, s->bytes, s->ranks, s->domain_gpus, theta), theta);
    sq += std::pow(std::log(std::max(p, 1e-12) / s->time.value()), 2);
  }
  fit.rms_log_error = std::sqrt(sq / static_cast<double>(rows.size()));
  return fit;
}

std::optional<Seconds> PredictSample(const FittedFabric& fit, const CollectiveSample& s) {
  if (s.ranks < 2) return std::nullopt;
  CollectiveFabric f = fit.fabric;
  f.domain_gpus = s.domain_gpus;
  const Theta theta = ThetaOf(f);
  CollectiveTerms t = FasterTerms(s.op, s.bytes, s.ranks, s.domain_gpus, theta);
  if (!HasBandwidth(CandidateTerms(s.op, s.bytes, s.ranks, s.domain_gpus).terms[0], theta)) {
    return std::nullopt;
  }
  return Seconds(Dot(t, theta));
}

// ---------------------------------------------------------------------------------------------
// Fit and cross-validate every system.

namespace {

struct Errors {
  std::vector<double> abs, signed_;
  int unpredictable = 0;
  void Add(const FittedFabric& fit, const CollectiveSample& s) {
    auto p = PredictSample(fit, s);
    if (!p) {
      ++unpredictable;
      return;
    }
    const double e = (p->value() - s.time.value()) / s.time.value();
    abs.push_back(std::abs(e));
    signed_.push_back(e);
  }
  ErrorCell Cell(std::string system, int ranks) const {
    ErrorCell c;
    c.system = std::move(system);
    c.ranks = ranks;
    c.samples = static_cast<int>(abs.size());
    c.median_abs = Median(abs);
    c.p90_abs = Quantile(abs, 0.9);
    double sum = 0;
    for (double e : signed_) sum += e;
    c.mean_signed = signed_.empty() ? 0 : sum / static_cast<double>(signed_.size());
    c.unpredictable = unpredictable;
    return c;
  }
};

// The samples a fit of `group` uses (FitFabric's rule), so in-sample and held-out errors are
// over the same kind of rows.
std::vector<const CollectiveSample*> UsedSamples(const std::vector<CollectiveSample>& group,
                                                 const FittedFabric& fit) {
  std::vector<const CollectiveSample*> out;
  for (const CollectiveSample& s : group) {
    if (s.use == SampleUse::kWire) out.push_back(&s);
    if (s.use == SampleUse::kNotWire && fit.inter_effective &&
        CandidateTerms(s.op, s.bytes, s.ranks, s.domain_gpus).terms[0].coefficient[4] > 0) {
      out.push_back(&s);
    }
  }
  // A system with no wire-rate NVLink sample takes its not-wire ones for that bandwidth too.
  bool wire_intra = false;
  for (const CollectiveSample& s : group) {
    wire_intra =
        wire_intra || (s.use == SampleUse::kWire &&
                       Informs(CandidateTerms(s.op, s.bytes, s.ranks, s.domain_gpus).terms[0], 3));
  }
  if (!wire_intra) {
    for (const CollectiveSample& s : group) {
      if (s.use == SampleUse::kNotWire &&
          Informs(CandidateTerms(s.op, s.bytes, s.ranks, s.domain_gpus).terms[0], 3)) {
        out.push_back(&s);
      }
    }
  }
  return out;
}

}  // namespace

CollectivesReport FitAndValidate(const std::vector<CollectiveSample>& samples,
                                 Bytes bandwidth_min_bytes) {
  CollectivesReport rep;
  std::vector<std::string> order;
  std::map<std::string, std::vector<CollectiveSample>> groups;
  std::map<std::string, int> reasons;
  for (const CollectiveSample& s : samples) {
    if (s.use == SampleUse::kExcluded) {
      ++rep.excluded;
      ++reasons[s.why];
      continue;
    }
    if (s.use == SampleUse::kNotWire) ++rep.not_wire;
    if (!groups.contains(s.system)) order.push_back(s.system);
    groups[s.system].push_back(s);
  }
  rep.excluded_by_reason.assign(reasons.begin(), reasons.end());

  std::vector<double> all_in, all_loro, all_loso;
  std::map<std::string, FittedFabric> fits;
  for (const std::string& name : order) {
    const auto& group = groups[name];
    CollectiveFabric prior;
    prior.domain_gpus = group.front().domain_gpus;
    auto fit = FitFabric(group, prior);
    if (!fit.ok()) continue;
    fits.emplace(name, *fit);
    rep.fits.push_back(*fit);
    const auto used = UsedSamples(group, *fit);
    Errors whole;
    std::map<int, Errors> by_scale;
    for (const CollectiveSample* s : used) {
      whole.Add(*fit, *s);
      by_scale[s->ranks].Add(*fit, *s);
    }
    all_in.insert(all_in.end(), whole.abs.begin(), whole.abs.end());
    rep.in_sample.push_back(whole.Cell(name, 0));
    if (by_scale.size() > 1) {
      for (const auto& [ranks, e] : by_scale) rep.in_sample.push_back(e.Cell(name, ranks));
    }
    // (a) Leave one rank count out.
    if (by_scale.size() < 2) continue;
    std::vector<int> scales;
    scales.reserve(by_scale.size());
    for (const auto& cell : by_scale) scales.push_back(cell.first);
    for (int ranks : scales) {
      std::vector<CollectiveSample> train;
      for (const CollectiveSample& s : group) {
        if (s.ranks != ranks) train.push_back(s);
      }
      Errors held;
      auto fold = FitFabric(train, prior);
      for (const CollectiveSample* s : used) {
        if (s->ranks != ranks) continue;
        if (fold.ok()) {
          held.Add(*fold, *s);
        } else {
          ++held.unpredictable;
        }
      }
      all_loro.insert(all_loro.end(), held.abs.begin(), held.abs.end());
      rep.leave_scale_out.push_back(held.Cell(name, ranks));
    }
  }

  // (b) Leave one system out for the latency shape.
  for (const FittedFabric& held_out : rep.fits) {
    std::array<std::vector<double>, 3> lat;
    for (const FittedFabric& f : rep.fits) {
      if (f.system == held_out.system || !f.latency_measured) continue;
      lat[0].push_back(f.fabric.base_latency.value());
      lat[1].push_back(f.fabric.intra_step_latency.value());
      if (f.inter_measured) lat[2].push_back(f.fabric.inter_step_latency.value());
    }
    CollectiveFabric shared;
    shared.domain_gpus = held_out.fabric.domain_gpus;
    shared.base_latency = Seconds(Median(lat[0]));
    shared.intra_step_latency = Seconds(Median(lat[1]));
    if (!lat[2].empty()) shared.inter_step_latency = Seconds(Median(lat[2]));
    const auto& group = groups[held_out.system];
    std::vector<CollectiveSample> large;
    for (const CollectiveSample& s : group) {
      if (s.bytes >= bandwidth_min_bytes) large.push_back(s);
    }
    if (large.empty()) continue;
    const std::array<bool, kFabricTerms> fixed = {true, true, true, false, false};
    auto fold = FitFabric(large, shared, 0.5, &fixed);
    Errors held;
    for (const CollectiveSample* s : UsedSamples(group, held_out)) {
      if (s->bytes >= bandwidth_min_bytes) continue;
      if (fold.ok()) {
        held.Add(*fold, *s);
      } else {
        ++held.unpredictable;
      }
    }
    if (held.abs.empty() && held.unpredictable == 0) continue;
    all_loso.insert(all_loso.end(), held.abs.begin(), held.abs.end());
    rep.leave_system_out.push_back(held.Cell(held_out.system, 0));
  }
  rep.in_sample_median = Median(all_in);
  rep.leave_scale_out_median = Median(all_loro);
  rep.leave_system_out_median = Median(all_loso);
  return rep;
}

// ---------------------------------------------------------------------------------------------
// Reports.

std::string FormatFabric(const FittedFabric& fit) {
  const CollectiveFabric& f = fit.fabric;
  auto bw = [](bool measured, BytesPerSecond b) {
    return measured ? fmt::format("{:.1f} GB/s", ToGBps(b)) : std::string("not measured");
  };
  return fmt::format(
      "fabric '{}' ({} samples, rms log error {:.3f}, NVLink domain {} GPUs):\n"
      "  base latency        {:8.2f} us\n"
      "  NVLink step latency {:8.2f} us\n"
      "  network step latency{:8.2f} us{}\n"
      "  NVLink bus bandwidth  {}\n"
      "  network bandwidth per GPU {}{}\n",
      fit.system, fit.samples, fit.rms_log_error, f.domain_gpus, ToMicroseconds(f.base_latency),
      ToMicroseconds(f.intra_step_latency), ToMicroseconds(f.inter_step_latency),
      !fit.latency_measured ? " (latencies: the prior's, no sample under 1 MiB)"
      : fit.inter_measured  ? ""
                            : " (prior: no sample crossed the network)",
      bw(fit.intra_measured, f.intra_bus_bandwidth), bw(fit.inter_measured, f.inter_bus_bandwidth),
      fit.inter_effective ? " (effective: all-reduce over 2 domains, not a wire rate)" : "");
}

namespace {

std::string Cells(std::string_view title, const std::vector<ErrorCell>& cells, bool with_scale) {
  std::string out = fmt::format("{}\n{:<58} {:>6} {:>5} {:>8} {:>8} {:>8} {:>6}\n", title, "system",
                                "ranks", "n", "median", "p90", "bias", "unpred");
  for (const ErrorCell& c : cells) {
    std::string ranks = with_scale && c.ranks > 0 ? std::to_string(c.ranks) : "all";
    std::string name = c.system.size() > 58 ? c.system.substr(0, 55) + "..." : c.system;
    if (with_scale && c.ranks > 0) name = "  " + name.substr(0, 56);
    out += fmt::format("{:<58} {:>6} {:>5} {:>7.1f}% {:>7.1f}% {:>+7.1f}% {:>6}\n", name, ranks,
                       c.samples, 100 * c.median_abs, 100 * c.p90_abs, 100 * c.mean_signed,
                       c.unpredictable);
  }
  return out;
}

}  // namespace

std::string FormatCollectivesReport(const CollectivesReport& rep) {
  std::string out;
  out += fmt::format("{} systems fitted; {} samples not wire rates; {} excluded:", rep.fits.size(),
                     rep.not_wire, rep.excluded);
  for (const auto& [why, n] : rep.excluded_by_reason) out += fmt::format(" {} ({}),", why, n);
  if (!rep.excluded_by_reason.empty()) out.pop_back();
  out += "\n\n";
  out += Cells("In-sample |error| of time, per system and per scale:", rep.in_sample, true);
  out += "\n";
  out += Cells("Leave one rank count out (systems with two or more scales):", rep.leave_scale_out,
               true);
  out += "\n";
  out += Cells(
      "Leave one system out for the latency shape (bandwidth from its own >= 64 MiB samples; "
      "error on its smaller ones):",
      rep.leave_system_out, false);
  out += fmt::format(
      "\nmedian |error|: in-sample {:.1f}%, leave-one-scale-out {:.1f}%, "
      "leave-one-system-out (latency) {:.1f}%\n",
      100 * rep.in_sample_median, 100 * rep.leave_scale_out_median,
      100 * rep.leave_system_out_median);
  return out;
}

std::string FormatSampleErrors(const FittedFabric& fit,
                               const std::vector<CollectiveSample>& samples) {
  std::string out =
      fmt::format("{:<15} {:>6} {:>14} {:>12} {:>12} {:>8} {:<12} {}\n", "collective", "ranks",
                  "bytes", "measured us", "model us", "error", "algo", "note");
  for (const CollectiveSample& s : samples) {
    auto p = PredictSample(fit, s);
    CollectiveFabric f = fit.fabric;
    f.domain_gpus = s.domain_gpus;
    std::string algo;
    if (p) {
      const CollectiveTerms t = FasterTerms(s.op, s.bytes, s.ranks, s.domain_gpus, ThetaOf(f));
      algo =
          fmt::format("{}/{}", CollectiveAlgorithmName(t.algorithm), NcclProtocolName(t.protocol));
    }
    out += fmt::format(
        "{:<15} {:>6} {:>14.0f} {:>12.1f} {:>12} {:>8} {:<12} {}\n", CollectiveName(s.op), s.ranks,
        s.bytes.value(), ToMicroseconds(s.time),
        p ? fmt::format("{:.1f}", ToMicroseconds(*p)) : std::string("-"),
        p ? fmt::format("{:+.1f}%", 100 * (p->value() / s.time.value() - 1)) : std::string("-"),
        algo, s.why);
  }
  return out;
}

}  // namespace baton::perf
