#include "sim/workload/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

namespace baton::sim {
namespace {

struct ReadAll {
  std::vector<TraceJob> jobs;
  TraceStats stats;
  Status status;
};

ReadAll Read(TraceFormat format, const std::string& text, TraceOptions options = {}) {
  std::istringstream in(text);
  auto reader = MakeTraceReader(format, in, "t", options);
  ReadAll out;
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
  auto r = Read(TraceFormat::kItp,
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
  auto r = Read(TraceFormat::kItp, "a,1,2,1\nb,1,2\nc,1,2,1\n", strict);
  EXPECT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.status.message(), "t:2: expected 4 fields, found 3 (truncated line?)");
}

TEST(TraceTest, PhillySwfOpenbJsonl) {
  auto philly = Read(TraceFormat::kPhilly,
                     "ResNet-18 (batch size 32)\tcmd\t--num_steps\t1\t1104675\t6.000000\t4\n");
  ASSERT_EQ(philly.jobs.size(), 1u);
  EXPECT_EQ(philly.jobs[0].gpus, 4);
  EXPECT_EQ(philly.jobs[0].total_steps, 1104675);
  EXPECT_EQ(philly.jobs[0].kind, "ResNet-18 (batch size 32)");
  EXPECT_FALSE(philly.jobs[0].duration.has_value());

  TraceOptions swf_options;
  swf_options.swf_procs_per_gpu = 4;
  auto swf = Read(TraceFormat::kSwf,
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

  auto openb = Read(TraceFormat::kOpenb,
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

  TraceJob j;
  j.id = "x";
  j.submit = Seconds(5);
  j.duration = Seconds(60);
  j.gpus = 16;
  j.tenant = "team-a";
  auto jsonl = Read(TraceFormat::kJsonl, ToJsonl(j) + "\n{\"gpus\": 0}\n{\"gpu\": 2}\nnot json\n");
  ASSERT_EQ(jsonl.jobs.size(), 1u);
  EXPECT_EQ(jsonl.jobs[0].tenant, "team-a");
  EXPECT_EQ(ToJsonl(jsonl.jobs[0]), ToJsonl(j));
  ASSERT_EQ(jsonl.stats.warnings.size(), 3u);
  EXPECT_EQ(jsonl.stats.warnings[0], "t:2: field 'gpus': 0 GPUs is out of range (1..1000000)");
  EXPECT_EQ(jsonl.stats.warnings[1], "t:3: field 'gpu': unknown field");
  EXPECT_EQ(jsonl.stats.warnings[2], "t:4: not valid JSON");
}

TEST(TraceTest, BinaryAndOverlongLinesAreMalformedNotFatal) {
  TraceOptions small;
  small.max_line_bytes = 16;
  auto r = Read(TraceFormat::kItp,
                std::string("\x00\x01\xff,,\n", 6) + std::string(100, 'x') + "\na,1,1,1\n", small);
  EXPECT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.stats.malformed, 2);
  EXPECT_NE(r.stats.warnings[1].find("longer than 16 bytes"), std::string::npos);
}

TEST(TraceTest, FormatNames) {
  EXPECT_EQ(*ParseTraceFormat("SWF"), TraceFormat::kSwf);
  EXPECT_FALSE(ParseTraceFormat("csv").ok());
  EXPECT_EQ(*GuessTraceFormat("x.csv", "job_id,submission_time,duration,num_gpu"),
            TraceFormat::kItp);
  EXPECT_FALSE(GuessTraceFormat("x.txt", "hello").ok());
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
                 Want{"swf/NASA-iPSC-1993-3.1-cln.swf", 18000},
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
