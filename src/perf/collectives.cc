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
