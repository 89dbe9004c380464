#include "perf/stack.h"

#include <fmt/format.h>

#include <array>
#include <string>
#include <vector>

#include "core/strings.h"

namespace baton::perf {
namespace {

// A setting with how it reads and writes TrainingSpec: `set` takes the index of the word in
// `values`, `get` returns it.
struct Setting {
  StackSetting info;
  bool fp8_only;
  void (*set)(int word, TrainingSpec* t);
  int (*get)(const TrainingSpec& t);
};

constexpr std::array<Setting, 9> kSettings{{
    {{"grads", "fp32|bf16|bf16-adam",
      "gradients in fp32 (default), bf16 (Megatron-Core DDP), or bf16 with Adam state in bf16 "
      "(Apex DistributedFusedAdam)"},
     false,
     [](int w, TrainingSpec* t) {
       t->fp32_grads = w == 0;
       t->bf16_optimizer_state = w == 2;
     },
     [](const TrainingSpec& t) { return t.bf16_optimizer_state ? 2 : (t.fp32_grads ? 0 : 1); }},
    {{"fp8_recipe", "delayed|tensorwise|rowwise|jax",
      "fp8 scaling: Transformer Engine's delayed (default), torchao's tensorwise / rowwise, or "
      "JAX's per-call casts (MaxText, Paxml)"},
     true,  // the words are in Fp8Recipe's order
     [](int w, TrainingSpec* t) { t->fp8_recipe = static_cast<Fp8Recipe>(w); },
     [](const TrainingSpec& t) { return static_cast<int>(t.fp8_recipe); }},
    {{"compiled", "yes|no",
      "element-wise ops fused (torch.compile, Transformer Engine, XLA; default) or eager"},
     false,
     [](int w, TrainingSpec* t) { t->fused_elementwise = w == 0; },
     [](const TrainingSpec& t) { return t.fused_elementwise ? 0 : 1; }},
    {{"cp_attention", "ring|torch|allgather",
      "context-parallel attention: Transformer Engine's ring (default), PyTorch's experimental "
      "context_parallel or Llama 3's all-gather"},
     false,  // the words are in CpAttention's order
     [](int w, TrainingSpec* t) { t->cp_attention = static_cast<CpAttention>(w); },
     [](const TrainingSpec& t) { return static_cast<int>(t.cp_attention); }},
    {{"async_tp", "no|yes",
      "TP overlap by PyTorch's async TP (torchtitan) instead of Transformer Engine's userbuffers"},
     false,
     [](int w, TrainingSpec* t) { t->async_tp = w == 1; },
     [](const TrainingSpec& t) { return t.async_tp ? 1 : 0; }},
    {{"tp_impl", "megatron|dtensor",
      "tensor parallelism as Megatron's linear layers (default) or PyTorch DTensor's "
      "(torchtitan)"},
     false,
     [](int w, TrainingSpec* t) { t->dtensor_tp = w == 1; },
     [](const TrainingSpec& t) { return t.dtensor_tp ? 1 : 0; }},
    {{"grad_accum", "fused|fp32|autograd",
      "micro-batch weight gradients summed inside the GEMM (default), by a separate add into "
      "fp32 (Megatron-LM 2021) or by autograd into 16 bits (DeepSpeed, torch DDP)"},
     false,  // the words are in GradAccum's order
     [](int w, TrainingSpec* t) { t->grad_accum = static_cast<GradAccum>(w); },
     [](const TrainingSpec& t) { return static_cast<int>(t.grad_accum); }},
    {{"attn_kernel", "flash|cudnn|flash1|flash3|triton|xformers|math",
      "attention kernel: FlashAttention-2 (default; PyTorch SDPA, Transformer Engine before "
      "mid-2024), cuDNN's (Transformer Engine's choice on Hopper and later since mid-2024), "
      "FlashAttention 1 or 3 (Hopper only), Triton's, xformers' or PyTorch's unfused math "
      "attention"},
     false,  // the words are in AttentionKernel's order
     [](int w, TrainingSpec* t) { t->attention_kernel = static_cast<AttentionKernel>(w); },
     [](const TrainingSpec& t) { return static_cast<int>(t.attention_kernel); }},
    {{"loss", "unfused|fused",
      "cross-entropy on an fp32 copy of the logits (default; Megatron-Core, torchtitan) or one "
      "fused kernel on the 16-bit logits (flash-attn's, as llm-foundry's fused_crossentropy; "
      "Liger-Kernel's)"},
     false,
     [](int w, TrainingSpec* t) { t->fused_loss = w == 1; },
     [](const TrainingSpec& t) { return t.fused_loss ? 1 : 0; }},
}};

constexpr std::array<StackSetting, kSettings.size()> Infos() {
  std::array<StackSetting, kSettings.size()> out{};
  for (std::size_t i = 0; i < kSettings.size(); ++i) out[i] = kSettings[i].info;
  return out;
}
constexpr std::array<StackSetting, kSettings.size()> kInfos = Infos();

const Setting* Find(std::string_view name) {
  for (const Setting& s : kSettings) {
    if (s.info.name == name) return &s;
  }
  return nullptr;
}

// "a|b|c" -> "a, b or c".
std::string Expected(std::string_view words) {
  std::vector<std::string_view> parts = Split(words, '|');
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += i + 1 == parts.size() ? " or " : ", ";
    out += parts[i];
  }
  return out;
}

}  // namespace

std::span<const StackSetting> StackSettings() { return kInfos; }

Status ApplyStackSetting(std::string_view name, std::string_view value, std::string_view field,
                         TrainingSpec* training) {
  const Setting* s = Find(name);
  if (s == nullptr) {
    return InvalidArgumentError(fmt::format("{}: not a stack setting", Printable(field)));
  }
  std::vector<std::string_view> words = Split(s->info.values, '|');
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (!EqualsIgnoreCase(words[i], Trim(value))) continue;
    if (s->fp8_only && training->dtype != topo::Dtype::kFp8) {
      return InvalidArgumentError(fmt::format("{}: '{}' given for a {} run", Printable(field),
                                              Printable(value, 64),
                                              topo::DtypeName(training->dtype)));
    }
    s->set(static_cast<int>(i), training);
    return Status::Ok();
  }
  return InvalidArgumentError(fmt::format("{}: '{}' is not {}", Printable(field),
                                          Printable(value, 64), Expected(s->info.values)));
}

std::string_view StackSettingValue(std::string_view name, const TrainingSpec& training) {
  const Setting* s = Find(name);
  if (s == nullptr) return {};
  return Split(s->info.values, '|')[static_cast<std::size_t>(s->get(training))];
}

std::string StackSummary(const TrainingSpec& training) {
  std::string out;
  for (const StackSetting& s : kInfos) {
    std::string_view word = StackSettingValue(s.name, training);
    if (word == s.values.substr(0, s.values.find('|'))) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{} {}", s.name, word);
  }
  return out;
}

}  // namespace baton::perf
