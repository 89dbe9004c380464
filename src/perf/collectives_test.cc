#include "perf/collectives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>

namespace baton::perf {
namespace {

CollectiveFabric H100Like() {
  CollectiveFabric f;
  f.domain_gpus = 8;
  f.intra_bus_bandwidth = GBps(360);
  f.inter_bus_bandwidth = GBps(25);  // a node's 8 NICs: 200 GB/s
  return f;
}

TEST(CollectivesTest, NamesRoundTrip) {
  for (Collective op : kCollectives) EXPECT_EQ(ParseCollective(CollectiveName(op)), op);
  EXPECT_EQ(ParseCollective("allreduce"), Collective::kAllReduce);
  EXPECT_EQ(ParseCollective("all_gather_perf"), Collective::kAllGather);
  EXPECT_EQ(ParseCollective("ALL_TO_ALL"), Collective::kAllToAll);
  EXPECT_EQ(ParseCollective("sendrecv"), std::nullopt);
}

TEST(CollectivesTest, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllReduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllGather, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(Collective::kAllToAll, 4), 0.75);
}

// A fabric fitted on one node has no network rate: ranks over two nodes get no time, not a
// crash (a user's fit may hold only single-node outputs).
TEST(CollectivesTest, AFabricWithoutANetworkRateAnswersNothingAcrossDomains) {
  CollectiveFabric f = H100Like();
  f.inter_bus_bandwidth = BytesPerSecond(0);
  EXPECT_TRUE(EstimateCollective(f, Collective::kAllGather, MiB(64), 8).has_value());
  EXPECT_FALSE(EstimateCollective(f, Collective::kAllGather, MiB(64), 16).has_value());
  EXPECT_EQ(EstimateCollective(f, Collective::kAllGather, MiB(64), 1)->time, Seconds(0));
}

// Time never falls as the message grows, for every collective and scale.
TEST(CollectivesTest, MonotoneInBytes) {
  const CollectiveFabric f = H100Like();
  for (Collective op : kCollectives) {
    for (int ranks : {2, 8, 16, 128, 1024}) {
      Seconds last(0);
      for (double b = 8; b <= 16e9; b *= 2) {
        Seconds t = EstimateCollective(f, op, Bytes(b), ranks)->time;
        EXPECT_GE(t.value(), last.value()) << CollectiveName(op) << " " << ranks << " " << b;
        last = t;
      }
    }
  }
}

// At a small message the latency grows with the participants: the ring's steps inside a node,
// then the network's; the tree's only as log2 of the nodes.
TEST(CollectivesTest, LatencyGrowsWithRanks) {
  const CollectiveFabric f = H100Like();
  for (Collective op : kCollectives) {
    Seconds last(0);
    for (int ranks : {2, 4, 8, 16, 64, 256, 1024}) {
      Seconds t = EstimateCollective(f, op, Bytes(8), ranks)->time;
      EXPECT_GT(t.value(), last.value()) << CollectiveName(op) << " " << ranks;
      last = t;
    }
  }
  // Ring all-gather at 1,024 ranks with LL: base + 1,023 steps, 127 of them over the network,
  // NVLink steps at 1.8x once the collective leaves the node (tuning.cc).
  const double expect = 6.6 + (1023 - 127) * 0.47 * 1.8 + 127 * 2.7;
  EXPECT_NEAR(ToMicroseconds(EstimateCollective(f, Collective::kAllGather, Bytes(8), 1024)->time),
              expect, 0.01);
}

// All-reduce is the fastest of ring and tree: the tree at small messages on many nodes (log2 of
// the nodes against 2 (n - 1) ring steps), the ring at large ones (the tree runs at 0.9 of its
// bandwidth); inside one node the ring always. Small messages go LL, large ones Simple.
TEST(CollectivesTest, RingTreeCrossover) {
  const CollectiveFabric f = H100Like();
  EXPECT_EQ(EstimateCollective(f, Collective::kAllReduce, KiB(64), 1024)->algorithm,
            CollectiveAlgorithm::kTree);
  EXPECT_EQ(EstimateCollective(f, Collective::kAllReduce, GiB(4), 64)->algorithm,
            CollectiveAlgorithm::kRing);
  EXPECT_EQ(EstimateCollective(f, Collective::kAllReduce, Bytes(8), 8)->algorithm,
            CollectiveAlgorithm::kRing);
  EXPECT_EQ(EstimateCollective(f, Collective::kAllReduce, Bytes(8), 8)->protocol,
            NcclProtocol::kLL);
  EXPECT_EQ(EstimateCollective(f, Collective::kAllReduce, GiB(1), 8)->protocol,
            NcclProtocol::kSimple);
  // The crossover moves to larger messages as the ring's step count grows.
  auto crossover = [&](int ranks) {
    for (double b = 8; b < 1e12; b *= 2) {
      if (EstimateCollective(f, Collective::kAllReduce, Bytes(b), ranks)->algorithm ==
          CollectiveAlgorithm::kRing) {
        return b;
      }
    }
    return 1e12;
  };
  EXPECT_LT(crossover(16), crossover(64));
  EXPECT_LT(crossover(64), crossover(256));
  EXPECT_LT(crossover(256), 1e12);
  // Other collectives have no tree: three ring protocols, against six candidates for all-reduce.
  EXPECT_EQ(CandidateTerms(Collective::kAllGather, MiB(1), 64, 8).count, 3);
  EXPECT_EQ(CandidateTerms(Collective::kAllReduce, MiB(1), 64, 8).count, 6);
}

TEST(CollectivesTest, AllToAllSplitsBytesByTier) {
  ASSERT_EQ(CandidateTerms(Collective::kAllToAll, Bytes(1600), 16, 8).count, 1);
  CollectiveTerms t = CandidateTerms(Collective::kAllToAll, Bytes(1600), 16, 8).terms[0];
  EXPECT_DOUBLE_EQ(t.coefficient[3], 1600.0 * 7 / 16);
  EXPECT_DOUBLE_EQ(t.coefficient[4], 1600.0 * 8 / 16);
  // Inside one node everything crosses NVLink.
  t = CandidateTerms(Collective::kAllToAll, Bytes(800), 8, 8).terms[0];
  EXPECT_DOUBLE_EQ(t.coefficient[3], 700);
  EXPECT_DOUBLE_EQ(t.coefficient[4], 0);
}

// A real all_reduce_perf output of 2 nodes x 8 H100 (the device lines and the first and last
// rows as nccl-tests printed them), with mpirun's echo and an NCCL INFO line around the table.
constexpr std::string_view kAllReduceOutput =
    R"(> mpirun -np 16 -npernode 8 /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   6899 on host-a device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   6900 on host-a device  1 [0000:05:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   6901 on host-a device  2 [0000:0b:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   6902 on host-a device  3 [0000:0c:00] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid   6903 on host-a device  4 [0000:84:00] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid   6904 on host-a device  5 [0000:85:00] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid   6905 on host-a device  6 [0000:8b:00] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid   6906 on host-a device  7 [0000:8c:00] NVIDIA H100 80GB HBM3
#  Rank  8 Group  0 Pid   6733 on host-b device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  9 Group  0 Pid   6734 on host-b device  1 [0000:05:00] NVIDIA H100 80GB HBM3
#  Rank 10 Group  0 Pid   6735 on host-b device  2 [0000:0b:00] NVIDIA H100 80GB HBM3
#  Rank 11 Group  0 Pid   6736 on host-b device  3 [0000:0c:00] NVIDIA H100 80GB HBM3
#  Rank 12 Group  0 Pid   6737 on host-b device  4 [0000:84:00] NVIDIA H100 80GB HBM3
#  Rank 13 Group  0 Pid   6738 on host-b device  5 [0000:85:00] NVIDIA H100 80GB HBM3
#  Rank 14 Group  0 Pid   6739 on host-b device  6 [0000:8b:00] NVIDIA H100 80GB HBM3
#  Rank 15 Group  0 Pid   6740 on host-b device  7 [0000:8c:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum      -1    135.8    0.00    0.00      0    123.5    0.00    0.00      0
          16             4     float     sum      -1    123.2    0.00    0.00      0    122.3    0.00    0.00      0
host-a:6899:6899 [0] NCCL INFO comm 0x5555 rank 0 nranks 16 cudaDev 0 busId 4000 - Init COMPLETE
   536870912     134217728     float     sum      -1   3817.5  140.63  263.69      0   3828.0  140.25  262.97      0
  8589934592    2147483648     float     sum      -1    47535  180.71  338.82      0    47743  179.92  337.35      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 70.742 
)";

TEST(NcclTestsParserTest, ReadsTheTable) {
  std::istringstream in{std::string(kAllReduceOutput)};
  auto run = ParseNcclTestsOutput(in, "ar.txt", std::nullopt);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->op, Collective::kAllReduce);  // from the echoed command
  EXPECT_EQ(run->ranks, 16);
  EXPECT_EQ(run->gpus_per_node, 8);
  EXPECT_FALSE(run->ranks_from_ratio);
  ASSERT_EQ(run->points.size(), 4u);
  EXPECT_DOUBLE_EQ(run->points[0].bytes.value(), 8);
  EXPECT_NEAR(ToMicroseconds(run->points[0].time), 135.8, 1e-9);  // out-of-place, not 123.5
  EXPECT_DOUBLE_EQ(run->points[3].bytes.value(), 8589934592.0);
  EXPECT_NEAR(ToMicroseconds(run->points[3].time), 47535, 1e-9);
  EXPECT_DOUBLE_EQ(run->points[3].busbw_gbps, 338.82);
  EXPECT_EQ(run->points[2].line, 28);
}

// nccl-tests before 2.10 printed no root column and "error" for "#wrong"; device lines may be
// cut, leaving the ranks to the busbw / algbw ratio (2 (n - 1) / n for all-reduce).
TEST(NcclTestsParserTest, OldFormatAndRanksFromRatio) {
  const std::string text =
      "#                                                 out-of-place                       "
      "in-place\n"
      "#       size         count    type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  "
      "(GB/s)  (GB/s)\n"
      "   536870912     134217728   float     sum   7011.8   76.57  148.35  5e-07   7011.8   "
      "76.57  148.35  5e-07\n";
  std::istringstream in(text);
  auto run = ParseNcclTestsOutput(in, "old.txt", Collective::kAllReduce);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->ranks_from_ratio);
  EXPECT_EQ(run->ranks, 32);  // 148.35 / 76.57 = 1.9375 = 2 x 31 / 32
  EXPECT_NEAR(ToMicroseconds(run->points[0].time), 7011.8, 1e-9);
}

TEST(NcclTestsParserTest, CollectiveMustBeNamedAndAgree) {
  std::string no_name(kAllReduceOutput.substr(kAllReduceOutput.find('\n') + 1));
  std::istringstream a(no_name);
  auto run = ParseNcclTestsOutput(a, "x.txt", std::nullopt);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("OP=x.txt"), std::string::npos) << run.status().message();
  std::istringstream b(no_name);
  run = ParseNcclTestsOutput(b, "x.txt", Collective::kReduceScatter);
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->op, Collective::kReduceScatter);
  std::istringstream c{std::string(kAllReduceOutput)};
  run = ParseNcclTestsOutput(c, "x.txt", Collective::kAllGather);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("is all_reduce, not all_gather"), std::string::npos);
}

struct HostileCase {
  std::string name;
  std::string text;
  std::string error;  // a fragment of the message
};
// Test names and failures show the case's name, not its bytes (a 10 MB line among them).
void PrintTo(const HostileCase& c, std::ostream* os) { *os << c.name; }

class NcclTestsHostileTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(NcclTestsHostileTest, RefusedNamingLineAndField) {
  std::istringstream in(GetParam().text);
  auto run = ParseNcclTestsOutput(in, "o.txt", Collective::kAllReduce);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find(GetParam().error), std::string::npos)
      << run.status().ToString();
}

const std::string kHeader =
    "#       size         count      type   redop    root     time   algbw   busbw #wrong\n";
INSTANTIATE_TEST_SUITE_P(
    Inputs, NcclTestsHostileTest,
    ::testing::Values(
        HostileCase{"long_line", std::string(10 << 20, 'x') + "\n", "o.txt:1: line longer than"},
        HostileCase{"no_table", "hello\n", "no nccl-tests table"},
        HostileCase{"bad_time", kHeader + "  8  2  float  sum  -1  1x3  0.00  0.00  0\n",
                    "o.txt:2: column 'time': '1x3' is not a number"},
        HostileCase{"short_row", kHeader + "  8  2  float  sum  -1  12.0\n", "o.txt:2: 6 columns"},
        HostileCase{"duplicate_column",
                    "#  size  size  type  redop  root  time  algbw  busbw #wrong\n",
                    "o.txt:1: duplicate column 'size'"},
        HostileCase{"second_table",
                    kHeader + "  8  2  float  sum  -1  12.0  0.00  0.00  0\n" + kHeader,
                    "o.txt:3: a second table"},
        HostileCase{"one_rank",
                    "#  Rank  0 Group  0 Pid 1 on h device 0\n" + kHeader +
                        "  8  2  float  sum  -1  12.0  0.00  0.00  0\n",
                    "1 rank(s)"},
        HostileCase{"bad_rank", "#  Rank  -3 Group\n", "field 'Rank'"}),
    [](const auto& info) { return info.param.name; });

// A /dev/zero-like stream: one endless line of NULs is refused at its first line.
TEST(NcclTestsParserTest, EndlessStreamIsRefused) {
  class Zeros : public std::streambuf {
   protected:
    int_type underflow() override {
      std::fill(buf_, buf_ + sizeof buf_, '\0');
      setg(buf_, buf_, buf_ + sizeof buf_);
      return traits_type::to_int_type('\0');
    }

   private:
    char buf_[4096];
  } zeros;
  std::istream in(&zeros);
  auto run = ParseNcclTestsOutput(in, "/dev/zero", Collective::kAllReduce);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kResourceExhausted);
  std::istream in2(&zeros);
  auto rows = ReadCollectivesCsv(in2, "/dev/zero");
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), StatusCode::kResourceExhausted);
}

const std::string kCsvHeader =
    "id,source,system,gpu,gpus,nodes,gpus_per_node,intra,inter,collective,dtype,bytes,time_us,"
    "algbw_gbps,busbw_gbps,nccl_version,algo_proto,notes\n";

TEST(CollectivesCsvTest, ReadsQuotedRows) {
  std::istringstream in(kCsvHeader +
                        "r1,src,Sys A,H100,16,2,8,NVLink4,\"EFA, 3200 Gbps\",all_reduce,fp32,"
                        "1024,30.5,0.03,0.06,2.18.5,,\"note with \"\"quotes\"\", commas\"\n"
                        "r2,src,Sys A,H100,8,1,8,NVLink4,n/a,all_gather,fp32,1048576,,,"
                        "100.0,,NVLS,busbw only\n");
  auto rows = ReadCollectivesCsv(in, "c.csv");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].inter, "EFA, 3200 Gbps");
  EXPECT_EQ((*rows)[0].notes, "note with \"quotes\", commas");
  EXPECT_NEAR(ToMicroseconds((*rows)[0].time), 30.5, 1e-9);
  EXPECT_EQ((*rows)[1].line, 3);
  EXPECT_EQ((*rows)[1].time.value(), 0);
  // busbw only: the sample's time is bytes / (busbw / factor); NVLS is not a wire rate.
  auto samples = SamplesFromCsv(*rows);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_NEAR(samples[1].time.value(), 1048576.0 / (100e9 / (7.0 / 8)), 1e-12);
  EXPECT_EQ(samples[1].use, SampleUse::kNotWire);
  EXPECT_EQ(samples[0].use, SampleUse::kNotWire);  // all-reduce over 2 nodes
}

class CollectivesCsvHostileTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(CollectivesCsvHostileTest, Refused) {
  std::istringstream in(GetParam().text);
  auto rows = ReadCollectivesCsv(in, "c.csv");
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find(GetParam().error), std::string::npos)
      << rows.status().ToString();
  // A cell's refusal carries its column as the Status's field, not only in the text.
  const std::string_view error = GetParam().error;
  if (const auto at = error.find("field '"); at != std::string_view::npos) {
    const std::string_view rest = error.substr(at + 7);
    EXPECT_EQ(rows.status().field(), rest.substr(0, rest.find('\'')));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Inputs, CollectivesCsvHostileTest,
    ::testing::Values(
        HostileCase{"duplicate_column", "id,system,id\n", "c.csv:1: duplicate column 'id'"},
        HostileCase{"missing_column", "id,system\n", "c.csv:1: no column 'gpu'"},
        HostileCase{"bad_bytes",
                    kCsvHeader + "r,s,S,H100,8,1,8,NV,n/a,all_reduce,fp32,12ab,1,0,0,,,\n",
                    "c.csv:2: field 'bytes': '12ab' is not a number"},
        HostileCase{"fractional_gpus",
                    kCsvHeader + "r,s,S,H100,8.5,1,8,NV,n/a,all_reduce,fp32,8,1,0,0,,,\n",
                    "c.csv:2: field 'gpus': 8.5 is not a whole number"},
        HostileCase{"cells", kCsvHeader + "r,s,S\n", "c.csv:2: 3 cells, the header has 18"},
        HostileCase{"quote", kCsvHeader + "r,\"s\n", "c.csv:2: unterminated quote"},
        HostileCase{"long_line", kCsvHeader + std::string(10 << 20, 'a') + "\n",
                    "c.csv:2: line longer than"},
        HostileCase{"empty", "", "c.csv: no rows"}),
    [](const auto& info) { return info.param.name; });

// Synthetic rows from known terms at 8 .. 512 ranks and 8 B .. 4 GiB: the fit gives them back.
TEST(CollectivesFitTest, RecoversKnownTerms) {
  CollectiveFabric truth;
  truth.domain_gpus = 8;
  truth.base_latency = Microseconds(9);
  truth.intra_step_latency = Microseconds(0.8);
  truth.inter_step_latency = Microseconds(4);
  truth.intra_bus_bandwidth = GBps(300);
  truth.inter_bus_bandwidth = GBps(20);  // x 8 GPUs = 160 GB/s a node: the network binds
  std::vector<CollectiveSample> samples;
  for (Collective op : {Collective::kAllReduce, Collective::kAllGather}) {
    for (int ranks : {8, 32, 128, 512}) {
      for (double b = 8; b <= 4.3e9; b *= 8) {
        CollectiveSample s;
        s.system = "synthetic";
        s.op = op;
        s.ranks = ranks;
        s.domain_gpus = 8;
        s.bytes = Bytes(b);
        s.time = EstimateCollective(truth, op, s.bytes, ranks)->time;
        samples.push_back(s);
      }
    }
  }
  auto fit = FitFabric(samples, CollectiveFabric{}, 0.0);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  EXPECT_TRUE(fit->intra_measured && fit->inter_measured);
  EXPECT_FALSE(fit->inter_effective);
  EXPECT_LT(fit->rms_log_error, 1e-3);
  const CollectiveFabric& f = fit->fabric;
  EXPECT_NEAR(ToMicroseconds(f.base_latency), 9, 0.1);
  EXPECT_NEAR(ToMicroseconds(f.intra_step_latency), 0.8, 0.02);
  EXPECT_NEAR(ToMicroseconds(f.inter_step_latency), 4, 0.05);
  EXPECT_NEAR(ToGBps(f.intra_bus_bandwidth), 300, 3);
  EXPECT_NEAR(ToGBps(f.inter_bus_bandwidth), 20, 0.2);

  // Holding a single scale out, the rest still predict it (the terms are the model's own).
  CollectivesReport rep = FitAndValidate(samples);
  ASSERT_EQ(rep.fits.size(), 1u);
  EXPECT_LT(rep.in_sample_median, 0.01);
  EXPECT_LT(rep.leave_scale_out_median, 0.02);
}

// A fabric with only single-node samples does not claim a network bandwidth.
TEST(CollectivesFitTest, UnmeasuredTierIsNotPredicted) {
  CollectiveFabric truth = H100Like();
  std::vector<CollectiveSample> samples;
  for (double b = 1024; b <= 1e9; b *= 4) {
    CollectiveSample s;
    s.system = "one node";
    s.op = Collective::kAllReduce;
    s.ranks = 8;
    s.domain_gpus = 8;
    s.bytes = Bytes(b);
    s.time = EstimateCollective(truth, s.op, s.bytes, 8)->time;
    samples.push_back(s);
  }
  auto fit = FitFabric(samples, CollectiveFabric{});
  ASSERT_TRUE(fit.ok());
  EXPECT_TRUE(fit->intra_measured);
  EXPECT_FALSE(fit->inter_measured);
  CollectiveSample far = samples.back();
  far.ranks = 64;
  EXPECT_FALSE(PredictSample(*fit, far).has_value());
  EXPECT_NEAR(ToGBps(fit->fabric.intra_bus_bandwidth), 360, 4);
}

// The published table, when the shared data is beside the repository.
TEST(CollectivesFitTest, PublishedTableFits) {
  const char* root = std::getenv("BATON_SOURCE_DIR");
  const std::filesystem::path path =
      std::filesystem::path(root ? root : ".") / "../shared/data/published/collectives.csv";
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is absent (the shared data set lives beside the repository)";
  }
  auto rows = LoadCollectivesCsv(path.string());
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_GT(rows->size(), 800u);
  CollectivesReport rep = FitAndValidate(SamplesFromCsv(*rows));
  EXPECT_GT(rep.fits.size(), 20u);
  EXPECT_GT(rep.excluded, 0);
  EXPECT_LT(rep.in_sample_median, 0.5);  // a sanity bound, not a figure: bench/perf prints those
}

}  // namespace
}  // namespace baton::perf
