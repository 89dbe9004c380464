// Standard Workload Format (Parallel Workloads Archive): 18 whitespace-separated fields, ';'
// comments, -1 = unknown.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "sim/workload/line_reader.h"
#include "sim/workload/readers.h"

namespace baton::sim {
namespace {

// SWF user ids and queue numbers are small integers; anything else (1e308, 2.5) is malformed, and
// is refused before any cast (a double out of an integer's range is undefined behaviour to cast).
Result<std::int64_t> SmallInteger(std::string_view field, double v, double max) {
  if (!(v >= -1 && v <= max) || v != std::floor(v)) {
    return InvalidArgumentError(
        fmt::format("field '{}': {:g} is not an integer in -1..{:g}", field, v, max));
  }
  return static_cast<std::int64_t>(v);
}

class SwfReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    std::string_view t = Trim(line);
    if (t.front() == ';') return std::optional<TraceJob>();
    std::vector<std::string_view> f;
    std::size_t i = 0;
    while (i < t.size() && f.size() <= 18) {
      while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
      std::size_t start = i;
      while (i < t.size() && t[i] != ' ' && t[i] != '\t') ++i;
      if (i > start) f.push_back(t.substr(start, i - start));
    }
    if (f.size() != 18) {
      return InvalidArgumentError(fmt::format("expected 18 SWF fields, found {}{}", f.size(),
                                              f.size() > 18 ? " or more" : " (truncated line?)"));
    }
    static constexpr const char* kNames[18] = {"job_number",
                                               "submit_time",
                                               "wait_time",
                                               "run_time",
                                               "allocated_processors",
                                               "average_cpu_time",
                                               "used_memory",
                                               "requested_processors",
                                               "requested_time",
                                               "requested_memory",
                                               "status",
                                               "user_id",
                                               "group_id",
                                               "executable",
                                               "queue",
                                               "partition",
                                               "preceding_job",
                                               "think_time"};
    double v[18];
    for (int k = 0; k < 18; ++k) {
      ASSIGN_OR_RETURN(v[k], Number(kNames[k], f[k]));
    }
    TraceJob j;
    j.id = std::string(f[0]);
    RETURN_IF_ERROR(TimeInHorizon("submit_time", v[1]));
    double procs = v[4] > 0 ? v[4] : v[7];
    if (procs <= 0 || v[3] < 0) return Filtered();  // never ran, or size unknown
    RETURN_IF_ERROR(TimeInHorizon("run_time", v[3]));
    if (v[8] > 0) RETURN_IF_ERROR(TimeInHorizon("requested_time", v[8]));
    const int per_gpu = std::max(1, options().swf_procs_per_gpu);
    const double gpus = std::ceil(procs / per_gpu);
    if (!(gpus <= 1'000'000)) {  // also NaN: checked before the cast to int
      return InvalidArgumentError(fmt::format(
          "field '{}': {:g} processors is out of range (at most 1000000 GPUs of {} processors)",
          v[4] > 0 ? kNames[4] : kNames[7], procs, per_gpu));
    }
    ASSIGN_OR_RETURN(std::int64_t user, SmallInteger(kNames[11], v[11], 1e15));
    ASSIGN_OR_RETURN(std::int64_t queue, SmallInteger(kNames[14], v[14], 1e6));
    j.submit = Seconds(v[1]);
    j.duration = Seconds(v[3]);
    if (v[8] > 0) j.requested_time = Seconds(v[8]);
    j.gpus = static_cast<int>(gpus);
    j.tenant = user >= 0 ? fmt::format("user{}", user) : "";
    j.priority = queue >= 0 ? static_cast<int>(queue) : 0;
    return std::optional<TraceJob>(std::move(j));
  }
};

}  // namespace

std::unique_ptr<TraceReader> MakeSwfReader(std::istream& in, std::string name,
                                           const TraceOptions& options) {
  return std::make_unique<SwfReader>(in, std::move(name), options);
}

}  // namespace baton::sim
