#include "perf/calibrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/strings.h"
#include "topology/gpu.h"

namespace baton::perf {

Result<std::vector<AttentionPoint>> LoadAttentionTable(const std::string& path) {
  std::vector<AttentionPoint> out;
  auto parse_line = [&](int no, std::string_view line) -> Status {
    if (no == 1 || Trim(line).empty()) return Status::Ok();  // the header
    std::vector<std::string_view> c = Split(line, ',');
    if (c.size() != 5) {
      return InvalidArgumentError(fmt::format("{}:{}: expected 5 columns", path, no));
    }
    AttentionPoint p;
    p.gpu = std::string(Trim(c[0]));
    auto hd = ParseInt64(c[1]);
    auto seq = ParseInt64(c[3]);
    auto tf = ParseDouble(c[4]);
    if (!hd || *hd <= 0 || *hd > 1024 || !seq || *seq <= 0 || *seq > (1 << 24) || !tf ||
        !(*tf > 0)) {
      return InvalidArgumentError(fmt::format("{}:{}: bad head_dim, seq or tflops", path, no));
    }
    if (Trim(c[2]) != "yes" && Trim(c[2]) != "no") {
      return InvalidArgumentError(fmt::format("{}:{}: causal is not yes/no", path, no));
    }
    p.head_dim = static_cast<int>(*hd);
    p.causal = Trim(c[2]) == "yes";
    p.seq = static_cast<int>(*seq);
    p.tflops = *tf;
    out.push_back(std::move(p));
    return Status::Ok();
  };
  RETURN_IF_ERROR(ForEachFileLine(path, "attention table", kPerfCsvLimits, parse_line));
  return out;
}

Result<double> FitAttention(const std::vector<AttentionPoint>& points, std::string_view family,
                            Calibration* calib) {
  struct P {
    double len, hd, peak, tflops;
  };
  std::vector<P> pts;
  for (const AttentionPoint& a : points) {
    auto gpu = topo::FindGpu(a.gpu);
    if (!gpu.ok() || topo::GpuFamilyName((*gpu)->family) != family) continue;
    double peak = (*gpu)->Peak(topo::Dtype::kBf16).value() / 1e12;
    // The estimator's convention (estimator.cc): a causal block of L runs like a full one of L/2.
    pts.push_back({a.causal ? a.seq / 2.0 : double(a.seq), double(a.head_dim), peak, a.tflops});
  }
  if (pts.empty()) {
    return NotFoundError(fmt::format("attention: no kernel points for {}", family));
  }
  double best = 1e300, bf = 0, bl = 0, bh = 0;
  for (int fi = 20; fi <= 100; ++fi) {
    double f = fi / 100.0;
    for (int l0 = 0; l0 <= 2000; l0 += 25) {
      for (int h0 = 0; h0 <= 128; h0 += 4) {
        double err = 0;
        for (const P& p : pts) {
          double pred = p.peak * f * p.len / (p.len + l0) * p.hd / (p.hd + h0);
          double e = std::log(pred / p.tflops);
          err += e * e;
        }
        if (err < best) {
          best = err;
          bf = f;
          bl = l0;
          bh = h0;
        }
      }
    }
  }
  calib->flash_attention_fraction = bf;
  calib->flash_half_length = bl;
  calib->flash_half_head_dim = bh;
  return std::sqrt(best / pts.size());
}

namespace {

bool IsPerf(const PublishedRun& r) { return !IsMemoryMetric(r.metric); }

// The prior penalty: the sum over fitted constants with a prior of (deviation / sigma)^2.
double PriorPenalty(const Calibration& c, const Calibration& center, bool user_runs) {
  double total = 0;
  for (const CalibrationField& f : CalibrationFields()) {
    if (!FittedOn(f, user_runs) || !(f.prior_sigma > 0)) continue;
    double v = c.*(f.member);
    double m = center.*(f.member);
    double d = f.prior_log ? std::log(std::max(v, 1e-12) / std::max(m, 1e-12)) : v - m;
    d /= f.prior_sigma;
    total += d * d;
  }
  return total;
}

// One row's cost for a log error e: e^2, or Huber's (linear beyond delta, with matching slope).
double RowCost(double e, double huber_delta) {
  double a = std::abs(e);
  if (huber_delta > 0 && a > huber_delta) return huber_delta * (2 * a - huber_delta);
  return e * e;
}

// Sum over groups of the group's mean row cost, for the rows of one family, plus the prior
// penalty around `center`.
double Loss(const std::vector<const PublishedRun*>& rows, const Calibration& c,
            const Calibration& center, const CalibrateOptions& options) {
  std::map<std::string, std::pair<double, int>> per_group;
  for (const PublishedRun* r : rows) {
    auto v = ValidateRun(*r, &c);
    double e = 1.0;  // a row that cannot be evaluated costs as much as a 2.7x miss
    if (v.ok() && v->predicted > 0 && std::isfinite(v->predicted)) {
      e = std::log(v->predicted / r->value);
    }
    auto& g = per_group[r->group];
    g.first += RowCost(e, options.huber_delta);
    g.second += 1;
  }
  double total = 0;
  for (const auto& [name, g] : per_group) total += g.first / g.second;
  if (options.prior_weight > 0)
    total += options.prior_weight * PriorPenalty(c, center, options.prior_is_start);
  return total;
}

Calibration FitFamily(const std::vector<const PublishedRun*>& rows, Calibration c,
                      const Calibration& center, const CalibrateOptions& options) {
  double loss = Loss(rows, c, center, options);
  for (int sweep = 0; sweep < options.max_sweeps; ++sweep) {
    bool improved = false;
    for (const CalibrationField& f : CalibrationFields()) {
      if (!FittedOn(f, options.prior_is_start)) continue;
      double v = c.*(f.member);
      double span = f.max - f.min;
      std::vector<double> candidates = {v * 0.5,  v * 0.8,         v * 0.9,        v * 0.97,
                                        v * 1.03, v * 1.1,         v * 1.25,       v * 2,
                                        f.min,    v + 0.01 * span, v - 0.01 * span};
      double best_v = v, best_loss = loss;
      for (double cand : candidates) {
        cand = std::clamp(cand, f.min, f.max);
        if (std::abs(cand - v) < 1e-12) continue;
        Calibration trial = c;
        trial.*(f.member) = cand;
        double l = Loss(rows, trial, center, options);
        if (l < best_loss - 1e-9) {
          best_loss = l;
          best_v = cand;
        }
      }
      if (best_v != v) {
        c.*(f.member) = best_v;
        loss = best_loss;
        improved = true;
      }
    }
    if (!improved) break;
  }
  return c;
}

struct JointFamily {
  std::vector<const PublishedRun*> rows;
  Calibration* calib;
  Calibration center;
};

// One descent over every family with rows: the pooled constants are one value shared by all
// (scored on the sum of the families' losses), the hardware-specific ones per family.
void FitJoint(std::vector<JointFamily>& fams, const CalibrateOptions& options) {
  std::vector<double> loss(fams.size());
  for (std::size_t i = 0; i < fams.size(); ++i) {
    loss[i] = Loss(fams[i].rows, *fams[i].calib, fams[i].center, options);
  }
  for (int sweep = 0; sweep < options.max_sweeps; ++sweep) {
    bool improved = false;
    for (const CalibrationField& f : CalibrationFields()) {
      if (!FittedOn(f, /*user_runs=*/false)) continue;
      std::vector<std::vector<std::size_t>> sets;
      if (f.hardware_specific) {
        for (std::size_t i = 0; i < fams.size(); ++i) sets.push_back({i});
      } else {
        sets.emplace_back();
        for (std::size_t i = 0; i < fams.size(); ++i) sets.back().push_back(i);
      }
      for (const auto& set : sets) {
        double v = (*fams[set[0]].calib).*(f.member);
        double span = f.max - f.min;
        std::vector<double> candidates = {v * 0.5,  v * 0.8,         v * 0.9,        v * 0.97,
                                          v * 1.03, v * 1.1,         v * 1.25,       v * 2,
                                          f.min,    v + 0.01 * span, v - 0.01 * span};
        double base = 0;
        for (std::size_t i : set) base += loss[i];
        double best_v = v, best_loss = base;
        std::vector<double> best_parts;
        for (double cand : candidates) {
          cand = std::clamp(cand, f.min, f.max);
          if (std::abs(cand - v) < 1e-12) continue;
          double l = 0;
          std::vector<double> parts;
          for (std::size_t i : set) {
            Calibration trial = *fams[i].calib;
            trial.*(f.member) = cand;
            parts.push_back(Loss(fams[i].rows, trial, fams[i].center, options));
            l += parts.back();
          }
          if (l < best_loss - 1e-9) {
            best_loss = l;
            best_v = cand;
            best_parts = parts;
          }
        }
        if (best_v != v) {
          for (std::size_t k = 0; k < set.size(); ++k) {
            (*fams[set[k]].calib).*(f.member) = best_v;
            loss[set[k]] = best_parts[k];
          }
          improved = true;
        }
      }
    }
    if (!improved) break;
  }
}

// Copies the constants a family shares with others (fitted, not hardware_specific).
void CopyPooled(const Calibration& from, Calibration* to) {
  for (const CalibrationField& f : CalibrationFields()) {
    if (FittedOn(f, /*user_runs=*/false) && !f.hardware_specific)
      to->*(f.member) = from.*(f.member);
  }
}

// The validated envelope in MFU: the speed each run reached as published, counted in the
// model's FLOPs and peak (the estimate's MFU scaled by the row's error: a time metric's error is
// the estimate's time over the published one, a rate metric's the inverse), kept as the highest
// MFU of the runs of at least each size (FamilyProfile::mfu_envelope).
void SetMfuEnvelope(const std::vector<const PublishedRun*>& rows, FamilyProfile* f) {
  std::map<double, double> by_size;  // params_b -> highest MFU reached at that size
  SystemProfile one;
  one.families.push_back(*f);
  for (const PublishedRun* r : rows) {
    auto v = ValidateRunWithProfile(*r, one);
    if (!v.ok() || !v->estimate.feasible() || !(1 + v->error > 0)) continue;
    double reached = r->metric == Metric::kIterationTime ? v->estimate.mfu * (1 + v->error)
                                                         : v->estimate.mfu / (1 + v->error);
    double& best = by_size[std::round(r->model.TotalParams() / 1e8) / 10];
    best = std::max(best, reached);
  }
  // From the largest model down, keep a size only where the running maximum rises.
  f->mfu_envelope.clear();
  double running = 0;
  for (auto it = by_size.rbegin(); it != by_size.rend(); ++it) {
    if (it->second > running) {
      running = it->second;
      f->mfu_envelope.emplace_back(it->first, running);
    }
  }
  std::reverse(f->mfu_envelope.begin(), f->mfu_envelope.end());
  // A profile holds at most 64 entries; dropping the smallest sizes only makes the check
  // stricter for small models.
  constexpr std::size_t kMaxEnvelope = 64;
  if (f->mfu_envelope.size() > kMaxEnvelope) {
    f->mfu_envelope.erase(f->mfu_envelope.begin(), f->mfu_envelope.end() - kMaxEnvelope);
  }
}

const char* const kFamilies[] = {"ampere", "hopper", "blackwell"};

}  // namespace

void SetEnvelope(const std::vector<PublishedRun>& runs, FamilyProfile* f) {
  f->runs = 0;
  f->gpus_max = f->seq_max = f->params_max_b = 0;
  f->kind_gpus_max.clear();
  for (const PublishedRun& r : runs) {
    if (GpuFamilyOf(r) != f->family) continue;
    ++f->runs;
    double gpus = r.system.gpus;
    f->gpus_max = std::max(f->gpus_max, gpus);
    f->seq_max = std::max(f->seq_max, double(r.model.seq));
    f->params_max_b = std::max(f->params_max_b, r.model.TotalParams() / 1e9);
    std::string_view kind = ParallelismKind(r.plan);
    auto it = std::find_if(f->kind_gpus_max.begin(), f->kind_gpus_max.end(),
                           [&](const auto& k) { return k.first == kind; });
    if (it == f->kind_gpus_max.end()) {
      f->kind_gpus_max.emplace_back(std::string(kind), gpus);
    } else {
      it->second = std::max(it->second, gpus);
    }
  }
  std::sort(f->kind_gpus_max.begin(), f->kind_gpus_max.end());
}

Result<SystemProfile> FitProfile(const std::vector<PublishedRun>& runs, const SystemProfile& start,
                                 const std::vector<AttentionPoint>* attention,
                                 const CalibrateOptions& options) {
  SystemProfile p = start;
  p.name = options.name;
  for (const char* fam : kFamilies) {
    if (p.FindMutable(fam) == nullptr) {
      const FamilyProfile* base = start.Find(fam);
      FamilyProfile f;
      if (base != nullptr) f = *base;
      f.family = fam;
      f.runs = 0;
      f.gpus_max = f.seq_max = f.params_max_b = 0;
      f.kind_gpus_max.clear();
      f.mfu_envelope.clear();
      f.bands.clear();
      p.families.push_back(std::move(f));
    }
  }
  auto performance_rows = [&](std::string_view family) {
    std::vector<const PublishedRun*> rows;
    for (const PublishedRun& r : runs) {
      if (GpuFamilyOf(r) == family && IsPerf(r)) rows.push_back(&r);
    }
    return rows;
  };
  auto wanted = [&](std::string_view family) {
    return options.families.empty() || std::find(options.families.begin(), options.families.end(),
                                                 family) != options.families.end();
  };
  // The prior's center per family: the defaults, or the start's constants.
  auto center_of = [&](const FamilyProfile& f) {
    if (options.prior_is_start) return f.calib;
    Calibration c = f.calib;
    const Calibration defaults;
    for (const CalibrationField& field : CalibrationFields()) {
      if (FittedOn(field, /*user_runs=*/false)) c.*(field.member) = defaults.*(field.member);
    }
    return c;
  };
  // Hierarchical families: fit the family with the most rows first; the others' pooled constants
  // start from (and, without rows, take) its fit, and their prior is centred on it.
  const FamilyProfile* reference = nullptr;
  std::size_t reference_rows = 0;
  Calibration reference_fit;
  if (options.pool_families && !options.prior_is_start) {
    for (const FamilyProfile& f : p.families) {
      std::size_t n = performance_rows(f.family).size();
      if (n > reference_rows) {
        reference_rows = n;
        reference = &f;
      }
    }
    if (reference != nullptr) {
      reference_fit = reference->calib;
      if (wanted(reference->family)) {
        if (attention != nullptr) {
          auto fit = FitAttention(*attention, reference->family, &reference_fit);
          if (!fit.ok() && fit.status().code() != StatusCode::kNotFound) return fit.status();
        }
        reference_fit = FitFamily(performance_rows(reference->family), reference_fit,
                                  center_of(*reference), options);
      }
    }
  }
  for (FamilyProfile& f : p.families) {
    if (!wanted(f.family)) continue;
    if (attention != nullptr) {
      auto fit = FitAttention(*attention, f.family, &f.calib);
      if (!fit.ok() && fit.status().code() != StatusCode::kNotFound) return fit.status();
    }
    SetEnvelope(runs, &f);
    std::vector<const PublishedRun*> rows = performance_rows(f.family);
    Calibration center = center_of(f);
    if (reference != nullptr && &f != reference) {
      CopyPooled(reference_fit, &center);
      if (rows.empty()) CopyPooled(reference_fit, &f.calib);
    }
    if (rows.empty()) continue;
    if (&f == reference) {
      f.calib = reference_fit;
    } else {
      f.calib = FitFamily(rows, f.calib, center, options);
    }
  }
  // Then the pooled constants become one value for every family with rows, fitted on all of
  // them together (from the reference family's fit); the hardware-specific ones stay per family.
  if (reference != nullptr) {
    std::vector<JointFamily> fams;
    for (FamilyProfile& f : p.families) {
      if (!wanted(f.family)) continue;
      std::vector<const PublishedRun*> rows = performance_rows(f.family);
      if (rows.empty()) continue;
      Calibration center = center_of(f);
      if (&f != reference) {
        CopyPooled(reference_fit, &center);
        CopyPooled(reference_fit, &f.calib);
      }
      fams.push_back({std::move(rows), &f.calib, center});
    }
    FitJoint(fams, options);
    for (FamilyProfile& f : p.families) {
      if (wanted(f.family) && performance_rows(f.family).empty() && !fams.empty()) {
        CopyPooled(*fams[0].calib, &f.calib);
      }
    }
  }
  // The envelopes are built from the final constants, after the pooled fit.
  for (FamilyProfile& f : p.families) {
    if (!wanted(f.family)) continue;
    std::vector<const PublishedRun*> rows = performance_rows(f.family);
    if (!rows.empty()) SetMfuEnvelope(rows, &f);
    // Every row ran, memory rows included: the reserve must let each fit.
    std::vector<const PublishedRun*> ran;
    for (const PublishedRun& r : runs) {
      if (GpuFamilyOf(r) == f.family) ran.push_back(&r);
    }
    if (!ran.empty()) FitMemoryReserve(ran, &f.calib);
  }
  return p;
}

MemoryReserveFit FitMemoryReserve(const std::vector<const PublishedRun*>& ran, Calibration* c) {
  MemoryReserveFit fit;
  fit.reserved_gib_before = c->hbm_reserved_gib;
  fit.fragmentation_before = c->hbm_fragmentation;
  double reserved = c->hbm_reserved_gib, fragmentation = c->hbm_fragmentation;
  // The tightest row: the least room (capacity less need, after the start's fragmentation).
  double least_room = std::numeric_limits<double>::infinity();
  std::vector<MemoryNeed> needs;
  needs.reserve(ran.size());
  for (const PublishedRun* r : ran) {
    Result<MemoryNeed> need = LeastMemoryNeed(*r, *c);
    if (!need.ok()) continue;  // a row no plan of which is valid informs nothing here
    needs.push_back(*need);
    const double room = need->capacity.value() - need->need.value() / (1 - fragmentation);
    if (room < least_room) {
      least_room = room;
      fit.tightest_id = r->id;
      fit.tightest = *need;
    }
  }
  if (needs.empty()) return fit;
  // (capacity - reserved) (1 - fragmentation) >= need for every row: the reserve first, down to
  // 0, then the fragmentation share, down to 0.
  reserved = std::clamp(least_room / static_cast<double>(GiB(1).value()), 0.0, reserved);
  if (least_room < 0) {
    for (const MemoryNeed& n : needs) {
      fragmentation = std::min(fragmentation, 1 - n.need.value() / n.capacity.value());
    }
    fragmentation = std::max(fragmentation, 0.0);
  }
  // Down to whole MiB-ish steps a profile file prints exactly (ProfileToYaml: 6 digits), so the
  // file read back keeps every run fitting.
  if (reserved < c->hbm_reserved_gib)
    reserved = std::max(0.0, std::floor(reserved * 1e3 - 1e-6) / 1e3);
  if (fragmentation < c->hbm_fragmentation) {
    fragmentation = std::max(0.0, std::floor(fragmentation * 1e4 - 1e-6) / 1e4);
  }
  for (const MemoryNeed& n : needs) {
    const double usable = (n.capacity.value() - GiB(reserved).value()) * (1 - fragmentation);
    if (n.need.value() > usable * (1 + 1e-12)) ++fit.still_out_of_memory;
  }
  c->hbm_reserved_gib = reserved;
  c->hbm_fragmentation = fragmentation;
  fit.reserved_gib = reserved;
  fit.fragmentation = fragmentation;
  return fit;
}

std::string_view CvUnitName(CvUnit unit) { return unit == CvUnit::kStack ? "stack" : "source"; }

const std::string& CvKey(const PublishedRun& run, CvUnit unit) {
  return unit == CvUnit::kStack ? run.stack : run.group;
}

Result<CvReport> CrossValidate(const std::vector<PublishedRun>& runs, const SystemProfile& start,
                               const std::vector<AttentionPoint>* attention,
                               const CalibrateOptions& options, CvUnit unit) {
  std::vector<std::string> groups;
  for (const PublishedRun& r : runs) {
    if (std::find(groups.begin(), groups.end(), CvKey(r, unit)) == groups.end()) {
      groups.push_back(CvKey(r, unit));
    }
  }
  CvReport cv;
  cv.unit = unit;
  CalibrateOptions fit_opts = options;
  fit_opts.bands = false;
  SystemProfile prior = start;
  const Calibration defaults;
  for (FamilyProfile& f : prior.families) {
    if (options.prior_is_start) break;  // `start` never saw these runs: folds keep it
    for (const CalibrationField& field : CalibrationFields()) {
      if (FittedOn(field, /*user_runs=*/false)) f.calib.*(field.member) = defaults.*(field.member);
    }
  }
  for (const std::string& g : groups) {
    std::vector<PublishedRun> train;
    for (const PublishedRun& r : runs) {
      if (CvKey(r, unit) != g) train.push_back(r);
    }
    ASSIGN_OR_RETURN(SystemProfile fitted, FitProfile(train, prior, attention, fit_opts));
    CvGroup cg;
    cg.group = g;
    for (const PublishedRun& r : runs) {
      if (CvKey(r, unit) != g) continue;
      ASSIGN_OR_RETURN(ValidationRow row, ValidateRunWithProfile(r, fitted));
      // Reach against the fold's envelope: what EstimateBand would have said with this profile.
      double mfu = row.estimate.feasible() ? row.estimate.mfu : 0.0;
      cv.beyond.push_back(!BeyondEnvelope(fitted, BandQuestionOf(row), mfu).empty());
      if (IsPerf(r)) {
        double e = std::abs(row.error);
        cg.mae += e;
        cg.max = std::max(cg.max, e);
        ++cg.rows;
        cv.mae += e;
        cv.max = std::max(cv.max, e);
        ++cv.total_rows;
      }
      cv.rows.push_back(std::move(row));
    }
    if (cg.rows > 0) {
      cg.mae /= cg.rows;
      cv.groups.push_back(cg);
    }
  }
  if (cv.total_rows > 0) cv.mae /= cv.total_rows;
  return cv;
}

std::string FormatCvReport(const CvReport& cv) {
  const std::string_view unit = CvUnitName(cv.unit);
  std::string out = fmt::format(
      "leave-one-{}-out cross-validation (fit on every other {}{}):\n", unit, unit,
      cv.unit == CvUnit::kStack ? ": a stack is every source that trained on it" : " group");
  const bool banded = cv.band_quantile > 0;
  out += fmt::format("{:<18} {:>5} {:>8} {:>8}{}\n", fmt::format("held-out {}", unit), "rows",
                     "mean", "max", banded ? "  band coverage" : "");
  for (const CvGroup& g : cv.groups) {
    out +=
        fmt::format("{:<18} {:>5} {:>7.1f}% {:>7.1f}%", g.group, g.rows, 100 * g.mae, 100 * g.max);
    out += banded ? fmt::format("  {:>12.0f}%\n", 100 * g.coverage) : "\n";
  }
  out += fmt::format("overall            {:>5} {:>7.1f}% {:>7.1f}%", cv.total_rows, 100 * cv.mae,
                     100 * cv.max);
  out += banded ? fmt::format("  {:>12.0f}%\n", 100 * cv.coverage) : "\n";
  if (banded) {
    out += fmt::format("{:<45}{:>12.0f}%\n", fmt::format("mean over {}s", unit),
                       100 * cv.source_coverage);
    out += fmt::format(
        "band coverage: the share of held-out rows whose published value lies inside the band\n"
        "[x / (1 + r), x (1 + r)] printed for them, r the {:.0f}th percentile of |residual| of "
        "the\n"
        "other {}s' held-out rows in the finest cell with {} rows from {} sources (GPU family,\n"
        "parallelism, sequence, size; inside or beyond the fold's validated envelope)\n",
        100 * cv.band_quantile, unit, kMinBandRows, kMinBandSources);
  }
  return out;
}

double BandResidual(const ValidationRow& row) {
  const double p = row.predicted, m = row.run.value;
  if (!(p > 0) || !(m > 0)) return 10;  // no estimate: outside any band
  return std::max(p / m, m / p) - 1;
}

BandQuestion BandQuestionOf(const ValidationRow& row) {
  return {GpuFamilyOf(row.run), ParallelismKind(row.plan), row.run.model.seq,
          row.run.model.TotalParams() / 1e9, row.run.system.gpus};
}

CvReport WorseOfFolds(const CvReport& a, const CvReport& b) {
  std::map<std::string_view, std::size_t> in_b;
  for (std::size_t i = 0; i < b.rows.size(); ++i) in_b[b.rows[i].run.id] = i;
  CvReport out;
  out.unit = a.unit;
  for (std::size_t i = 0; i < a.rows.size(); ++i) {
    auto it = in_b.find(a.rows[i].run.id);
    if (it != in_b.end() && BandResidual(b.rows[it->second]) > BandResidual(a.rows[i])) {
      out.rows.push_back(b.rows[it->second]);
      out.beyond.push_back(b.beyond[it->second]);
    } else {
      out.rows.push_back(a.rows[i]);
      out.beyond.push_back(a.beyond[i]);
    }
  }
  return out;
}

BandModel BuildBandModel(const CvReport& cv, double quantile, std::string_view exclude,
                         CvUnit exclude_unit) {
  struct Cell {
    std::vector<double> residuals;
    std::set<std::string> sources;
  };
  std::map<std::string, Cell> cells;
  for (std::size_t i = 0; i < cv.rows.size(); ++i) {
    const ValidationRow& row = cv.rows[i];
    if (!IsPerf(row.run) || (!exclude.empty() && CvKey(row.run, exclude_unit) == exclude)) {
      continue;
    }
    const double d = BandResidual(row);
    BandQuestion q = BandQuestionOf(row);
    std::set<std::string> keys;
    for (std::string& k : BandCellKeys(q, cv.beyond[i])) keys.insert(std::move(k));
    q.kind = "*";
    for (std::string& k : BandCellKeys(q, cv.beyond[i])) keys.insert(std::move(k));
    for (const std::string& k : keys) {
      cells[k].residuals.push_back(d);
      cells[k].sources.insert(row.run.group);
    }
  }
  BandModel band;
  band.quantile = quantile;
  for (auto& [key, cell] : cells) {
    std::vector<double>& ds = cell.residuals;
    const int n = static_cast<int>(ds.size());
    const int sources = static_cast<int>(cell.sources.size());
    if (n < kMinBandRows || sources < kMinBandSources) continue;
    std::sort(ds.begin(), ds.end());
    // The conformal rank: the ceil((n + 1) q)-th smallest, the largest when that passes n, so a
    // small cell widens toward its worst row.
    const int rank = std::min(n, static_cast<int>(std::ceil((n + 1) * quantile)));
    band.cells.push_back({key, ds[rank - 1], n, sources});
  }
  return band;
}

void BandCoverage(double quantile, const CvReport& residuals, CvReport* cv) {
  int covered_all = 0, rows_all = 0;
  for (CvGroup& g : cv->groups) {
    const BandModel band = BuildBandModel(residuals, quantile, g.group, cv->unit);
    int covered = 0, rows = 0;
    for (std::size_t i = 0; i < cv->rows.size(); ++i) {
      const ValidationRow& row = cv->rows[i];
      if (CvKey(row.run, cv->unit) != g.group || !IsPerf(row.run)) continue;
      ++rows;
      if (BandResidual(row) <= BandRelative(band, BandQuestionOf(row), cv->beyond[i])) ++covered;
    }
    g.coverage = rows > 0 ? double(covered) / rows : 0;
    covered_all += covered;
    rows_all += rows;
  }
  cv->coverage = rows_all > 0 ? double(covered_all) / rows_all : 0;
  cv->source_coverage = 0;
  int groups = 0;
  for (const CvGroup& g : cv->groups) {
    if (g.rows == 0) continue;
    cv->source_coverage += g.coverage;
    ++groups;
  }
  if (groups > 0) cv->source_coverage /= groups;
  cv->band_quantile = quantile;
}

void BandCoverage(double quantile, CvReport* cv) { BandCoverage(quantile, *cv, cv); }

double ChooseBandQuantile(const CvReport& residuals, std::span<CvReport* const> protocols) {
  auto reached = [&](double q) {
    bool all = true;
    for (CvReport* cv : protocols) {
      BandCoverage(q, residuals, cv);
      all =
          all && cv->coverage >= kBandTargetCoverage && cv->source_coverage >= kBandTargetCoverage;
    }
    return all;
  };
  for (double q : kBandQuantiles) {
    if (reached(q)) return q;
  }
  const double last = std::end(kBandQuantiles)[-1];
  reached(last);
  return last;
}

double ChooseBandQuantile(CvReport* cv) {
  const CvReport residuals = *cv;
  CvReport* const one[] = {cv};
  return ChooseBandQuantile(residuals, one);
}

Result<SystemProfile> CalibrateProfile(const std::vector<PublishedRun>& runs,
                                       const SystemProfile& start,
                                       const std::vector<AttentionPoint>* attention,
                                       const CalibrateOptions& options, CvReport* cv_out,
                                       CvReport* stack_cv_out) {
  ASSIGN_OR_RETURN(SystemProfile p, FitProfile(runs, start, attention, options));
  if (!options.bands) return p;
  ASSIGN_OR_RETURN(CvReport cv, CrossValidate(runs, start, attention, options));
  const bool stacks_are_sources = std::all_of(
      runs.begin(), runs.end(), [](const PublishedRun& r) { return r.stack == r.group; });
  CvReport stack_cv;
  if (stacks_are_sources) {
    stack_cv = cv;
    stack_cv.unit = CvUnit::kStack;
  } else {
    ASSIGN_OR_RETURN(stack_cv, CrossValidate(runs, start, attention, options, CvUnit::kStack));
  }
  // Bands: cross-validated mean |error| per family and sequence range.
  const double edges[] = {8192, 32768, 131072, 1048576};
  for (FamilyProfile& f : p.families) {
    f.bands.clear();
    double all = 0;
    int all_n = 0;
    std::vector<SeqBand> bands;
    for (double edge : edges) bands.push_back({edge, 0, 0});
    for (const ValidationRow& r : cv.rows) {
      if (GpuFamilyOf(r.run) != f.family || !IsPerf(r.run)) continue;
      double e = std::abs(r.error);
      all += e;
      ++all_n;
      for (SeqBand& b : bands) {
        if (r.run.model.seq <= b.seq_max) {
          b.mae += e;
          ++b.rows;
          break;
        }
      }
    }
    if (all_n == 0) continue;
    for (SeqBand& b : bands) {
      // A range with too few rows takes the family's overall error.
      if (b.rows >= 3) {
        b.mae /= b.rows;
      } else {
        b.mae = all / all_n;
      }
      f.bands.push_back(b);
    }
  }
  const CvReport residuals = WorseOfFolds(cv, stack_cv);
  CvReport* const protocols[] = {&cv, &stack_cv};
  BandModel band = BuildBandModel(residuals, ChooseBandQuantile(residuals, protocols));
  if (band.Find("any/any/any/any/any") != nullptr) {
    p.band = std::move(band);
  } else {
    // Too few rows or sources for a band of their own (a user's handful of runs): the start's
    // band is kept, and no coverage is reported for a band the rows could not build.
    cv.band_quantile = 0;
    stack_cv.band_quantile = 0;
  }
  if (cv_out != nullptr) *cv_out = std::move(cv);
  if (stack_cv_out != nullptr) *stack_cv_out = std::move(stack_cv);
  return p;
}

}  // namespace baton::perf
