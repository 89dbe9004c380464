#include "core/clock.h"

#include <chrono>

namespace baton {

TimePoint SystemClock::Now() const {
  auto d = std::chrono::system_clock::now().time_since_epoch();
  return {Seconds(std::chrono::duration<double>(d).count())};
}

TimePoint ManualClock::Now() const {
  std::lock_guard lock(mu_);
  return now_;
}

void ManualClock::Set(TimePoint t) {
  std::lock_guard lock(mu_);
  now_ = t;
}

void ManualClock::Advance(Seconds d) {
  std::lock_guard lock(mu_);
  now_ = now_ + d;
}

}  // namespace baton
