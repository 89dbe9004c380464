#include "sim/workload/trace.h"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace baton::sim {
namespace {

// A line-oriented reader: pulls lines, hands each to Parse(), applies the strict/skip policy.
class LineReader : public TraceReader {
 public:
  LineReader(std::istream& in, std::string name, TraceOptions options)
      : in_(in), name_(std::move(name)), options_(options) {}

  Result<std::optional<TraceJob>> Next() final {
    std::string line;
    while (ReadLine(line)) {
      ++stats_.lines;
      if (too_long_) {
        too_long_ = false;
        RETURN_IF_ERROR(
            Malformed(fmt::format("line longer than {} bytes", options_.max_line_bytes)));
        continue;
      }
      std::string_view view = line;
      if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
      if (Trim(view).empty()) continue;
      Result<std::optional<TraceJob>> job = Parse(view);
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

  const TraceStats& stats() const final { return stats_; }

 protected:
  // Parses one non-empty line. nullopt: not a job (header, comment, filtered); error: malformed.
  virtual Result<std::optional<TraceJob>> Parse(std::string_view line) = 0;

  std::optional<TraceJob> Filtered() {
    ++stats_.filtered;
    return std::nullopt;
  }
  std::int64_t line_number() const { return stats_.lines; }
  const TraceOptions& options() const { return options_; }

 private:
  bool ReadLine(std::string& line) {
    line.clear();
    char c;
    while (in_.get(c)) {
      if (c == '\n') return true;
      if (line.size() < options_.max_line_bytes) {
        line.push_back(c);
      } else {
        too_long_ = true;
      }
    }
    return !line.empty() || too_long_;  // a last line without '\n' (a truncated trace) still counts
  }

  Status Malformed(const std::string& reason) {
    std::string msg = fmt::format("{}:{}: {}", name_, stats_.lines, reason);
    if (options_.strict) return InvalidArgumentError(msg);
    ++stats_.malformed;
    if (stats_.warnings.size() < options_.max_warnings) stats_.warnings.push_back(std::move(msg));
    return Status::Ok();
  }

  std::istream& in_;
  std::string name_;
  TraceOptions options_;
  TraceStats stats_;
  bool too_long_ = false;
};

Result<double> Number(std::string_view field, std::string_view text) {
  auto v = ParseDouble(text);
  if (!v)
    return InvalidArgumentError(
        fmt::format("field '{}': '{}' is not a number", field, Printable(text, 40)));
  return *v;
}

Result<std::int64_t> Integer(std::string_view field, std::string_view text) {
  auto v = ParseInt64(text);
  if (!v)
    return InvalidArgumentError(
        fmt::format("field '{}': '{}' is not an integer", field, Printable(text, 40)));
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

Result<std::vector<std::string_view>> Fields(std::string_view line, char sep, std::size_t want) {
  auto f = Split(line, sep);
  if (f.size() != want) {
    return InvalidArgumentError(
        fmt::format("expected {} fields, found {} (truncated line?)", want, f.size()));
  }
  return f;
}

// Microsoft ITP (ElasticFlow): job_id,submission_time,duration,num_gpu
class ItpReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    if (line_number() == 1 && line.starts_with("job_id")) return std::optional<TraceJob>();
    ASSIGN_OR_RETURN(auto f, Fields(line, ',', 4));
    TraceJob j;
    j.id = std::string(Trim(f[0]));
    if (j.id.empty()) return InvalidArgumentError("field 'job_id': empty");
    ASSIGN_OR_RETURN(double submit, Number("submission_time", f[1]));
    ASSIGN_OR_RETURN(double duration, Number("duration", f[2]));
    ASSIGN_OR_RETURN(std::int64_t gpus, Integer("num_gpu", f[3]));
    RETURN_IF_ERROR(NonNegative("submission_time", submit));
    RETURN_IF_ERROR(NonNegative("duration", duration));
    RETURN_IF_ERROR(GpuCount("num_gpu", gpus));
    if (gpus == 0) return Filtered();
    j.submit = Seconds(submit);
    j.duration = Seconds(duration);
    j.gpus = static_cast<int>(gpus);
    return std::optional<TraceJob>(std::move(j));
  }
};

// Gavel's Philly-derived trace, tab-separated: job_type, command, num_steps_arg, needs_data_dir,
// total_steps, arrival_time, scale_factor. No duration: it comes from steps and throughput.
class PhillyReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    ASSIGN_OR_RETURN(auto f, Fields(line, '\t', 7));
    TraceJob j;
    j.id = fmt::format("{}", line_number());
    j.kind = std::string(Trim(f[0]));
    if (j.kind.empty()) return InvalidArgumentError("field 'job_type': empty");
    ASSIGN_OR_RETURN(j.total_steps, Integer("total_steps", f[4]));
    ASSIGN_OR_RETURN(double arrival, Number("arrival_time", f[5]));
    ASSIGN_OR_RETURN(std::int64_t gpus, Integer("scale_factor", f[6]));
    if (j.total_steps <= 0) return InvalidArgumentError("field 'total_steps': must be > 0");
    RETURN_IF_ERROR(NonNegative("arrival_time", arrival));
    RETURN_IF_ERROR(GpuCount("scale_factor", gpus));
    if (gpus == 0) return InvalidArgumentError("field 'scale_factor': must be > 0");
    j.submit = Seconds(arrival);
    j.gpus = static_cast<int>(gpus);
    return std::optional<TraceJob>(std::move(j));
  }
};

// Standard Workload Format: 18 whitespace-separated fields, ';' comments, -1 = unknown.
class SwfReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    std::string_view t = Trim(line);
    if (t.front() == ';') return std::optional<TraceJob>();
    std::vector<std::string_view> f;
    std::size_t i = 0;
    while (i < t.size()) {
      while (i < t.size() && (t[i] == ' ' || t[i] == '\t')) ++i;
      std::size_t start = i;
      while (i < t.size() && t[i] != ' ' && t[i] != '\t') ++i;
      if (i > start) f.push_back(t.substr(start, i - start));
    }
    if (f.size() != 18) {
      return InvalidArgumentError(
          fmt::format("expected 18 SWF fields, found {} (truncated line?)", f.size()));
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
    RETURN_IF_ERROR(NonNegative("submit_time", v[1]));
    double procs = v[4] > 0 ? v[4] : v[7];
    if (procs <= 0 || v[3] < 0) return Filtered();  // never ran, or size unknown
    j.submit = Seconds(v[1]);
    j.duration = Seconds(v[3]);
    if (v[8] > 0) j.requested_time = Seconds(v[8]);
    const int per_gpu = std::max(1, options().swf_procs_per_gpu);
    j.gpus = static_cast<int>(std::ceil(procs / per_gpu));
    RETURN_IF_ERROR(GpuCount("allocated_processors", j.gpus));
    j.tenant = v[11] >= 0 ? fmt::format("user{}", static_cast<long long>(v[11])) : "";
    j.priority = v[14] >= 0 ? static_cast<int>(v[14]) : 0;
    return std::optional<TraceJob>(std::move(j));
  }
};

// Alibaba openb pods: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
// creation_time,deletion_time,scheduled_time. gpu_milli is the fraction of each GPU.
class OpenbReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    if (line_number() == 1 && line.starts_with("name,")) return std::optional<TraceJob>();
    ASSIGN_OR_RETURN(auto f, Fields(line, ',', 11));
    TraceJob j;
    j.id = std::string(Trim(f[0]));
    if (j.id.empty()) return InvalidArgumentError("field 'name': empty");
    ASSIGN_OR_RETURN(std::int64_t gpus, Integer("num_gpu", f[3]));
    ASSIGN_OR_RETURN(std::int64_t milli, Integer("gpu_milli", f[4]));
    ASSIGN_OR_RETURN(double created, Number("creation_time", f[8]));
    RETURN_IF_ERROR(GpuCount("num_gpu", gpus));
    if (milli < 0 || milli > 1000) {
      return InvalidArgumentError(
          fmt::format("field 'gpu_milli': {} is out of range (0..1000)", milli));
    }
    RETURN_IF_ERROR(NonNegative("creation_time", created));
    if (gpus == 0 || milli == 0) return Filtered();  // CPU-only pod
    std::string_view scheduled = Trim(f[10]);
    std::string_view deleted = Trim(f[9]);
    if (scheduled.empty() || deleted.empty()) return Filtered();  // never started / never ended
    ASSIGN_OR_RETURN(double start, Number("scheduled_time", scheduled));
    ASSIGN_OR_RETURN(double end, Number("deletion_time", deleted));
    if (end < start) return InvalidArgumentError("field 'deletion_time': before scheduled_time");
    j.submit = Seconds(created);
    j.duration = Seconds(end - start);
    j.gpus = static_cast<int>(gpus);
    j.gpu_milli = gpus == 1 ? static_cast<int>(milli) : 1000;
    j.gpu_type = std::string(Trim(f[5]));
    j.kind = std::string(Trim(f[6]));
    return std::optional<TraceJob>(std::move(j));
  }
};

// baton JSONL: one object per line; see ToJsonl for the keys.
class JsonlReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    nlohmann::json o = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (o.is_discarded()) return InvalidArgumentError("not valid JSON");
    if (!o.is_object()) return InvalidArgumentError("not a JSON object");
    TraceJob j;
    for (const auto& item : o.items()) {
      // Not a structured binding: lambdas cannot capture those before clang 16 (P1091).
      const std::string& key = item.key();
      const nlohmann::json& value = item.value();
      auto bad = [&](std::string_view why) {
        return InvalidArgumentError(fmt::format("field '{}': {}", key, why));
      };
      if (key == "id" || key == "tenant" || key == "gpu_type" || key == "kind") {
        if (!value.is_string()) return bad("must be a string");
        std::string s = value.get<std::string>();
        (key == "id"         ? j.id
         : key == "tenant"   ? j.tenant
         : key == "gpu_type" ? j.gpu_type
                             : j.kind) = s;
      } else if (key == "submit_s" || key == "duration_s" || key == "requested_time_s") {
        if (!value.is_number()) return bad("must be a number");
        double v = value.get<double>();
        if (!(v >= 0) || !std::isfinite(v)) return bad("must be a finite number >= 0");
        if (key == "submit_s") j.submit = Seconds(v);
        if (key == "duration_s") j.duration = Seconds(v);
        if (key == "requested_time_s") j.requested_time = Seconds(v);
      } else if (key == "gpus" || key == "gpu_milli" || key == "total_steps" || key == "priority") {
        if (!value.is_number_integer()) return bad("must be an integer");
        auto v = value.get<std::int64_t>();
        if (key == "gpus") {
          if (v <= 0 || v > 1'000'000)
            return bad(fmt::format("{} GPUs is out of range (1..1000000)", v));
          j.gpus = static_cast<int>(v);
        } else if (key == "gpu_milli") {
          if (v <= 0 || v > 1000) return bad(fmt::format("{} is out of range (1..1000)", v));
          j.gpu_milli = static_cast<int>(v);
        } else if (key == "total_steps") {
          if (v < 0) return bad("must not be negative");
          j.total_steps = v;
        } else {
          if (v < -1'000'000 || v > 1'000'000) return bad("out of range");
          j.priority = static_cast<int>(v);
        }
      } else {
        return bad("unknown field");
      }
    }
    if (j.gpus == 0) return InvalidArgumentError("field 'gpus': missing");
    if (j.id.empty()) j.id = fmt::format("{}", line_number());
    return std::optional<TraceJob>(std::move(j));
  }
};

class OwningReader final : public TraceReader {
 public:
  OwningReader(std::unique_ptr<std::ifstream> in, std::unique_ptr<TraceReader> reader)
      : in_(std::move(in)), reader_(std::move(reader)) {}
  Result<std::optional<TraceJob>> Next() override { return reader_->Next(); }
  const TraceStats& stats() const override { return reader_->stats(); }

 private:
  std::unique_ptr<std::ifstream> in_;
  std::unique_ptr<TraceReader> reader_;
};

}  // namespace

std::string_view TraceFormatName(TraceFormat f) {
  switch (f) {
    case TraceFormat::kItp:
      return "itp";
    case TraceFormat::kPhilly:
      return "philly";
    case TraceFormat::kSwf:
      return "swf";
    case TraceFormat::kOpenb:
      return "openb";
    case TraceFormat::kJsonl:
      return "jsonl";
  }
  return "?";
}

Result<TraceFormat> ParseTraceFormat(std::string_view name) {
  for (TraceFormat f : {TraceFormat::kItp, TraceFormat::kPhilly, TraceFormat::kSwf,
                        TraceFormat::kOpenb, TraceFormat::kJsonl}) {
    if (EqualsIgnoreCase(name, TraceFormatName(f))) return f;
  }
  return InvalidArgumentError(fmt::format(
      "unknown trace format '{}' (expected itp, philly, swf, openb or jsonl)", Printable(name)));
}

Result<TraceFormat> GuessTraceFormat(std::string_view path, std::string_view first_line) {
  if (path.ends_with(".swf")) return TraceFormat::kSwf;
  if (path.ends_with(".trace")) return TraceFormat::kPhilly;
  if (path.ends_with(".jsonl")) return TraceFormat::kJsonl;
  if (first_line.starts_with("job_id,submission_time")) return TraceFormat::kItp;
  if (first_line.starts_with("name,cpu_milli")) return TraceFormat::kOpenb;
  return InvalidArgumentError(fmt::format(
      "{}: cannot tell the trace format from its name or first line; pass it explicitly", path));
}

std::unique_ptr<TraceReader> MakeTraceReader(TraceFormat format, std::istream& in, std::string name,
                                             TraceOptions options) {
  switch (format) {
    case TraceFormat::kItp:
      return std::make_unique<ItpReader>(in, std::move(name), options);
    case TraceFormat::kPhilly:
      return std::make_unique<PhillyReader>(in, std::move(name), options);
    case TraceFormat::kSwf:
      return std::make_unique<SwfReader>(in, std::move(name), options);
    case TraceFormat::kOpenb:
      return std::make_unique<OpenbReader>(in, std::move(name), options);
    case TraceFormat::kJsonl:
      return std::make_unique<JsonlReader>(in, std::move(name), options);
  }
  CHECK(false) << "unknown trace format";
  return nullptr;
}

Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path,
                                               std::optional<TraceFormat> format,
                                               TraceOptions options) {
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) return NotFoundError(fmt::format("{}: cannot open", path));
  if (!format) {
    std::string first;
    std::getline(*in, first);
    in->clear();
    in->seekg(0);
    ASSIGN_OR_RETURN(format, GuessTraceFormat(path, first));
  }
  auto reader = MakeTraceReader(*format, *in, path, options);
  return std::unique_ptr<TraceReader>(
      std::make_unique<OwningReader>(std::move(in), std::move(reader)));
}

std::string ToJsonl(const TraceJob& job) {
  nlohmann::json o;
  o["id"] = job.id;
  o["submit_s"] = job.submit.value();
  if (job.duration) o["duration_s"] = job.duration->value();
  if (job.requested_time) o["requested_time_s"] = job.requested_time->value();
  o["gpus"] = job.gpus;
  if (job.gpu_milli != 1000) o["gpu_milli"] = job.gpu_milli;
  if (!job.tenant.empty()) o["tenant"] = job.tenant;
  if (!job.gpu_type.empty()) o["gpu_type"] = job.gpu_type;
  if (!job.kind.empty()) o["kind"] = job.kind;
  if (job.total_steps) o["total_steps"] = job.total_steps;
  if (job.priority) o["priority"] = job.priority;
  return o.dump();
}

}  // namespace baton::sim
