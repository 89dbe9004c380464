#include "perf/model.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

#include "core/bounded_input.h"
#include "core/strings.h"

namespace baton::perf {

std::string_view FfnKindName(FfnKind k) { return k == FfnKind::kSwiGlu ? "swiglu" : "gelu"; }

double ModelSpec::AttentionParams() const {
  double h = hidden;
  double kv = static_cast<double>(kv_heads) * head_dim();
  // Q and output projections (h x h each), K and V (h x kv each), biases, two layer norms.
  return 2.0 * h * h + 2.0 * h * kv + (h + 2 * kv + h) + 4.0 * h;
}

double ModelSpec::DenseLayerParams() const {
  double mats = ffn_kind == FfnKind::kSwiGlu ? 3.0 : 2.0;
  return AttentionParams() + mats * hidden * static_cast<double>(ffn) + ffn + hidden;
}

double ModelSpec::MoeLayerParams() const {
  double mats = ffn_kind == FfnKind::kSwiGlu ? 3.0 : 2.0;
  double expert = mats * hidden * static_cast<double>(moe.expert_ffn);
  return AttentionParams() + (moe.experts + moe.shared_experts) * expert +
         static_cast<double>(hidden) * moe.experts;
}

double ModelSpec::EmbeddingParams() const {
  double e = static_cast<double>(vocab) * hidden;
  if (!tied_embeddings) e *= 2;
  if (learned_positions) e += static_cast<double>(seq) * hidden;
  return e + hidden;  // final layer norm
}

double ModelSpec::TotalParams() const {
  int moe_l = moe_layers();
  return (layers - moe_l) * DenseLayerParams() + moe_l * MoeLayerParams() + EmbeddingParams();
}

double ModelSpec::ActiveParams() const {
  if (!is_moe()) return TotalParams();
  double mats = ffn_kind == FfnKind::kSwiGlu ? 3.0 : 2.0;
  double expert = mats * hidden * static_cast<double>(moe.expert_ffn);
  double active_moe = AttentionParams() + (moe.top_k + moe.shared_experts) * expert;
  int moe_l = moe_layers();
  return (layers - moe_l) * DenseLayerParams() + moe_l * active_moe + EmbeddingParams();
}

namespace {

Status FieldError(std::string_view field, std::string_view why) {
  return InvalidArgumentError(fmt::format("model.{}: {}", field, why));
}

Status Positive(std::string_view field, long long v, long long max) {
  if (v <= 0) return FieldError(field, fmt::format("{} must be > 0", v));
  if (v > max) return FieldError(field, fmt::format("{} is larger than {}", v, max));
  return Status::Ok();
}

}  // namespace

Status ValidateModel(const ModelSpec& m) {
  if (m.name.empty()) return FieldError("name", "must not be empty");
  RETURN_IF_ERROR(Positive("layers", m.layers, 100000));
  RETURN_IF_ERROR(Positive("hidden", m.hidden, 1 << 20));
  RETURN_IF_ERROR(Positive("heads", m.heads, 1 << 16));
  RETURN_IF_ERROR(Positive("kv_heads", m.kv_heads, m.heads));
  RETURN_IF_ERROR(Positive("ffn", m.ffn, 1 << 22));
  RETURN_IF_ERROR(Positive("vocab", m.vocab, 1 << 24));
  RETURN_IF_ERROR(Positive("seq", m.seq, 1 << 24));
  if (m.hidden % m.heads != 0) {
    return FieldError("heads", fmt::format("{} does not divide hidden {}", m.heads, m.hidden));
  }
  if (m.heads % m.kv_heads != 0) {
    return FieldError("kv_heads", fmt::format("{} does not divide heads {}", m.kv_heads, m.heads));
  }
  if (m.moe.experts < 0) return FieldError("moe.experts", "must be >= 0");
  if (m.moe.experts > 0) {
    RETURN_IF_ERROR(Positive("moe.top_k", m.moe.top_k, m.moe.experts));
    RETURN_IF_ERROR(Positive("moe.expert_ffn", m.moe.expert_ffn, 1 << 22));
    RETURN_IF_ERROR(Positive("moe.layer_frequency", m.moe.layer_frequency, m.layers));
    if (m.moe.shared_experts < 0) return FieldError("moe.shared_experts", "must be >= 0");
  }
  return Status::Ok();
}

namespace {

ModelSpec Gpt(std::string name, int layers, int hidden, int heads) {
  ModelSpec m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.ffn = 4 * hidden;
  m.vocab = 51200;
  m.seq = 2048;
  m.learned_positions = true;
  return m;
}

ModelSpec Llama(std::string name, int layers, int hidden, int heads, int kv, int ffn, int vocab,
                int seq) {
  ModelSpec m;
  m.name = std::move(name);
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = kv;
  m.ffn = ffn;
  m.ffn_kind = FfnKind::kSwiGlu;
  m.vocab = vocab;
  m.seq = seq;
  m.tied_embeddings = false;
  m.dropout = false;
  return m;
}

std::vector<ModelSpec> MakeCatalogue() {
  std::vector<ModelSpec> c;
  // Narayanan et al., SC'21, Table 1 (vocab 51200, seq 2048).
  c.push_back(Gpt("gpt-1.7b", 24, 2304, 24));
  c.push_back(Gpt("gpt-3.6b", 30, 3072, 32));
  c.push_back(Gpt("gpt-7.5b", 36, 4096, 32));
  c.push_back(Gpt("gpt-18.4b", 40, 6144, 48));
  c.push_back(Gpt("gpt-39.1b", 48, 8192, 64));
  c.push_back(Gpt("gpt-76.1b", 60, 10240, 80));
  c.push_back(Gpt("gpt-145.6b", 80, 12288, 96));
  c.push_back(Gpt("gpt-310.1b", 96, 16384, 128));
  c.push_back(Gpt("gpt-529.6b", 105, 20480, 128));
  c.push_back(Gpt("gpt-1008b", 128, 25600, 160));
  // Brown et al. 2020; Korthikanti et al. 2022 (22B, 530B = MT-NLG, 1T).
  c.push_back(Gpt("gpt3-175b", 96, 12288, 96));
  c.push_back(Gpt("megatron-22b", 48, 6144, 64));
  c.push_back(Gpt("mt-nlg-530b", 105, 20480, 128));
  c.push_back(Gpt("megatron-1t", 128, 25600, 160));
  // BigScience BLOOM: ALiBi positions, 250,680-token vocabulary.
  ModelSpec bloom = Gpt("bloom-176b", 70, 14336, 112);
  bloom.vocab = 250680;
  bloom.learned_positions = false;
  bloom.dropout = false;  // BLOOM trained with hidden and attention dropout 0
  c.push_back(bloom);
  // Touvron et al. 2023 (Llama 2), Dubey et al. 2024 (Llama 3).
  c.push_back(Llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096));
  c.push_back(Llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096));
  c.push_back(Llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096));
  c.push_back(Llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192));
  c.push_back(Llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192));
  c.push_back(Llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192));
  // Jiang et al. 2024 (Mixtral of Experts).
  ModelSpec mixtral = Llama("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 4096);
  mixtral.moe = MoeSpec{8, 2, 14336, 0, 1};
  c.push_back(mixtral);
  return c;
}

std::string Canonical(std::string_view s) {
  std::string out;
  for (char ch : ToLower(s)) {
    if (ch == ' ' || ch == '-' || ch == '_') continue;
    out.push_back(ch);
  }
  return out;
}

}  // namespace

std::span<const ModelSpec> BuiltinModels() {
  static const std::vector<ModelSpec> catalogue = MakeCatalogue();
  return catalogue;
}

Result<ModelSpec> FindModel(std::string_view name) {
  std::string key = Canonical(name);
  static const std::array<std::pair<std::string_view, std::string_view>, 10> aliases = {{
      {"gpt3", "gpt3-175b"},
      {"gpt175b", "gpt3-175b"},
      {"mtnlg", "mt-nlg-530b"},
      {"megatron530b", "mt-nlg-530b"},
      {"gpt1t", "megatron-1t"},
      {"megatron1008b", "megatron-1t"},
      {"bloom", "bloom-176b"},
      {"mixtral", "mixtral-8x7b"},
      {"llama31405b", "llama3-405b"},
      {"llama3.1405b", "llama3-405b"},
  }};
  for (const auto& [alias, target] : aliases) {
    if (key == alias) key = Canonical(target);
  }
  for (const ModelSpec& m : BuiltinModels()) {
    if (Canonical(m.name) == key) return m;
  }
  std::string known;
  for (const ModelSpec& m : BuiltinModels()) known += (known.empty() ? "" : ", ") + m.name;
  return NotFoundError(
      fmt::format("model: unknown model '{}' (known: {})", Printable(name), known));
}

namespace {

template <typename T>
Status ReadField(const YAML::Node& node, const char* key, std::string_view field, T& out) {
  const YAML::Node v = node[key];
  if (!v) return Status::Ok();
  // decode is yaml-cpp's conversion without the exception as<T> throws.
  if (!YAML::convert<T>::decode(v, out)) {
    return FieldError(field, fmt::format("cannot read '{}'", Printable(v.Scalar())));
  }
  return Status::Ok();
}

}  // namespace

Result<ModelSpec> ParseModel(std::string_view text, std::string_view source) {
  // Size, depth, aliases and duplicate keys bounded before the walk below.
  ASSIGN_OR_RETURN(YAML::Node root, LoadYamlBounded(text, source));
  if (!root.IsMap()) return InvalidArgumentError(fmt::format("{}: expected a mapping", source));
  ModelSpec m;
  bool has_kv = false, has_ffn = false;
  if (root["base"]) {
    std::string base;
    RETURN_IF_ERROR(ReadField(root, "base", "base", base).WithPrefix(source));
    auto found = FindModel(base);
    if (!found.ok()) return found.status().WithPrefix(source);
    m = *found;
    has_kv = has_ffn = true;
  }
  Status st = [&]() -> Status {
    // Unknown keys are typos ("layrs"), and a typo must not silently keep a base model's value.
    auto only_known = [](const YAML::Node& map, std::string_view prefix,
                         std::initializer_list<std::string_view> known) -> Status {
      for (const auto& kv : map) {
        const std::string key = kv.first.as<std::string>("");
        if (std::find(known.begin(), known.end(), key) == known.end()) {
          return FieldError(fmt::format("{}{}", prefix, Printable(key)), "unknown field");
        }
      }
      return Status::Ok();
    };
    RETURN_IF_ERROR(
        only_known(root, "",
                   {"name", "base", "layers", "hidden", "heads", "kv_heads", "ffn", "ffn_kind",
                    "vocab", "seq", "tied_embeddings", "learned_positions", "dropout", "moe"}));
    if (root["moe"] && root["moe"].IsMap()) {
      RETURN_IF_ERROR(
          only_known(root["moe"], "moe.",
                     {"experts", "top_k", "expert_ffn", "shared_experts", "layer_frequency"}));
    }
    RETURN_IF_ERROR(ReadField(root, "name", "name", m.name));
    RETURN_IF_ERROR(ReadField(root, "layers", "layers", m.layers));
    RETURN_IF_ERROR(ReadField(root, "hidden", "hidden", m.hidden));
    RETURN_IF_ERROR(ReadField(root, "heads", "heads", m.heads));
    has_kv = has_kv || root["kv_heads"];
    has_ffn = has_ffn || root["ffn"];
    RETURN_IF_ERROR(ReadField(root, "kv_heads", "kv_heads", m.kv_heads));
    RETURN_IF_ERROR(ReadField(root, "ffn", "ffn", m.ffn));
    std::string kind = std::string(FfnKindName(m.ffn_kind));
    RETURN_IF_ERROR(ReadField(root, "ffn_kind", "ffn_kind", kind));
    if (EqualsIgnoreCase(kind, "gelu")) {
      m.ffn_kind = FfnKind::kGelu;
    } else if (EqualsIgnoreCase(kind, "swiglu")) {
      m.ffn_kind = FfnKind::kSwiGlu;
    } else {
      return FieldError("ffn_kind", fmt::format("'{}' is not gelu or swiglu", Printable(kind)));
    }
    RETURN_IF_ERROR(ReadField(root, "vocab", "vocab", m.vocab));
    RETURN_IF_ERROR(ReadField(root, "seq", "seq", m.seq));
    RETURN_IF_ERROR(ReadField(root, "tied_embeddings", "tied_embeddings", m.tied_embeddings));
    RETURN_IF_ERROR(ReadField(root, "learned_positions", "learned_positions", m.learned_positions));
    RETURN_IF_ERROR(ReadField(root, "dropout", "dropout", m.dropout));
    const YAML::Node moe = root["moe"];
    if (moe) {
      if (!moe.IsMap()) return FieldError("moe", "expected a mapping");
      RETURN_IF_ERROR(ReadField(moe, "experts", "moe.experts", m.moe.experts));
      RETURN_IF_ERROR(ReadField(moe, "top_k", "moe.top_k", m.moe.top_k));
      RETURN_IF_ERROR(ReadField(moe, "expert_ffn", "moe.expert_ffn", m.moe.expert_ffn));
      RETURN_IF_ERROR(ReadField(moe, "shared_experts", "moe.shared_experts", m.moe.shared_experts));
      RETURN_IF_ERROR(
          ReadField(moe, "layer_frequency", "moe.layer_frequency", m.moe.layer_frequency));
    }
    return Status::Ok();
  }();
  if (!st.ok()) return st.WithPrefix(source);
  if (!has_kv) m.kv_heads = m.heads;
  // The default FFN only for a hidden size that validation will accept (no overflow on junk).
  if (!has_ffn) m.ffn = m.hidden > 0 && m.hidden <= (1 << 20) ? 4 * m.hidden : 0;
  if (m.name.empty()) m.name = std::string(source);
  RETURN_IF_ERROR(ValidateModel(m).WithPrefix(source));
  return m;
}

Result<ModelSpec> ResolveModel(std::string_view name_or_path) {
  std::string_view s = name_or_path;
  auto ends = [&](std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
  };
  if (!(ends(".yaml") || ends(".yml") || ends(".json"))) return FindModel(s);
  ASSIGN_OR_RETURN(std::string text, ReadFileBounded(std::string(s), MiB(1), "model file"));
  return ParseModel(text, s);
}

}  // namespace baton::perf
