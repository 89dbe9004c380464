// Job traces: streaming readers that turn a real cluster trace into TraceJob records, one at a
// time, in constant memory whatever the trace length. Formats (each a reader in this folder,
// registered by name in trace_formats.cc): the Microsoft ITP CSV, Gavel's Philly-derived
// `.trace`, SWF (Parallel Workloads Archive), the Alibaba openb pod list, and baton's own JSONL.
// A malformed line is reported with file and line number, counted and skipped — or, under
// `strict`, ends the read with that error. Lines are bounded (max_line_bytes), and every time a
// reader yields is within kTraceHorizon.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace baton::sim {

// The latest time and the longest duration a trace may give, in seconds from the trace's start:
// 10 years. Real traces span weeks to a few years (ITP cluster04: 59.5 days of submissions; the
// longest logs of the Parallel Workloads Archive: about 5 years). A line past it (1e20, or epoch
// milliseconds such as 1e12) is malformed, with its line number: simulated time is event-driven,
// but samples and checkpoints are periodic, so an unbounded time would be unbounded work.
inline constexpr Seconds kTraceHorizon = Seconds(10 * 365.25 * 86400);

// One job as a trace records it. Fields a format does not carry keep their defaults.
struct TraceJob {
  std::string id;
  Seconds submit;                         // since the start of the trace
  std::optional<Seconds> duration;        // measured run time, when the trace has it
  std::optional<Seconds> requested_time;  // the user's wall-time limit (SWF)
  int gpus = 0;                           // whole GPUs (a fractional request counts as 1 here)
  int gpu_milli = 1000;                   // per GPU: 1000 = whole; less = a shared fraction (openb)
  std::string tenant;                     // user, group or virtual cluster
  std::string gpu_type;                   // requested GPU model, when the trace says
  std::vector<std::string> gpu_types;     // accepted GPU models (openb `A|B`); empty: gpu_type
  std::int64_t cpu_milli = 0;             // per task; 0: unstated
  std::int64_t memory_mib = 0;            // per task; 0: unstated
  // Named extended resources per task ({"rdma_nic", 1}), sorted by name (JSONL `extended`).
  std::vector<std::pair<std::string, std::int64_t>> extended;
  std::string kind;              // model / job type, when the trace says
  std::int64_t total_steps = 0;  // training steps (Philly/Gavel), 0 when unknown
  int priority = 0;
  // An elastic job's GPU range (JSONL `elastic`); max_gpus == 0: rigid. It starts at `gpus`
  // (the size its duration was measured at) and the scheduler resizes it within the range in
  // steps of step_gpus (0: sched::DefaultElasticStep on the simulated cluster).
  int min_gpus = 0;
  int max_gpus = 0;
  int step_gpus = 0;
};

class PhillyThroughputs;

struct TraceOptions {
  bool strict = false;        // first malformed line is fatal
  int swf_procs_per_gpu = 1;  // SWF processors that make one GPU
  std::size_t max_line_bytes = 1 << 20;
  std::size_t max_warnings = 20;  // warnings kept (all are counted)
  // Philly: the measured throughputs that turn steps into run times. OpenTrace loads the
  // throughputs.csv beside the trace when this is null; without one every line is malformed.
  std::shared_ptr<const PhillyThroughputs> philly_throughputs;
};

struct TraceStats {
  std::int64_t lines = 0;
  std::int64_t jobs = 0;
  std::int64_t malformed = 0;  // reported, skipped
  std::int64_t filtered = 0;   // well-formed but not a GPU job (CPU-only pods, unstarted jobs)
  // Jobs whose run time rests on an extrapolation (Philly: a scale factor past the largest one
  // measured for its job type; see PhillyThroughputs).
  std::int64_t estimated_durations = 0;
  std::vector<std::string> warnings;  // "file:line: reason", the first max_warnings
};

class TraceReader {
 public:
  virtual ~TraceReader() = default;
  // The next job; nullopt at the end of the trace. An error only under `strict` (or for I/O).
  virtual Result<std::optional<TraceJob>> Next() = 0;
  virtual const TraceStats& stats() const = 0;
};

// A trace format: its name, how to recognise its files, and the factory of its reader. Reads
// from `in`, which must outlive the reader; `name` (the file's path) prefixes messages.
using TraceReaderFactory = std::unique_ptr<TraceReader> (*)(std::istream& in, std::string name,
                                                            const TraceOptions& options);
struct TraceFormat {
  std::string_view name;         // "itp", as --format takes it
  std::string_view extension;    // a file ending in this is in this format ("" none)
  std::string_view header;       // a file whose first line starts with this is ("" none)
  std::string_view description;  // one line, for --help
  TraceReaderFactory make;
};

// The registry (trace_formats.cc): a new format is a reader in this folder plus one entry there.
std::span<const TraceFormat> TraceFormats();
// Looks a format up by name (case-insensitive). Errors list the known names.
Result<const TraceFormat*> FindTraceFormat(std::string_view name);
// Guesses from the file name's extension, else from its first line's header.
Result<const TraceFormat*> GuessTraceFormat(std::string_view path, std::string_view first_line);

// A reader of `format` (a registered name) over `in`, which must outlive it.
Result<std::unique_ptr<TraceReader>> MakeTraceReader(std::string_view format, std::istream& in,
                                                     std::string name,
                                                     const TraceOptions& options = {});
// Opens a file (format guessed when empty) and owns the stream. A directory is read as one
// trace: its files of that format (by extension; Philly's `.trace` when no format is given),
// merged by submit time, each file's jobs tagged with the file's name as their tenant when the
// format has none (Philly: one file per virtual cluster). Philly without
// options.philly_throughputs loads PATH's folder's throughputs.csv (an error when missing).
Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path,
                                               std::string_view format = {},
                                               TraceOptions options = {});

// Gavel's measured throughputs (philly-gavel/throughputs.csv: gpu_type,job_type,scale_factor,
// steps_per_s). Gavel generated each trace's total_steps as run time x the V100 throughput of
// the same job type and scale factor, so run time = total_steps / the V100 steps per second.
class PhillyThroughputs {
 public:
  // Errors name the line: a row that is not 4 fields, a non-positive rate, a duplicate row.
  static Result<PhillyThroughputs> Parse(std::string_view csv, std::string_view name);
  // Reads at most 1 MiB (checked before reading).
  static Result<PhillyThroughputs> Load(const std::string& path);
  struct Rate {
    double steps_per_s = 0;
    bool extrapolated = false;
  };
  // Steps per second on V100s. The table measures scale factors 1, 2, 4 and 8 (some job types
  // only 1), while the traces ask for up to 64 GPUs: past the largest measured scale factor s0 of
  // the job type, the rate is extrapolated linearly, rate(s0) x s / s0 (Gavel's rates grow about
  // linearly with the scale factor: ResNet-18 at batch 128 runs 18, 24, 70 and 162 steps/s on 1,
  // 2, 4 and 8 V100s), and marked extrapolated. A scale factor between measured ones (e.g. 3)
  // scales from the largest measured one below it. nullopt: the job type is not in the table.
  std::optional<Rate> V100StepsPerSecond(std::string_view job_type, int scale_factor) const;
  std::size_t size() const { return v100_.size(); }

 private:
  std::vector<std::pair<std::pair<std::string, int>, double>> v100_;  // sorted by key
};

// Writes one job as a line of baton's JSONL format (no trailing newline).
std::string ToJsonl(const TraceJob& job);

}  // namespace baton::sim
