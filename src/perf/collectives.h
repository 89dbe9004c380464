// Collective-communication time: all-reduce, all-gather, reduce-scatter and all-to-all as a
// function of message size, participant count and the tiers crossed (inside an NVLink domain or
// over the network), with NCCL's ring and tree latency terms; readers for nccl-tests output and
// the published collectives table; and the least-squares fit of a fabric's terms to them.
#pragma once

#include <array>
#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace baton::perf {

enum class Collective : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll };
inline constexpr std::array<Collective, 4> kCollectives = {
    Collective::kAllReduce, Collective::kAllGather, Collective::kReduceScatter,
    Collective::kAllToAll};

// "all_reduce", "all_gather", "reduce_scatter", "alltoall" (nccl-tests' names, less "_perf").
std::string_view CollectiveName(Collective op);
// Those names, and the same without underscores or with "_perf" ("allreduce", "all_gather_perf").
std::optional<Collective> ParseCollective(std::string_view name);

// The NVLink domains of `domain_gpus` GPUs that `ranks` ranks packed onto them span (>= 1 for
// ranks >= 1; domain_gpus > 0).
inline int Domains(int ranks, int domain_gpus) { return (ranks + domain_gpus - 1) / domain_gpus; }

// nccl-tests' bus-bandwidth factor, busbw = algbw x this (nccl-tests doc/PERFORMANCE.md):
// 2 (n - 1) / n for all-reduce, (n - 1) / n for all-gather, reduce-scatter and all-to-all.
double BusBandwidthFactor(Collective op, int ranks);

// The free terms of one fabric, in NCCL's own latency model (src/graph/tuning.cc,
// ncclTopoTuneModel, commit 01afd20 of NVIDIA/nccl): a collective runs as ring or tree with the
// LL, LL128 or Simple protocol, each pair with its own base latency, per-step latency (NVLink or
// network) and share of the bus bandwidth, and NCCL takes the fastest. The fabric's free terms
// are the ring/LL latencies and the ring/Simple bus bandwidths; every other pair's are those times
// tuning.cc's ratios (kBaseLatUs, kNvlinkLatUs, kNetLatUs and BandwidthShare in collectives.cc), so
// a fit moves NCCL's whole table by one scale per term. The defaults are tuning.cc's own ring/LL
// values.
struct CollectiveFabric {
  // GPUs that reach each other over NVLink: a node's HGX board (8), or a whole NVL72 rack.
  int domain_gpus = 8;
  Seconds base_latency = Microseconds(6.6);         // tuning.cc baseLat, ring / LL
  Seconds intra_step_latency = Microseconds(0.47);  // tuning.cc hwLat NVLink, ring / LL
  Seconds inter_step_latency = Microseconds(2.7);   // tuning.cc hwLat NET, ring / LL
  // Inside a domain: the bus bandwidth per GPU of the ring with the Simple protocol (nccl-tests'
  // busbw at large messages). Across domains: each GPU's share of its domain's network bandwidth
  // (the NIC rate per GPU that collectives reach); a ring across domains moves 1 / g of its bus
  // bytes per GPU over the network (g GPUs of a domain share its NICs), so its busbw is the lesser
  // of the NVLink figure and g times this one. 0 = not known: a collective that needs it has no
  // time (CHECKed).
  BytesPerSecond intra_bus_bandwidth;
  BytesPerSecond inter_bus_bandwidth;
};

enum class CollectiveAlgorithm : std::uint8_t { kRing, kTree };
enum class NcclProtocol : std::uint8_t { kLL, kLL128, kSimple };
std::string_view CollectiveAlgorithmName(CollectiveAlgorithm a);
std::string_view NcclProtocolName(NcclProtocol p);

// A collective's time is linear in the fabric's latency terms plus the slower of its two
// transfers: time = c0 base + c1 intra step + c2 inter step + max(c3 / intra bandwidth,
// c4 / inter bandwidth) (NVLink and network transfers overlap). The fit works on these
// coefficients, Gauss-Newton over the transfer that binds.
inline constexpr int kFabricTerms = 5;
struct CollectiveTerms {
  // [0] calls, [1] steps inside a domain, [2] steps over the network (each in ring/LL units),
  // [3] bytes over NVLink, [4] bytes over the network (each at the ring/Simple bus rate).
  std::array<double, kFabricTerms> coefficient{};
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
};

// Every (algorithm, protocol) NCCL weighs for `op`, after tuning.cc: a ring all-reduce takes
// 2 (n - 1) steps of which 2 (m - 1) cross the network (m domains of g GPUs), all-gather and
// reduce-scatter n - 1 of which m - 1, moving S x BusBandwidthFactor at the bus rate; the tree
// (all-reduce only) 2 ((g - 1) intra + log2 m inter) steps, moving 2 S; across domains the
// network carries 1 / g of those bytes per GPU. All-to-all (n - 1
// grouped sends; one Simple candidate) takes g - 1 intra and n - g network steps and moves
// S (g - 1) / n over NVLink and S (n - g) / n over the network. `bytes` is nccl-tests' size
// (all-gather's whole output buffer). terms[0] is always the ring with Simple (all-to-all's
// one), whose bandwidth columns are every candidate's. CHECKs ranks >= 2, domain_gpus >= 1.
struct CollectiveCandidates {
  std::array<CollectiveTerms, 6> terms{};
  int count = 0;
};
CollectiveCandidates CandidateTerms(Collective op, Bytes bytes, int ranks, int domain_gpus);

struct CollectiveTime {
  Seconds time;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing;
  NcclProtocol protocol = NcclProtocol::kSimple;
};

// The fastest candidate (NCCL picks by the same model), one call; nullopt when the fabric lacks
// a bandwidth the collective needs (an inter-domain rate left 0 for ranks over several domains).
// Fewer than 2 ranks take no time. Pure, thread-safe.
std::optional<CollectiveTime> EstimateCollective(const CollectiveFabric& fabric, Collective op,
                                                 Bytes bytes, int ranks);

// ---------------------------------------------------------------------------------------------
// Readers. Both read one bounded line at a time (core/bounded_input.h) and name source, line and
// field in every error; neither CHECKs on input.

// One row of data/published/collectives.csv (columns: README.md of that folder).
struct CollectivesCsvRow {
  int line = 0;
  std::string id, system, gpu;
  int gpus = 0, nodes = 0, gpus_per_node = 0;
  std::string intra, inter;
  std::string collective;        // as written (sendrecv included)
  std::optional<Collective> op;  // nullopt for collectives the model does not cover
  Bytes bytes;
  Seconds time;  // 0 when the row prints busbw only
  double algbw_gbps = 0, busbw_gbps = 0;
  std::string nccl_version, algo_proto, notes;
};

inline constexpr std::size_t kCollectivesMaxLineBytes = std::size_t{16} << 10;

// Errors: InvalidArgument "SOURCE:LINE: field 'bytes': '1e' is not a number", a duplicate or
// missing header column, a row with the wrong number of cells or an unterminated quote;
// ResourceExhausted for a line or a table past the limits.
Result<std::vector<CollectivesCsvRow>> ReadCollectivesCsv(std::istream& in,
                                                          std::string_view source);
Result<std::vector<CollectivesCsvRow>> LoadCollectivesCsv(const std::string& path);

// One nccl-tests run as it printed it (all_reduce_perf and the others): the out-of-place
// columns of its table, the rank count from its "#  Rank N Group ..." lines (or, where the
// device lines are elided, from busbw / algbw) and GPUs per host from the hosts those lines name.
struct NcclTestsPoint {
  Bytes bytes;
  Seconds time;
  double algbw_gbps = 0, busbw_gbps = 0;
  int line = 0;
};
struct NcclTestsRun {
  std::string source;
  Collective op = Collective::kAllReduce;
  int ranks = 0;
  int gpus_per_node = 0;  // 0 when no device lines named hosts
  bool ranks_from_ratio = false;
  std::vector<NcclTestsPoint> points;
};

// `op` names the collective when the output does not (nccl-tests prints its binary's name only
// in newer versions, "# Collective test starting: all_gather_perf"; the table of all-reduce and
// reduce-scatter look alike); an output that names another collective than `op` is refused.
// Errors: InvalidArgument naming line and column ("out.txt:31: column 'time': 'x' is not a
// number"), no table, no rank count; ResourceExhausted past the line limits.
Result<NcclTestsRun> ParseNcclTestsOutput(std::istream& in, std::string_view source,
                                          std::optional<Collective> op);
// "FILE" or "OP=FILE" (all_gather=ag.txt); without OP, the collective comes from the output, or
// else from the file name (all_gather_perf.log).
Result<NcclTestsRun> LoadNcclTestsOutput(std::string_view spec);

// ---------------------------------------------------------------------------------------------
// The fit.

// What a measurement may inform (data/published/README.md, "Added in December 2026 (second
// set)"): a ring's wire rate; a time whose bandwidth is not a wire rate (all-reduce over two
// domains, where NCCL may pick Tree or NVLSTree; NVLS; SHARP/CollNet); or nothing (approximate
// values, RCCL, torch.distributed benchmarks, Azure's size labels, rows without a time).
enum class SampleUse : std::uint8_t { kWire, kNotWire, kExcluded };

struct CollectiveSample {
  std::string system;  // the fit group
  Collective op = Collective::kAllReduce;
  int ranks = 0;
  int domain_gpus = 8;
  Bytes bytes;
  Seconds time;
  SampleUse use = SampleUse::kWire;
  std::string why;  // for kNotWire / kExcluded
  std::string id;
};

// The table's rows as samples: a system is the rows sharing `system`, `gpus_per_node` and the
// NVLink fabric (`intra`; `inter` differs between one system's single- and multi-node rows); an
// NVL72 rack is one domain of 72. Rows of collectives the model lacks (sendrecv) and of size 0
// are left out.
std::vector<CollectiveSample> SamplesFromCsv(const std::vector<CollectivesCsvRow>& rows);
// A user's runs as one system (`system`); all-reduce over two domains is kNotWire as above.
std::vector<CollectiveSample> SamplesFromNcclTests(const std::vector<NcclTestsRun>& runs,
                                                   std::string_view system);

struct FittedFabric {
  std::string system;
  CollectiveFabric fabric;
  bool intra_measured = false;  // a sample crossed only NVLink
  bool inter_measured = false;  // a sample crossed the network
  // The network bandwidth came from samples that are not wire rates (no wire-rate sample of
  // this system crossed the network): an effective figure for that scale, not the NIC's rate.
  bool inter_effective = false;
  // A sample under 1 MiB informed the latency terms (otherwise they are the prior's).
  bool latency_measured = false;
  int samples = 0;
  double rms_log_error = 0;
};

// Least squares on log time, the terms non-negative, over `samples` (kExcluded skipped;
// kNotWire used only for a bandwidth no wire-rate sample informs). The latency terms carry a
// weak prior toward `prior` on log scale (worth `prior_weight` samples each), so that terms one
// scale cannot tell apart (base vs per-step latency) stay near NCCL's values; bandwidths have none.
// `fixed` (optional) marks terms held at `prior`'s value. Errors: InvalidArgument when no sample
// fits.
Result<FittedFabric> FitFabric(const std::vector<CollectiveSample>& samples,
                               const CollectiveFabric& prior, double prior_weight = 0.5,
                               const std::array<bool, kFabricTerms>* fixed = nullptr);

// The model's time for a sample under a fitted fabric, or nullopt when the sample needs a
// bandwidth the fit did not measure.
std::optional<Seconds> PredictSample(const FittedFabric& fit, const CollectiveSample& s);

// Relative error (model - measured) / measured of each sample of a system; grouped reports.
struct ErrorCell {
  std::string system;
  int ranks = 0;  // 0 = every scale
  int samples = 0;
  double median_abs = 0, p90_abs = 0, mean_signed = 0;
  int unpredictable = 0;  // samples needing a term the fit lacks
};

struct CollectivesReport {
  std::vector<FittedFabric> fits;
  std::vector<ErrorCell> in_sample;         // per system (ranks 0) then per system and scale
  std::vector<ErrorCell> leave_scale_out;   // per system and held-out scale
  std::vector<ErrorCell> leave_system_out;  // per system: latency shape from the others
  double in_sample_median = 0, leave_scale_out_median = 0, leave_system_out_median = 0;
  int excluded = 0, not_wire = 0;
  std::vector<std::pair<std::string, int>> excluded_by_reason;
};

// Fits every system, then cross-validates: (a) within each system with two or more scales,
// leave one rank count out; (b) leave one system out for the latency shape: the latency terms
// the other systems' fits give (geometric medians), the held-out system's bandwidths from its own
// samples of at least `bandwidth_min_bytes`, the error over its smaller samples.
CollectivesReport FitAndValidate(const std::vector<CollectiveSample>& samples,
                                 Bytes bandwidth_min_bytes = MiB(64));

std::string FormatFabric(const FittedFabric& fit);
std::string FormatCollectivesReport(const CollectivesReport& rep);
// One line per sample: op, ranks, size, measured and model time, error.
std::string FormatSampleErrors(const FittedFabric& fit,
                               const std::vector<CollectiveSample>& samples);

}  // namespace baton::perf
