// The software stack a run trains on, as named settings: how its gradients and optimizer state
// are held, its fp8 recipe, whether its element-wise ops are compiled, how it runs context-
// parallel attention, which TP overlap it uses and whose TP layers. They change the estimate as
// much as the parallel plan does (PyTorch's experimental CP and async TP are not Transformer
// Engine's), so one table names them for every way a user describes a run:
//   * a validation / calibration CSV row (column `grads`, `fp8_recipe`, ...; async TP is also
//     tp_overlap = async, which turns the plan's TP overlap on too);
//   * `baton plan estimate|search --grads bf16 --cp-attention torch ...`;
//   * the daemon's plan requests and job plans ("training": {"grads": "bf16", ...}).
// Values are the CSV's words (case-insensitive). Pure; never throws.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "perf/plan.h"

namespace baton::perf {

struct StackSetting {
  std::string_view name;    // CSV column and JSON field; the CLI flag is "--" + name, '_' -> '-'
  std::string_view values;  // the accepted words, default first ("fp32|bf16|bf16-adam")
  std::string_view help;    // one line for --help and the API reference
};

// Every setting, in a fixed order.
std::span<const StackSetting> StackSettings();

// Sets `name` to `value` on `training`. Reads training->dtype (fp8_recipe is only for fp8 runs),
// so callers set the dtype first. kInvalidArgument naming `field` (how the caller shows the
// setting: "column grads", "training.grads", "--grads") with the accepted words when the value
// is not one of them, or when `name` is not a setting; `training` is then unchanged.
Status ApplyStackSetting(std::string_view name, std::string_view value, std::string_view field,
                         TrainingSpec* training);

// The word `name` has in `training` (the default's word when left alone); "" for an unknown name.
std::string_view StackSettingValue(std::string_view name, const TrainingSpec& training);

// The settings `training` changes from their defaults, as "grads bf16, cp_attention torch"; ""
// when it runs the default stack. What the CLI prints beside the dtype.
std::string StackSummary(const TrainingSpec& training);

}  // namespace baton::perf
