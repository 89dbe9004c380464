// The built-in actions' name -> factory table.
#include "sched/actions/action.h"

#include <fmt/format.h>

#include "sched/actions/internal.h"

namespace baton::sched {

Result<std::unique_ptr<Action>> MakeAction(std::string_view name) {
  if (name == "admit") return internal::MakeAdmitAction();
  if (name == "allocate") return internal::MakeAllocateAction();
  if (name == "backfill") return internal::MakeBackfillAction();
  if (name == "preempt") return internal::MakePreemptAction();
  if (name == "reclaim") return internal::MakeReclaimAction();
  if (name == "resize") return internal::MakeResizeAction();
  return NotFoundError(fmt::format(
      "unknown action '{}' (known: admit, allocate, backfill, preempt, reclaim, resize)", name));
}

}  // namespace baton::sched
