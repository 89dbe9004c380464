// Job traces: streaming readers that turn a real cluster trace into TraceJob records, one at a
// time, in constant memory whatever the trace length. Formats: the Microsoft ITP CSV, Gavel's
// Philly-derived `.trace`, SWF (Parallel Workloads Archive), the Alibaba openb pod list, and
// baton's own JSONL. A malformed line is reported with file and line number, counted and skipped
// — or, under `strict`, ends the read with that error.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace baton::sim {

enum class TraceFormat { kItp, kPhilly, kSwf, kOpenb, kJsonl };
std::string_view TraceFormatName(TraceFormat f);
Result<TraceFormat> ParseTraceFormat(std::string_view name);
// Guesses from the file name: *.csv with an ITP or openb header, *.trace, *.swf, *.jsonl.
Result<TraceFormat> GuessTraceFormat(std::string_view path, std::string_view first_line);

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
  std::string kind;                       // model / job type, when the trace says
  std::int64_t total_steps = 0;           // training steps (Philly/Gavel), 0 when unknown
  int priority = 0;
};

struct TraceOptions {
  bool strict = false;        // first malformed line is fatal
  int swf_procs_per_gpu = 1;  // SWF processors that make one GPU
  std::size_t max_line_bytes = 1 << 20;
  std::size_t max_warnings = 20;  // warnings kept (all are counted)
};

struct TraceStats {
  std::int64_t lines = 0;
  std::int64_t jobs = 0;
  std::int64_t malformed = 0;  // reported, skipped
  std::int64_t filtered = 0;   // well-formed but not a GPU job (CPU-only pods, unstarted jobs)
  std::vector<std::string> warnings;  // "file:line: reason", the first max_warnings
};

class TraceReader {
 public:
  virtual ~TraceReader() = default;
  // The next job; nullopt at the end of the trace. An error only under `strict` (or for I/O).
  virtual Result<std::optional<TraceJob>> Next() = 0;
  virtual const TraceStats& stats() const = 0;
};

// Reads from `in`, which must outlive the reader; `name` prefixes messages.
std::unique_ptr<TraceReader> MakeTraceReader(TraceFormat format, std::istream& in, std::string name,
                                             TraceOptions options = {});
// Opens a file (format guessed when nullopt). The reader owns the stream.
Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path,
                                               std::optional<TraceFormat> format = std::nullopt,
                                               TraceOptions options = {});

// Writes one job as a line of baton's JSONL format (no trailing newline).
std::string ToJsonl(const TraceJob& job);

}  // namespace baton::sim
