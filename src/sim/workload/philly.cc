// Gavel's Philly-derived trace, tab-separated: job_type, command, num_steps_arg, needs_data_dir,
// total_steps, arrival_time, scale_factor; one file per Philly virtual cluster. Run times come
// from total_steps and the measured throughputs (PhillyThroughputs), the tenant from the file's
// name (the virtual cluster's id).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/bounded_input.h"
#include "core/strings.h"
#include "sim/workload/line_reader.h"
#include "sim/workload/readers.h"

namespace baton::sim {
namespace {

class PhillyReader final : public LineReader {
 public:
  PhillyReader(std::istream& in, std::string name, const TraceOptions& options)
      : LineReader(in, std::move(name), options),
        virtual_cluster_(std::filesystem::path(LineReader::name()).stem().string()) {}

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
    RETURN_IF_ERROR(TimeInHorizon("arrival_time", arrival));
    RETURN_IF_ERROR(GpuCount("scale_factor", gpus));
    if (gpus == 0) return InvalidArgumentError("field 'scale_factor': must be > 0");
    const PhillyThroughputs* table = options().philly_throughputs.get();
    if (table == nullptr) {
      return InvalidArgumentError(
          "no throughputs table to turn total_steps into a run time (throughputs.csv)");
    }
    std::optional<PhillyThroughputs::Rate> rate =
        table->V100StepsPerSecond(j.kind, static_cast<int>(gpus));
    if (!rate) {
      return InvalidArgumentError(fmt::format(
          "field 'job_type': no V100 throughput for '{}' in the table", Printable(j.kind, 60)));
    }
    const double run_s = static_cast<double>(j.total_steps) / rate->steps_per_s;
    RETURN_IF_ERROR(TimeInHorizon("total_steps / steps_per_s", run_s));
    j.submit = Seconds(arrival);
    j.duration = Seconds(run_s);
    j.gpus = static_cast<int>(gpus);
    j.gpu_type = "";  // Gavel's traces name no GPU model; the throughputs are V100's
    j.tenant = virtual_cluster_;
    if (rate->extrapolated) CountEstimatedDuration();
    return std::optional<TraceJob>(std::move(j));
  }

 private:
  std::string virtual_cluster_;
};

}  // namespace

std::unique_ptr<TraceReader> MakePhillyReader(std::istream& in, std::string name,
                                              const TraceOptions& options) {
  return std::make_unique<PhillyReader>(in, std::move(name), options);
}

Result<PhillyThroughputs> PhillyThroughputs::Parse(std::string_view csv, std::string_view name) {
  PhillyThroughputs t;
  int line_no = 0;
  for (std::string_view line : Split(csv, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (Trim(line).empty()) continue;
    if (line_no == 1 && line.starts_with("gpu_type,")) continue;
    auto bad = [&](std::string_view why) {
      return InvalidArgumentError(fmt::format("{}:{}: {}", name, line_no, why));
    };
    auto f = Split(line, ',');
    if (f.size() != 4) {
      return bad(
          fmt::format("expected 4 fields (gpu_type,job_type,scale_factor,steps_per_s), "
                      "found {}",
                      f.size()));
    }
    if (Trim(f[0]) != "v100") continue;
    auto scale = ParseInt64(Trim(f[2]));
    if (!scale || *scale < 1 || *scale > 1'000'000) {
      return bad("field 'scale_factor': expected an integer in 1..1000000");
    }
    auto rate = ParseDouble(Trim(f[3]));
    if (!rate || !std::isfinite(*rate) || !(*rate > 0)) {
      return bad("field 'steps_per_s': expected a finite number > 0");
    }
    t.v100_.push_back({{std::string(Trim(f[1])), static_cast<int>(*scale)}, *rate});
  }
  std::sort(t.v100_.begin(), t.v100_.end());
  for (std::size_t i = 1; i < t.v100_.size(); ++i) {
    if (t.v100_[i].first == t.v100_[i - 1].first) {
      return InvalidArgumentError(fmt::format("{}: two V100 rows for '{}' at scale factor {}", name,
                                              Printable(t.v100_[i].first.first, 60),
                                              t.v100_[i].first.second));
    }
  }
  if (t.v100_.empty()) return InvalidArgumentError(fmt::format("{}: no v100 rows", name));
  return t;
}

Result<PhillyThroughputs> PhillyThroughputs::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(path, MiB(1), "Philly throughputs table"));
  return Parse(text, path);
}

std::optional<PhillyThroughputs::Rate> PhillyThroughputs::V100StepsPerSecond(
    std::string_view job_type, int scale_factor) const {
  // The rows of this job type with a scale factor <= the one asked for; the last is the largest.
  auto first = std::lower_bound(v100_.begin(), v100_.end(), job_type,
                                [](const auto& row, std::string_view type) {
                                  return std::string_view(row.first.first) < type;
                                });
  auto past = std::upper_bound(
      first, v100_.end(), std::pair(job_type, scale_factor), [](const auto& key, const auto& row) {
        return key < std::pair(std::string_view(row.first.first), row.first.second);
      });
  if (past == first || first->first.first != job_type) return std::nullopt;
  const auto& [key, rate] = *std::prev(past);
  if (key.second == scale_factor) return Rate{rate, false};
  return Rate{rate * scale_factor / key.second, true};
}

}  // namespace baton::sim
