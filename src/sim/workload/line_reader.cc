#include "sim/workload/line_reader.h"

#include <fmt/format.h>

#include <cmath>

#include "core/strings.h"

namespace baton::sim {

bool ReadBoundedLine(std::istream& in, std::size_t max_bytes, std::string& line, bool& too_long) {
  line.clear();
  too_long = false;
  char c;
  while (in.get(c)) {
    if (c == '\n') return true;
    if (line.size() < max_bytes) {
      line.push_back(c);
    } else {
      too_long = true;
    }
  }
  return !line.empty() || too_long;  // a last line without '\n' (a truncated trace) still counts
}

Result<std::optional<TraceJob>> LineReader::Next() {
  std::string line;
  while (ReadLine(line)) {
    ++stats_.lines;
    if (too_long_) {
      too_long_ = false;
      RETURN_IF_ERROR(Malformed(fmt::format("line longer than {} bytes", options_.max_line_bytes)));
      continue;
    }
    std::string_view view = line;
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    if (Trim(view).empty()) continue;
    Result<std::optional<TraceJob>> job = Parse(view);
    if (job.ok() && job->has_value()) {
      // Every format's times pass the same horizon check, whatever its reader parsed.
      const TraceJob& j = **job;
      Status horizon = TimeInHorizon("submit", j.submit.value());
      if (horizon.ok() && j.duration) horizon = TimeInHorizon("duration", j.duration->value());
      if (horizon.ok() && j.requested_time) {
        horizon = TimeInHorizon("requested_time", j.requested_time->value());
      }
      if (!horizon.ok()) job = horizon;
    }
    if (!job.ok()) {
      RETURN_IF_ERROR(Malformed(job.status().message()));
      continue;
    }
    if (!job->has_value()) continue;
    ++stats_.jobs;
    return job;
  }
  if (in_.bad()) return InternalError(fmt::format("{}: read error", name_));
  return std::optional<TraceJob>();
}

bool LineReader::ReadLine(std::string& line) {
  return ReadBoundedLine(in_, options_.max_line_bytes, line, too_long_);
}

Status LineReader::Malformed(const std::string& reason) {
  std::string msg = fmt::format("{}:{}: {}", name_, stats_.lines, reason);
  if (options_.strict) return InvalidArgumentError(msg);
  ++stats_.malformed;
  if (stats_.warnings.size() < options_.max_warnings) stats_.warnings.push_back(std::move(msg));
  return Status::Ok();
}

Result<double> Number(std::string_view field, std::string_view text) {
  auto v = ParseDouble(text);
  if (!v) {
    return InvalidArgumentError(
        fmt::format("field '{}': '{}' is not a number", field, Printable(text, 40)));
  }
  return *v;
}

Result<std::int64_t> Integer(std::string_view field, std::string_view text) {
  auto v = ParseInt64(text);
  if (!v) {
    return InvalidArgumentError(
        fmt::format("field '{}': '{}' is not an integer", field, Printable(text, 40)));
  }
  return *v;
}

Status NonNegative(std::string_view field, double v) {
  if (v < 0) return InvalidArgumentError(fmt::format("field '{}': {} is negative", field, v));
  return Status::Ok();
}

Status GpuCount(std::string_view field, std::int64_t v) {
  if (v < 0 || v > 1'000'000) {
    return InvalidArgumentError(
        fmt::format("field '{}': {} GPUs is out of range (0..1000000)", field, v));
  }
  return Status::Ok();
}

Status TimeInHorizon(std::string_view field, double v) {
  if (!std::isfinite(v) || v < 0) {
    return InvalidArgumentError(
        fmt::format("field '{}': {} is not a time >= 0 in seconds", field, v));
  }
  if (v > kTraceHorizon.value()) {
    return InvalidArgumentError(fmt::format(
        "field '{}': {:g} s is past the trace horizon of {:g} s (10 years; trace times are "
        "seconds from the trace's start)",
        field, v, kTraceHorizon.value()));
  }
  return Status::Ok();
}

Result<std::vector<std::string_view>> Fields(std::string_view line, char sep, std::size_t want) {
  auto f = Split(line, sep);
  if (f.size() != want) {
    return InvalidArgumentError(
        fmt::format("expected {} fields, found {} (truncated line?)", want, f.size()));
  }
  return f;
}

}  // namespace baton::sim
