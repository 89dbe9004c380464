// Clock: the only way baton code learns the time. The daemon uses SystemClock; tests and the
// simulator use ManualClock, which moves only when told. The scheduling core never reads a
// clock at all: its drivers pass `now` in.
#pragma once

#include <compare>
#include <mutex>

#include "core/units.h"

namespace baton {

// A point in time as seconds since the Unix epoch (simulations may start at 0).
struct TimePoint {
  Seconds since_epoch;
  constexpr auto operator<=>(const TimePoint&) const = default;
  constexpr TimePoint operator+(Seconds d) const { return {since_epoch + d}; }
  constexpr Seconds operator-(TimePoint o) const { return since_epoch - o.since_epoch; }
};

class Clock {
 public:
  virtual ~Clock() = default;
  // Thread-safe.
  virtual TimePoint Now() const = 0;
};

class SystemClock final : public Clock {
 public:
  TimePoint Now() const override;
};

// Starts at `start` and advances only through Set/Advance. Thread-safe.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(TimePoint start = {}) : now_(start) {}
  TimePoint Now() const override;
  void Set(TimePoint t);
  void Advance(Seconds d);

 private:
  mutable std::mutex mu_;
  TimePoint now_;
};

}  // namespace baton
