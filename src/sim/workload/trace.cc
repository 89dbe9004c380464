#include "sim/workload/trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "sim/workload/line_reader.h"
#include "sim/workload/openb.h"
#include "sim/workload/readers.h"

namespace baton::sim {
namespace {

// Alibaba openb pods, through the one openb row parser (openb.h): the header names the columns
// (the full list or a variant with fewer), creation_time is required here (the submit time). A
// pod's run time is deletion - scheduled; a pod never scheduled is kept (it is demand) with the
// time it waited, deletion - creation, counted as an estimated duration. CPU-only pods and pods
// with no deletion time are filtered (the event simulator runs GPU jobs of known length).
class OpenbReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    const auto fields = SplitOpenbCsv(line);
    if (!columns_) {
      if (!fields.empty() && fields[0] == "name") {
        ASSIGN_OR_RETURN(columns_, OpenbPodColumns::FromHeader(fields));
        return std::optional<TraceJob>();
      }
      // No header: the full list's eleven columns, in the published order.
      static constexpr std::string_view kFull[] = {
          "name", "cpu_milli", "memory_mib",    "num_gpu",       "gpu_milli",     "gpu_spec",
          "qos",  "pod_phase", "creation_time", "deletion_time", "scheduled_time"};
      ASSIGN_OR_RETURN(columns_, OpenbPodColumns::FromHeader(kFull));
    }
    ASSIGN_OR_RETURN(OpenbPod p, columns_->Parse(fields));
    if (!p.creation_time) return InvalidArgumentError("field 'creation_time': missing");
    if (p.num_gpu == 0) return Filtered();    // CPU-only pod
    if (!p.deletion_time) return Filtered();  // never ended: no length
    TraceJob j;
    j.id = p.name;
    const double start = p.scheduled_time ? *p.scheduled_time : *p.creation_time;
    if (*p.deletion_time < start) {
      return InvalidArgumentError(
          fmt::format("field 'deletion_time': before {}",
                      p.scheduled_time ? "scheduled_time" : "creation_time"));
    }
    if (!p.scheduled_time) CountEstimatedDuration();
    j.submit = Seconds(*p.creation_time);
    j.duration = Seconds(*p.deletion_time - start);
    j.gpus = p.num_gpu;
    j.gpu_milli = p.gpu_milli;
    j.cpu_milli = p.cpu_milli;
    j.memory_mib = p.memory_mib;
    j.gpu_types = p.gpu_spec;
    j.gpu_type = p.gpu_spec.size() == 1 ? p.gpu_spec[0] : "";
    j.kind = p.qos;
    return std::optional<TraceJob>(std::move(j));
  }

 private:
  std::optional<OpenbPodColumns> columns_;
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

// The files of one folder read as one trace: a k-way merge by submit time (each file is in
// submit order, as traces are), one pending job per file, so memory stays constant per file.
class MergedReader final : public TraceReader {
 public:
  struct Part {
    std::unique_ptr<TraceReader> reader;
    std::string tenant;  // for jobs whose format names none
    std::optional<TraceJob> next;
  };
  MergedReader(std::vector<Part> parts, std::size_t max_warnings)
      : parts_(std::move(parts)), max_warnings_(max_warnings) {}

  Result<std::optional<TraceJob>> Next() override {
    if (!primed_) {
      for (Part& p : parts_) RETURN_IF_ERROR(Advance(p));
      primed_ = true;
    }
    Part* best = nullptr;
    for (Part& p : parts_) {
      if (p.next && (best == nullptr || p.next->submit < best->next->submit)) best = &p;
    }
    if (best == nullptr) return std::optional<TraceJob>();
    std::optional<TraceJob> out = std::move(best->next);
    RETURN_IF_ERROR(Advance(*best));
    return out;
  }

  const TraceStats& stats() const override {
    stats_ = TraceStats();
    for (const Part& p : parts_) {
      const TraceStats& s = p.reader->stats();
      stats_.lines += s.lines;
      stats_.jobs += s.jobs;
      stats_.malformed += s.malformed;
      stats_.filtered += s.filtered;
      stats_.estimated_durations += s.estimated_durations;
      for (const auto& w : s.warnings) {
        if (stats_.warnings.size() < max_warnings_) stats_.warnings.push_back(w);
      }
    }
    return stats_;
  }

 private:
  static Status Advance(Part& p) {
    ASSIGN_OR_RETURN(p.next, p.reader->Next());
    if (p.next && p.next->tenant.empty()) p.next->tenant = p.tenant;
    return Status::Ok();
  }

  std::vector<Part> parts_;
  std::size_t max_warnings_;
  bool primed_ = false;
  mutable TraceStats stats_;
};

// Fills in what a format needs from beside the trace (Philly's throughputs table).
Status Prepare(const TraceFormat& format, const std::filesystem::path& dir, TraceOptions& options) {
  if (format.name == "philly" && !options.philly_throughputs) {
    const std::filesystem::path table = dir / "throughputs.csv";
    auto loaded = PhillyThroughputs::Load(table.string());
    if (!loaded.ok()) {
      return loaded.status().WithPrefix(
          "a Philly trace needs Gavel's throughputs.csv beside it to get run times");
    }
    options.philly_throughputs = std::make_shared<const PhillyThroughputs>(*std::move(loaded));
  }
  return Status::Ok();
}

// The most files of one folder read as one trace.
constexpr std::size_t kMaxTraceFiles = 4096;

Result<std::unique_ptr<TraceReader>> OpenFolder(const std::string& path, std::string_view format,
                                                TraceOptions options) {
  namespace fs = std::filesystem;
  const TraceFormat* f = nullptr;
  if (format.empty()) {
    ASSIGN_OR_RETURN(f, FindTraceFormat("philly"));
  } else {
    ASSIGN_OR_RETURN(f, FindTraceFormat(format));
  }
  if (f->extension.empty()) {
    return InvalidArgumentError(
        fmt::format("{}: a folder is read as files named *EXT, and format '{}' has no extension",
                    path, f->name));
  }
  std::vector<fs::path> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == f->extension) {
      files.push_back(entry.path());
      if (files.size() > kMaxTraceFiles) {
        return ResourceExhaustedError(
            fmt::format("{}: more than {} {} files", path, kMaxTraceFiles, f->extension));
      }
    }
  }
  if (ec) return NotFoundError(fmt::format("{}: cannot list: {}", path, ec.message()));
  if (files.empty()) {
    return InvalidArgumentError(fmt::format("{}: no {} files in this folder", path, f->extension));
  }
  std::sort(files.begin(), files.end());
  RETURN_IF_ERROR(Prepare(*f, path, options));
  std::vector<MergedReader::Part> parts;
  for (const fs::path& file : files) {
    auto in = std::make_unique<std::ifstream>(file, std::ios::binary);
    if (!*in) return NotFoundError(fmt::format("{}: cannot open", file.string()));
    auto reader = f->make(*in, file.string(), options);
    parts.push_back({std::make_unique<OwningReader>(std::move(in), std::move(reader)),
                     file.stem().string(), std::nullopt});
  }
  return std::unique_ptr<TraceReader>(
      std::make_unique<MergedReader>(std::move(parts), options.max_warnings));
}

}  // namespace

std::unique_ptr<TraceReader> MakeOpenbReader(std::istream& in, std::string name,
                                             const TraceOptions& options) {
  return std::make_unique<OpenbReader>(in, std::move(name), options);
}

Result<const TraceFormat*> FindTraceFormat(std::string_view name) {
  std::string known;
  for (const TraceFormat& f : TraceFormats()) {
    if (EqualsIgnoreCase(name, f.name)) return &f;
    known += known.empty() ? "" : ", ";
    known += f.name;
  }
  return InvalidArgumentError(
      fmt::format("unknown trace format '{}' (expected {})", Printable(name), known));
}

Result<const TraceFormat*> GuessTraceFormat(std::string_view path, std::string_view first_line) {
  for (const TraceFormat& f : TraceFormats()) {
    if (!f.extension.empty() && path.ends_with(f.extension)) return &f;
  }
  for (const TraceFormat& f : TraceFormats()) {
    if (!f.header.empty() && first_line.starts_with(f.header)) return &f;
  }
  return InvalidArgumentError(fmt::format(
      "{}: cannot tell the trace format from its name or first line; pass it explicitly", path));
}

Result<std::unique_ptr<TraceReader>> MakeTraceReader(std::string_view format, std::istream& in,
                                                     std::string name,
                                                     const TraceOptions& options) {
  ASSIGN_OR_RETURN(const TraceFormat* f, FindTraceFormat(format));
  return f->make(in, std::move(name), options);
}

Result<std::unique_ptr<TraceReader>> OpenTrace(const std::string& path, std::string_view format,
                                               TraceOptions options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return OpenFolder(path, format, std::move(options));
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) return NotFoundError(fmt::format("{}: cannot open", path));
  const TraceFormat* f = nullptr;
  if (format.empty()) {
    std::string first;
    bool too_long = false;
    ReadBoundedLine(*in, 4096, first, too_long);  // a header is short; a binary file may not be
    in->clear();
    in->seekg(0);
    ASSIGN_OR_RETURN(f, GuessTraceFormat(path, first));
  } else {
    ASSIGN_OR_RETURN(f, FindTraceFormat(format));
  }
  RETURN_IF_ERROR(Prepare(*f, std::filesystem::path(path).parent_path(), options));
  auto reader = f->make(*in, path, options);
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
  if (!job.gpu_types.empty()) o["gpu_types"] = job.gpu_types;
  if (job.cpu_milli) o["cpu_milli"] = job.cpu_milli;
  if (job.memory_mib) o["memory_mib"] = job.memory_mib;
  if (!job.extended.empty()) {
    nlohmann::json ext = nlohmann::json::object();
    for (const auto& [name, amount] : job.extended) ext[name] = amount;
    o["extended"] = std::move(ext);
  }
  if (!job.kind.empty()) o["kind"] = job.kind;
  if (job.total_steps) o["total_steps"] = job.total_steps;
  if (job.priority) o["priority"] = job.priority;
  if (job.max_gpus > 0) {
    nlohmann::json e = {{"min_gpus", job.min_gpus}, {"max_gpus", job.max_gpus}};
    if (job.step_gpus > 0) e["step_gpus"] = job.step_gpus;
    o["elastic"] = std::move(e);
  }
  return o.dump();
}

}  // namespace baton::sim
