// baton's JSONL trace: one JSON object per line; see ToJsonl for the keys.
#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/bounded_input.h"
#include "sched/framework/job.h"
#include "sim/workload/line_reader.h"
#include "sim/workload/readers.h"
#include "topology/cluster.h"

namespace baton::sim {
namespace {

// Sanity bounds of one job's host requests (2^40 milli-cores or MiB: far above any node) and of
// its list of accepted GPU types.
constexpr std::int64_t kMaxHostAmount = std::int64_t{1} << 40;
constexpr std::size_t kMaxNames = 64;

// baton JSONL: one object per line; see ToJsonl for the keys.
class JsonlReader final : public LineReader {
 public:
  using LineReader::LineReader;

 protected:
  Result<std::optional<TraceJob>> Parse(std::string_view line) override {
    // Depth- and size-checked before parsing (a line of 100,000 '[' must not recurse that
    // deep), duplicate keys refused.
    auto parsed = ParseJsonBounded(line, {.max_depth = 4, .max_bytes = options().max_line_bytes});
    if (!parsed.ok()) {
      const std::string& why = parsed.status().message();
      if (parsed.status().code() == StatusCode::kResourceExhausted ||
          why.find("duplicate key") != std::string::npos) {
        return InvalidArgumentError(why);
      }
      return InvalidArgumentError("not valid JSON");
    }
    const nlohmann::json& o = *parsed;
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
        RETURN_IF_ERROR(TimeInHorizon(key, v));
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
      } else if (key == "cpu_milli" || key == "memory_mib") {
        if (!value.is_number_integer()) return bad("must be an integer");
        auto v = value.get<std::int64_t>();
        if (v < 0 || v > kMaxHostAmount) {
          return bad(fmt::format("{} is out of range (0..{})", v, kMaxHostAmount));
        }
        (key == "cpu_milli" ? j.cpu_milli : j.memory_mib) = v;
      } else if (key == "extended") {
        // Named extended resources per task; whether the cluster has them is the scheduler's
        // admission check.
        if (!value.is_object() || value.size() > sched::kMaxExtendedPerTask) {
          return bad(fmt::format("must be an object of at most {} name: amount",
                                 sched::kMaxExtendedPerTask));
        }
        for (const auto& r : value.items()) {
          const std::string field = fmt::format("extended.{}", r.key());
          if (Status s = topo::CheckExtendedResourceName(r.key()); !s.ok()) {
            return InvalidArgumentError(fmt::format("field '{}': {}", field, s.message()));
          }
          if (!r.value().is_number_integer() || r.value().get<std::int64_t>() < 0 ||
              r.value().get<std::int64_t>() > topo::kMaxExtendedAmount) {
            return InvalidArgumentError(fmt::format("field '{}': must be a whole amount 0..{}",
                                                    field, topo::kMaxExtendedAmount));
          }
          j.extended.emplace_back(r.key(), r.value().get<std::int64_t>());
        }
      } else if (key == "elastic") {
        // {min_gpus, max_gpus[, step_gpus]}: the range an elastic job may run at.
        if (!value.is_object()) return bad("must be an object {min_gpus, max_gpus, step_gpus}");
        for (const auto& r : value.items()) {
          const std::string field = fmt::format("elastic.{}", r.key());
          if (r.key() != "min_gpus" && r.key() != "max_gpus" && r.key() != "step_gpus") {
            return InvalidArgumentError(fmt::format(
                "field '{}': unknown field (expected min_gpus, max_gpus or step_gpus)", field));
          }
          if (!r.value().is_number_integer() || r.value().get<std::int64_t>() < 1 ||
              r.value().get<std::int64_t>() > 1'000'000) {
            return InvalidArgumentError(
                fmt::format("field '{}': must be a GPU count 1..1000000", field));
          }
          const int v = static_cast<int>(r.value().get<std::int64_t>());
          (r.key() == "min_gpus"   ? j.min_gpus
           : r.key() == "max_gpus" ? j.max_gpus
                                   : j.step_gpus) = v;
        }
        if (j.min_gpus == 0) return InvalidArgumentError("field 'elastic.min_gpus': missing");
        if (j.max_gpus == 0) return InvalidArgumentError("field 'elastic.max_gpus': missing");
        if (j.max_gpus < j.min_gpus) {
          return InvalidArgumentError(fmt::format(
              "field 'elastic.max_gpus': {} is below min_gpus {}", j.max_gpus, j.min_gpus));
        }
        if (j.step_gpus > 0 && (j.min_gpus % j.step_gpus != 0 || j.max_gpus % j.step_gpus != 0)) {
          return InvalidArgumentError(fmt::format(
              "field 'elastic.step_gpus': {} does not divide min_gpus {} and max_gpus {}",
              j.step_gpus, j.min_gpus, j.max_gpus));
        }
      } else if (key == "gpu_types") {
        if (!value.is_array() || value.size() > kMaxNames) {
          return bad(fmt::format("must be an array of at most {} strings", kMaxNames));
        }
        for (const auto& t : value) {
          if (!t.is_string() || t.get<std::string>().empty()) return bad("must hold names");
          j.gpu_types.push_back(t.get<std::string>());
        }
      } else {
        return bad("unknown field");
      }
    }
    if (j.max_gpus > 0) {
      if (j.gpus == 0) j.gpus = j.min_gpus;  // an elastic job starts at its smallest size
      if (j.gpus < j.min_gpus || j.gpus > j.max_gpus) {
        return InvalidArgumentError(fmt::format("field 'gpus': {} is outside elastic's [{}, {}]",
                                                j.gpus, j.min_gpus, j.max_gpus));
      }
      if (j.step_gpus > 0 && j.gpus % j.step_gpus != 0) {
        return InvalidArgumentError(fmt::format(
            "field 'gpus': {} is not a multiple of elastic.step_gpus {}", j.gpus, j.step_gpus));
      }
    }
    if (j.gpus == 0) return InvalidArgumentError("field 'gpus': missing");
    if (j.id.empty()) j.id = fmt::format("{}", line_number());
    return std::optional<TraceJob>(std::move(j));
  }
};

}  // namespace

std::unique_ptr<TraceReader> MakeJsonlReader(std::istream& in, std::string name,
                                             const TraceOptions& options) {
  return std::make_unique<JsonlReader>(in, std::move(name), options);
}

}  // namespace baton::sim
