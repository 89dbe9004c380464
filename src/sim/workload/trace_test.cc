#include "sim/workload/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

namespace baton::sim {
namespace {

// A few rows of Gavel's philly-gavel/throughputs.csv (V100, steps per second).
std::shared_ptr<const PhillyThroughputs> Throughputs() {
  auto t = PhillyThroughputs::Parse(
      "gpu_type,job_type,scale_factor,steps_per_s\n"
      "k80,ResNet-18 (batch size 32),4,1.0\n"
      "v100,ResNet-18 (batch size 32),4,114.73342037584995\n"
      "v100,A3C,1,7.175767179667988\n",
      "throughputs.csv");
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::make_shared<const PhillyThroughputs>(*t);
}

struct ReadAll {
  std::vector<TraceJob> jobs;
  TraceStats stats;
  Status status;
};

ReadAll Read(std::string_view format, const std::string& text, const TraceOptions& options = {},
             std::string name = "t") {
  std::istringstream in(text);
  auto made = MakeTraceReader(format, in, std::move(name), options);
  ReadAll out;
  if (!made.ok()) {
    out.status = made.status();
    return out;
  }
  auto& reader = *made;
  while (true) {
    auto next = reader->Next();
    if (!next.ok()) {
      out.status = next.status();
      break;
    }
    if (!next->has_value()) break;
    out.jobs.push_back(**next);
  }
  out.stats = reader->stats();
  return out;
}

TEST(TraceTest, ItpParsesAndReportsMalformedLines) {
  auto r = Read("itp",
                "job_id,submission_time,duration,num_gpu\n"
                "a,10,100,8\n"
                "b,11,x,8\n"
                "c,12,50\n"
                "d,13,50,-1\n"
                "e,14,50,0\n"
                "f,15,60,2");  // last line without newline (truncated file) still counts
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[0].id, "a");
  EXPECT_EQ(r.jobs[0].gpus, 8);
  EXPECT_EQ(r.jobs[0].duration->value(), 100);
  EXPECT_EQ(r.jobs[1].id, "f");
  EXPECT_EQ(r.stats.malformed, 3);
  EXPECT_EQ(r.stats.filtered, 1);
  ASSERT_EQ(r.stats.warnings.size(), 3u);
  EXPECT_EQ(r.stats.warnings[0], "t:3: field 'duration': 'x' is not a number");
  EXPECT_EQ(r.stats.warnings[1], "t:4: expected 4 fields, found 3 (truncated line?)");
  EXPECT_EQ(r.stats.warnings[2], "t:5: field 'num_gpu': -1 GPUs is out of range (0..1000000)");
}

TEST(TraceTest, StrictStopsAtFirstMalformedLine) {
  TraceOptions strict;
  strict.strict = true;
  auto r = Read("itp", "a,1,2,1\nb,1,2\nc,1,2,1\n", strict);
  EXPECT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.status.message(), "t:2: expected 4 fields, found 3 (truncated line?)");
}

TEST(TraceTest, PhillySwfOpenbJsonl) {
  TraceOptions philly_options;
  philly_options.philly_throughputs = Throughputs();
  auto philly =
      Read("philly", "ResNet-18 (batch size 32)\tcmd\t--num_steps\t1\t1104675\t6.000000\t4\n",
           philly_options, "traces/6214e9.trace");
  ASSERT_EQ(philly.jobs.size(), 1u);
  EXPECT_EQ(philly.jobs[0].gpus, 4);
  EXPECT_EQ(philly.jobs[0].total_steps, 1104675);
  EXPECT_EQ(philly.jobs[0].kind, "ResNet-18 (batch size 32)");
  ASSERT_TRUE(philly.jobs[0].duration.has_value());
  EXPECT_DOUBLE_EQ(philly.jobs[0].duration->value(), 1104675 / 114.73342037584995);
  EXPECT_EQ(philly.jobs[0].tenant, "6214e9");  // the virtual cluster, from the file name

  TraceOptions swf_options;
  swf_options.swf_procs_per_gpu = 4;
  auto swf = Read("swf",
                  "; comment\n"
                  "    1        0     -1   1451  128     -1    -1   -1     -1    -1 -1   1   1  -1 "
                  "-1 -1 -1 -1\n"
                  "    2     1460     -1     -1   -1     -1    -1   -1     -1    -1 -1   1   1  -1 "
                  "-1 -1 -1 -1\n"
                  "    3     1460     -1   10 2\n",
                  swf_options);
  ASSERT_EQ(swf.jobs.size(), 1u);
  EXPECT_EQ(swf.jobs[0].gpus, 32);
  EXPECT_EQ(swf.jobs[0].tenant, "user1");
  EXPECT_EQ(swf.stats.filtered, 1);
  EXPECT_EQ(swf.stats.malformed, 1);

  auto openb = Read("openb",
                    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_"
                    "time,deletion_time,scheduled_time\n"
                    "p0,12000,16384,1,460,,LS,Running,0,100,10\n"
                    "p1,12000,16384,0,0,,LS,Running,0,100,10\n"
                    "p2,12000,16384,2,1000,V100M32,BE,Pending,5,,\n"
                    "p3,12000,16384,1,2000,,LS,Running,0,100,10\n");
  ASSERT_EQ(openb.jobs.size(), 1u);
  EXPECT_EQ(openb.jobs[0].gpu_milli, 460);
  EXPECT_EQ(openb.jobs[0].duration->value(), 90);
  EXPECT_EQ(openb.stats.filtered, 2);
  EXPECT_EQ(openb.stats.malformed, 1);
  // The same parser as the packing protocol's: a variant list with fewer columns, a pod never
  // scheduled kept with the time it waited, gpu_spec with several models, CPU and memory.
  auto variant = Read("openb",
                      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,creation_time,"
                      "deletion_time\n"
                      "q0,6000,12288,1,460,V100M16|V100M32,10,70\n");
  ASSERT_EQ(variant.jobs.size(), 1u) << variant.stats.malformed;
  EXPECT_EQ(variant.jobs[0].duration->value(), 60);
  EXPECT_EQ(variant.jobs[0].cpu_milli, 6000);
  EXPECT_EQ(variant.jobs[0].memory_mib, 12288);
  EXPECT_EQ(variant.jobs[0].gpu_types, (std::vector<std::string>{"V100M16", "V100M32"}));
  EXPECT_EQ(variant.stats.estimated_durations, 1);

  TraceJob j;
  j.id = "x";
  j.submit = Seconds(5);
  j.duration = Seconds(60);
  j.gpus = 16;
  j.tenant = "team-a";
  auto jsonl = Read("jsonl", ToJsonl(j) + "\n{\"gpus\": 0}\n{\"gpu\": 2}\nnot json\n");
  ASSERT_EQ(jsonl.jobs.size(), 1u);
  EXPECT_EQ(jsonl.jobs[0].tenant, "team-a");
  EXPECT_EQ(ToJsonl(jsonl.jobs[0]), ToJsonl(j));
  ASSERT_EQ(jsonl.stats.warnings.size(), 3u);
  EXPECT_EQ(jsonl.stats.warnings[0], "t:2: field 'gpus': 0 GPUs is out of range (1..1000000)");
  EXPECT_EQ(jsonl.stats.warnings[1], "t:3: field 'gpu': unknown field");
  EXPECT_EQ(jsonl.stats.warnings[2], "t:4: not valid JSON");

  // Host resources and accepted types round-trip; bad ones name the field.
  TraceJob r = j;
  r.gpus = 1;
  r.gpu_milli = 500;
  r.cpu_milli = 8000;
  r.memory_mib = 16384;
  r.gpu_types = {"T4", "P100"};
  auto res = Read("jsonl", ToJsonl(r) +
                               "\n{\"gpus\": 1, \"cpu_milli\": -1}\n"
                               "{\"gpus\": 1, \"memory_mib\": 1.5}\n"
                               "{\"gpus\": 1, \"gpu_types\": [3]}\n");
  ASSERT_EQ(res.jobs.size(), 1u);
  EXPECT_EQ(ToJsonl(res.jobs[0]), ToJsonl(r));
  ASSERT_EQ(res.stats.warnings.size(), 3u);
  EXPECT_NE(res.stats.warnings[0].find("field 'cpu_milli'"), std::string::npos);
  EXPECT_NE(res.stats.warnings[1].find("field 'memory_mib'"), std::string::npos);
  EXPECT_NE(res.stats.warnings[2].find("field 'gpu_types'"), std::string::npos);

  // Named extended resources per job round-trip; bad ones name the resource.
  TraceJob x = j;
  x.extended = {{"nvme_gb", 500}, {"rdma_nic", 2}};
  auto ext = Read("jsonl", ToJsonl(x) +
                               "\n{\"gpus\": 1, \"extended\": {\"rdma_nic\": -1}}\n"
                               "{\"gpus\": 1, \"extended\": {\"RDMA\": 1}}\n"
                               "{\"gpus\": 1, \"extended\": [1]}\n");
  ASSERT_EQ(ext.jobs.size(), 1u);
  EXPECT_EQ(ext.jobs[0].extended, x.extended);
  EXPECT_EQ(ToJsonl(ext.jobs[0]), ToJsonl(x));
  ASSERT_EQ(ext.stats.warnings.size(), 3u);
  EXPECT_NE(ext.stats.warnings[0].find("field 'extended.rdma_nic': must be a whole amount"),
            std::string::npos)
      << ext.stats.warnings[0];
  EXPECT_NE(ext.stats.warnings[1].find("field 'extended.RDMA'"), std::string::npos);
  EXPECT_NE(ext.stats.warnings[2].find("field 'extended'"), std::string::npos);
}

// Issue 27: an elastic job's range round-trips; a bad range names its field.
TEST(TraceTest, JsonlElasticRange) {
  auto res = Read("jsonl",
                  "{\"id\": \"e\", \"duration_s\": 60, \"elastic\": {\"min_gpus\": 8, "
                  "\"max_gpus\": 32, \"step_gpus\": 8}}\n"
                  "{\"gpus\": 4, \"elastic\": {\"min_gpus\": 8, \"max_gpus\": 4}}\n"
                  "{\"gpus\": 4, \"elastic\": {\"min_gpus\": 0, \"max_gpus\": 4}}\n"
                  "{\"gpus\": 6, \"elastic\": {\"min_gpus\": 4, \"max_gpus\": 8, "
                  "\"step_gpus\": 4}}\n"
                  "{\"gpus\": 16, \"elastic\": {\"min_gpus\": 4, \"max_gpus\": 8}}\n"
                  "{\"gpus\": 4, \"elastic\": {\"min_gpus\": 4, \"max_gpus\": 12, "
                  "\"step_gpus\": 8}}\n"
                  "{\"gpus\": 4, \"elastic\": {\"min_gpus\": 4, \"max\": 8}}\n"
                  "{\"gpus\": 4, \"elastic\": {\"min_gpus\": 4, \"max_gpus\": 8, "
                  "\"max_gpus\": 16}}\n");
  ASSERT_EQ(res.jobs.size(), 1u);
  const TraceJob& e = res.jobs[0];
  EXPECT_EQ(e.gpus, 8);  // starts at min_gpus
  EXPECT_EQ(e.min_gpus, 8);
  EXPECT_EQ(e.max_gpus, 32);
  EXPECT_EQ(e.step_gpus, 8);
  EXPECT_EQ(ToJsonl(Read("jsonl", ToJsonl(e)).jobs.at(0)), ToJsonl(e));
  const std::vector<std::string> want = {
      "field 'elastic.max_gpus': 4 is below min_gpus 8",
      "field 'elastic.min_gpus': must be a GPU count",
      "field 'gpus': 6 is not a multiple of elastic.step_gpus 4",
      "field 'gpus': 16 is outside elastic's [4, 8]",
      "field 'elastic.step_gpus': 8 does not divide",
      "field 'elastic.max': unknown field",
      "duplicate key 'max_gpus'",
  };
  ASSERT_EQ(res.stats.warnings.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NE(res.stats.warnings[i].find(want[i]), std::string::npos) << res.stats.warnings[i];
  }
}

TEST(TraceTest, BinaryAndOverlongLinesAreMalformedNotFatal) {
  TraceOptions small;
  small.max_line_bytes = 16;
  auto r = Read("itp", std::string("\x00\x01\xff,,\n", 6) + std::string(100, 'x') + "\na,1,1,1\n",
                small);
  EXPECT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.stats.malformed, 2);
  EXPECT_NE(r.stats.warnings[1].find("longer than 16 bytes"), std::string::npos);
}

TEST(TraceTest, FormatNames) {
  EXPECT_EQ((*FindTraceFormat("SWF"))->name, "swf");
  EXPECT_FALSE(FindTraceFormat("csv").ok());
  EXPECT_EQ((*GuessTraceFormat("x.csv", "job_id,submission_time,duration,num_gpu"))->name, "itp");
  EXPECT_EQ((*GuessTraceFormat("x.csv", "name,cpu_milli,memory_mib"))->name, "openb");
  EXPECT_EQ((*GuessTraceFormat("vc.trace", ""))->name, "philly");
  EXPECT_FALSE(GuessTraceFormat("x.txt", "hello").ok());
  // Every registered format makes a reader by its name.
  for (const TraceFormat& f : TraceFormats()) {
    std::istringstream in("");
    auto r = MakeTraceReader(f.name, in, "t");
    ASSERT_TRUE(r.ok()) << f.name;
    EXPECT_FALSE((*r)->Next()->has_value()) << f.name;
  }
}

// Issue 15: one far-future time (1e20 s, or epoch milliseconds) made `baton sim` grow memory
// until it aborted. Every reader now refuses a time past kTraceHorizon, naming the line.
TEST(TraceTest, TimesPastTheHorizonAreMalformedNamingTheLine) {
  auto itp = Read("itp", "a,1e20,100,8\nb,10,1e12,8\nc,10,100,8\n");
  ASSERT_TRUE(itp.status.ok()) << itp.status.ToString();
  ASSERT_EQ(itp.jobs.size(), 1u);
  EXPECT_EQ(itp.jobs[0].id, "c");
  ASSERT_EQ(itp.stats.warnings.size(), 2u);
  EXPECT_NE(itp.stats.warnings[0].find("t:1: field 'submission_time'"), std::string::npos)
      << itp.stats.warnings[0];
  EXPECT_NE(itp.stats.warnings[0].find("horizon"), std::string::npos);
  EXPECT_NE(itp.stats.warnings[1].find("t:2: field 'duration'"), std::string::npos);
  auto jsonl = Read("jsonl", R"({"gpus":1,"submit_s":1e12,"duration_s":5})"
                             "\n");
  EXPECT_EQ(jsonl.stats.malformed, 1);
  EXPECT_NE(jsonl.stats.warnings[0].find("submit_s"), std::string::npos);
  // openb's reader is not touched here: the shared line reader checks what it yields.
  auto openb = Read("openb", "p,0,0,1,1000,V100,LS,Running,1e20,1e20,1e20\n");
  EXPECT_EQ(openb.stats.malformed, 1);
  EXPECT_NE(openb.stats.warnings[0].find("horizon"), std::string::npos) << openb.stats.warnings[0];
  TraceOptions strict;
  strict.strict = true;
  auto s = Read("swf", "1 1e20 -1 10 1 -1 -1 -1 -1 -1 -1 1 1 -1 -1 -1 -1 -1\n", strict);
  EXPECT_NE(s.status.message().find("t:1: field 'submit_time'"), std::string::npos)
      << s.status.ToString();
}

// Issue 15: a 1e308 in an SWF trace was cast to int (undefined behaviour; the dev preset's
// -fsanitize=float-cast-overflow aborts on it).
TEST(TraceTest, SwfHugeNumbersAreMalformedNotCast) {
  auto r = Read("swf",
                "1 0 -1 10 1e308 -1 -1 -1 -1 -1 -1 1 1 -1 -1 -1 -1 -1\n"
                "2 0 -1 10 1 -1 -1 -1 -1 -1 -1 1e308 1 -1 -1 -1 -1 -1\n"
                "3 0 -1 10 1 -1 -1 -1 -1 -1 -1 1 1 -1 1e308 -1 -1 -1\n"
                "4 0 -1 10 1 -1 -1 -1 -1 -1 -1 1 1 -1 -1 -1 -1 -1\n");
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].id, "4");
  ASSERT_EQ(r.stats.warnings.size(), 3u);
  EXPECT_NE(r.stats.warnings[0].find("allocated_processors"), std::string::npos);
  EXPECT_NE(r.stats.warnings[1].find("user_id"), std::string::npos);
  EXPECT_NE(r.stats.warnings[2].find("queue"), std::string::npos);
}

TEST(TraceTest, JsonlDeepNestingIsMalformedNotARecursion) {
  auto r = Read("jsonl", std::string(200000, '[') + "\n" + R"({"gpus":1,"duration_s":5})" + "\n");
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.stats.malformed, 1);
  auto dup = Read("jsonl", R"({"gpus":1,"gpus":2,"duration_s":5})"
                           "\n");
  EXPECT_EQ(dup.stats.malformed, 1);
}

TEST(TraceTest, PhillyNeedsItsThroughputs) {
  // Without a table every line is malformed (and `baton sim` then stops: no job).
  auto none = Read("philly", "A3C\tcmd\t-n\t1\t100\t0\t1\n");
  EXPECT_EQ(none.jobs.size(), 0u);
  EXPECT_EQ(none.stats.malformed, 1);
  TraceOptions o;
  o.philly_throughputs = Throughputs();
  auto unknown = Read("philly", "LM (batch size 5)\tcmd\t-n\t1\t100\t0\t8\n", o);
  ASSERT_EQ(unknown.stats.warnings.size(), 1u);
  EXPECT_NE(unknown.stats.warnings[0].find("no V100 throughput for 'LM (batch size 5)'"),
            std::string::npos);
  // Past the largest measured scale factor (A3C: 1 only) the rate grows linearly, and the job
  // is counted as estimated.
  auto extrapolated = Read("philly", "A3C\tcmd\t-n\t1\t1000\t0\t8\n", o);
  ASSERT_EQ(extrapolated.jobs.size(), 1u);
  EXPECT_DOUBLE_EQ(extrapolated.jobs[0].duration->value(), 1000 / (7.175767179667988 * 8));
  EXPECT_EQ(extrapolated.stats.estimated_durations, 1);
  EXPECT_FALSE(PhillyThroughputs::Parse("gpu_type,job_type,scale_factor,steps_per_s\n"
                                        "v100,A3C,1,0\n",
                                        "x.csv")
                   .ok());
  EXPECT_FALSE(PhillyThroughputs::Parse("v100,A3C,1,2\nv100,A3C,1,3\n", "x.csv").ok());
  // OpenTrace finds throughputs.csv beside the trace, or says it is missing.
  const auto dir = std::filesystem::path(::testing::TempDir()) / "philly_no_table";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "vc1.trace") << "A3C\tcmd\t-n\t1\t100\t0\t1\n";
  auto missing = OpenTrace((dir / "vc1.trace").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("throughputs.csv"), std::string::npos);
  std::ofstream(dir / "throughputs.csv") << "gpu_type,job_type,scale_factor,steps_per_s\n"
                                            "v100,A3C,1,7.175767179667988\n";
  std::ofstream(dir / "vc2.trace") << "A3C\tcmd\t-n\t1\t200\t5\t1\n"
                                      "A3C\tcmd\t-n\t1\t300\t50\t1\n";
  // A folder is one trace: files merged by submit time, each file's virtual cluster a tenant.
  auto merged = OpenTrace(dir.string());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  std::vector<std::pair<std::string, double>> seen;
  while (true) {
    auto next = (*merged)->Next();
    ASSERT_TRUE(next.ok());
    if (!next->has_value()) break;
    seen.push_back({(*next)->tenant, (*next)->submit.value()});
  }
  EXPECT_EQ(seen,
            (std::vector<std::pair<std::string, double>>{{"vc1", 0}, {"vc2", 5}, {"vc2", 50}}));
  EXPECT_EQ((*merged)->stats().jobs, 3);
  std::filesystem::remove_all(dir);
}

// The real traces in ../shared/data/traces: read each whole, in constant memory.
TEST(TraceTest, RealTracesReadCleanly) {
  const char* root = std::getenv("BATON_SOURCE_DIR");
  std::filesystem::path traces = std::filesystem::path(root ? root : ".") / "../shared/data/traces";
  if (!std::filesystem::exists(traces)) {
    GTEST_SKIP() << "no shared traces at " << traces << " (they are not part of the repo)";
  }
  struct Want {
    const char* path;
    std::int64_t min_jobs;
  };
  for (Want w : {Want{"itp/cluster04.csv", 15000}, Want{"philly-gavel/0e4a51.trace", 1000},
                 Want{"philly-gavel", 15000}, Want{"swf/NASA-iPSC-1993-3.1-cln.swf", 18000},
                 Want{"alibaba-openb/openb_pod_list_default.csv", 5000}}) {
    auto reader = OpenTrace((traces / w.path).string());
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    std::int64_t n = 0;
    while (true) {
      auto next = (*reader)->Next();
      ASSERT_TRUE(next.ok()) << next.status().ToString();
      if (!next->has_value()) break;
      ++n;
    }
    EXPECT_GE(n, w.min_jobs) << w.path;
    EXPECT_EQ((*reader)->stats().malformed, 0)
        << w.path << ": "
        << ((*reader)->stats().warnings.empty() ? "" : (*reader)->stats().warnings[0]);
  }
}

}  // namespace
}  // namespace baton::sim
