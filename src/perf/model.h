// ModelSpec: the shape of a transformer language model (dense or mixture-of-experts) as the
// performance model needs it, the built-in catalogue of published models, and the YAML / JSON
// reader for anything else. Pure data; every reader validates and names the bad field.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace baton::perf {

enum class FfnKind : std::uint8_t { kGelu, kSwiGlu };
std::string_view FfnKindName(FfnKind k);

// Mixture-of-experts layers. experts == 0 means a dense model.
struct MoeSpec {
  int experts = 0;
  int top_k = 0;
  int expert_ffn = 0;       // FFN size of one expert
  int shared_experts = 0;   // always-active experts (DeepSeek-style), each of expert_ffn
  int layer_frequency = 1;  // every n-th layer is MoE (1 = all)
};

struct ModelSpec {
  std::string name;
  int layers = 0;
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // == heads: MHA; 1: MQA; in between: GQA
  int ffn = 0;       // FFN (intermediate) size of the dense MLP
  FfnKind ffn_kind = FfnKind::kGelu;
  int vocab = 0;
  int seq = 0;  // training sequence length
  bool tied_embeddings = true;
  bool learned_positions = false;  // GPT-style learned position embeddings (s x h parameters)
  bool dropout = true;             // dropout after attention and MLP (stores masks)
  MoeSpec moe;

  int head_dim() const { return hidden / heads; }
  bool is_moe() const { return moe.experts > 0; }
  // Number of MoE layers (every layer_frequency-th layer).
  int moe_layers() const { return is_moe() ? layers / moe.layer_frequency : 0; }
  // Parameters of one dense transformer layer / one MoE layer (attention + router + experts).
  double DenseLayerParams() const;
  double MoeLayerParams() const;
  double AttentionParams() const;
  double EmbeddingParams() const;  // input embedding (+ positions) + untied output layer
  double TotalParams() const;
  double ActiveParams() const;  // per token: top_k + shared experts instead of all experts
};

// Checks every field; the error names the first bad one ("model.heads: 0 must be > 0").
Status ValidateModel(const ModelSpec& m);

// GPT-3 175B, the Narayanan GPT family (1.7B..1T), Megatron 22B / 530B (MT-NLG) / 1T, BLOOM 176B,
// Llama 2 7/13/70B, Llama 3 8/70/405B, Mixtral 8x7B.
std::span<const ModelSpec> BuiltinModels();
// By catalogue name, case-insensitive, ignoring spaces, '-' and '_' ("llama3-405b", "gpt3-175b").
Result<ModelSpec> FindModel(std::string_view name);

// Parses a model description (YAML, or JSON which is YAML too). `source` prefixes errors.
// Fields: name, layers, hidden, heads, kv_heads (default heads), ffn (default 4*hidden),
// ffn_kind (gelu | swiglu), vocab, seq, tied_embeddings, learned_positions, dropout,
// moe: {experts, top_k, expert_ffn, shared_experts, layer_frequency}. A `base:` key starts from
// a catalogue model and overrides the listed fields.
Result<ModelSpec> ParseModel(std::string_view text, std::string_view source);
// A catalogue name, or a path to a .yaml / .yml / .json file.
Result<ModelSpec> ResolveModel(std::string_view name_or_path);

}  // namespace baton::perf
