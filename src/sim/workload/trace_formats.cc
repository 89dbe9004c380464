// The trace format registry: name -> reader factory, with how to recognise each format's files.
// A new format is a reader in this folder (a LineReader subclass, line_reader.h), its factory in
// readers.h, and one entry here.
#include "sim/workload/readers.h"
#include "sim/workload/trace.h"

namespace baton::sim {

std::span<const TraceFormat> TraceFormats() {
  static const TraceFormat kFormats[] = {
      {"itp", "", "job_id,submission_time", "Microsoft ITP CSV (ElasticFlow)", &MakeItpReader},
      {"philly", ".trace", "", "Gavel's Philly .trace (one file per virtual cluster)",
       &MakePhillyReader},
      {"swf", ".swf", "", "Standard Workload Format (Parallel Workloads Archive)", &MakeSwfReader},
      {"openb", "", "name,cpu_milli", "Alibaba openb pod list CSV", &MakeOpenbReader},
      {"jsonl", ".jsonl", "", "baton JSONL (one job object per line)", &MakeJsonlReader},
  };
  return kFormats;
}

}  // namespace baton::sim
