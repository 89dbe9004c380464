// The base of baton's line-oriented trace readers (not a public API; see trace.h): pulls lines of
// at most TraceOptions::max_line_bytes, hands each non-empty one to Parse(), applies the
// strict/skip policy, and refuses any job whose times pass kTraceHorizon — so a format's reader
// only turns one line into a TraceJob. Also the field helpers every reader shares.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sim/workload/trace.h"

namespace baton::sim {

class LineReader : public TraceReader {
 public:
  LineReader(std::istream& in, std::string name, TraceOptions options)
      : in_(in), name_(std::move(name)), options_(std::move(options)) {}

  Result<std::optional<TraceJob>> Next() final;
  const TraceStats& stats() const final { return stats_; }

 protected:
  // Parses one non-empty line. nullopt: not a job (header, comment, filtered); error: malformed.
  virtual Result<std::optional<TraceJob>> Parse(std::string_view line) = 0;

  std::optional<TraceJob> Filtered() {
    ++stats_.filtered;
    return std::nullopt;
  }
  void CountEstimatedDuration() { ++stats_.estimated_durations; }
  std::int64_t line_number() const { return stats_.lines; }
  const TraceOptions& options() const { return options_; }
  const std::string& name() const { return name_; }

 private:
  bool ReadLine(std::string& line);
  Status Malformed(const std::string& reason);

  std::istream& in_;
  std::string name_;
  TraceOptions options_;
  TraceStats stats_;
  bool too_long_ = false;
};

// Reads one line of at most `max_bytes` into `line` (the rest of a longer line is consumed and
// dropped, and `too_long` set). False at the end of the stream with nothing read.
bool ReadBoundedLine(std::istream& in, std::size_t max_bytes, std::string& line, bool& too_long);

// Field helpers: errors read "field 'NAME': ...".
Result<double> Number(std::string_view field, std::string_view text);
Result<std::int64_t> Integer(std::string_view field, std::string_view text);
Status NonNegative(std::string_view field, double v);
Status GpuCount(std::string_view field, std::int64_t v);
// A time or duration in seconds: finite, >= 0 and within kTraceHorizon.
Status TimeInHorizon(std::string_view field, double v);
Result<std::vector<std::string_view>> Fields(std::string_view line, char sep, std::size_t want);

}  // namespace baton::sim
