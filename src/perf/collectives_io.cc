// Readers for collective timings: the published table (collectives.csv) and nccl-tests output,
// and the samples the fit takes from them (collectives.h).
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
#include "perf/collectives.h"

namespace baton::perf {

// ---------------------------------------------------------------------------------------------
// The published table.

namespace {

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

}  // namespace baton::perf
