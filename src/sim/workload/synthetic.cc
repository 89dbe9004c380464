#include "sim/workload/synthetic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"

namespace baton::sim {
namespace {

class SyntheticReader final : public TraceReader {
 public:
  SyntheticReader(SyntheticParams p, std::uint64_t seed) : p_(p), rng_(seed) {}

  Result<std::optional<TraceJob>> Next() override {
    if (stats_.jobs >= p_.jobs) return std::optional<TraceJob>();
    now_ += rng_.Exponential(std::max(1e-3, p_.mean_interarrival.value()));
    TraceJob j;
    j.id = fmt::format("syn{:06d}", stats_.jobs);
    j.submit = Seconds(std::floor(now_));
    j.tenant = fmt::format("team{}", rng_.UniformInt(0, std::max(1, p_.tenants) - 1));
    const double u = rng_.Uniform();
    double median_s = 0;
    if (u < p_.share_debug) {
      j.kind = "debug";
      j.gpus = 1 << Pick({0.55, 0.15, 0.15, 0.15});  // 1, 2, 4, 8
      median_s = 90;
    } else if (u < p_.share_debug + p_.share_eval) {
      j.kind = "eval";
      j.gpus = rng_.Bernoulli(0.75) ? 1 : 8;
      median_s = 125;
    } else if (u < p_.share_debug + p_.share_eval + p_.share_finetune) {
      j.kind = "finetune";
      j.gpus = 8 << Pick({0.4, 0.3, 0.2, 0.1});  // 8 .. 64
      median_s = 1800;
    } else {
      // 256 .. 8192 GPUs, fewer as they grow; the model grows with the gang.
      static constexpr const char* kModels[] = {"llama3-8b",  "llama3-8b",  "llama3-70b",
                                                "llama3-70b", "llama3-70b", "llama3-405b"};
      int k = Pick({0.30, 0.25, 0.18, 0.12, 0.09, 0.06});
      while (k > 0 && (256 << k) > p_.max_pretrain_gpus) --k;
      j.gpus = 256 << k;
      j.kind = fmt::format("pretrain/{}", kModels[k]);
      j.duration = Seconds(3600.0 * (6 + 10 * rng_.Uniform()));
    }
    if (!j.duration) {
      j.duration = Seconds(std::max(10.0, std::round(median_s * rng_.LogNormal(0, 1.2))));
    }
    j.duration = Seconds(std::round(j.duration->value()));
    ++stats_.lines;
    ++stats_.jobs;
    return std::optional<TraceJob>(std::move(j));
  }
  const TraceStats& stats() const override { return stats_; }

 private:
  // An index drawn with the given weights (summing to 1).
  int Pick(std::initializer_list<double> weights) {
    double u = rng_.Uniform();
    int i = 0;
    for (double w : weights) {
      if (u < w) return i;
      u -= w;
      ++i;
    }
    return i - 1;
  }

  SyntheticParams p_;
  Rng rng_;
  double now_ = 0;
  TraceStats stats_;
};

}  // namespace

std::unique_ptr<TraceReader> MakeSyntheticTrace(SyntheticParams params, std::uint64_t seed) {
  return std::make_unique<SyntheticReader>(params, seed);
}

}  // namespace baton::sim
