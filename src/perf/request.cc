#include "perf/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>

#include "core/bounded_input.h"
#include "core/strings.h"
#include "perf/estimator.h"
#include "perf/stack.h"

namespace baton::perf {
namespace {

using nlohmann::json;

// The fields of the "training" and "plan" objects; a job plan (ParseJobPlan) has them side by side.
// The stack settings (perf/stack.h) are training fields too.
constexpr std::string_view kTrainingFields[] = {
    "global_batch",       "global_batch_tokens", "dtype",    "tokens",
    "price_per_gpu_hour", "flash_attention",     "grads",    "fp8_recipe",
    "compiled",           "cp_attention",        "async_tp", "tp_impl",
    "grad_accum",         "attn_kernel",         "loss"};
constexpr std::string_view kPlanFields[] = {"tp",        "pp",         "dp",
                                            "cp",        "ep",         "mbs",
                                            "vp",        "recompute",  "sequence_parallel",
                                            "zero",      "fsdp_group", "overlap_dp_comm",
                                            "uneven_pp", "order"};

bool In(std::span<const std::string_view> names, std::string_view key) {
  return std::find(names.begin(), names.end(), key) != names.end();
}

// An error that names its field; converted to the Status + field pair at the boundary.
struct FieldError {
  std::string field;
  std::string message;
};

class Reader {
 public:
  std::optional<FieldError> error;

  bool Fail(std::string field, std::string message) {
    if (!error) error = FieldError{std::move(field), std::move(message)};
    return false;
  }

  // Rejects keys of `object` that are not in `known`.
  bool OnlyKnown(const json& object, std::string_view prefix,
                 std::initializer_list<std::string_view> known) {
    return OnlyKnown(object, prefix,
                     std::span<const std::string_view>(known.begin(), known.size()));
  }
  bool OnlyKnown(const json& object, std::string_view prefix,
                 std::span<const std::string_view> known) {
    for (const auto& [key, value] : object.items()) {
      if (!In(known, key)) {
        std::string name = Join(prefix, key);
        return Fail(name, fmt::format("{}: unknown field", name));
      }
    }
    return true;
  }

  bool Int(const json& v, const std::string& field, long long min, long long max, int* out) {
    if (!v.is_number_integer()) return Fail(field, fmt::format("{}: must be an integer", field));
    long long x = v.get<long long>();
    if (v.is_number_unsigned() &&
        v.get<unsigned long long>() >
            static_cast<unsigned long long>(std::numeric_limits<long long>::max())) {
      x = std::numeric_limits<long long>::max();
    }
    if (x < min || x > max) {
      return Fail(field, fmt::format("{}: {} is not in {}..{}", field, x, min, max));
    }
    *out = static_cast<int>(x);
    return true;
  }

  bool Number(const json& v, const std::string& field, double min, double* out) {
    if (!v.is_number()) return Fail(field, fmt::format("{}: must be a number", field));
    double x = v.get<double>();
    if (!std::isfinite(x) || x < min) {
      return Fail(field, fmt::format("{}: {} must be a finite number >= {}", field, x, min));
    }
    *out = x;
    return true;
  }

  bool Bool(const json& v, const std::string& field, bool* out) {
    if (!v.is_boolean()) return Fail(field, fmt::format("{}: must be true or false", field));
    *out = v.get<bool>();
    return true;
  }

  bool String(const json& v, const std::string& field, std::string* out) {
    if (!v.is_string()) return Fail(field, fmt::format("{}: must be a string", field));
    *out = v.get<std::string>();
    return true;
  }

  // Adopts a Status from the perf validators, whose messages start with the field name.
  bool Adopt(const Status& st, std::string_view fallback_field) {
    if (st.ok()) return true;
    std::string_view msg = st.message();
    std::size_t colon = msg.find(':');
    std::string field(colon == std::string_view::npos ? fallback_field : msg.substr(0, colon));
    if (field.find(' ') != std::string::npos) field = std::string(fallback_field);
    return Fail(field, std::string(msg));
  }

  static std::string Join(std::string_view prefix, std::string_view key) {
    return prefix.empty() ? std::string(key) : fmt::format("{}.{}", prefix, key);
  }
};

bool ReadModel(Reader& r, const json& v, ModelSpec* out) {
  if (v.is_string()) {
    Result<ModelSpec> m = FindModel(v.get<std::string>());
    if (!m.ok()) return r.Fail("model", std::string(m.status().message()));  // "model: ..."
    *out = std::move(m).value();
    return true;
  }
  if (!v.is_object()) {
    return r.Fail("model", "model: must be a catalogue name or an object of model fields");
  }
  // JSON is YAML: the model reader validates every field and names it.
  Result<ModelSpec> m = ParseModel(v.dump(), "model");
  if (!m.ok()) return r.Fail("model", std::string(m.status().message()));
  *out = std::move(m).value();
  return true;
}

bool ReadTraining(Reader& r, const json& v, const ModelSpec& model, TrainingSpec* out) {
  if (!v.is_object()) return r.Fail("training", "training: must be an object");
  if (!r.OnlyKnown(v, "training", kTrainingFields)) return false;
  if (v.contains("global_batch") && v.contains("global_batch_tokens")) {
    return r.Fail("training.global_batch_tokens",
                  "training.global_batch_tokens: give global_batch or global_batch_tokens, not "
                  "both");
  }
  if (v.contains("global_batch") &&
      !r.Int(v["global_batch"], "training.global_batch", 1, 1 << 24, &out->global_batch)) {
    return false;
  }
  if (v.contains("global_batch_tokens")) {
    double tokens = 0;
    if (!r.Number(v["global_batch_tokens"], "training.global_batch_tokens", 1, &tokens)) {
      return false;
    }
    Result<int> b = GlobalBatchFromTokens(tokens, model.seq, "training.global_batch_tokens");
    if (!b.ok()) return r.Adopt(b.status(), "training.global_batch_tokens");
    out->global_batch = *b;
  }
  if (v.contains("dtype")) {
    std::string name;
    if (!r.String(v["dtype"], "training.dtype", &name)) return false;
    Result<topo::Dtype> d = topo::ParseDtype(name);
    if (!d.ok()) {
      return r.Fail("training.dtype", fmt::format("training.dtype: {}", d.status().message()));
    }
    out->dtype = *d;
  }
  if (v.contains("tokens") && !r.Number(v["tokens"], "training.tokens", 0, &out->tokens_to_train)) {
    return false;
  }
  if (v.contains("price_per_gpu_hour") &&
      !r.Number(v["price_per_gpu_hour"], "training.price_per_gpu_hour", 0,
                &out->dollars_per_gpu_hour)) {
    return false;
  }
  if (v.contains("flash_attention") &&
      !r.Bool(v["flash_attention"], "training.flash_attention", &out->flash_attention)) {
    return false;
  }
  // After dtype: fp8_recipe is only for fp8 runs. A yes/no setting also takes true / false.
  for (const StackSetting& s : StackSettings()) {
    if (!v.contains(s.name)) continue;
    std::string field = fmt::format("training.{}", s.name), word;
    const json& x = v[std::string(s.name)];
    if (x.is_boolean() && (s.values == "yes|no" || s.values == "no|yes")) {
      word = x.get<bool>() ? "yes" : "no";
    } else if (!r.String(x, field, &word)) {
      return false;
    }
    if (!r.Adopt(ApplyStackSetting(s.name, word, field, out), field)) return false;
  }
  return true;
}

bool ReadPlan(Reader& r, const json& v, ParallelPlan* out, bool* has_dp) {
  if (!v.is_object()) return r.Fail("plan", "plan: must be an object");
  if (!r.OnlyKnown(v, "plan", kPlanFields)) return false;
  struct IntField {
    const char* name;
    int* value;
    int min;
  };
  for (IntField f :
       {IntField{"tp", &out->tp, 1}, IntField{"pp", &out->pp, 1}, IntField{"dp", &out->dp, 1},
        IntField{"cp", &out->cp, 1}, IntField{"ep", &out->ep, 1}, IntField{"mbs", &out->mbs, 1},
        IntField{"vp", &out->vp, 1}, IntField{"zero", &out->zero, 0},
        IntField{"fsdp_group", &out->fsdp_group, 0}}) {
    if (v.contains(f.name) &&
        !r.Int(v[f.name], fmt::format("plan.{}", f.name), f.min, 1 << 22, f.value)) {
      return false;
    }
  }
  *has_dp = v.contains("dp");
  if (out->zero > 3)
    return r.Fail("plan.zero", fmt::format("plan.zero: {} is not in 0..3", out->zero));
  struct BoolField {
    const char* name;
    bool* value;
  };
  for (BoolField f : {BoolField{"sequence_parallel", &out->sequence_parallel},
                      BoolField{"overlap_dp_comm", &out->overlap_dp_comm},
                      BoolField{"uneven_pp", &out->uneven_pp}}) {
    if (v.contains(f.name) && !r.Bool(v[f.name], fmt::format("plan.{}", f.name), f.value)) {
      return false;
    }
  }
  std::string text;
  if (v.contains("recompute")) {
    if (!r.String(v["recompute"], "plan.recompute", &text)) return false;
    Result<Recompute> rc = ParseRecompute(text);
    if (!rc.ok()) {
      return r.Fail("plan.recompute", fmt::format("plan.recompute: {}", rc.status().message()));
    }
    out->recompute = *rc;
  }
  if (v.contains("order")) {
    if (!r.String(v["order"], "plan.order", &text)) return false;
    Result<RankOrder> o = ParseRankOrder(text);
    if (!o.ok()) return r.Fail("plan.order", fmt::format("plan.order: {}", o.status().message()));
    out->order = *o;
  }
  return true;
}

bool ReadIntList(Reader& r, const json& v, const std::string& field, int min, int max,
                 std::vector<int>* out) {
  if (!v.is_array() || v.empty()) {
    return r.Fail(field, fmt::format("{}: must be a non-empty list of integers", field));
  }
  if (v.size() > 256) return r.Fail(field, fmt::format("{}: more than 256 values", field));
  out->clear();
  for (std::size_t i = 0; i < v.size(); ++i) {
    int x = 0;
    if (!r.Int(v[i], fmt::format("{}[{}]", field, i), min, max, &x)) return false;
    out->push_back(x);
  }
  return true;
}

bool ReadSearch(Reader& r, const json& v, PlanRequest* out) {
  if (!v.is_object()) return r.Fail("search", "search: must be an object");
  if (!r.OnlyKnown(
          v, "search",
          {"tp", "pp", "cp", "ep", "mbs", "vp", "zero", "recompute", "top", "objective"})) {
    return false;
  }
  SearchSpace& s = out->space;
  struct ListField {
    const char* name;
    std::vector<int>* values;
    int min;
    int max;
  };
  for (ListField f : {ListField{"tp", &s.tp, 1, 1 << 16}, ListField{"pp", &s.pp, 1, 1 << 16},
                      ListField{"cp", &s.cp, 1, 1 << 16}, ListField{"ep", &s.ep, 1, 1 << 16},
                      ListField{"mbs", &s.mbs, 1, 1 << 16}, ListField{"vp", &s.vp, 1, 1 << 10},
                      ListField{"zero", &s.zero, 0, 3}}) {
    if (v.contains(f.name) &&
        !ReadIntList(r, v[f.name], fmt::format("search.{}", f.name), f.min, f.max, f.values)) {
      return false;
    }
  }
  if (v.contains("recompute")) {
    const json& list = v["recompute"];
    if (!list.is_array() || list.empty() || list.size() > 3) {
      return r.Fail("search.recompute", "search.recompute: must be a list of 1-3 names");
    }
    s.recompute.clear();
    for (std::size_t i = 0; i < list.size(); ++i) {
      std::string field = fmt::format("search.recompute[{}]", i);
      std::string name;
      if (!r.String(list[i], field, &name)) return false;
      Result<Recompute> rc = ParseRecompute(name);
      if (!rc.ok()) return r.Fail(field, fmt::format("{}: {}", field, rc.status().message()));
      s.recompute.push_back(*rc);
    }
  }
  if (v.contains("top") && !r.Int(v["top"], "search.top", 1, 100, &out->top_k)) return false;
  if (v.contains("objective")) {
    std::string name;
    if (!r.String(v["objective"], "search.objective", &name)) return false;
    if (name == "time") {
      out->objective = Objective::kStepTime;
    } else if (name == "mfu") {
      out->objective = Objective::kMfu;
    } else {
      return r.Fail("search.objective",
                    fmt::format("search.objective: '{}' is not time or mfu", Printable(name)));
    }
  }
  if (s.size() > kMaxRequestSearchSpace) {
    return r.Fail("search", fmt::format("search: the space holds {} plans, more than the {} a "
                                        "request may search; restrict tp, pp, mbs or vp",
                                        s.size(), kMaxRequestSearchSpace));
  }
  return true;
}

}  // namespace

Result<PlanRequest> ParsePlanRequest(std::string_view body, PlanQuestion question,
                                     std::string* field) {
  auto fail = [&](std::string f, std::string message) -> Status {
    if (field != nullptr) *field = std::move(f);
    return InvalidArgumentError(std::move(message));
  };
  // Bounded before parsing (depth, size, duplicate keys): the model object is serialised
  // recursively below, so deep nesting must never reach it.
  Result<json> parsed = ParseJsonBounded(body);
  if (!parsed.ok()) return fail("", "body: " + std::string(parsed.status().message()));
  json root = std::move(parsed).value();
  if (!root.is_object()) return fail("", "body: must be a JSON object");

  Reader r;
  PlanRequest req;
  const bool estimate = question == PlanQuestion::kEstimate;
  bool has_dp = false;
  auto run = [&]() -> bool {
    if (!r.OnlyKnown(root, "", {"model", "gpus", "training", estimate ? "plan" : "search"})) {
      return false;
    }
    if (!root.contains("model")) return r.Fail("model", "model: required");
    if (!ReadModel(r, root["model"], &req.model)) return false;
    if (!root.contains("gpus")) return r.Fail("gpus", "gpus: required");
    if (!r.Int(root["gpus"], "gpus", 1, 1 << 22, &req.gpus)) return false;
    if (root.contains("training") && !ReadTraining(r, root["training"], req.model, &req.training)) {
      return false;
    }
    if (req.training.global_batch == 0) {
      req.training.global_batch = std::max(1, (4 << 20) / req.model.seq);  // ~4M tokens
    }
    if (!r.Adopt(ValidateTraining(req.training), "training")) return false;
    if (estimate) {
      if (root.contains("plan") && !ReadPlan(r, root["plan"], &req.plan, &has_dp)) return false;
      if (!has_dp) {
        long long mp = static_cast<long long>(req.plan.tp) * req.plan.pp * req.plan.cp;
        if (req.gpus % mp != 0) {
          return r.Fail("gpus", fmt::format("gpus: {} GPUs cannot be split into tp {} x pp {} x "
                                            "cp {} = {} model-parallel groups",
                                            req.gpus, req.plan.tp, req.plan.pp, req.plan.cp, mp));
        }
        req.plan.dp = static_cast<int>(req.gpus / mp);
      }
      return r.Adopt(ValidatePlan(req.model, req.plan, req.training, req.gpus), "plan");
    }
    req.space = DefaultSearchSpace(req.model, {req.gpus});
    return !root.contains("search") || ReadSearch(r, root["search"], &req);
  };
  if (!run()) return fail(r.error->field, r.error->message);
  return req;
}

namespace {

// The default training of a plan request, and of the planner's best plan
// (planning::PlannerEstimator::DefaultTraining): a global batch of about 4M tokens, bf16.
TrainingSpec DefaultJobTraining(const ModelSpec& model) {
  TrainingSpec t;
  t.global_batch = std::max(1, (4 << 20) / std::max(1, model.seq));
  return t;
}

// `message` without its leading "field:".
std::string_view WithoutField(std::string_view message, std::string_view field) {
  if (!field.empty() && message.starts_with(field) &&
      message.substr(field.size()).starts_with(":")) {
    message.remove_prefix(field.size() + 1);
  }
  return Trim(message);
}

// ParsePlanRequest's field as the job plan's flat object names it.
std::string JobPlanField(std::string_view request_field) {
  constexpr std::string_view kTraining = "training.", kPlan = "plan.";
  if (request_field == "gpus") return "plan.dp";  // dp is what cannot be derived from them
  if (request_field.starts_with(kTraining)) {
    return fmt::format("plan.{}", request_field.substr(kTraining.size()));
  }
  if (request_field.starts_with(kPlan)) return std::string(request_field);
  return request_field.empty() || request_field == "training"
             ? "plan"
             : fmt::format("plan.{}", request_field);
}

}  // namespace

Result<JobPlanRequest> ParseJobPlan(std::string_view object, int gpus, std::string* field) {
  auto fail = [&](std::string f, std::string_view message) -> Status {
    Status st = InvalidArgumentError(fmt::format("{}: {}", f, message));
    if (field != nullptr) *field = std::move(f);
    return st;
  };
  Result<json> parsed = ParseJsonBounded(object);
  if (!parsed.ok()) return fail("plan", parsed.status().message());
  json root = std::move(parsed).value();
  if (!root.is_object()) return fail("plan", "must be an object");
  json training = json::object(), plan = json::object();
  for (const auto& [key, v] : root.items()) {
    if (key == "model") continue;
    if (In(kTrainingFields, key)) {
      training[key] = v;
    } else if (In(kPlanFields, key)) {
      plan[key] = v;
    } else {
      return fail(
          fmt::format("plan.{}", Printable(key, 64)),
          "unknown field (expected model, a plan field: tp, pp, dp, cp, ep, mbs, vp, "
          "recompute, sequence_parallel, zero, fsdp_group, overlap_dp_comm, uneven_pp, order; or a "
          "training field: global_batch, global_batch_tokens, dtype, tokens, "
          "price_per_gpu_hour, flash_attention, grads, fp8_recipe, compiled, "
          "cp_attention, async_tp, tp_impl, grad_accum, attn_kernel, loss)");
    }
  }
  if (!root.contains("model")) return fail("plan.model", "required");
  JobPlanRequest out;
  if (plan.empty()) {
    // The planner's best plan: searched by catalogue name, with its default training.
    if (!root["model"].is_string()) {
      return fail("plan.model",
                  "the planner's best plan needs a catalogue model name; with an inline model "
                  "give the plan too (tp, pp, ...)");
    }
    if (!training.empty()) {
      return fail(fmt::format("plan.{}", training.begin().key()),
                  "training fields need an explicit plan (tp, pp, ...); the planner's best plan "
                  "uses its default training");
    }
    Result<ModelSpec> m = FindModel(root["model"].get<std::string>());
    if (!m.ok()) return fail("plan.model", WithoutField(m.status().message(), "model"));
    out.model = std::move(m).value();
    out.training = DefaultJobTraining(out.model);
    return out;
  }
  json request = {{"model", root["model"]}, {"gpus", gpus}, {"plan", plan}};
  if (!training.empty()) request["training"] = training;
  std::string f;
  Result<PlanRequest> r = ParsePlanRequest(request.dump(), PlanQuestion::kEstimate, &f);
  if (!r.ok()) {
    // The request's messages start with its field name; say the job plan's instead.
    std::string_view message = WithoutField(r.status().message(), f);
    return fail(JobPlanField(f), message);
  }
  out.model = std::move(r->model);
  out.training = r->training;
  out.plan = r->plan;
  return out;
}

Result<ParallelPlan> ResolveJobPlan(const JobPlanRequest& request, const SystemSpec& system,
                                    std::string* field) {
  auto fail = [&](std::string message) -> Status {
    if (field != nullptr) *field = "plan";
    return InvalidArgumentError(fmt::format("plan: {}", message));
  };
  const ModelSpec& model = request.model;
  if (request.plan) {
    Result<StepEstimate> e = Estimate(model, *request.plan, request.training, system);
    if (!e.ok()) return fail(std::string(e.status().message()));
    if (!e->feasible()) {
      EvalContext ctx(model, request.training, system);
      std::string why = ExplainRejection(ctx, *request.plan, *e);
      return fail(fmt::format("{} ({}) on {} GPUs of {} is infeasible: {}{}{}", model.name,
                              PlanToString(*request.plan), system.gpus, system.name,
                              RejectionName(e->rejection), why.empty() ? "" : ": ", why));
    }
    return *request.plan;
  }
  SearchOptions options;
  options.top_k = 1;
  Result<SearchResult> r =
      Search(model, request.training, system, DefaultSearchSpace(model, {system.gpus}), options);
  if (!r.ok()) return fail(std::string(r.status().message()));
  if (r->top.empty()) {
    std::string reasons;
    for (int i = 0; i < kRejectionCount; ++i) {
      if (r->rejected[i] == 0) continue;
      reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ", r->rejected[i],
                             RejectionName(static_cast<Rejection>(i)));
    }
    return fail(
        fmt::format("the planner finds no feasible plan for {} on {} GPUs of {} ({} "
                    "plans: {}); give more GPUs or a smaller model",
                    model.name, system.gpus, system.name, r->space,
                    reasons.empty() ? "none estimated" : reasons));
  }
  return r->top[0].plan;
}

}  // namespace baton::perf
