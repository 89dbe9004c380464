// libFuzzer target for one trace reader (the format is BATON_TRACE_FORMAT, a name registered in
// src/sim/workload/trace_formats.cc; fuzz/CMakeLists.txt builds one target per format). The
// input is the trace text. Besides "no crash, no sanitizer report" (a float cast out of range is
// one), every job the reader yields must be in range: GPUs 1..1000000, times within
// kTraceHorizon, and the counts must add up.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "sim/workload/trace.h"

namespace {

// Gavel's rows for the Philly reader (a few; the rest of a job type extrapolates or is missing).
std::shared_ptr<const baton::sim::PhillyThroughputs> Throughputs() {
  static const auto table =
      std::make_shared<const baton::sim::PhillyThroughputs>(*baton::sim::PhillyThroughputs::Parse(
          "v100,A3C,1,7.17\nv100,ResNet-18 (batch size 32),1,29.9\n"
          "v100,ResNet-18 (batch size 32),4,114.7\n",
          "throughputs.csv"));
  return table;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace baton::sim;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  TraceOptions options;
  options.max_line_bytes = 4096;
  options.swf_procs_per_gpu = 3;
  options.philly_throughputs = Throughputs();
  auto reader = MakeTraceReader(BATON_TRACE_FORMAT, in, "fuzz/vc1.trace", options);
  if (!reader.ok()) __builtin_trap();
  std::int64_t jobs = 0;
  while (true) {
    auto next = (*reader)->Next();
    if (!next.ok()) __builtin_trap();  // only strict mode or I/O may fail
    if (!next->has_value()) break;
    const TraceJob& j = **next;
    ++jobs;
    if (j.gpus < 1 || j.gpus > 1'000'000) __builtin_trap();
    if (!(j.submit.value() >= 0 && j.submit <= kTraceHorizon)) __builtin_trap();
    if (j.duration && !(j.duration->value() >= 0 && *j.duration <= kTraceHorizon)) {
      __builtin_trap();
    }
    if (j.gpu_milli < 1 || j.gpu_milli > 1000) __builtin_trap();
  }
  const TraceStats& s = (*reader)->stats();
  if (s.jobs != jobs || s.jobs + s.malformed + s.filtered > s.lines) __builtin_trap();
  return 0;
}
