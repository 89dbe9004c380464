// Microsoft ITP (ElasticFlow): job_id,submission_time,duration,num_gpu
#include "core/strings.h"
#include "sim/workload/line_reader.h"
#include "sim/workload/readers.h"

namespace baton::sim {
namespace {

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
    RETURN_IF_ERROR(TimeInHorizon("submission_time", submit));
    RETURN_IF_ERROR(TimeInHorizon("duration", duration));
    RETURN_IF_ERROR(GpuCount("num_gpu", gpus));
    if (gpus == 0) return Filtered();
    j.submit = Seconds(submit);
    j.duration = Seconds(duration);
    j.gpus = static_cast<int>(gpus);
    return std::optional<TraceJob>(std::move(j));
  }
};

}  // namespace

std::unique_ptr<TraceReader> MakeItpReader(std::istream& in, std::string name,
                                           const TraceOptions& options) {
  return std::make_unique<ItpReader>(in, std::move(name), options);
}

}  // namespace baton::sim
